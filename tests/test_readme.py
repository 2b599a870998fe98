"""The README's code runs as printed."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest
import trio
from typecheck import mypy_strict

import acp_trio
import acp_trio.testing

README = Path(__file__).resolve().parents[1] / "README.md"


def python_blocks() -> dict[str, str]:
    """The README's python blocks, the first under each heading, by heading."""
    blocks: dict[str, str] = {}
    heading = ""
    for part in re.split(r"(^## .*$)", README.read_text(), flags=re.MULTILINE):
        if part.startswith("## "):
            heading = part[3:].strip()
            continue
        for code in re.findall(r"```python\n(.*?)```", part, flags=re.DOTALL):
            blocks.setdefault(heading, code)  # a section's first block
    return blocks


async def test_the_twenty_line_agent_and_client_talk(tmp_path: Path) -> None:
    blocks = python_blocks()
    agent = tmp_path / "agent.py"
    client = tmp_path / "client.py"
    agent.write_text(blocks["An agent in twenty lines"])
    client.write_text(blocks["A client in twenty lines"])
    with trio.fail_after(60):
        result = await trio.run_process(
            [sys.executable, str(client), sys.executable, str(agent)],
            capture_stdout=True,
            capture_stderr=True,
        )
    assert result.stdout.decode().split() == ["hello", "there", "end_turn"]


async def test_the_json_level_example_runs(tmp_path: Path) -> None:
    script = tmp_path / "connection.py"
    script.write_text(python_blocks()["The JSON-level connection"])
    with trio.fail_after(60):
        result = await trio.run_process(
            [sys.executable, str(script)], capture_stdout=True, capture_stderr=True
        )
    assert result.stdout.decode() == "{'hi': 1}\n"


async def test_the_tool_call_example_runs(tmp_path: Path) -> None:
    script = tmp_path / "tool_call.py"
    script.write_text(python_blocks()["Tool calls, plans and content: `acp_trio.build`"])
    with trio.fail_after(60):
        result = await trio.run_process(
            [sys.executable, str(script)], capture_stdout=True, capture_stderr=True
        )
    assert [line.strip() for line in result.stdout.decode().splitlines()] == [
        "Plan",
        "ToolCall in_progress",
        "ToolCallUpdate",
        "ToolCallUpdate completed",
        "AgentMessageChunk",
    ]


def all_python_blocks() -> list[str]:
    """Every python block of the README, in order."""
    return re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)


@pytest.mark.typecheck
async def test_every_python_block_type_checks(tmp_path: Path) -> None:
    blocks = all_python_blocks()
    assert len(blocks) >= 6
    names = []
    for index, code in enumerate(blocks):
        name = f"readme_block_{index}.py"
        (tmp_path / name).write_text(code)
        names.append(name)
    argv = [*mypy_strict(), *names]
    with trio.fail_after(180):
        result = await trio.run_process(argv, cwd=tmp_path, capture_stdout=True, check=False)
    assert result.returncode == 0, result.stdout.decode()


async def test_the_files_and_terminals_example_runs(tmp_path: Path) -> None:
    script = tmp_path / "files.py"
    script.write_text(python_blocks()["Serving an agent's files and terminals safely"])
    with trio.fail_after(60):
        result = await trio.run_process(
            [sys.executable, str(script)], capture_stdout=True, capture_stderr=True
        )
    assert result.stdout.decode().strip().splitlines() == [
        "refused: path is outside the workspace roots",
        "ok",
    ]


async def test_the_proxy_example_adds_its_note_in_a_chain(tmp_path: Path) -> None:
    proxy = tmp_path / "context_proxy.py"
    proxy.write_text(python_blocks()["Proxy chains (draft RFD): `python -m acp_trio conduct`"])
    root = README.parent
    agent = [sys.executable, str(root / "tests" / "proxies" / "echo_all_agent.py")]
    command = [sys.executable, "-m", "acp_trio", "conduct", "--", sys.executable, str(proxy)]
    client = acp_trio.testing.ScenarioClient()
    with trio.fail_after(60):
        async with acp_trio.open_spawned_agent(
            client, [*command, "--", *agent], stderr="capture"
        ) as conn:
            await conn.initialize(client.initialize_request())
            session = (await conn.new_session("/")).session_id
            reply = await conn.prompt_text(session, "hello")
    assert reply.stop_reason == "end_turn"
    assert "".join(client.texts(session)) == "hello | Project conventions: trio, attrs."


def sh_blocks(heading: str) -> list[str]:
    """The README's sh blocks under one heading."""
    parts = re.split(r"(^## .*$)", README.read_text(), flags=re.MULTILINE)
    for index, part in enumerate(parts):
        if part.startswith("## ") and part[3:].strip() == heading:
            return re.findall(r"```sh\n(.*?)```", parts[index + 1], flags=re.DOTALL)
    raise AssertionError(f"no heading {heading!r}")


async def test_the_twenty_line_agent_conforms_under_the_readme_check(tmp_path: Path) -> None:
    """The first agent a reader copies passes ``check-agent``, run exactly as
    the README prints it (``python`` being this interpreter)."""
    (tmp_path / "agent.py").write_text(python_blocks()["An agent in twenty lines"])
    (command,) = sh_blocks("An agent in twenty lines")
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    with trio.fail_after(120):
        result = await trio.run_process(
            ["bash", "-c", command.strip()],
            cwd=tmp_path,
            env=env,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    out = result.stdout.decode()
    assert result.returncode == 0, out + result.stderr.decode()[-2000:]
    assert "\nCONFORMS\n" in out
    rows = {line.split()[0]: line.split()[2] for line in out.splitlines() if "  required  " in line}
    assert rows["session-new"] == rows["session-cancel"] == "PASS", out
