"""Review tests: errors out of the v2 public calls are plain exceptions, and
a turn the agent can no longer end does not leave ``prompt`` waiting."""

from __future__ import annotations

import logging
from contextlib import AbstractAsyncContextManager
from typing import Any

import pytest
import trio
import trio.testing

from acp_trio import ConnectionClosed, ConnectionConfig, RequestError, v2
from acp_trio.schema import v2 as s2
from acp_trio.testing import ScriptedPeer

from .conftest import LIMIT, RecordingClient, memory_pair, text
from .v2_test_agent import V2TestAgent


@pytest.mark.parametrize("side", ["agent", "client"])
async def test_an_error_in_the_open_block_comes_out_plain(
    side: str, autojump_clock: trio.testing.MockClock
) -> None:
    left, right = trio.testing.memory_stream_pair()
    opened: AbstractAsyncContextManager[object] = (
        v2.open_client(V2TestAgent(), left)
        if side == "agent"
        else v2.open_agent(RecordingClient(), right)
    )
    with trio.fail_after(LIMIT), pytest.raises(ValueError, match="mine"):
        async with opened:
            raise ValueError("mine")


async def test_prompt_raises_connection_closed_when_the_agent_goes_mid_turn(
    autojump_clock: trio.testing.MockClock,
) -> None:
    left, right = trio.testing.memory_stream_pair()
    client = RecordingClient()
    agent_gone = trio.Event()

    async def agent_side() -> None:
        # Serves until the turn runs, then closes the connection under it.
        async with v2.open_client(V2TestAgent(), left):
            await client.wait_for(lambda u: u.get("state") == "running")
        agent_gone.set()

    with trio.fail_after(LIMIT):
        async with v2.open_agent(client, right) as proxy, trio.open_nursery() as nursery:
            nursery.start_soon(agent_side)
            await proxy.initialize()
            sid = (await proxy.new_session("/tmp")).session_id
            with pytest.raises(ConnectionClosed):
                await proxy.prompt(sid, text("wait"))
            assert agent_gone.is_set()


class SlowToStop(V2TestAgent):
    """``slow-stop``: waits until cancelled, then takes 30 s to clean up;
    any other prompt as the test agent (``wait`` runs until cancelled)."""

    async def prompt(self, params: s2.PromptRequest, turn: v2.Turn) -> str | None:
        block = params.prompt[0]
        if isinstance(block, s2.TextContent) and block.text == "slow-stop":
            try:
                await trio.sleep_forever()
            finally:
                with trio.CancelScope(shield=True):
                    await trio.sleep(30)
        return await super().prompt(params, turn)


async def test_a_prompt_arriving_while_close_drains_is_refused_and_close_ends(
    autojump_clock: trio.testing.MockClock,
) -> None:
    client = RecordingClient()
    errors: list[int] = []
    with trio.fail_after(LIMIT):
        async with memory_pair(client, SlowToStop()) as agent:
            sid = (await agent.new_session("/tmp")).session_id
            await agent.send_prompt(sid, text("slow-stop"))
            await client.wait_for(lambda u: u.get("state") == "running")

            async def late_prompt() -> None:
                try:
                    await agent.send_prompt(sid, text("wait"))
                except RequestError as exc:
                    errors.append(exc.code)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(agent.close_session, sid)
                await trio.sleep(1)  # close is draining the slow turn
                nursery.start_soon(late_prompt)
            count = len(client.updates)
            await trio.sleep(10)
            assert len(client.updates) == count
    # The late prompt never became a turn that close would wait for.
    assert errors == [-32002]
    assert [s for s in client.states() if s[0] == "running"] == [("running", None)]


class FailsInANursery(V2TestAgent):
    """``nursery``: a task in a nursery of the handler raises a RequestError."""

    async def prompt(self, params: s2.PromptRequest, turn: v2.Turn) -> str | None:
        async def fail() -> None:
            raise RequestError(-32050, "quota exceeded", {"retryAfter": 3})

        async with trio.open_nursery() as nursery:
            nursery.start_soon(fail)
            nursery.start_soon(trio.sleep_forever)
        return None


