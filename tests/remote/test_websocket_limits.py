"""The WebSocket profile's edges: the message-size cap on each side (a
message one byte over it is answered as on stdio, one far over it drops the
WebSocket), the bearer token, origins, paths, loopback-only binding."""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio

import acp_trio
from acp_trio import ConnectionConfig, schema
from acp_trio.lowlevel import Handler, RequestContext
from acp_trio.remote import (
    RemoteApp,
    WebSocketClosed,
    WebSocketRejected,
    agent_app,
    library_limit,
    open_remote_agent,
    open_websocket_stream,
    serve_remote,
)
from acp_trio.testing import ScenarioAgent, ScenarioClient

from .conftest import LIMIT, running, ws_url

CAP = 4096
INITIALIZE = b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}'


def request_of_size(size: int, request_id: int = 7) -> bytes:
    """A request of exactly ``size`` bytes."""
    base = {"jsonrpc": "2.0", "id": request_id, "method": "echo", "params": {"x": ""}}
    empty = len(json.dumps(base, separators=(",", ":")).encode())
    base["params"] = {"x": "y" * (size - empty)}
    data = json.dumps(base, separators=(",", ":")).encode()
    assert len(data) == size
    return data


class Echo(Handler):
    async def handle_request(self, ctx: RequestContext, method: str, params: Any) -> Any:
        return {"echo": params}


def echo_app(cap: int = CAP) -> RemoteApp:
    async def handle(stream: Any) -> None:
        await acp_trio.lowlevel.serve_connection(stream, Echo())

    return RemoteApp(handle, max_message_size=cap)


def test_the_library_limit_is_a_little_above_the_cap() -> None:
    assert library_limit(CAP) == 2 * CAP
    assert library_limit(64 * 1024 * 1024) == 65 * 1024 * 1024
    with pytest.raises(ValueError, match="positive"):
        library_limit(0)


async def test_a_request_one_byte_over_the_servers_cap_is_answered_32600() -> None:
    with trio.fail_after(LIMIT):
        async with (
            running(echo_app()) as base,
            open_websocket_stream(ws_url(base), max_message_size=10 * CAP) as stream,
        ):
            await stream.send_message(INITIALIZE)  # (the first message, always)
            assert isinstance(await stream.receive_message(), bytes)
            await stream.send_message(request_of_size(CAP))
            reply = json.loads(await stream.receive_message())  # type: ignore[arg-type]
            assert reply["id"] == 7
            assert len(reply["result"]["echo"]["x"]) > 0
            await stream.send_message(request_of_size(CAP + 1, 8))
            reply = json.loads(await stream.receive_message())  # type: ignore[arg-type]
            assert reply["id"] == 8
            assert reply["error"]["code"] == -32600
            assert reply["error"]["message"] == "Request too large"
            assert reply["error"]["data"] == {"size": CAP + 1, "limit": CAP}
            # The connection goes on.
            await stream.send_message(request_of_size(100, 9))
            reply = json.loads(await stream.receive_message())  # type: ignore[arg-type]
            assert reply["id"] == 9


async def test_a_message_far_over_the_cap_drops_the_websocket_with_1009() -> None:
    with trio.fail_after(LIMIT):
        async with (
            running(echo_app()) as base,
            open_websocket_stream(ws_url(base), max_message_size=10 * CAP) as stream,
        ):
            await stream.send_message(request_of_size(library_limit(CAP) + 1))
            with pytest.raises(WebSocketClosed) as info:
                await stream.websocket.get_message()
            assert info.value.code == 1009


