"""The Streamable HTTP profile on the wire (raw httpx2, HTTP/2 and
HTTP/1.1): the RFD's status codes, cookies, a dropped SSE stream in the
middle of a turn, a client that stops reading, the size cap."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import aclosing, asynccontextmanager
from typing import Any

import httpx2
import pytest
import trio

import acp_trio
from acp_trio import ConnectionConfig
from acp_trio.remote import RemoteApp, agent_app, library_limit
from acp_trio.remote._http_client import raw_chunks, reset_when_left
from acp_trio.remote._sse import SseDecoder
from acp_trio.testing import ScenarioAgent

from .conftest import LIMIT, running, until

JSON = {"Content-Type": "application/json"}
CAPS = {"fs": {"readTextFile": True, "writeTextFile": True}}
INIT = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {"protocolVersion": 1, "clientCapabilities": CAPS},
}
CAP = 4096


def dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


class Client(httpx2.AsyncClient):
    """POSTs on one HTTP connection, SSE streams (``.streams``) on another,
    as acp_trio's client does."""

    streams: httpx2.AsyncClient


@asynccontextmanager
async def raw_client(http2: bool) -> AsyncIterator[Client]:
    async with (
        Client(http1=not http2, http2=http2, timeout=30) as client,
        httpx2.AsyncClient(http1=not http2, http2=http2, timeout=30) as streams,
    ):
        client.streams = streams
        yield client


async def initialize(client: httpx2.AsyncClient, url: str) -> str:
    response = await client.post(url, content=dumps(INIT), headers=JSON)
    assert response.status_code == 200
    assert response.json()["result"]["protocolVersion"] == 1
    return response.headers["acp-connection-id"]


class Events:
    """An open SSE stream, read event by event."""

    def __init__(self, chunks: AsyncIterator[bytes]) -> None:
        self._chunks = chunks
        self._decoder = SseDecoder(1 << 30)
        self._ready: list[bytes] = []

    async def next(self) -> dict[str, Any]:
        while not self._ready:
            self._ready = self._decoder.feed(await self._chunks.__anext__())
        return json.loads(self._ready.pop(0))  # type: ignore[no-any-return]


@asynccontextmanager
async def sse(
    client: Client, url: str, connection_id: str, session_id: str | None = None
) -> AsyncIterator[Events]:
    headers = {"Acp-Connection-Id": connection_id, "Accept": "text/event-stream"}
    if session_id is not None:
        headers["Acp-Session-Id"] = session_id
    async with (
        client.streams.stream("GET", url, headers=headers) as response,
        reset_when_left(response),
    ):
        assert response.status_code == 200
        assert response.headers["content-type"] == "text/event-stream"
        async with aclosing(raw_chunks(response)) as chunks:
            yield Events(chunks)


def prompt(request_id: int, session_id: str, text: str) -> bytes:
    params = {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}
    return dumps({"jsonrpc": "2.0", "id": request_id, "method": "session/prompt", "params": params})


