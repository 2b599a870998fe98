"""The version routers, rule by rule: the agent-side router driven by a raw
peer writing exact JSON (in memory), and the client-side fallback."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
import trio.testing

import acp_trio
from acp_trio import v2
from acp_trio.schema import v2 as s2
from acp_trio.testing import ScriptedPeer

from .conftest import LIMIT, RecordingClient, text
from .v2_test_agent import V1TestAgent, V2TestAgent

V2_INIT = {"protocolVersion": 2, "info": {"name": "raw", "version": "1"}}
V1_INIT = {"protocolVersion": 1, "clientCapabilities": {}}


@asynccontextmanager
async def router(**sides: Any) -> AsyncIterator[ScriptedPeer]:
    left, right = trio.testing.memory_stream_pair()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(lambda: v2.serve_router(left, **sides))
        yield ScriptedPeer(right, timeout=30)
        nursery.cancel_scope.cancel()


BOTH = {"v1": V1TestAgent, "v2": V2TestAgent}


def test_choose_version_rules() -> None:
    assert v2.choose_version(2, [1, 2]) == 2
    assert v2.choose_version(7, [1, 2]) == 2
    assert v2.choose_version(1, [1, 2]) == 1
    assert v2.choose_version(2, [1]) == 1
    assert v2.choose_version(1, [2]) is None
    assert v2.choose_version(0, [1, 2]) is None


async def test_requests_before_initialize_get_32600_and_notifications_are_dropped(
    autojump_clock: trio.testing.MockClock,
) -> None:
    with trio.fail_after(LIMIT):
        async with router(**BOTH) as peer:
            await peer.request("session/new", {"cwd": "/"}, id=1)
            await peer.send({"jsonrpc": "2.0", "method": "session/cancel", "params": {}})
            await peer.send({"jsonrpc": "2.0", "id": 99, "result": {}})  # a stray response
            await peer.request("initialize", V2_INIT, id="x")
            first = await peer.receive()
            second = await peer.receive()
    assert first["id"] == 1
    assert first["error"]["code"] == -32600
    assert second["id"] == "x"
    assert second["result"]["protocolVersion"] == 2


async def test_a_batch_gets_one_32600_with_null_id_and_nothing_closes(
    autojump_clock: trio.testing.MockClock,
) -> None:
    with trio.fail_after(LIMIT):
        async with router(**BOTH) as peer:
            batch = [
                {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": V2_INIT},
                {"jsonrpc": "2.0", "id": 2, "method": "initialize", "params": V2_INIT},
            ]
            await peer.send(batch)
            await peer.send(b"{not json\n")
            await peer.send(b"\n")
            await peer.request("initialize", V2_INIT, id=3)
            replies = [await peer.receive() for _ in range(3)]
    assert replies[0] == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32600, "message": replies[0]["error"]["message"]},
    }
    assert replies[1]["id"] is None
    assert replies[1]["error"]["code"] == -32700
    assert replies[2]["id"] == 3
    assert replies[2]["result"]["protocolVersion"] == 2


@pytest.mark.parametrize(
    ("sides", "requested", "answered"),
    [
        (("v1", "v2"), 2, 2),
        (("v1", "v2"), 5, 2),
        (("v1", "v2"), 1, 1),
        (("v1",), 2, 1),
        (("v1",), 1, 1),
        (("v2",), 3, 2),
    ],
)
async def test_the_requested_number_picks_the_side(
    sides: tuple[str, ...], requested: int, answered: int, autojump_clock: trio.testing.MockClock
) -> None:
    params = dict(V2_INIT if requested >= 2 else V1_INIT, protocolVersion=requested)
    with trio.fail_after(LIMIT):
        async with router(**{s: BOTH[s] for s in sides}) as peer:
            await peer.request("initialize", params, id=1)
            reply = await peer.receive()
    assert reply["result"]["protocolVersion"] == answered
    # Only the v2 agent answers with the (required) v2 ``info``.
    assert ("info" in reply["result"]) == (answered == 2)


@pytest.mark.parametrize(("sides", "requested"), [(("v1", "v2"), 0), (("v2",), 1)])
async def test_no_fitting_version_is_32022_with_data_and_the_router_reads_on(
    sides: tuple[str, ...], requested: int, autojump_clock: trio.testing.MockClock
) -> None:
    with trio.fail_after(LIMIT):
        async with router(**{s: BOTH[s] for s in sides}) as peer:
            await peer.request("initialize", dict(V1_INIT, protocolVersion=requested), id=1)
            refused = await peer.receive()
            await peer.request("initialize", V2_INIT, id=2)
            accepted = await peer.receive()
    assert refused["id"] == 1
    assert refused["error"]["code"] == -32022
    assert refused["error"]["data"] == {
        "requested": requested,
        "supported": [int(s[1]) for s in sides],
    }
    assert accepted["result"]["protocolVersion"] == 2


async def test_an_initialize_without_a_valid_version_is_32602_and_reading_goes_on(
    autojump_clock: trio.testing.MockClock,
) -> None:
    with trio.fail_after(LIMIT):
        async with router(**BOTH) as peer:
            await peer.request("initialize", {"protocolVersion": "1.0.0"}, id=1)
            await peer.request("initialize", {"info": {"name": "x", "version": "1"}}, id=2)
            await peer.request("initialize", V1_INIT, id=3)
            replies = [await peer.receive() for _ in range(3)]
    assert [r.get("error", {}).get("code") for r in replies] == [-32602, -32602, None]
    assert replies[2]["result"]["protocolVersion"] == 1


async def test_a_v1_probe_with_v2_looking_fields_goes_to_v1(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # The shape says v2 (info, capabilities); the number says 1: v1 it is.
    probe = {"protocolVersion": 1, "info": {"name": "x", "version": "1"}, "capabilities": {}}
    with trio.fail_after(LIMIT):
        async with router(**BOTH) as peer:
            await peer.request("initialize", probe, id=1)
            reply = await peer.receive()
    assert reply["result"] == {"protocolVersion": 1}  # the v1 agent's answer


async def test_a_repeated_initialize_goes_to_the_chosen_side_never_rerouted(
    autojump_clock: trio.testing.MockClock,
) -> None:
    with trio.fail_after(LIMIT):
        async with router(**BOTH) as peer:
            await peer.request("initialize", V1_INIT, id=1)
            first = await peer.receive()
            await peer.request("initialize", V2_INIT, id=2)
            second = await peer.receive()
            await peer.request("session/new", {"cwd": "/", "mcpServers": []}, id=3)
            third = await peer.receive()
    assert first["result"]["protocolVersion"] == 1
    # The v1 agent answered the second one too (it speaks 1, whatever was asked).
    assert second["result"]["protocolVersion"] == 1
    assert third["result"] == {"sessionId": "v1-session"}


async def test_end_of_input_before_initialize_ends_the_router(
    autojump_clock: trio.testing.MockClock,
) -> None:
    left, right = trio.testing.memory_stream_pair()
    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(lambda: v2.serve_router(left, **BOTH))
            peer = ScriptedPeer(right, timeout=30)
            await peer.send(b'{"jsonrpc": "2.0", "id": 1, "method": "x"}\n')
            await peer.close_send()
            reply = await peer.receive()
    assert reply["error"]["code"] == -32600


# -- client side ---------------------------------------------------------------


class V1Recorder(acp_trio.Client):
    pass


def connector(sides: dict[str, Any], count: list[int]) -> Any:
    @asynccontextmanager
    async def connect() -> AsyncIterator[trio.abc.Stream]:
        count.append(1)
        left, right = trio.testing.memory_stream_pair()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(lambda: v2.serve_router(left, **sides))
            yield right
            nursery.cancel_scope.cancel()

    return connect


async def test_the_client_offers_v2_and_gets_it(autojump_clock: trio.testing.MockClock) -> None:
    count: list[int] = []
    client = RecordingClient()
    with trio.fail_after(LIMIT):
        async with v2.open_any_agent(connector(BOTH, count), client, V1Recorder()) as got:
            assert got.version == 2
            assert isinstance(got.agent, v2.AgentProxy)
            assert isinstance(got.initialize, s2.InitializeResponse)
            sid = (await got.agent.new_session("/tmp")).session_id
            result = await got.agent.prompt(sid, text("hello"))
    assert result.stop_reason == "end_turn"
    assert count == [1]


async def test_the_client_falls_back_to_v1_on_a_fresh_connection(
    autojump_clock: trio.testing.MockClock,
) -> None:
    count: list[int] = []
    with trio.fail_after(LIMIT):
        async with v2.open_any_agent(
            connector({"v1": V1TestAgent}, count), RecordingClient(), V1Recorder()
        ) as got:
            assert got.version == 1
            assert isinstance(got.agent, acp_trio.AgentProxy)
            session = await got.agent.new_session("/tmp")
            answer = await got.agent.prompt(
                session.session_id, [acp_trio.schema.TextContent(text="x")]
            )
    assert answer.stop_reason == "end_turn"
    assert count == [1, 1]


async def test_without_a_v1_client_a_v1_answer_is_unsupported(
    autojump_clock: trio.testing.MockClock,
) -> None:
    with trio.fail_after(LIMIT), pytest.raises(acp_trio.UnsupportedProtocolVersion):
        async with v2.open_any_agent(connector({"v1": V1TestAgent}, []), RecordingClient()):
            pass


async def test_a_v1_client_through_the_router_gets_v1(
    autojump_clock: trio.testing.MockClock,
) -> None:
    left, right = trio.testing.memory_stream_pair()
    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(lambda: v2.serve_router(left, **BOTH))
            async with acp_trio.open_agent(V1Recorder(), right) as agent:
                answer = await agent.initialize()
            nursery.cancel_scope.cancel()
    assert answer.protocol_version == 1


# -- the v2 sides alone (no router) ---------------------------------------------


async def test_a_v2_agent_alone_answers_a_v1_initialize_32022_and_a_lower_repeat_32600(
    autojump_clock: trio.testing.MockClock,
) -> None:
    left, right = trio.testing.memory_stream_pair()
    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(lambda: v2.serve_agent(V2TestAgent, left))
            peer = ScriptedPeer(right, timeout=30)
            await peer.request("initialize", V1_INIT, id=1)
            refused = await peer.receive()
            await peer.request("initialize", V2_INIT, id=2)
            accepted = await peer.receive()
            await peer.request("initialize", V1_INIT, id=3)
            repeat = await peer.receive()
            nursery.cancel_scope.cancel()
    assert refused["error"]["code"] == -32022
    assert refused["error"]["data"] == {"requested": 1, "supported": [2]}
    assert accepted["result"]["protocolVersion"] == 2
    assert repeat["error"]["code"] == -32600


async def test_a_v2_client_alone_refuses_a_v1_answer(
    autojump_clock: trio.testing.MockClock,
) -> None:
    left, right = trio.testing.memory_stream_pair()
    with trio.fail_after(LIMIT):
        async with (
            acp_trio.open_client(V1TestAgent, left),
            v2.open_agent(RecordingClient(), right) as agent,
        ):
            with pytest.raises(acp_trio.UnsupportedProtocolVersion) as info:
                await agent.initialize()
    assert info.value.version == 1


async def test_cancelling_the_router_before_the_choice_closes_the_stream(
    autojump_clock: trio.testing.MockClock,
) -> None:
    left, right = trio.testing.memory_stream_pair()
    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(lambda: v2.serve_router(left, **BOTH))
            await trio.sleep(1)
            nursery.cancel_scope.cancel()
        # The peer sees the end of the stream, as after the choice.
        assert await right.receive_some() == b""


async def test_started_router_ending_before_the_choice_is_not_a_start_error(
    autojump_clock: trio.testing.MockClock,
) -> None:
    left, right = trio.testing.memory_stream_pair()
    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            await right.send_eof()
            # End of input before any initialize: nursery.start returns (no
            # connection) rather than failing with "never called started()".
            connection = await nursery.start(
                lambda task_status: v2.serve_router(left, task_status=task_status, **BOTH)
            )
    assert connection is None
