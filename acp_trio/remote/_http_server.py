"""The Streamable HTTP profile, server side: POST, GET (SSE) and DELETE on
``/acp``, with the RFD's status codes."""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from acp_trio._core._message_stream import MessageStream
from acp_trio.remote._http_connection import CONNECTION_SCOPE, HttpConnection, Outbox, ReplayBuffer
from acp_trio.remote._sse import encode_event
from acp_trio.remote._ws_server import ASGIReceive, ASGISend

__all__ = ["HttpProfile", "drain_body"]

_log = logging.getLogger("acp_trio.remote")

CONNECTION_ID = "acp-connection-id"
SESSION_ID = "acp-session-id"

Scope = dict[str, Any]


def _header(scope: Any, name: str) -> str | None:
    wanted = name.encode("latin-1")
    for key, value in scope.get("headers", ()):
        if key.lower() == wanted:
            return bytes(value).decode("latin-1")
    return None


async def _respond(
    send: ASGISend,
    status: int,
    body: bytes = b"",
    *,
    content_type: bytes = b"text/plain; charset=utf-8",
    headers: list[tuple[bytes, bytes]] | None = None,
) -> None:
    all_headers = [(b"content-length", str(len(body)).encode()), *(headers or [])]
    if body:
        all_headers.append((b"content-type", content_type))
    await send({"type": "http.response.start", "status": status, "headers": all_headers})
    await send({"type": "http.response.body", "body": body})


async def _error(send: ASGISend, status: int, text: str) -> None:
    await _respond(send, status, (text + "\n").encode())


class _TooLarge(Exception):
    pass


async def drain_body(receive: ASGIReceive) -> None:
    """Read the rest of a request's body, keeping none of it.

    Always done before answering: hypercorn 0.18's HTTP/2 code raises out
    of the whole server (``KeyError`` in ``_handle_events``) when body data
    arrives for a stream the app already answered.
    """
    while True:
        event = await receive()
        if event["type"] == "http.disconnect" or not event.get("more_body", False):
            return


async def _read_body(receive: ASGIReceive, limit: int) -> bytes | None:
    """The request's body, ``None`` if the client went away; raises
    :class:`_TooLarge` past ``limit`` bytes."""
    chunks: list[bytes] = []
    size = 0
    while True:
        event = await receive()
        if event["type"] == "http.disconnect":
            return None
        chunk = event.get("body", b"")
        size += len(chunk)
        if size > limit:
            if event.get("more_body", False):
                await drain_body(receive)
            raise _TooLarge
        chunks.append(chunk)
        if not event.get("more_body", False):
            return b"".join(chunks)


#: At most this many bytes of queued events go out in one body chunk.
_BATCH_BYTES = 64 * 1024
#: At most this many scheduler rounds are spent gathering one chunk.
_BATCH_ROUNDS = 64
#: A chunk goes out after this many rounds in a row that queued nothing (a
#: message on its way from the agent takes a few rounds to arrive here).
_IDLE_ROUNDS = 4


async def _events(
    box: Outbox, first: bytes, *, replay: ReplayBuffer | None = None, burst: bool = False
) -> tuple[bytes, int]:
    """``first`` as an SSE event, followed by the events queued in ``box``
    meanwhile: one body chunk (one write here, one read on the other side)
    for a burst of messages instead of one each; and how many it holds.

    In a burst (more than one message was queued, or ``burst``: the last
    chunk held several), each scheduler round (a checkpoint that cannot be
    cancelled) gathers the messages the agent queued meanwhile; the chunk
    goes out after a few rounds that added nothing, or once it is big
    enough. A lone message (a request, a reply) goes out at once. With
    ``replay`` (a resumable stream), each event carries its cursor as ``id:``.
    """

    def encode(message: bytes) -> bytes:
        if replay is None:
            return encode_event(message)
        # Kept before it is sent: a stream dropped in the middle of this
        # send can be resumed with it.
        return encode_event(message, str(replay.add(message)))

    events = [encode(first)]
    size = len(events[0])
    rounds = 0
    idle = 0  # rounds in a row that queued nothing
    while size < _BATCH_BYTES:
        try:
            message = box.receive.receive_nowait()
        except trio.WouldBlock:
            if idle >= _IDLE_ROUNDS or rounds >= _BATCH_ROUNDS or (len(events) == 1 and not burst):
                break
            idle += 1
            rounds += 1
            await trio.lowlevel.cancel_shielded_checkpoint()
            continue
        except trio.EndOfChannel:
            break
        idle = 0
        event = encode(message)
        events.append(event)
        size += len(event)
    return (events[0] if len(events) == 1 else b"".join(events)), len(events)