@pytest.mark.parametrize("http2", [True, False], ids=["h2c", "http1"])
async def test_the_status_code_table(http2: bool) -> None:
    app = agent_app(ScenarioAgent, config=ConnectionConfig(max_message_size=CAP))
    with trio.fail_after(LIMIT):
        async with running(app) as base, raw_client(http2) as client:
            url = base + "/acp"
            post = client.post
            # 415: not JSON's content type.
            r = await post(url, content=dumps(INIT), headers={"Content-Type": "text/plain"})
            assert r.status_code == 415
            # 501: a batch.
            assert (await post(url, content=dumps([INIT]), headers=JSON)).status_code == 501
            # 400: not JSON; not initialize without a connection id.
            assert (await post(url, content=b"{nope", headers=JSON)).status_code == 400
            ping = {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {}}
            assert (await post(url, content=dumps(ping), headers=JSON)).status_code == 400
            # 404: an unknown connection.
            unknown = {**JSON, "Acp-Connection-Id": "nope"}
            assert (await post(url, content=dumps(ping), headers=unknown)).status_code == 404
            # 200 + Acp-Connection-Id for initialize.
            connection_id = await initialize(client, url)
            assert len(connection_id) == 32
            known = {"Acp-Connection-Id": connection_id}
            # GET: 406 without text/event-stream, 400 without the id, 404 unknown.
            r = await client.get(url, headers={**known, "Accept": "application/json"})
            assert r.status_code == 406
            r = await client.get(url, headers={"Accept": "text/event-stream"})
            assert r.status_code == 400
            r = await client.get(url, headers={"Accept": "text/event-stream", **unknown})
            assert r.status_code == 404
            r = await client.get(
                url,
                headers={"Accept": "text/event-stream", **known, "Acp-Session-Id": "nope"},
            )
            assert r.status_code == 404
            # 202 for a later POST; its reply comes on the connection stream.
            async with sse(client, url, connection_id) as events:
                new = {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "/"}}
                new["params"]["mcpServers"] = []
                r = await post(url, content=dumps(new), headers={**JSON, **known})
                assert r.status_code == 202
                reply = await events.next()
                assert reply["id"] == 1
                assert reply["result"]["sessionId"]
                # One byte over the cap: 202, then -32600 on the stream.
                big = dumps({"jsonrpc": "2.0", "id": 2, "method": "x", "params": {"p": "y" * CAP}})
                r = await post(url, content=big, headers={**JSON, **known})
                assert r.status_code == 202
                reply = await events.next()
                assert reply["id"] == 2
                assert reply["error"]["code"] == -32600
                assert reply["error"]["data"] == {"size": len(big), "limit": CAP}
            # 413 past the library limit.
            huge = b'{"a":"' + b"y" * library_limit(CAP) + b'"}'
            assert (await post(url, content=huge, headers={**JSON, **known})).status_code == 413
            # 405 for other methods; 404 for other paths.
            assert (await client.put(url, content=b"{}", headers=known)).status_code == 405
            assert (await client.get(base + "/other")).status_code == 404
            # DELETE: 400 without the id, 202, then 404.
            assert (await client.delete(url)).status_code == 400
            assert (await client.delete(url, headers=known)).status_code == 202
            await until(lambda: not app.http.connections)
            assert (await client.delete(url, headers=known)).status_code == 404
            r = await post(url, content=dumps(ping), headers={**JSON, **known})
            assert r.status_code == 404


