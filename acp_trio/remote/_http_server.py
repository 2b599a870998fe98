"""The Streamable HTTP profile, server side: POST, GET (SSE) and DELETE on
``/acp``, with the RFD's status codes.

Every request is judged on its head first: a request refused (an unknown
connection, a body announced over the cap, a content type, a method) is
answered at once, without its body being read (:func:`answer_early`: the
HTTP/1.1 connection is closed after the answer, an HTTP/2 stream reset).
A body that is read is read under the body deadline (a minimum rate after
a grace period) into one buffer. A message is not parsed here: its JSON
structure is checked in steps (depth, values), its route peeked, and the
handler parses it (under ``serve``, the agent's own process)."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from acp_trio._core._message_stream import MessageStream
from acp_trio._exceptions import RequestError
from acp_trio._jsonrpc import (
    InvalidMessage,
    OversizedFrame,
    Request,
    classify,
    decode_frame,
    encode_frame,
    error_response,
)
from acp_trio.remote._front import FRONT, FrontConnection
from acp_trio.remote._http1_guard import EXPECT_CONTINUE
from acp_trio.remote._http_connection import (
    CONNECTION_SCOPE,
    HttpConnection,
    Outbox,
    ReplayBuffer,
    route_of,
)
from acp_trio.remote._limits import Admission, ServerLimits, check_structure
from acp_trio.remote._sse import encode_event
from acp_trio.remote._ws_server import ASGIReceive, ASGISend

__all__ = ["HttpProfile", "answer_early", "drain_body"]

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


def front_of(scope: Any) -> FrontConnection | None:
    """The request's :class:`FrontConnection` (``None`` when the app runs
    under another server)."""
    state = scope.get("state")
    front = state.get(FRONT) if isinstance(state, dict) else None
    return front if isinstance(front, FrontConnection) else None


def client_of(scope: Any) -> str | None:
    """The client's address (what tells clients apart)."""
    client = scope.get("client")
    return str(client[0]) if client else None


async def drain_body(receive: ASGIReceive) -> None:
    """Read the rest of a request's body, keeping none of it (until the body
    ends or the client goes away)."""
    while True:
        event = await receive()
        if event["type"] == "http.disconnect" or not event.get("more_body", False):
            return


async def answer_early(
    scope: Any,
    receive: ASGIReceive,
    send: ASGISend,
    status: int,
    body: bytes,
    *,
    content_type: bytes = b"text/plain; charset=utf-8",
    headers: list[tuple[bytes, bytes]] | None = None,
) -> None:
    """Answer a request before reading its body (what came with its head
    excepted): at once. If the body has not ended by then, an HTTP/1.1
    connection is closed after the answer (``Connection: close``) and an
    HTTP/2 stream reset (``NO_ERROR``, after the answer): the client stops
    sending. Meanwhile what comes of the body is read and dropped (hypercorn
    would wait for room in the request's queue). Under another server than
    ours (no :class:`FrontConnection`), the body is read to its end first,
    as hypercorn's HTTP/2 needs."""
    front = front_of(scope)
    if front is None:
        await drain_body(receive)
        await _respond(send, status, body, content_type=content_type, headers=headers)
        return
    stream_id = front.stream_id(scope)
    ended = False

    async def drop() -> None:
        nonlocal ended
        await drain_body(receive)
        ended = True

    async with trio.open_nursery() as nursery:
        nursery.start_soon(drop)
        for _ in range(4):  # what came with the head is taken first
            await trio.lowlevel.cancel_shielded_checkpoint()
            if ended:
                break
        # (Decided now: the end of the answer ends the request, which the
        # task above sees as the client leaving.)
        unread = not ended
        extra = list(headers or [])
        if unread and stream_id is None:
            extra.append((b"connection", b"close"))
        await _respond(send, status, body, content_type=content_type, headers=extra)
        if unread and stream_id is not None:
            await front.reset(stream_id)
        nursery.cancel_scope.cancel()


async def answer_text(
    scope: Any,
    receive: ASGIReceive,
    send: ASGISend,
    status: int,
    text: str,
    headers: list[tuple[bytes, bytes]] | None = None,
) -> None:
    await answer_early(scope, receive, send, status, (text + "\n").encode(), headers=headers)


async def _error(send: ASGISend, status: int, text: str) -> None:
    await _respond(send, status, (text + "\n").encode())


class _TooLarge(Exception):
    pass


class _TooSlow(Exception):
    pass


