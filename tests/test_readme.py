"""The README is a landing page whose code runs as printed: its agent and
client talk, its agent passes the check it prints, its two set-up commands
are the Makefile's, its links lead somewhere, and its remote example keeps
the token off the command line. (Its python blocks are type-checked with
every docs page's in ``tests/test_docs.py``.)"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import trio
from docblocks import ROOT, blocks, page_files, section
from test_docs import env_with_this_python

README = ROOT / "README.md"


def sh_blocks(heading: str) -> list[str]:
    """The README's sh blocks under one heading."""
    return re.findall(r"```sh\n(.*?)```", section("README.md", heading), flags=re.DOTALL)


def test_the_readme_is_a_landing_page() -> None:
    lines = README.read_text().splitlines()
    assert len(lines) <= 200, f"the README has {len(lines)} lines: the manual goes in docs/"
    assert not [line for line in lines if line.startswith("| ")], "tables go in docs/"


def test_the_two_commands_are_the_makefiles() -> None:
    (block,) = sh_blocks("Two commands")
    commands = [line.split("#", 1)[0].strip() for line in block.splitlines()]
    assert commands == ["make demo", "make test"]
    # What each runs: the demo, and lint, strict typing and the suite.
    dry = {
        target: subprocess.run(
            ["make", "-n", target], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout
        for target in ("demo", "test")
    }
    assert "examples/cancel_demo.py" in dry["demo"]
    for step in ("ruff check", "mypy --strict", "-m pytest"):
        assert step in dry["test"], (step, dry["test"])


def test_the_readme_links_lead_somewhere() -> None:
    text = README.read_text()
    targets = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text)
    local = [target for target in targets if "://" not in target]
    assert local, "no local links found"
    missing = [target for target in local if not (ROOT / target).exists()]
    assert not missing, missing


def test_the_remote_example_keeps_the_token_off_the_command_line() -> None:
    (block,) = sh_blocks("Remote agents")
    assert "ACP_TRIO_TOKEN" in block
    assert "--token" not in block
    assert [line.split()[:4] for line in block.splitlines() if "python -m" in line] == [
        ["python", "-m", "acp_trio", "serve"],
        ["python", "-m", "acp_trio", "connect"],
    ]


async def test_the_twenty_line_agent_and_client_talk(tmp_path: Path) -> None:
    files = page_files("README.md")
    for name in ("agent.py", "client.py"):
        (tmp_path / name).write_text(files[name])
    assert [b.file for b in blocks("README.md") if b.lang == "python"] == ["agent.py", "client.py"]
    for name in ("agent.py", "client.py"):
        assert len(files[name].strip().splitlines()) <= 22, name  # "in twenty lines"
    with trio.fail_after(60):
        result = await trio.run_process(
            [sys.executable, "client.py", sys.executable, "agent.py"],
            cwd=tmp_path,
            capture_stdout=True,
            capture_stderr=True,
        )
    assert result.stdout.decode().split() == ["hello", "there", "end_turn"]


async def test_the_twenty_line_agent_conforms_under_the_readme_check(tmp_path: Path) -> None:
    """The first agent a reader copies passes ``check-agent``, run exactly as
    the README prints it (``python`` being this interpreter)."""
    (tmp_path / "agent.py").write_text(page_files("README.md")["agent.py"])
    (command,) = sh_blocks("An agent in twenty lines")
    with trio.fail_after(120):
        result = await trio.run_process(
            ["bash", "-c", command.strip()],
            cwd=tmp_path,
            env=env_with_this_python(),
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    out = result.stdout.decode()
    assert result.returncode == 0, out + result.stderr.decode()[-2000:]
    assert "\nCONFORMS\n" in out
    rows = {line.split()[0]: line.split()[2] for line in out.splitlines() if "  required  " in line}
    assert rows["session-new"] == rows["session-cancel"] == "PASS", out