class CookieApp(RemoteApp):
    """Sets a cookie on the reply to initialize; records each later
    request's Cookie header."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.cookies: list[str | None] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await super().__call__(scope, receive, send)
            return
        headers = dict(scope["headers"])
        cookie = headers.get(b"cookie")
        first = b"acp-connection-id" not in headers and scope["method"] == "POST"
        if not first:
            self.cookies.append(cookie.decode() if cookie else None)

        async def send_with_cookie(event: Any) -> None:
            if first and event["type"] == "http.response.start":
                event = {**event, "headers": [*event["headers"], (b"set-cookie", b"lb=node-7")]}
            await send(event)

        await super().__call__(scope, receive, send_with_cookie)


@pytest.mark.parametrize("profile", ["http", "http1"])
async def test_the_client_keeps_and_resends_cookies(profile: str) -> None:
    async def handle(stream: Any) -> None:
        await acp_trio.serve_agent(ScenarioAgent, stream)

    app = CookieApp(handle)
    with trio.fail_after(LIMIT):
        async with running(app) as base:
            client = acp_trio.testing.ScenarioClient()
            async with acp_trio.remote.open_remote_agent(
                client,
                base + "/acp",
                profile=profile,  # type: ignore[arg-type]
            ) as agent:
                await agent.initialize(client.initialize_request())
                session = await agent.new_session(
                    acp_trio.schema.NewSessionRequest(cwd="/", mcp_servers=[])
                )
                await agent.prompt_text(session.session_id, "echo hi")
    # POSTs, the SSE GETs and the DELETE all carried it.
    assert len(app.cookies) >= 5
    assert set(app.cookies) == {"lb=node-7"}


# Over h2c this needs the client to reset the SSE stream it leaves
# (``reset_when_left``): httpcore2 2.16.2 sends no RST_STREAM, so the
# server kept the abandoned stream, which took the agent's next messages.
@pytest.mark.parametrize("http2", [True, False], ids=["h2c", "http1"])
async def test_a_dropped_sse_stream_does_not_end_the_turn(http2: bool) -> None:
    app = agent_app(ScenarioAgent)
    with trio.fail_after(LIMIT):
        async with running(app) as base, raw_client(http2) as client:
            url = base + "/acp"
            connection_id = await initialize(client, url)
            known = {**JSON, "Acp-Connection-Id": connection_id}
            async with sse(client, url, connection_id) as events:
                new = {"jsonrpc": "2.0", "id": 1, "method": "session/new"}
                new["params"] = {"cwd": "/", "mcpServers": []}
                await client.post(url, content=dumps(new), headers=known)
                session_id = (await events.next())["result"]["sessionId"]
            scoped = {**known, "Acp-Session-Id": session_id}
            r = await client.post(url, content=prompt(2, session_id, "read 1 /x"), headers=scoped)
            assert r.status_code == 202
            async with sse(client, url, connection_id, session_id) as events:
                read = await events.next()
                assert read["method"] == "fs/read_text_file"
            # The session stream dropped in the middle of the turn; the
            # client answers the agent's request, the turn goes on.
            answer = {"jsonrpc": "2.0", "id": read["id"], "result": {"content": "abc"}}
            r = await client.post(url, content=dumps(answer), headers=scoped)
            assert r.status_code == 202
            # What the agent sent meanwhile waits for the next stream.
            async with sse(client, url, connection_id, session_id) as events:
                update = await events.next()
                assert update["method"] == "session/update"
                assert update["params"]["update"]["content"]["text"] == "read 1 3"
                reply = await events.next()
                assert reply == {"jsonrpc": "2.0", "id": 2, "result": {"stopReason": "end_turn"}}


async def test_a_client_that_stops_reading_slows_its_agent() -> None:
    queue = 8
    config = ConnectionConfig(outbox_limit=16)

    async def handle(stream: Any) -> None:
        await acp_trio.serve_agent(ScenarioAgent, stream, config=config)

    app = RemoteApp(handle, queue_size=queue)
    n = 2000
    with trio.fail_after(LIMIT):
        async with running(app) as base, raw_client(True) as client:
            url = base + "/acp"
            connection_id = await initialize(client, url)
            known = {**JSON, "Acp-Connection-Id": connection_id}
            async with sse(client, url, connection_id) as events:
                new = {"jsonrpc": "2.0", "id": 1, "method": "session/new"}
                new["params"] = {"cwd": "/", "mcpServers": []}
                await client.post(url, content=dumps(new), headers=known)
                session_id = (await events.next())["result"]["sessionId"]
            scoped = {**known, "Acp-Session-Id": session_id}
            await client.post(url, content=prompt(2, session_id, f"stream {n} 100"), headers=scoped)
            connection = app.http.connections[connection_id]
            box = connection.outboxes[session_id]
            # Nobody reads the session stream: the queue fills, then the
            # agent waits; it neither finishes nor grows the queue.
            await until(lambda: box.receive.statistics().current_buffer_used == queue)
            await trio.sleep(0.5)
            assert box.receive.statistics().current_buffer_used == queue
            # Reading again delivers everything, in order.
            texts: list[str] = []
            async with sse(client, url, connection_id, session_id) as events:
                while True:
                    message = await events.next()
                    if "method" not in message:
                        assert message["result"]["stopReason"] == "end_turn"
                        break
                    texts.append(message["params"]["update"]["content"]["text"])
            assert [t.rstrip(".") for t in texts] == [str(i) for i in range(n)]


async def test_a_connection_nobody_uses_is_ended_after_the_idle_timeout() -> None:
    ended = trio.Event()

    async def handle(stream: Any) -> None:
        try:
            await acp_trio.serve_agent(ScenarioAgent, stream)
        finally:
            ended.set()

    app = RemoteApp(handle, idle_timeout=0.3)
    with trio.fail_after(LIMIT):
        async with running(app) as base, raw_client(False) as client:
            url = base + "/acp"
            connection_id = await initialize(client, url)
            # An open stream keeps it, however long.
            async with sse(client, url, connection_id):
                await trio.sleep(1.0)
                assert connection_id in app.http.connections
                assert not ended.is_set()
            # Then nothing: it goes, its agent with it, as after DELETE.
            await ended.wait()
            assert connection_id not in app.http.connections
            r = await client.post(
                url, content=dumps(INIT), headers={**JSON, "Acp-Connection-Id": connection_id}
            )
            assert r.status_code == 404
