"""The size cap over Streamable HTTP, HTTP/2 (h2c) and HTTP/1.1, on each
side, as on WebSocket (test_websocket_limits.py): a message one byte over it
is answered as on stdio; a reply one byte over the client's cap fails that
call only."""

from __future__ import annotations

from typing import Any

import pytest
import trio

import acp_trio
from acp_trio import ConnectionConfig, schema
from acp_trio.lowlevel import Handler, RequestContext
from acp_trio.remote import (
    RemoteApp,
    agent_app,
    hypercorn_config,
    open_http_stream,
    open_remote_agent,
)
from acp_trio.testing import ScenarioAgent, ScenarioClient

from .conftest import LIMIT, running

CAP = 4096
PROFILES = ["http", "http1"]


class Big(Handler):
    async def handle_request(self, ctx: RequestContext, method: str, params: Any) -> Any:
        if method == "initialize":
            return {"protocolVersion": 1}
        return {"x": "y" * params["n"]}


@pytest.mark.parametrize("profile", PROFILES)
async def test_a_reply_one_byte_over_the_clients_cap_fails_that_call(profile: str) -> None:
    async def handle(stream: Any) -> None:
        await acp_trio.lowlevel.serve_connection(stream, Big())

    config = ConnectionConfig(max_message_size=CAP)
    with trio.fail_after(LIMIT):
        async with (
            running(RemoteApp(handle, max_message_size=10 * CAP)) as base,
            open_http_stream(
                base + "/acp", max_message_size=CAP, http2=profile == "http"
            ) as stream,
            acp_trio.lowlevel.open_connection(stream, config=config) as connection,
        ):
            await connection.call("initialize", {"protocolVersion": 1})
            small = await connection.call("big", {"n": 10})
            assert small == {"x": "y" * 10}
            overhead = len(b'{"jsonrpc":"2.0","id":2,"result":{"x":""}}')
            with pytest.raises(acp_trio.MessageTooLarge) as info:
                await connection.call("big", {"n": CAP + 1 - overhead})
            assert (info.value.size, info.value.limit) == (CAP + 1, CAP)
            assert await connection.call("big", {"n": 3}) == {"x": "yyy"}


@pytest.mark.parametrize("profile", PROFILES)
async def test_a_prompt_one_byte_over_the_agents_cap_is_answered_32600(profile: str) -> None:
    app = agent_app(ScenarioAgent, config=ConnectionConfig(max_message_size=CAP))
    with trio.fail_after(LIMIT):
        async with running(app) as base:
            client = ScenarioClient()
            async with open_remote_agent(client, base + "/acp", profile=profile) as agent:  # type: ignore[arg-type]
                await agent.initialize(client.initialize_request())
                session = await agent.new_session(schema.NewSessionRequest(cwd="/", mcp_servers=[]))
                session_id = session.session_id

                async def refused(text: str) -> int:
                    with pytest.raises(acp_trio.RequestError) as info:
                        await agent.prompt_text(session_id, text)
                    assert info.value.code == -32600
                    assert info.value.data["limit"] == CAP
                    return int(info.value.data["size"])

                # The request's size beside its text, from one over the cap.
                overhead = await refused("echo " + "z" * (CAP + 100)) - (5 + CAP + 100)
                # One byte over: refused; at the cap: served.
                assert await refused("echo " + "z" * (CAP + 1 - overhead - 5)) == CAP + 1
                result = await agent.prompt_text(session_id, "echo " + "z" * (CAP - overhead - 5))
                assert result.stop_reason == "end_turn"
                # The connection goes on.
                result = await agent.prompt_text(session_id, "echo fine")
                assert result.stop_reason == "end_turn"


def test_the_listen_backlog_has_room_for_bursts_of_connections() -> None:
    """Issue 37 (1,000 clients, benchmarks/bench_scale.py): with hypercorn's
    default backlog (100) the busy server's accept queue overflowed and the
    connections it dropped were reset mid-request (225 to 436 of 1,000
    clients failed over HTTP/1.1 and h2c); with 4,096, none."""
    config = hypercorn_config(agent_app(ScenarioAgent), "127.0.0.1", 0)
    assert config.backlog >= 4096
