"""Review tests: errors out of the v2 public calls are plain exceptions, and
a turn the agent can no longer end does not leave ``prompt`` waiting."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from acp_trio import ConnectionClosed, v2

from .conftest import LIMIT, RecordingClient, text
from .v2_test_agent import V2TestAgent


async def test_an_error_in_the_open_agent_block_comes_out_plain(
    autojump_clock: trio.testing.MockClock,
) -> None:
    left, _right = trio.testing.memory_stream_pair()
    with trio.fail_after(LIMIT), pytest.raises(ValueError, match="mine"):
        async with v2.open_agent(V2TestAgent(), left):
            raise ValueError("mine")


async def test_an_error_in_the_open_client_block_comes_out_plain(
    autojump_clock: trio.testing.MockClock,
) -> None:
    _left, right = trio.testing.memory_stream_pair()
    with trio.fail_after(LIMIT), pytest.raises(ValueError, match="mine"):
        async with v2.open_client(RecordingClient(), right):
            raise ValueError("mine")


async def test_prompt_raises_connection_closed_when_the_agent_goes_mid_turn(
    autojump_clock: trio.testing.MockClock,
) -> None:
    left, right = trio.testing.memory_stream_pair()
    client = RecordingClient()
    agent_gone = trio.Event()

    async def agent_side() -> None:
        # Serves until the turn runs, then closes the connection under it.
        async with v2.open_agent(V2TestAgent(), left):
            await client.wait_for(lambda u: u.get("state") == "running")
        agent_gone.set()

    with trio.fail_after(LIMIT):
        async with v2.open_client(client, right) as proxy, trio.open_nursery() as nursery:
            nursery.start_soon(agent_side)
            await proxy.initialize()
            sid = (await proxy.new_session("/tmp")).session_id
            with pytest.raises(ConnectionClosed):
                await proxy.prompt(sid, text("wait"))
            assert agent_gone.is_set()
