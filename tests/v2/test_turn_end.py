"""How a v2 turn ends when its ``prompt()`` is cancelled together with the
block of its connection: ``session/cancel`` goes out first, and leaving the
block waits (shielded) for the turn's ``idle``, at most ``cancel_grace``.
Memory streams, the autojump clock: times are virtual and exact."""

from __future__ import annotations

import logging
import math
from typing import Any

import pytest
import trio
import trio.testing

from acp_trio import v2
from acp_trio.testing import ExpectationFailed, ScriptedPeer

from .conftest import RecordingClient, text

LIMIT = 600


async def deaf_v2_agent(peer: ScriptedPeer, log: list[tuple[float, str]]) -> None:
    """Answers initialize, session/new and session/prompt; its turn never
    goes idle, whatever it is sent."""
    while True:
        try:
            msg = await peer.receive(within=math.inf)
        except ExpectationFailed:
            return
        method = msg.get("method", "<answer>")
        log.append((trio.current_time(), method))
        if method == "initialize":
            info = {"name": "deaf", "version": "1"}
            await peer.respond(msg["id"], {"protocolVersion": 2, "info": info, "capabilities": {}})
        elif method == "session/new":
            await peer.respond(msg["id"], {"sessionId": "s1"})
        elif method == "session/prompt":
            running = {"sessionUpdate": "state_update", "state": "running"}
            await peer.notify("session/update", {"sessionId": "s1", "update": running})
            await peer.respond(msg["id"], {"messageId": "m1"})


@pytest.mark.parametrize("grace", [5.0, 0.5])
async def test_leaving_waits_the_grace_for_a_turn_that_never_goes_idle(
    autojump_clock: Any, grace: float, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="acp_trio")
    client = RecordingClient()
    log: list[tuple[float, str]] = []
    ours, theirs = trio.testing.memory_stream_pair()
    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(deaf_v2_agent, ScriptedPeer(theirs, timeout=30), log)
            with trio.CancelScope() as scope:
                async with v2.open_agent(client, ours, cancel_grace=grace) as agent:
                    assert agent.cancel_grace == grace
                    await agent.initialize()
                    sid = (await agent.new_session("/tmp")).session_id
                    async with trio.open_nursery() as inner:
                        inner.start_soon(agent.prompt, sid, text("wait"))
                        await client.wait_for(lambda u: u.get("state") == "running")
                        await trio.testing.wait_all_tasks_blocked()
                        cancelled_at = trio.current_time()
                        scope.cancel()
            left_at = trio.current_time()
            nursery.cancel_scope.cancel()
    assert left_at == cancelled_at + grace
    assert [m for _, m in log][-1] == "session/cancel"
    assert "did not end (no idle state) within its grace" in caplog.text


async def test_the_grace_is_checked() -> None:
    ours, _ = trio.testing.memory_stream_pair()
    with pytest.raises(ValueError, match="cancel_grace"):
        async with v2.open_agent(RecordingClient(), ours, cancel_grace=-1):
            pass
