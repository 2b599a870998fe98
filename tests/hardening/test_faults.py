"""Peers that misbehave as processes: an agent that writes garbage on
stdout, an agent killed by SIGKILL mid-prompt, a client that vanishes
mid-prompt."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest
import trio

import acp_trio
from acp_trio import ConnectionClosed, ConnectionConfig
from acp_trio.schema import NewSessionRequest
from acp_trio.testing import ScenarioClient

from .conftest import (
    AGENT,
    CLIENT_CAPS,
    LIMIT,
    error_of,
    open_client,
    prompt_params,
    stop_process,
    text_update,
)


def gone(pid: int) -> bool:
    """No process ``pid`` runs (absent, or a zombie waiting to be reaped)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
    except FileNotFoundError:
        return True
    return fields[0] in (b"Z", b"X")


async def wait_gone(pid: int) -> None:
    """Until ``pid`` is gone (bound it with ``trio.fail_after``)."""
    # Not our child (and perhaps not alive): no event to wait for; poll.
    while not gone(pid):  # noqa: ASYNC110
        await trio.sleep(0.02)


# ----------------------------------------------------------------------
# Garbage on the agent's stdout (we play the agent of a real client)

GARBAGE = [
    (b"Starting agent v1.2.3...\n", -32700),
    (b"\x1b]0;agent\x07\x1b[32mready\x1b[0m\n", -32700),
    (b"{partial json\n", -32700),
    (b"\xff\xfe\xfd\n", -32700),
    (b"[1, 2, 3]\n", -32600),
    (b"42\n", -32600),
    (b'"a string"\n', -32600),
    (b'{"no": "jsonrpc"}\n', -32600),
    (b"\n\n", None),  # blank lines: skipped, not answered
]


async def test_agent_writing_garbage_between_valid_messages() -> None:
    """Every garbage line is answered with an error and ``id: null`` (blank
    lines are skipped); every valid message around them is delivered, in
    order, and the client works on."""
    with trio.fail_after(LIMIT):
        async with open_client("prompts", "--prompts", "2") as client:
            peer = client.peer
            garbage = b"".join(g for g, _ in GARBAGE)
            codes = [c for _, c in GARBAGE if c is not None]

            async def expect_garbage_answers() -> None:
                for code in codes:
                    assert error_of(await peer.receive()) == (None, code)

            init = await peer.receive_request("initialize")
            await peer.send_bytes(
                garbage
                + b'{"jsonrpc":"2.0","id":%d,"result":{"protocolVersion":1}}\n' % init["id"]
                + garbage
            )
            await expect_garbage_answers()
            await expect_garbage_answers()
            await client.report("initialized")
            new = await peer.receive_request("session/new")
            await peer.send(
                garbage, {"jsonrpc": "2.0", "id": new["id"], "result": {"sessionId": "s-1"}}
            )
            await expect_garbage_answers()
            await client.report("session")
            prompt = await client.next_prompt()
            messages: list[Any] = []
            for i in range(5):
                messages += [
                    garbage,
                    {
                        "jsonrpc": "2.0",
                        "method": "session/update",
                        "params": text_update("s-1", f"chunk {i}"),
                    },
                ]
            messages += [
                garbage,
                {"jsonrpc": "2.0", "id": prompt, "result": {"stopReason": "end_turn"}},
            ]
            await peer.send(*messages)
            for _ in range(6):
                await expect_garbage_answers()
            reported = await client.report("prompt")
            assert reported["texts"] == [f"chunk {i}" for i in range(5)], reported
            await client.assert_serves_requests()
            await client.answer_prompt(await client.next_prompt(), "clean again")
            await client.finish()
            assert peer.queued == []


# ----------------------------------------------------------------------
# The agent dies


