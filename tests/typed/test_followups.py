"""After a protocol version mismatch, typed calls say the connection is closed."""

from __future__ import annotations

import json

import pytest
import trio

import acp_trio
from acp_trio import ConnectionClosed, UnsupportedProtocolVersion, schema


class FutureAgent(acp_trio.Agent):
    async def initialize(self, params: schema.InitializeRequest) -> schema.InitializeResponse:
        return schema.InitializeResponse(protocol_version=2)


async def test_calls_after_a_version_mismatch_raise_connection_closed() -> None:
    with trio.fail_after(10):
        async with acp_trio.open_agent_client_pair(FutureAgent(), acp_trio.Client()) as (
            agent,
            _,
        ):
            with pytest.raises(UnsupportedProtocolVersion) as info:
                await agent.initialize()
            assert (info.value.version, info.value.supported) == (2, 1)
            with pytest.raises(ConnectionClosed):
                await agent.new_session(schema.NewSessionRequest(cwd="/", mcp_servers=[]))


@pytest.mark.parametrize("text", ["", "hello", "naïve ✓ \n \u2028", "x" * 10_000])
async def test_send_text_fast_path_writes_what_the_converter_would(text: str) -> None:
    sent: list[object] = []

    def trace(direction: str, frame: bytes) -> None:
        if direction == "send":
            sent.append(json.loads(frame))

    config = acp_trio.ConnectionConfig(trace=trace)
    with trio.fail_after(10):
        async with acp_trio.open_agent_client_pair(
            acp_trio.Agent(), acp_trio.Client(), agent_config=config
        ) as (_, to_client):
            await to_client.send_text("s-1", text)
    expected = schema.converter.unstructure(
        schema.SessionNotification(
            session_id="s-1",
            update=schema.AgentMessageChunk(content=schema.TextContent(text=text)),
        )
    )
    assert sent == [{"jsonrpc": "2.0", "method": "session/update", "params": expected}]


@pytest.mark.parametrize(
    ("method", "params"),
    [("session/load", {}), ("session/list", {"cursor": 5}), ("authenticate", None)],
)
async def test_methods_an_agent_does_not_implement_are_not_found_whatever_the_params(
    method: str, params: object
) -> None:
    from acp_trio.testing import open_scripted_client

    with trio.fail_after(10):
        async with open_scripted_client(acp_trio.Agent()) as peer:
            request_id = await peer.request(method, params)
            reply = await peer.receive_response(request_id)
    assert reply["error"]["code"] == -32601