async def test_a_reply_one_byte_over_the_clients_cap_fails_that_call() -> None:
    class Big(Handler):
        async def handle_request(self, ctx: RequestContext, method: str, params: Any) -> Any:
            return {"x": "y" * params["n"]}

    async def handle(stream: Any) -> None:
        await acp_trio.lowlevel.serve_connection(stream, Big())

    config = ConnectionConfig(max_message_size=CAP)
    with trio.fail_after(LIMIT):
        async with (
            running(RemoteApp(handle, max_message_size=10 * CAP)) as base,
            open_websocket_stream(ws_url(base), max_message_size=CAP) as stream,
            acp_trio.lowlevel.open_connection(stream, config=config) as connection,
        ):
            await connection.call("initialize", {"protocolVersion": 1, "n": 0})
            small = await connection.call("big", {"n": 10})
            assert small == {"x": "y" * 10}
            overhead = len(b'{"jsonrpc":"2.0","id":2,"result":{"x":""}}')
            with pytest.raises(acp_trio.MessageTooLarge) as info:
                await connection.call("big", {"n": CAP + 1 - overhead})
            assert (info.value.size, info.value.limit) == (CAP + 1, CAP)
            assert await connection.call("big", {"n": 3}) == {"x": "yyy"}


async def test_the_agents_cap_comes_from_its_connection_config() -> None:
    app = agent_app(ScenarioAgent, config=ConnectionConfig(max_message_size=CAP))
    assert app.max_message_size == CAP
    with trio.fail_after(LIMIT):
        async with running(app) as base:
            client = ScenarioClient()
            async with open_remote_agent(client, ws_url(base)) as agent:
                await agent.initialize(client.initialize_request())
                session = await agent.new_session(schema.NewSessionRequest(cwd="/", mcp_servers=[]))
                with pytest.raises(acp_trio.RequestError) as info:
                    await agent.prompt_text(session.session_id, "echo " + "z" * CAP)
                assert info.value.code == -32600
                assert info.value.data["limit"] == CAP


async def rejected_status(url: str, headers: dict[str, str] | None = None) -> int:
    with pytest.raises(WebSocketRejected) as info:
        async with open_websocket_stream(url, headers=headers):
            pass
    return info.value.status_code


async def test_a_token_is_required_when_set() -> None:
    app = agent_app(ScenarioAgent, token="s3cret")
    with trio.fail_after(LIMIT):
        async with running(app) as base:
            assert await rejected_status(ws_url(base)) == 401
            wrong = {"authorization": "Bearer nope"}
            assert await rejected_status(ws_url(base), wrong) == 401
            client = ScenarioClient()
            async with open_remote_agent(client, ws_url(base), token="s3cret") as agent:
                result = await agent.initialize(client.initialize_request())
                assert result.protocol_version == 1


async def test_browser_origins_are_refused_unless_allowed() -> None:
    app = agent_app(ScenarioAgent, allowed_origins=["https://editor.example"])
    with trio.fail_after(LIMIT):
        async with running(app) as base:
            evil = {"origin": "https://evil.example"}
            assert await rejected_status(ws_url(base), evil) == 403
            good = {"origin": "https://editor.example"}
            async with open_websocket_stream(ws_url(base), headers=good) as stream:
                assert stream.connection_id


async def test_other_paths_are_not_found() -> None:
    with trio.fail_after(LIMIT):
        async with running(agent_app(ScenarioAgent)) as base:
            assert await rejected_status(ws_url(base, "/elsewhere")) == 404


async def test_binding_beyond_loopback_needs_an_explicit_flag() -> None:
    app = agent_app(ScenarioAgent)
    with pytest.raises(ValueError, match="not a loopback address"):
        await serve_remote(app, 0, host="0.0.0.0")


async def test_ipv6_loopback_serves_too() -> None:
    with trio.fail_after(LIMIT):
        try:
            cm = running(agent_app(ScenarioAgent), host="::1")
            base = await cm.__aenter__()
        except OSError:
            pytest.skip("no IPv6 loopback here")
        try:
            assert base.startswith("http://[::1]:")
            client = ScenarioClient()
            async with open_remote_agent(client, ws_url(base)) as agent:
                result = await agent.initialize(client.initialize_request())
                assert result.protocol_version == 1
        finally:
            await cm.__aexit__(None, None, None)