class HttpProfile:
    """The Streamable HTTP side of a :class:`~acp_trio.remote.RemoteApp`:
    its table of connections, each served by ``handle`` in ``nursery``."""

    def __init__(
        self,
        handle: Callable[[MessageStream], Awaitable[None]],
        *,
        max_message_size: int,
        body_limit: int,
        queue_size: int,
        idle_timeout: float | None = None,
        replay_size: int = 0,
    ) -> None:
        self.handle = handle
        self.idle_timeout = idle_timeout
        #: Events kept per SSE stream for ``Last-Event-ID`` (0: streams are
        #: not resumable, no ``id:`` is sent).
        self.replay_size = replay_size
        self.max_message_size = max_message_size
        self.body_limit = body_limit
        self.queue_size = queue_size
        self.connections: dict[str, HttpConnection] = {}
        self.nursery: trio.Nursery | None = None

    async def __call__(self, scope: Any, receive: ASGIReceive, send: ASGISend) -> None:
        method = scope.get("method")
        if method == "POST":
            await self._post(scope, receive, send)
        elif method == "GET":
            await self._get(scope, receive, send)
        elif method == "DELETE":
            await drain_body(receive)
            await self._delete(scope, send)
        else:
            await drain_body(receive)
            await _respond(
                send, 405, b"method not allowed\n", headers=[(b"allow", b"GET, POST, DELETE")]
            )

    def _connection(self, scope: Any) -> HttpConnection | int:
        """The request's connection, or the status to answer (400, 404)."""
        connection_id = _header(scope, CONNECTION_ID)
        if connection_id is None:
            return 400
        found = self.connections.get(connection_id)
        return 404 if found is None else found

    async def _post(self, scope: Any, receive: ASGIReceive, send: ASGISend) -> None:
        content_type = (_header(scope, "content-type") or "").split(";")[0].strip().lower()
        if content_type != "application/json":
            await drain_body(receive)
            await _error(send, 415, "Content-Type must be application/json")
            return
        try:
            body = await _read_body(receive, self.body_limit)
        except _TooLarge:
            await _error(send, 413, f"message over {self.body_limit} bytes")
            return
        if body is None:
            return
        if body.lstrip()[:1] == b"[":
            await _error(send, 501, "JSON-RPC batches are not supported")
            return
        message: Any = None
        if len(body) <= self.max_message_size:
            try:
                message = json.loads(body)
            except ValueError:
                await _error(send, 400, "the body is not JSON")
                return
            if not isinstance(message, dict):
                await _error(send, 400, "the body is not a JSON-RPC message")
                return
        if _header(scope, CONNECTION_ID) is None:
            await self._initialize(message, body, send)
            return
        connection = self._connection(scope)
        if isinstance(connection, int):
            await _error(send, connection, "unknown connection")
            return
        connection.touch()
        if message is not None:
            connection.note_incoming(message)
        try:
            await connection.deliver(body)
        except trio.BrokenResourceError:
            await _error(send, 404, "the connection ended")
            return
        await _respond(send, 202)

    async def _initialize(self, message: Any, body: bytes, send: ASGISend) -> None:
        if not isinstance(message, dict) or message.get("method") != "initialize":
            await _error(send, 400, f"{CONNECTION_ID} is required after initialize")
            return
        if self.nursery is None:
            await _error(send, 503, "the app is not running (no ASGI lifespan)")
            return
        connection = HttpConnection(
            uuid.uuid4().hex, self.max_message_size, self.queue_size, self.replay_size
        )
        self.connections[connection.id] = connection
        self.nursery.start_soon(self._serve, connection)
        connection.note_incoming(message)
        try:
            await connection.deliver(body)
        except trio.BrokenResourceError:
            await _error(send, 500, "the connection ended")
            return
        await connection.initialized.wait()
        reply = connection.initialize_reply()
        if reply is None:
            await _error(send, 500, "the connection ended before initialize was answered")
            return
        await _respond(
            send,
            200,
            reply,
            content_type=b"application/json",
            headers=[(CONNECTION_ID.encode(), connection.id.encode())],
        )

    async def _serve(self, connection: HttpConnection) -> None:
        try:
            with connection.cancel_scope:
                async with trio.open_nursery() as nursery:
                    if self.idle_timeout is not None:
                        nursery.start_soon(self._expire, connection, self.idle_timeout)
                    await self.handle(connection)
                    nursery.cancel_scope.cancel()
        except Exception:
            _log.exception("serving HTTP connection %s failed", connection.id)
        finally:
            self.connections.pop(connection.id, None)
            connection.end()

    async def _expire(self, connection: HttpConnection, limit: float) -> None:
        """End ``connection`` once no request and no stream touched it for
        ``limit`` seconds (a client that went away without DELETE)."""
        while True:
            idle = connection.idle_for()
            if idle >= limit:
                _log.info("HTTP connection %s idle for %.0f s: ended", connection.id, idle)
                self.connections.pop(connection.id, None)
                connection.cancel_scope.cancel()
                return
            await trio.sleep(limit - idle)

    async def _get(self, scope: Any, receive: ASGIReceive, send: ASGISend) -> None:
        accept = _header(scope, "accept") or ""
        if "text/event-stream" not in accept and "*/*" not in accept:
            await _error(send, 406, "Accept must include text/event-stream")
            return
        connection = self._connection(scope)
        if isinstance(connection, int):
            await _error(send, connection, "unknown connection")
            return
        session_id = _header(scope, "acp-session-id")
        box = connection.outboxes.get(session_id if session_id is not None else CONNECTION_SCOPE)
        if box is None:
            await _error(send, 404, "unknown session")
            return
        # A refusal touches nothing: the cursor is checked before the
        # stream already open is.
        replayed: list[tuple[int, bytes]] = []
        cursor = _header(scope, "last-event-id")
        if box.replay is not None and cursor is not None:
            found = box.replay.after(cursor.strip())
            if found is None:
                await _error(send, 409, f"cursor {cursor!r} is not held any more")
                return
            replayed = found
        # A newer GET takes over: the older one stops before taking another
        # message (what it took is in the replay buffer already, and in
        # ``replayed``: nothing was awaited since).
        if box.reader is not None:
            box.reader.cancel()
            box.reader = None
        connection.open_streams += 1
        try:
            await self._stream(box, replayed, receive, send)
        finally:
            connection.open_streams -= 1
            connection.touch()

    async def _stream(
        self,
        box: Outbox,
        replayed: list[tuple[int, bytes]],
        receive: ASGIReceive,
        send: ASGISend,
    ) -> None:
        """Send ``replayed`` then ``box``'s messages as SSE events until the
        client leaves, a newer GET takes over, or the connection ends."""
        headers = [
            (b"content-type", b"text/event-stream"),
            (b"cache-control", b"no-store"),
        ]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        # An empty comment, so the client sees the stream open at once.
        await send({"type": "http.response.body", "body": b": open\n\n", "more_body": True})
        with trio.CancelScope() as reader:
            box.reader = reader
            async with trio.open_nursery() as nursery:

                async def watch() -> None:
                    while (await receive())["type"] != "http.disconnect":
                        pass
                    nursery.cancel_scope.cancel()

                nursery.start_soon(watch)
                if replayed:
                    body = b"".join(
                        encode_event(message, str(cursor)) for cursor, message in replayed
                    )
                    await send({"type": "http.response.body", "body": body, "more_body": True})
                burst = False
                async for message in box.receive:
                    body, count = await _events(box, message, replay=box.replay, burst=burst)
                    burst = count > 1
                    await send({"type": "http.response.body", "body": body, "more_body": True})
                nursery.cancel_scope.cancel()
        if box.reader is reader:
            box.reader = None
        with trio.CancelScope(shield=True), trio.move_on_after(1):
            await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _delete(self, scope: Any, send: ASGISend) -> None:
        connection = self._connection(scope)
        if isinstance(connection, int):
            await _error(send, connection, "unknown connection")
            return
        self.connections.pop(connection.id, None)
        connection.cancel_scope.cancel()
        await _respond(send, 202)
