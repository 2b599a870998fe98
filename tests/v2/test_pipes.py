"""The v2 cancellation rules over real pipes: the v2 test agent runs as a
subprocess behind the version router (``v2_test_agent.py``), and the v2
client talks to it through ``open_any_spawned_agent``. Real clock, generous
watchdogs, no timing assertions."""

from __future__ import annotations

import logging
import os
import signal
import sys
from pathlib import Path

import pytest
import trio
import trio.testing

import acp_trio
from acp_trio import RequestError, v2
from acp_trio._transports import open_agent_process

from .conftest import PIPE_LIMIT, RecordingClient, text

AGENT = [sys.executable, str(Path(__file__).with_name("v2_test_agent.py"))]

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX pipes")


async def test_session_cancel_with_a_running_turn_and_two_held_prompts() -> None:
    client = RecordingClient()
    codes: list[int] = []
    with trio.fail_after(PIPE_LIMIT):
        async with v2.open_any_spawned_agent(AGENT, client) as got:
            agent = got.agent
            assert isinstance(agent, v2.AgentProxy)
            sid = (await agent.new_session("/tmp")).session_id
            accepted = await agent.send_prompt(sid, text("wait"))
            await client.wait_for(lambda u: u.get("state") == "running")

            async def held() -> None:
                with pytest.raises(RequestError) as info:
                    await agent.send_prompt(sid, text("hello"))
                codes.append(info.value.code)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(held)
                nursery.start_soon(held)
                # Both prompts are written (their callers wait for answers)
                # before the cancel, so the agent reads them first.
                await trio.testing.wait_all_tasks_blocked()
                await agent.cancel(sid)
            idle = await agent.turns.wait(sid, accepted.message_id)
    assert idle.stop_reason == "cancelled"
    assert codes == [-32800, -32800]
    assert client.states() == [("running", None), ("idle", "cancelled")]


async def test_tool_call_cancel_of_one_of_two_parallel_tool_calls() -> None:
    client = RecordingClient()
    with trio.fail_after(PIPE_LIMIT):
        async with v2.open_any_spawned_agent(AGENT, client) as got:
            agent = got.agent
            assert isinstance(agent, v2.AgentProxy)
            sid = (await agent.new_session("/tmp")).session_id
            results = []
            async with trio.open_nursery() as nursery:

                async def run() -> None:
                    results.append(await agent.prompt(sid, text("tools")))

                nursery.start_soon(run)
                await client.wait_for(lambda u: u.get("toolCallId") == "slow")
                await client.wait_for(lambda u: u.get("toolCallId") == "fast")
                await agent.cancel_tool_call(sid, "slow")
    assert results[0].stop_reason == "end_turn"
    final = {
        u["toolCallId"]: u["status"]
        for u in client.updates
        if u.get("status") in ("completed", "cancelled", "failed")
    }
    assert final == {"slow": "cancelled", "fast": "completed"}
    assert client.states() == [("running", None), ("idle", "end_turn")]


async def test_a_turn_whose_handler_raises_ends_idle_with_error() -> None:
    client = RecordingClient()
    with trio.fail_after(PIPE_LIMIT):
        async with v2.open_any_spawned_agent(AGENT, client) as got:
            agent = got.agent
            assert isinstance(agent, v2.AgentProxy)
            sid = (await agent.new_session("/tmp")).session_id
            result = await agent.prompt(sid, text("raise"))
    assert result.stop_reason == "error"
    assert result.error is not None
    assert result.error.code == -32603
    assert "ValueError: boom" in result.error.message
    idle = client.updates[-1]
    assert idle["state"] == "idle"
    assert idle["stopReason"] == "error"
    assert idle["error"]["message"] == result.error.message


async def test_a_v1_only_agent_makes_the_client_fall_back_over_pipes() -> None:
    with trio.fail_after(PIPE_LIMIT):
        async with v2.open_any_spawned_agent(
            [*AGENT, "--no-v2"], RecordingClient(), acp_trio.Client()
        ) as got:
            assert got.version == 1
            assert isinstance(got.agent, acp_trio.AgentProxy)
            session = await got.agent.new_session("/tmp")
    assert session.session_id == "v1-session"


async def test_sigterm_shuts_the_router_down_in_order_before_and_after_the_choice() -> None:
    codes = []
    with trio.fail_after(PIPE_LIMIT):
        for choose in (False, True):
            async with (
                open_agent_process(AGENT, stderr="discard") as process,
                v2.open_agent(RecordingClient(), process.stream) as agent,
            ):
                if choose:
                    await agent.initialize()
                    sid = (await agent.new_session("/tmp")).session_id
                    await agent.send_prompt(sid, text("wait"))
                else:
                    # Answered -32600 by the router: it is reading, and
                    # its signal handler is in place.
                    with pytest.raises(RequestError):
                        await agent.connection.call("session/new", {"cwd": "/"})
                os.kill(process.pid, signal.SIGTERM)
                # The agent closes its side and exits by itself.
                codes.append(await process.process.wait())
    # An orderly exit (0), not death by the signal (-15).
    assert codes == [0, 0]


@pytest.mark.parametrize("run", range(5))
async def test_a_prompt_cancelled_with_its_block_still_ends_the_turn(
    run: int, caplog: pytest.LogCaptureFixture
) -> None:
    """The relay's shape, v2: the scope around the spawned agent's block is
    cancelled while ``prompt()`` waits. ``session/cancel`` goes out, and
    leaving the block gives the turn its grace to go idle before the
    connection and the process go (no warning that it did not). The
    updates read while leaving are dropped, the idle one too."""
    caplog.set_level(logging.WARNING, logger="acp_trio")
    client = RecordingClient()
    with trio.fail_after(PIPE_LIMIT):
        with trio.CancelScope() as scope:
            async with v2.open_spawned_agent(client, AGENT, stderr="capture") as agent:
                await agent.initialize()
                sid = (await agent.new_session("/tmp")).session_id
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(agent.prompt, sid, text("wait"))
                    await client.wait_for(lambda u: u.get("state") == "running")
                    scope.cancel()
        assert scope.cancelled_caught
    assert client.states() == [("running", None)]
    # The client saw the turn end (the idle was read, not handed on).
    (idle,) = agent.turns._ended[sid].values()
    assert idle.stop_reason == "cancelled"
    assert "did not end" not in caplog.text
    assert "not even answered" not in caplog.text
