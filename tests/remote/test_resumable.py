"""Resumable SSE streams (provisional: the durable-transport draft after the
RFD): each event's ``id:`` is a per-stream cursor, a GET with
``Last-Event-ID`` resumes after it (exactly: no loss, no duplicate), a
cursor the server no longer holds gets ``409``; off by default."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import aclosing, asynccontextmanager
from typing import Any

import pytest
import trio

import acp_trio
from acp_trio import schema
from acp_trio.remote import HttpStatusError, RemoteApp, agent_app, open_http_stream
from acp_trio.remote._http_client import raw_chunks, reset_when_left
from acp_trio.remote._http_connection import ReplayBuffer
from acp_trio.remote._sse import SseDecoder
from acp_trio.testing import ScenarioAgent, ScenarioClient

from .conftest import LIMIT, running, until
from .test_http_protocol import JSON, Client, dumps, initialize, prompt, raw_client


class Events:
    """An open SSE stream, read event by event with its id."""

    def __init__(self, chunks: AsyncIterator[bytes]) -> None:
        self._chunks = chunks
        self._decoder = SseDecoder(1 << 30)
        self._ready: list[tuple[str | None, bytes]] = []

    async def next(self) -> tuple[str | None, dict[str, Any]]:
        while not self._ready:
            chunk = await self._chunks.__anext__()
            # One event at a time, to see each one's id.
            for line in chunk.splitlines(keepends=True):
                for data in self._decoder.feed(line):
                    self._ready.append((self._decoder.last_id, data))
        event_id, data = self._ready.pop(0)
        return event_id, json.loads(data)


@asynccontextmanager
async def sse(
    client: Client,
    url: str,
    connection_id: str,
    session_id: str | None = None,
    last_event_id: str | None = None,
    status: int = 200,
) -> AsyncIterator[Events]:
    headers = {"Acp-Connection-Id": connection_id, "Accept": "text/event-stream"}
    if session_id is not None:
        headers["Acp-Session-Id"] = session_id
    if last_event_id is not None:
        headers["Last-Event-ID"] = last_event_id
    async with (
        client.streams.stream("GET", url, headers=headers) as response,
        reset_when_left(response),
    ):
        assert response.status_code == status
        async with aclosing(raw_chunks(response)) as chunks:
            yield Events(chunks)


async def start_session(client: Client, url: str, connection_id: str) -> str:
    known = {**JSON, "Acp-Connection-Id": connection_id}
    async with sse(client, url, connection_id) as events:
        new = {"jsonrpc": "2.0", "id": 1, "method": "session/new"}
        new["params"] = {"cwd": "/", "mcpServers": []}
        await client.post(url, content=dumps(new), headers=known)
        event_id, reply = await events.next()
        assert event_id == "1"
        return str(reply["result"]["sessionId"])


def test_the_replay_buffer_knows_which_cursors_it_can_resume_after() -> None:
    buffer = ReplayBuffer(3)
    assert buffer.after("0") == []
    for text in (b"a", b"b", b"c", b"d"):
        buffer.add(text)
    assert buffer.after("4") == []
    assert buffer.after("1") == [(2, b"b"), (3, b"c"), (4, b"d")]
    assert buffer.after("3") == [(4, b"d")]
    # Event 1 was dropped: resuming after 0 would miss it.
    assert buffer.after("0") is None
    assert buffer.after("5") is None
    assert buffer.after("-1") is None
    assert buffer.after("x") is None


@pytest.mark.parametrize("http2", [True, False], ids=["h2c", "http1"])
async def test_a_stream_resumed_after_its_last_event_id_misses_nothing(http2: bool) -> None:
    app = agent_app(ScenarioAgent, resumable=True)
    with trio.fail_after(LIMIT):
        async with running(app) as base, raw_client(http2) as client:
            url = base + "/acp"
            connection_id = await initialize(client, url)
            session_id = await start_session(client, url, connection_id)
            scoped = {**JSON, "Acp-Connection-Id": connection_id, "Acp-Session-Id": session_id}
            r = await client.post(url, content=prompt(2, session_id, "stream 40 1"), headers=scoped)
            assert r.status_code == 202
            seen: list[tuple[str | None, dict[str, Any]]] = []
            async with sse(client, url, connection_id, session_id) as events:
                for _ in range(10):
                    seen.append(await events.next())
            # The stream dropped after 10 events (more may have been sent and
            # not read); resumed after the 6th, the 7th comes next.
            assert [event_id for event_id, _ in seen] == [str(n) for n in range(1, 11)]
            texts = [m["params"]["update"]["content"]["text"] for _, m in seen[:6]]
            async with sse(client, url, connection_id, session_id, last_event_id="6") as events:
                while True:
                    event_id, message = await events.next()
                    assert event_id == str(len(texts) + 1)
                    if "result" in message:
                        break
                    texts.append(message["params"]["update"]["content"]["text"])
            assert message == {"jsonrpc": "2.0", "id": 2, "result": {"stopReason": "end_turn"}}
            assert texts == [str(i) for i in range(40)]


@pytest.mark.parametrize("http2", [True, False], ids=["h2c", "http1"])
async def test_a_cursor_no_longer_held_gets_409(http2: bool) -> None:
    app = RemoteApp(
        agent_app(ScenarioAgent).handle, resumable=True, replay_size=4, idle_timeout=None
    )
    with trio.fail_after(LIMIT):
        async with running(app) as base, raw_client(http2) as client:
            url = base + "/acp"
            connection_id = await initialize(client, url)
            session_id = await start_session(client, url, connection_id)
            scoped = {**JSON, "Acp-Connection-Id": connection_id, "Acp-Session-Id": session_id}
            await client.post(url, content=prompt(2, session_id, "stream 10 1"), headers=scoped)
            async with sse(client, url, connection_id, session_id) as events:
                while "result" not in (await events.next())[1]:
                    pass
            # 11 events were sent; the last 4 are held.
            for cursor in ("1", "6", "12", "abc"):
                async with sse(client, url, connection_id, session_id, cursor, status=409):
                    pass
            async with sse(client, url, connection_id, session_id, "7"):
                pass
            async with sse(client, url, connection_id, session_id, "11"):
                pass


@pytest.mark.parametrize("http2", [True, False], ids=["h2c", "http1"])
async def test_a_refused_get_leaves_the_open_stream_alone(http2: bool) -> None:
    app = agent_app(ScenarioAgent, resumable=True)
    with trio.fail_after(LIMIT):
        async with running(app) as base, raw_client(http2) as client:
            url = base + "/acp"
            connection_id = await initialize(client, url)
            session_id = await start_session(client, url, connection_id)
            scoped = {**JSON, "Acp-Connection-Id": connection_id, "Acp-Session-Id": session_id}
            async with sse(client, url, connection_id, session_id) as events:
                await client.post(url, content=prompt(2, session_id, "stream 1 1"), headers=scoped)
                assert "params" in (await events.next())[1]
                assert (await events.next())[1]["id"] == 2
                # A second GET with a cursor never sent: refused, and the
                # stream open goes on (it used to be cancelled first).
                async with sse(client, url, connection_id, session_id, "999", status=409):
                    pass
                await client.post(url, content=prompt(3, session_id, "stream 1 1"), headers=scoped)
                assert "params" in (await events.next())[1]
                assert (await events.next())[1]["id"] == 3


@pytest.mark.parametrize("http2", [True, False], ids=["h2c", "http1"])
async def test_streams_are_not_resumable_unless_asked(http2: bool) -> None:
    app = agent_app(ScenarioAgent)
    with trio.fail_after(LIMIT):
        async with running(app) as base, raw_client(http2) as client:
            url = base + "/acp"
            connection_id = await initialize(client, url)
            known = {**JSON, "Acp-Connection-Id": connection_id}
            async with sse(client, url, connection_id, last_event_id="5") as events:
                new = {"jsonrpc": "2.0", "id": 1, "method": "session/new"}
                new["params"] = {"cwd": "/", "mcpServers": []}
                await client.post(url, content=dumps(new), headers=known)
                event_id, reply = await events.next()
                assert event_id is None
                assert "sessionId" in reply["result"]


async def drop_session_stream(app: RemoteApp, session_id: str) -> None:
    """End the session's SSE stream on the server (as a proxy would)."""
    (connection,) = app.http.connections.values()
    box = connection.outboxes[session_id]
    await until(lambda: box.reader is not None)
    assert box.reader is not None
    box.reader.cancel()


