"""After a protocol version mismatch, typed calls say the connection is closed."""

from __future__ import annotations

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
