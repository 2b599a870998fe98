"""The guides' code runs and type-checks as printed.

A guide's code blocks are files: a block under a ``<!-- file: NAME -->``
line goes into ``NAME``, after the blocks of that name before it (a file
may be built step by step, one block per step). Every ``python`` block must
have a file; other blocks (``sh``) need none and are not run. Each guide's
files are written to a fresh directory, checked with ``mypy --strict``, and
run there as the guide says (its test files with pytest, its programs
against the example agent), as in ``tests/test_readme.py`` for the README.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import trio
from typecheck import mypy_strict

ROOT = Path(__file__).resolve().parents[1]
GUIDES = ["docs/agents.md", "docs/clients.md"]
LIMIT = 180  # real seconds: mypy and pytest in subprocesses

_BLOCK = re.compile(
    r"(?:<!-- file: (?P<name>[\w./-]+) -->\n+)?```(?P<lang>\w*)\n(?P<code>.*?)^```",
    flags=re.DOTALL | re.MULTILINE,
)


def guide_files(guide: str, text: str | None = None) -> dict[str, str]:
    """The files a guide's code blocks make, by name, in the guide's order."""
    files: dict[str, str] = {}
    for match in _BLOCK.finditer((ROOT / guide).read_text() if text is None else text):
        name, lang, code = match["name"], match["lang"], match["code"]
        if name is None:
            assert lang != "python", f"{guide}: a python block with no file marker:\n{code}"
            continue
        files[name] = files.get(name, "") + code
    return files


def write_guide(guide: str, where: Path) -> dict[str, str]:
    files = guide_files(guide)
    for name, code in files.items():
        (where / name).parent.mkdir(parents=True, exist_ok=True)
        (where / name).write_text(code)
    return files


async def run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[bytes]:
    with trio.fail_after(LIMIT):
        return await trio.run_process(
            argv, cwd=cwd, capture_stdout=True, capture_stderr=True, check=False
        )


def test_blocks_are_found() -> None:
    # The extraction itself: a marker takes the block right after it, steps
    # of one file are joined in order, and an unmarked python block fails.
    text = "<!-- file: a.py -->\n```python\nx = 1\n```\n```sh\nls\n```\n"
    text += "<!-- file: a.py -->\n\n```python\ny = 2\n```\n"
    assert [m["name"] for m in _BLOCK.finditer(text)] == ["a.py", None, "a.py"]
    assert guide_files("t.md", text) == {"a.py": "x = 1\ny = 2\n"}
    with pytest.raises(AssertionError, match="no file marker"):
        guide_files("t.md", "```python\nx = 1\n```\n")


@pytest.mark.typecheck
@pytest.mark.parametrize("guide", GUIDES)
async def test_the_guide_type_checks(guide: str, tmp_path: Path) -> None:
    files = write_guide(guide, tmp_path)
    python = sorted(name for name in files if name.endswith(".py"))
    assert python, f"{guide} has no python files"
    result = await run([*mypy_strict(), *python], tmp_path)
    assert result.returncode == 0, result.stdout.decode() + result.stderr.decode()


@pytest.mark.parametrize(
    ("guide", "tests", "passed"),
    [("docs/agents.md", "test_agent.py", 6), ("docs/clients.md", "test_client.py", 2)],
)
async def test_the_guide_tests_pass(guide: str, tests: str, passed: int, tmp_path: Path) -> None:
    files = write_guide(guide, tmp_path)
    assert "pyproject.toml" in files  # the guide's pytest settings (trio_mode)
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", tests]
    result = await run(argv, tmp_path)
    out = result.stdout.decode() + result.stderr.decode()
    assert result.returncode == 0, out
    assert f"{passed} passed" in out, out


async def test_the_guide_client_drives_the_example_agent(tmp_path: Path) -> None:
    write_guide("docs/clients.md", tmp_path)
    agent = [sys.executable, str(ROOT / "examples" / "coding_agent.py")]
    target = tmp_path / "main.py"
    target.write_text("prnt('hi')\n")
    argv = [sys.executable, "client.py", "--yes", f"fix {target}", "--", *agent]
    result = await run(argv, tmp_path)
    assert result.returncode == 0, result.stderr.decode()
    assert "stop reason: end_turn" in result.stdout.decode()
    assert target.read_text() == "print('hi')\n"
    # A deadline shorter than the agent's stream (nine words, 10 ms apart):
    # the turn is cancelled and nothing is written.
    target.write_text("prnt('hi')\n")
    result = await run([*argv[:2], "--timeout", "0.03", *argv[2:]], tmp_path)
    assert result.returncode == 0, result.stderr.decode()
    assert "stop reason: cancelled" in result.stdout.decode()
    assert target.read_text() == "prnt('hi')\n"


async def test_the_guide_client_conforms(tmp_path: Path) -> None:
    write_guide("docs/clients.md", tmp_path)
    client = [sys.executable, "client.py", "--yes", "check me", "--", "{agent-args}"]
    result = await run([sys.executable, "-m", "acp_trio", "check-client", "--", *client], tmp_path)
    out = result.stdout.decode()
    # A required check it cannot exercise (every permission answered at
    # once): INCOMPLETE, exit 3; no required failure.
    assert result.returncode == 3, out + result.stderr.decode()
    assert "INCOMPLETE" in out, out
    assert "(0 required)" in out, out
