"""The naming rule: ``open_X`` gives you X (the peer at the other end),
``serve_X``/``run_X`` serve your X. Passing the wrong side's object is a
clear ``TypeError`` naming the function that fits, never an obscure failure
inside the connection."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

import acp_trio
from acp_trio import v2


class MyAgent(acp_trio.Agent):
    pass


class MyClient(acp_trio.Client):
    pass


class MyV2Agent(v2.Agent):
    pass


class MyV2Client(v2.Client):
    pass


async def test_open_agent_gives_the_agent_and_takes_your_client() -> None:
    left, right = trio.testing.memory_stream_pair()
    with trio.fail_after(10):
        async with (
            acp_trio.open_client(MyAgent(), left) as client,
            acp_trio.open_agent(MyClient(), right) as agent,
        ):
            assert isinstance(client, acp_trio.ClientProxy)
            assert isinstance(agent, acp_trio.AgentProxy)
            reply = await agent.initialize(protocol_version=1)
            assert reply.protocol_version == 1


@pytest.mark.parametrize(
    ("opener", "wrong", "hint"),
    [
        (acp_trio.open_agent, MyAgent(), r"open_client\(agent, stream\)"),
        (v2.open_agent, MyV2Agent(), r"acp_trio\.v2\.open_client\(agent, stream\)"),
        (acp_trio.open_client, MyClient(), r"open_agent\(client, stream\)"),
        (v2.open_client, MyV2Client(), r"acp_trio\.v2\.open_agent\(client, stream\)"),
    ],
)
async def test_the_wrong_side_is_a_type_error_naming_the_right_function(
    opener: Any, wrong: object, hint: str
) -> None:
    left, _right = trio.testing.memory_stream_pair()
    with pytest.raises(TypeError, match=hint):
        async with opener(wrong, left):
            pass  # pragma: no cover


async def test_serve_agent_refuses_a_client_class_too() -> None:
    left, _right = trio.testing.memory_stream_pair()
    with pytest.raises(TypeError, match=r"expected your Agent"):
        await acp_trio.serve_agent(MyClient, left)  # type: ignore[arg-type]