async def test_agent_killed_by_sigkill_mid_prompt() -> None:
    """Every pending call fails at once with ConnectionClosed carrying the
    signal's exit code (-9); later calls fail the same way."""
    client = ScenarioClient()
    with trio.fail_after(LIMIT):
        async with acp_trio.lowlevel.open_agent_process([*AGENT]) as process:
            config = ConnectionConfig(exit_details=process.exit_details)
            async with acp_trio.open_agent(client, process.stream, config=config) as agent:
                await agent.initialize(client.initialize_request())
                new = NewSessionRequest(cwd="/", mcp_servers=[])
                sessions = [(await agent.new_session(new)).session_id for _ in range(2)]
                failures: list[tuple[ConnectionClosed, float]] = []

                async def pending(session_id: str, text: str) -> None:
                    with pytest.raises(ConnectionClosed) as info:
                        await agent.prompt_text(session_id, text)
                    failures.append((info.value, trio.current_time()))

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(pending, sessions[0], "wait_for_cancel")
                    nursery.start_soon(pending, sessions[1], "permission")
                    await client.wait_for_requests("session/request_permission")
                    killed = trio.current_time()
                    os.kill(process.pid, signal.SIGKILL)
                assert len(failures) == 2
                for error, when in failures:
                    assert error.exit_code == -signal.SIGKILL, error
                    assert when - killed < 1.0, when - killed
                # The held permission request was cancelled with the connection.
                assert client.cancelled == ["session/request_permission"]
                with pytest.raises(ConnectionClosed) as later:
                    await agent.prompt_text(sessions[0], "echo too late")
                assert later.value.exit_code == -signal.SIGKILL
                stats = agent.connection.statistics()
                assert (stats.incoming_in_flight, stats.outgoing_pending) == (0, 0)
                assert agent.connection.request_tree() == []


# ----------------------------------------------------------------------
# The client vanishes


async def test_client_killed_mid_prompt_agent_exits_on_its_own(tmp_path: Path) -> None:
    """A client process (with the agent it spawned) is SIGKILLed while a
    prompt runs: the agent sees its stdin end, cancels the prompt's handler
    and exits by itself (nothing else would stop it)."""
    log = tmp_path / "agent.log"
    with trio.fail_after(LIMIT):
        async with open_client("spawn", "--", *AGENT, "--log", str(log)) as client:
            prompting = await client.report("prompting")
            agent_pid = prompting["meta"]["pid"]
            assert not gone(agent_pid)
            client.process.kill()
            await wait_gone(agent_pid)
        assert log.read_text().splitlines() == ["cancelled permission", "exit"]


async def test_client_closing_its_pipes_mid_prompt_agent_exits_on_its_own(
    tmp_path: Path,
) -> None:
    """Same, with the client's ends of the pipes simply closed: the agent
    exits with status 0, its prompt handler cancelled."""
    log = tmp_path / "agent.log"
    with trio.fail_after(LIMIT):
        process = await trio.lowlevel.open_process(
            [*AGENT, "--log", str(log)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            start_new_session=True,
        )
        try:
            assert process.stdin is not None
            assert process.stdout is not None
            peer = acp_trio.testing.ScriptedPeer(
                trio.StapledStream(process.stdin, process.stdout), timeout=10
            )
            rid = await peer.request(
                "initialize", {"protocolVersion": 1, "clientCapabilities": CLIENT_CAPS}
            )
            await peer.receive_response(rid)
            rid = await peer.request("session/new", {"cwd": "/", "mcpServers": []})
            session = (await peer.receive_response(rid))["result"]["sessionId"]
            await peer.request("session/prompt", prompt_params(session, "permission"))
            await peer.receive_request("session/request_permission")
            await process.stdin.aclose()
            await process.stdout.aclose()
            assert await process.wait() == 0
        finally:
            with trio.CancelScope(shield=True):
                await stop_process(process, grace=0)
        assert log.read_text().splitlines() == ["cancelled permission", "exit"]


# ----------------------------------------------------------------------
# The client leaves during a burst


class SlowUi(ScenarioClient):
    def __init__(self) -> None:
        super().__init__()
        self.handled = 0

    async def session_update(self, params: Any) -> None:
        await trio.sleep(0.01)  # a UI that takes 10 ms per update
        self.handled += 1


async def test_client_leaving_during_a_burst_closes_promptly() -> None:
    """Leaving drops the updates still queued: the UI does not work through
    the backlog (until ``close_timeout``) before the block ends."""
    client = SlowUi()
    with trio.fail_after(LIMIT):
        async with acp_trio.lowlevel.open_agent_process([*AGENT]) as process:
            config = ConnectionConfig(exit_details=process.exit_details, close_timeout=1.5)
            async with acp_trio.open_agent(client, process.stream, config=config) as agent:
                await agent.initialize(client.initialize_request())
                new = NewSessionRequest(cwd="/", mcp_servers=[])
                session = (await agent.new_session(new)).session_id
                with trio.move_on_after(0.5):
                    await agent.prompt_text(session, "stream 100000 1000")
                backlog = agent.connection.statistics().notifications_queued
                handled = client.handled
            assert backlog > 1, "no backlog to drop: the test proves nothing"
            # The update under way when we left, and at most one more that the
            # UI took up in the same scheduling round as the close (draining
            # would go on for close_timeout: some 150 updates).
            assert client.handled - handled <= 2
