"""The README's code runs as printed."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import trio

README = Path(__file__).resolve().parents[1] / "README.md"


def python_blocks() -> dict[str, str]:
    """The README's python blocks, keyed by the heading they sit under."""
    blocks: dict[str, str] = {}
    heading = ""
    for part in re.split(r"(^## .*$)", README.read_text(), flags=re.MULTILINE):
        if part.startswith("## "):
            heading = part[3:].strip()
            continue
        for code in re.findall(r"```python\n(.*?)```", part, flags=re.DOTALL):
            blocks[heading] = code
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
        "ToolCall pending",
        "ToolCallUpdate",
        "ToolCallUpdate completed",
        "AgentMessageChunk",
    ]