@pytest.mark.parametrize("profile", ["http", "http1"])
async def test_the_client_resumes_a_dropped_stream_exactly(profile: str) -> None:
    app = agent_app(ScenarioAgent, resumable=True)
    count = 600
    with trio.fail_after(LIMIT):
        async with running(app) as base:
            client = ScenarioClient()
            async with (
                open_http_stream(base + "/acp", http2=profile == "http", resumable=True) as stream,
                acp_trio.open_agent(client, stream) as agent,
            ):
                await agent.initialize(client.initialize_request())
                session = await agent.new_session(schema.NewSessionRequest(cwd="/", mcp_servers=[]))
                session_id = session.session_id
                results: list[schema.PromptResponse] = []
                async with trio.open_nursery() as nursery:

                    async def run() -> None:
                        results.append(await agent.prompt_text(session_id, f"stream {count} 1"))

                    nursery.start_soon(run)
                    for drops, after in enumerate((50, 250, 450), start=1):
                        await until(lambda after=after: len(client.texts(session_id)) >= after)  # type: ignore[misc]
                        await drop_session_stream(app, session_id)
                        await until(lambda drops=drops: stream.reconnects >= drops)  # type: ignore[misc]
                assert results[0].stop_reason == "end_turn"
                assert client.texts(session_id) == [str(i) for i in range(count)]


async def test_the_client_fails_the_stream_on_409() -> None:
    app = RemoteApp(
        agent_app(ScenarioAgent).handle, resumable=True, replay_size=1, idle_timeout=None
    )
    with trio.fail_after(LIMIT):
        async with running(app) as base:
            client = ScenarioClient()
            async with (
                open_http_stream(base + "/acp", resumable=True) as stream,
                acp_trio.open_agent(client, stream) as agent,
            ):
                await agent.initialize(client.initialize_request())
                new = schema.NewSessionRequest(cwd="/", mcp_servers=[])
                session_id = (await agent.new_session(new)).session_id
                # The client holds cursor 1 (the reply to session/new) of
                # the connection's stream; two more events make it unheld.
                (connection,) = app.http.connections.values()
                box = connection.outboxes[None]
                assert box.replay is not None
                box.replay.add(b"{}")
                box.replay.add(b"{}")
                assert box.reader is not None
                box.reader.cancel()
                with pytest.raises(acp_trio.ConnectionClosed) as info:
                    await agent.prompt_text(session_id, "wait_for_cancel")
            causes: list[BaseException] = []
            cause = info.value.__cause__
            while cause is not None:
                causes.append(cause)
                cause = cause.__cause__
            assert [c.status for c in causes if isinstance(c, HttpStatusError)] == [409]
