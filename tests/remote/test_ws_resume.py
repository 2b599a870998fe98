"""Resumable WebSockets (provisional): with resumable streams on both ends,
a WebSocket lost in the middle of a turn is replaced by a new one that takes
up the same ACP connection (``stream/resume``): the turn goes on, nothing is
lost or repeated either way. Unknown connections get ``4404``, cursors no
longer held ``4409``; ``stream/close`` ends the connection at once; a
connection nobody resumes ends after ``disconnect_timeout``."""

from __future__ import annotations

import functools
import json

import pytest
import trio

import acp_trio
from acp_trio import schema
from acp_trio.remote import RemoteApp, WebSocketClosed, agent_app, open_websocket_stream
from acp_trio.remote._ws_client import connect_websocket
from acp_trio.remote._ws_resume_client import ResumableWebSocketMessages
from acp_trio.testing import ScenarioAgent, ScenarioClient

from .conftest import LIMIT, running, until, ws_url


def resumable_app(disconnect_timeout: float = 600.0) -> RemoteApp:
    app = agent_app(ScenarioAgent, resumable=True)
    app.disconnect_timeout = disconnect_timeout
    return app


async def drop(stream: ResumableWebSocketMessages) -> None:
    """Lose the WebSocket as a network failure would: its socket closes,
    no closing handshake."""
    await stream._sockets[-1].aclose()


async def test_a_websocket_lost_mid_turn_is_resumed_and_the_turn_goes_on() -> None:
    app = resumable_app()
    count = 600
    with trio.fail_after(LIMIT):
        async with running(app) as base:
            client = ScenarioClient()
            async with (
                open_websocket_stream(ws_url(base), resumable=True) as stream,
                acp_trio.open_agent(client, stream) as agent,
            ):
                assert isinstance(stream, ResumableWebSocketMessages)
                await agent.initialize(client.initialize_request())
                new = schema.NewSessionRequest(cwd="/", mcp_servers=[])
                session_id = (await agent.new_session(new)).session_id
                results: list[schema.PromptResponse] = []
                async with trio.open_nursery() as nursery:

                    async def run() -> None:
                        results.append(await agent.prompt_text(session_id, f"stream {count} 1"))

                    nursery.start_soon(run)
                    for drops, after in enumerate((50, 250, 450), start=1):
                        await until(lambda after=after: len(client.texts(session_id)) >= after)  # type: ignore[misc]
                        await drop(stream)
                        await until(lambda drops=drops: stream.resumes >= drops)  # type: ignore[misc]
                assert results[0].stop_reason == "end_turn"
                assert client.texts(session_id) == [str(i) for i in range(count)]
                # Requests and answers crossing resumes, both ways.
                results.clear()
                async with trio.open_nursery() as nursery:

                    async def reads() -> None:
                        results.append(await agent.prompt_text(session_id, "read 300 /tmp/x"))

                    nursery.start_soon(reads)
                    for drops, after in enumerate((50, 150), start=4):
                        await until(
                            lambda after=after: len(client.received("fs/read_text_file")) >= after  # type: ignore[misc]
                        )
                        await drop(stream)
                        await until(lambda drops=drops: stream.resumes >= drops)  # type: ignore[misc]
                assert results[0].stop_reason == "end_turn"
                assert client.texts(session_id)[-1] == "read 300 19200"
                assert len(client.received("fs/read_text_file")) == 300
            assert stream.resumes == 5
            # stream/close ended the connection at once (not after 600 s).
            await until(lambda: not app.ws_sessions)


async def test_a_turn_waiting_on_the_client_survives_a_lost_websocket() -> None:
    app = resumable_app()
    with trio.fail_after(LIMIT):
        async with running(app) as base:
            client = ScenarioClient()
            async with (
                open_websocket_stream(ws_url(base), resumable=True) as stream,
                acp_trio.open_agent(client, stream) as agent,
            ):
                assert isinstance(stream, ResumableWebSocketMessages)
                await agent.initialize(client.initialize_request())
                new = schema.NewSessionRequest(cwd="/", mcp_servers=[])
                session_id = (await agent.new_session(new)).session_id
                results: list[schema.PromptResponse] = []
                async with trio.open_nursery() as nursery:

                    async def run() -> None:
                        results.append(await agent.prompt_text(session_id, "permission"))

                    nursery.start_soon(run)
                    await client.wait_for_requests("session/request_permission")
                    await drop(stream)
                    await until(lambda: stream.resumes >= 1)
                    # The turn was not cancelled: session/cancel reaches it
                    # on the new WebSocket and its answer comes back.
                    await agent.cancel(session_id)
                assert results[0].stop_reason == "cancelled"


