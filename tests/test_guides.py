"""The guides' programs and tests run as the guides say: their own tests
pass with pytest, and the client drives the example agent and passes
``check-client``. A guide's code blocks are files (``<!-- file: NAME -->``,
see ``tests/docblocks.py``); ``tests/test_docs.py`` type-checks them.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
import trio
from docblocks import ROOT, write_page

LIMIT = 180  # real seconds: pytest in subprocesses


def write_guide(guide: str, where: Path) -> dict[str, str]:
    return write_page(guide, where)


async def run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[bytes]:
    with trio.fail_after(LIMIT):
        return await trio.run_process(
            argv, cwd=cwd, capture_stdout=True, capture_stderr=True, check=False
        )


@pytest.mark.parametrize(
    ("guide", "tests", "passed"),
    [
        ("docs/agents.md", "test_agent.py", 6),
        ("docs/clients.md", "test_client.py", 2),
        ("docs/how-a-turn-ends.md", "test_relay.py", 4),
    ],
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


def test_the_turn_picture_is_what_its_script_draws() -> None:
    """``docs/how-a-turn-ends.svg`` is ``tools/draw_turn_ends.py``'s output:
    change the script and run it, not the picture."""
    spec = importlib.util.spec_from_file_location("draw", ROOT / "tools" / "draw_turn_ends.py")
    assert spec is not None
    assert spec.loader is not None
    draw = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(draw)
    assert (ROOT / "docs" / "how-a-turn-ends.svg").read_text() == draw.draw()
    assert "how-a-turn-ends.svg" in (ROOT / "docs" / "how-a-turn-ends.md").read_text()
