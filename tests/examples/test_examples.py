"""Every example runs, and does what its docstring says."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import trio
import trio.testing

import acp_trio
from acp_trio import ConnectionConfig, schema

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def test_cancel_demo_cancels_every_nested_request_on_the_wire() -> None:
    with trio.fail_after(60):
        result = await trio.run_process(
            [sys.executable, str(EXAMPLES / "cancel_demo.py")],
            capture_stdout=True,
            capture_stderr=True,
        )
    out = result.stdout.decode()
    # The streamed turn reads in wire order: the prompt, its three words,
    # then its reply and the stop reason the caller got.
    lines = [line.strip() for line in out.splitlines()]
    start = lines.index("2. a prompt whose reply is streamed")
    assert lines[start + 1 : start + 7] == [
        "client -> agent  session/prompt (request id 2)",
        "agent -> client  session/update agent_message_chunk 'hello '",
        "agent -> client  session/update agent_message_chunk 'from '",
        "agent -> client  session/update agent_message_chunk 'trio '",
        'agent -> client  result for id 2: {"stopReason": "end_turn"}',
        "stopReason: end_turn",
    ]
    # The file read and the terminal are cancelled on the wire and answered
    # -32800; the permission request is answered "cancelled" by the client
    # SDK, and also cancelled on the wire if the agent got there first.
    cancels = out.count("$/cancel_request for request id")
    refusals = out.count("error -32800 'Request cancelled'")
    outcomes = out.count('{"outcome": {"outcome": "cancelled"}}')
    assert cancels in (2, 3)
    assert (refusals, outcomes) == (2, 1)
    assert "stopReason: cancelled" in out
    assert "0 incoming and 0 outgoing requests left in flight" in out
    tree = result.stderr.decode()
    for method in ("session/request_permission", "fs/read_text_file", "terminal/create"):
        assert f"-> {method} id=" in tree
    assert tree.count("[pending]") == 3


async def test_client_example_streams_the_echo_agent() -> None:
    command = [
        sys.executable,
        str(EXAMPLES / "client.py"),
        "one two three",
        "--",
        sys.executable,
        str(EXAMPLES / "echo_agent.py"),
    ]
    with trio.fail_after(60):
        result = await trio.run_process(command, capture_stdout=True)
    assert result.stdout.decode() == "one two three \n[stopReason: end_turn]\n"


def test_client_example_explains_its_usage() -> None:
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / "client.py")], capture_output=True, timeout=60
    )
    assert result.returncode == 1
    assert b"AGENT COMMAND" in result.stderr


class HoldingClient(acp_trio.Client):
    async def session_update(self, params: schema.SessionNotification) -> None:
        update = params.update
        assert isinstance(update, schema.AgentMessageChunk)
        assert isinstance(update.content, schema.TextContent)
        self.said = update.content.text

    async def read_text_file(
        self, params: schema.ReadTextFileRequest
    ) -> schema.ReadTextFileResponse:
        await trio.sleep_forever()
        raise AssertionError("unreachable")


async def test_deadline_agent_cancels_its_file_read_at_the_deadline(
    autojump_clock: trio.testing.MockClock,
) -> None:
    frames: list[dict[str, object]] = []
    config = ConnectionConfig(trace=lambda direction, frame: frames.append(json.loads(frame)))
    client = HoldingClient()
    capabilities = schema.ClientCapabilities(fs=schema.FileSystemCapabilities(read_text_file=True))
    with trio.fail_after(10):
        async with acp_trio.open_agent_client_pair(
            load("deadline_agent").DeadlineAgent(), client, client_config=config
        ) as (agent, _):
            await agent.initialize(
                schema.InitializeRequest(protocol_version=1, client_capabilities=capabilities)
            )
            session = await agent.new_session(schema.NewSessionRequest(cwd="/", mcp_servers=[]))
            start = trio.current_time()
            result = await agent.prompt_text(session.session_id, "go")
            elapsed = trio.current_time() - start
    assert result.stop_reason == "end_turn"
    assert client.said == "the client took too long"
    assert 2.0 <= elapsed < 2.1
    cancels = [f for f in frames if f.get("method") == acp_trio.lowlevel.CANCEL_REQUEST_METHOD]
    reads = [f for f in frames if f.get("method") == "fs/read_text_file"]
    assert len(reads) == 1
    assert cancels == [
        {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": reads[0]["id"]}}
    ]