async def test_a_connection_nobody_resumes_ends_after_the_disconnect_timeout() -> None:
    app = resumable_app(disconnect_timeout=0.2)
    with trio.fail_after(LIMIT):
        async with running(app) as base, trio.open_nursery() as nursery:
            ws, tcp = await connect_websocket(
                ws_url(base),
                nursery,
                token=None,
                headers=None,
                max_message_size=1 << 20,
                connect_timeout=30,
                write_buffer=65536,
                ssl_context=None,
            )
            init = {"jsonrpc": "2.0", "id": 0, "method": "initialize"}
            init["params"] = {"protocolVersion": 1, "clientCapabilities": {}}
            await ws.send_message(json.dumps(init))
            await ws.get_message()
            assert len(app.ws_sessions) == 1
            await tcp.aclose()
            # Kept for a while, then ended.
            await until(lambda: not app.ws_sessions)
            nursery.cancel_scope.cancel()


@pytest.mark.parametrize(("which", "code"), [("unknown", 4404), ("gone", 4409)])
async def test_a_resume_that_cannot_be_served_is_refused(which: str, code: int) -> None:
    app = agent_app(ScenarioAgent, resumable=True)
    app = RemoteApp(app.handle, resumable=True, replay_size=1)
    with trio.fail_after(LIMIT):
        async with running(app) as base, trio.open_nursery() as nursery:
            connect = functools.partial(
                connect_websocket,
                ws_url(base),
                nursery,
                token=None,
                headers=None,
                max_message_size=1 << 20,
                connect_timeout=30,
                write_buffer=65536,
                ssl_context=None,
            )
            ws, tcp = await connect()
            init = {"jsonrpc": "2.0", "id": 0, "method": "initialize"}
            init["params"] = {"protocolVersion": 1, "clientCapabilities": {}}
            await ws.send_message(json.dumps(init))
            await ws.get_message()
            (connection_id,) = app.ws_sessions
            for request_id in (1, 2):
                # (With a window of 1, the server waits for each ack.)
                ack = {"jsonrpc": "2.0", "method": "stream/ack", "params": {"cursor": request_id}}
                await ws.send_message(json.dumps(ack))
                await ws.send_message(
                    json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "x"})
                )
                await ws.get_message()
            # 3 frames sent; with a buffer of 1, resuming after 1 is refused.
            params = {"connectionId": connection_id, "cursor": 1}
            if which == "unknown":
                params["connectionId"] = "nope"
            second, tcp2 = await connect()
            resume = {"jsonrpc": "2.0", "method": "stream/resume", "params": params}
            await second.send_message(json.dumps(resume))
            with pytest.raises(WebSocketClosed) as info:
                await second.get_message()
            assert info.value.code == code
            for socket in (tcp, tcp2):
                await socket.aclose()
            nursery.cancel_scope.cancel()


async def test_websockets_are_not_resumable_unless_asked() -> None:
    app = agent_app(ScenarioAgent)
    with trio.fail_after(LIMIT):
        async with running(app) as base:
            client = ScenarioClient()
            async with (
                open_websocket_stream(ws_url(base)) as stream,
                acp_trio.open_agent(client, stream) as agent,
            ):
                assert not isinstance(stream, ResumableWebSocketMessages)
                await agent.initialize(client.initialize_request())
                assert not app.ws_sessions


async def test_a_server_that_does_not_resume_fails_the_stream_soon() -> None:
    app = agent_app(ScenarioAgent)  # not resumable
    with trio.fail_after(LIMIT):
        async with running(app) as base:
            client = ScenarioClient()
            async with (
                open_websocket_stream(ws_url(base), resumable=True) as stream,
                acp_trio.open_agent(client, stream) as agent,
            ):
                assert isinstance(stream, ResumableWebSocketMessages)
                stream._handshake_timeout = 0.2
                await agent.initialize(client.initialize_request())
                await drop(stream)
                with pytest.raises(acp_trio.ConnectionClosed) as info:
                    await agent.new_session(schema.NewSessionRequest(cwd="/", mcp_servers=[]))
                assert "does not resume" in str(info.value)