async def test_an_error_out_of_a_nursery_of_the_turn_is_reported_as_itself(
    autojump_clock: trio.testing.MockClock,
) -> None:
    client = RecordingClient()
    with trio.fail_after(LIMIT):
        async with memory_pair(client, FailsInANursery()) as agent:
            sid = (await agent.new_session("/tmp")).session_id
            result = await agent.prompt(sid, text("nursery"))
    assert result.stop_reason == "error"
    assert result.error == s2.Error(code=-32050, message="quota exceeded", data={"retryAfter": 3})


class FailsWhenCancelled(V2TestAgent):
    """``cleanup-fails``: a task of the handler's nursery raises while the
    turn is being cancelled; any other prompt as the test agent."""

    async def prompt(self, params: s2.PromptRequest, turn: v2.Turn) -> str | None:
        block = params.prompt[0]
        if not (isinstance(block, s2.TextContent) and block.text == "cleanup-fails"):
            return await super().prompt(params, turn)

        async def cleanup_fails() -> None:
            try:
                await trio.sleep_forever()
            finally:
                raise ValueError("cleanup failed")

        async with trio.open_nursery() as nursery:
            nursery.start_soon(cleanup_fails)
            nursery.start_soon(trio.sleep_forever)
        return None


async def test_a_turn_failing_while_cancelled_ends_once_and_the_connection_goes_on(
    autojump_clock: trio.testing.MockClock,
) -> None:
    client = RecordingClient()
    with trio.fail_after(LIMIT):
        async with memory_pair(client, FailsWhenCancelled()) as agent:
            sid = (await agent.new_session("/tmp")).session_id
            await agent.send_prompt(sid, text("cleanup-fails"))
            await client.wait_for(lambda u: u.get("state") == "running")
            await agent.cancel(sid)
            await client.wait_for(lambda u: u.get("stopReason") is not None)
            again = await agent.prompt(sid, text("hello"))
    assert again.stop_reason == "end_turn"
    idles = [s for s in client.states() if s[0] == "idle"]
    assert len(idles) == 2
    assert idles[1] == ("idle", "end_turn")


async def test_a_malformed_session_cancel_is_ignored_quietly(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    left, right = trio.testing.memory_stream_pair()
    with trio.fail_after(LIMIT):
        async with v2.open_client(V2TestAgent(), left):
            peer = ScriptedPeer(right, timeout=30)
            await peer.send(
                b'{"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": []}}\n'
                b'{"jsonrpc": "2.0", "id": 1, "method": "session/list", "params": {}}\n'
            )
            reply = await peer.receive()
    assert reply == {"jsonrpc": "2.0", "id": 1, "result": {"sessions": []}}
    # Malformed input is not an error of the agent (no traceback logged).
    assert [r for r in caplog.records if r.levelno >= logging.ERROR] == []


class BlocksOnExt(SlowToStop):
    """``_block``: an extension request that waits until ``release`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.release = trio.Event()

    async def ext_method(self, method: str, params: Any) -> Any:
        await self.release.wait()
        return {}


async def test_a_prompt_read_during_close_but_started_after_it_is_still_refused(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # Two requests at a time: with close and a blocked extension request in
    # flight, a prompt read while close drains waits in the connection's
    # queue until close has ended the session, then starts.
    left, right = trio.testing.memory_stream_pair()
    client = RecordingClient()
    agent_side = BlocksOnExt()
    config = ConnectionConfig(max_concurrent_requests=2)
    errors: list[int] = []
    with trio.fail_after(LIMIT):
        async with (
            v2.open_client(agent_side, left, config=config),
            v2.open_agent(client, right) as agent,
        ):
            await agent.initialize()
            sid = (await agent.new_session("/tmp")).session_id
            await agent.send_prompt(sid, text("slow-stop"))
            await client.wait_for(lambda u: u.get("state") == "running")

            async def late_prompt() -> None:
                try:
                    await agent.send_prompt(sid, text("wait"))
                except RequestError as exc:
                    errors.append(exc.code)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(agent.connection.call, "_block", {})
                await trio.sleep(1)
                nursery.start_soon(agent.close_session, sid)
                await trio.sleep(1)  # close drains the slow turn (30 s)
                nursery.start_soon(late_prompt)  # read now, queued
                await client.wait_for(lambda u: u.get("stopReason") == "cancelled")
                await trio.sleep(1)  # close has answered
                agent_side.release.set()  # the late prompt starts
    assert errors == [-32002]
    assert [s for s in client.states() if s[0] == "running"] == [("running", None)]