async def _read_body(
    scope: Any, receive: ASGIReceive, limit: int, limits: ServerLimits
) -> bytes | None:
    """The request's body, ``None`` if the client went away; raises
    :class:`_TooLarge` past ``limit`` bytes and :class:`_TooSlow` when it
    falls behind the body deadline. One buffer, whatever the chunks."""
    front = front_of(scope)
    if front is not None and _header(scope, EXPECT_CONTINUE.decode()) == "100-continue":
        await front.grant_continue()
    body = bytearray()
    start = trio.current_time()
    with trio.CancelScope(deadline=limits.body_deadline(start, 0)) as deadline:
        while True:
            event = await receive()
            if event["type"] == "http.disconnect":
                return None
            chunk = event.get("body", b"")
            if len(body) + len(chunk) > limit:
                raise _TooLarge
            body += chunk
            if not event.get("more_body", False):
                return bytes(body)
            # Moved on by a second or more at a time (moving a deadline
            # costs trio more than a small chunk costs us).
            later = limits.body_deadline(start, len(body))
            if later - deadline.deadline >= 1.0:
                deadline.deadline = later
    raise _TooSlow


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
        box.taken(message)
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
        limits: ServerLimits | None = None,
        admission: Admission | None = None,
    ) -> None:
        self.handle = handle
        self.idle_timeout = idle_timeout
        #: Events kept per SSE stream for ``Last-Event-ID`` (0: streams are
        #: not resumable, no ``id:`` is sent).
        self.replay_size = replay_size
        self.max_message_size = max_message_size
        self.body_limit = body_limit
        self.queue_size = queue_size
        self.limits = limits or ServerLimits()
        self.admission = admission or Admission(self.limits)
        self.connections: dict[str, HttpConnection] = {}
        self.nursery: trio.Nursery | None = None

    async def __call__(self, scope: Any, receive: ASGIReceive, send: ASGISend) -> None:
        method = scope.get("method")
        if method == "POST":
            await self._post(scope, receive, send)
        elif method == "GET":
            await self._get(scope, receive, send)
        elif method == "DELETE":
            await self._delete(scope, receive, send)
        else:
            await answer_early(
                scope,
                receive,
                send,
                405,
                b"method not allowed\n",
                headers=[(b"allow", b"GET, POST, DELETE")],
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
            await answer_text(scope, receive, send, 415, "Content-Type must be application/json")
            return
        length: int | None = None
        declared = _header(scope, "content-length")
        if declared is not None:
            try:
                length = int(declared)
            except ValueError:
                await answer_text(scope, receive, send, 400, "Content-Length is not a number")
                return
            if length > self.body_limit:
                await answer_text(
                    scope, receive, send, 413, f"message over {self.body_limit} bytes"
                )
                return
        if _header(scope, CONNECTION_ID) is None:
            await self._initialize(scope, receive, send)
            return
        connection = self._connection(scope)
        if isinstance(connection, int):
            await answer_text(scope, receive, send, connection, "unknown connection")
            return
        # The body's bytes are taken from the connection's budget before it
        # is read, and given back once its handler reads the message.
        share = self.body_limit if length is None else length
        if not connection.inbound_budget.try_take(share):
            await answer_text(
                scope,
                receive,
                send,
                429,
                "too many bytes of this connection's messages wait to be read",
                self.admission.retry_after(),
            )
            return
        delivered = False
        try:
            body = await self._body(scope, receive, send)
            if body is None:
                return
            connection.inbound_budget.give(share - len(body))
            share = len(body)
            if body.lstrip()[:1] == b"[":
                await _error(send, 501, "JSON-RPC batches are not supported")
                return
            message = await check_structure(body, self.max_message_size, self.limits)
            connection.touch()
            if type(message) is bytes:
                connection.note_incoming(route_of(message, incoming=True))
            try:
                await connection.deliver(message, share)
            except trio.BrokenResourceError:
                await _error(send, 404, "the connection ended")
                return
            delivered = True
        finally:
            if not delivered:
                connection.inbound_budget.give(share)
        await _respond(send, 202)

    async def _body(self, scope: Any, receive: ASGIReceive, send: ASGISend) -> bytes | None:
        """The body, or ``None`` (the client went away, or the body was
        refused: too large, too slow)."""
        try:
            return await _read_body(scope, receive, self.body_limit, self.limits)
        except _TooLarge:
            await answer_text(scope, receive, send, 413, f"message over {self.body_limit} bytes")
        except _TooSlow:
            await answer_text(scope, receive, send, 408, "the request body stopped coming")
        return None

    async def _initialize(self, scope: Any, receive: ASGIReceive, send: ASGISend) -> None:
        if self.nursery is None:
            await answer_text(
                scope, receive, send, 503, "the app is not running (no ASGI lifespan)"
            )
            return
        client = client_of(scope)
        refused = self.admission.take(client)
        if refused is not None:
            await answer_text(scope, receive, send, *refused, self.admission.retry_after())
            return
        started = False
        try:
            body = await self._body(scope, receive, send)
            if body is None:
                return
            if body.lstrip()[:1] == b"[":
                await _error(send, 501, "JSON-RPC batches are not supported")
                return
            error = await _not_initialize(body, self.max_message_size, self.limits)
            if error is not None:
                await _respond(send, 400, error, content_type=b"application/json")
                return
            connection = HttpConnection(
                uuid.uuid4().hex, self.max_message_size, self.queue_size, self.replay_size
            )
            self.connections[connection.id] = connection
            self.nursery.start_soon(self._serve, connection, client)
            started = True
            connection.note_incoming(route_of(body, incoming=True))
            taken = len(body)
            connection.inbound_budget.try_take(taken)
            try:
                await connection.deliver(body, taken)
            except trio.BrokenResourceError:
                await _error(send, 502, "the agent ended before initialize was answered")
                return
            await connection.initialized.wait()
            reply = connection.initialize_reply()
            if reply is None:
                await _error(send, 502, "the agent ended before initialize was answered")
                return
            await _respond(
                send,
                200,
                reply,
                content_type=b"application/json",
                headers=[(CONNECTION_ID.encode(), connection.id.encode())],
            )
        finally:
            if not started:
                self.admission.give_back(client)

    async def _serve(self, connection: HttpConnection, client: str | None) -> None:
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
            self.admission.give_back(client)

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
            await answer_text(scope, receive, send, 406, "Accept must include text/event-stream")
            return
        connection = self._connection(scope)
        if isinstance(connection, int):
            await answer_text(scope, receive, send, connection, "unknown connection")
            return
        session_id = _header(scope, "acp-session-id")
        box = connection.outboxes.get(session_id if session_id is not None else CONNECTION_SCOPE)
        if box is None:
            await answer_text(scope, receive, send, 404, "unknown session")
            return
        # A refusal touches nothing: the cursor is checked before the
        # stream already open is.
        replayed: list[tuple[int, bytes]] = []
        cursor = _header(scope, "last-event-id")
        if box.replay is not None and cursor is not None:
            found = box.replay.after(cursor.strip())
            if found is None:
                await answer_text(
                    scope, receive, send, 409, f"cursor {cursor!r} is not held any more"
                )
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
            await self._stream(scope, box, replayed, receive, send)
        finally:
            connection.open_streams -= 1
            connection.touch()

    async def _stream(
        self,
        scope: Any,
        box: Outbox,
        replayed: list[tuple[int, bytes]],
        receive: ASGIReceive,
        send: ASGISend,
    ) -> None:
        """Send ``replayed`` then ``box``'s messages as SSE events until the
        client leaves, a newer GET takes over, or the connection ends. On
        HTTP/2, a chunk waits while hypercorn still holds one for this
        stream (its peer's window shut), so what waits stays in ``box``."""
        front = front_of(scope)
        stream_id = None if front is None else front.stream_id(scope)

        async def writable() -> None:
            if stream_id is not None:
                assert front is not None
                await front.wait_writable(stream_id, _BATCH_BYTES)

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
                    await writable()
                    await send({"type": "http.response.body", "body": body, "more_body": True})
                burst = False
                while True:
                    await writable()
                    try:
                        message = await box.receive.receive()
                    except trio.EndOfChannel:
                        break
                    box.taken(message)
                    body, count = await _events(box, message, replay=box.replay, burst=burst)
                    burst = count > 1
                    await send({"type": "http.response.body", "body": body, "more_body": True})
                nursery.cancel_scope.cancel()
        if box.reader is reader:
            box.reader = None
        with trio.CancelScope(shield=True), trio.move_on_after(1):
            await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _delete(self, scope: Any, receive: ASGIReceive, send: ASGISend) -> None:
        connection = self._connection(scope)
        if isinstance(connection, int):
            await answer_text(scope, receive, send, connection, "unknown connection")
            return
        self.connections.pop(connection.id, None)
        connection.cancel_scope.cancel()
        await answer_early(scope, receive, send, 202, b"")


async def _not_initialize(body: bytes, limit: int, limits: ServerLimits) -> bytes | None:
    """``None`` if ``body`` is a valid ``initialize`` request (an integer or
    string id); else the JSON-RPC error answering it (as a body)."""
    checked = await check_structure(body, limit, limits)
    if type(checked) is not bytes:
        assert isinstance(checked, OversizedFrame)
        error = getattr(checked, "error", None) or RequestError.invalid_request()
        return encode_frame(error_response(None, error))[:-1]
    value = decode_frame(body)
    if type(value) is InvalidMessage:
        return encode_frame(error_response(value.reply_id, value.error))[:-1]
    message = classify(value)
    reply_id = message.reply_id if isinstance(message, InvalidMessage) else None
    if isinstance(message, Request):
        reply_id = message.id
        if type(message.id) in (int, str) and message.method == "initialize":
            return None
    error = RequestError.invalid_request(
        f"the first message must be an initialize request with an integer or string id "
        f"(no {CONNECTION_ID} header: a new connection)"
    )
    return encode_frame(error_response(reply_id, error))[:-1]
