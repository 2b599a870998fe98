"""The ASGI app serving ``/acp``: a small app of our own, no web framework,
so it can run under hypercorn's Trio worker or be mounted in another ASGI
app running on Trio."""

from __future__ import annotations

import hmac
import logging
import uuid
from collections.abc import Awaitable, Callable, Collection, MutableMapping
from typing import Any

import trio

from acp_trio._core._message_stream import MessageStream
from acp_trio.remote._front import NATIVE, NativeWebSocket
from acp_trio.remote._http_server import HttpProfile, _not_initialize, answer_text, client_of
from acp_trio.remote._limits import (
    REMOTE_MAX_MESSAGE_SIZE,
    Admission,
    ServerLimits,
    library_limit,
)
from acp_trio.remote._websocket import WebSocketClosed
from acp_trio.remote._ws_client import WebSocketMessages
from acp_trio.remote._ws_resume import (
    CLOSE,
    CURSOR_GONE,
    RESUME,
    UNKNOWN_CONNECTION,
    WsSession,
    control_frame,
)
from acp_trio.remote._ws_server import ASGIReceive, ASGISend, AsgiWebSocketMessages

__all__ = ["RemoteApp", "StreamHandler"]

_log = logging.getLogger("acp_trio.remote")

#: What serves one ACP connection: called with its message stream, returns
#: when the connection is over.
StreamHandler = Callable[[MessageStream], Awaitable[None]]

Scope = MutableMapping[str, Any]

#: The close code of a resumable WebSocket refused for want of room (RFC
#: 6455's "Try Again Later"): its upgrade was accepted before it could be
#: told a new agent from a resume.
TRY_AGAIN_LATER = 1013


def header(scope: Scope, name: str) -> str | None:
    """The first value of header ``name`` (lower case) in ``scope``."""
    wanted = name.encode("latin-1")
    for key, value in scope.get("headers", ()):
        if key.lower() == wanted:
            return bytes(value).decode("latin-1")
    return None


class RemoteApp:
    """An ASGI 3 app serving ACP at ``path`` (``/acp``): one ACP connection
    per WebSocket, each served by ``handle(stream)`` in the request's task.

    - ``max_message_size``: the cap of every connection (bytes; 16 MiB by
      default, lower than stdio's 64 MiB: a stranger's message is read and
      parsed on the server's one event loop); a message over it is answered
      as on stdio. Run by :func:`serve_remote`, the server's own limits are
      set from it.
    - ``limits``: the server's bounds in time, agents, connections and JSON
      structure (:class:`ServerLimits`): an ACP connection past
      ``max_agents`` is refused ``503`` (``429`` past a client's share),
      with ``Retry-After``; its first message must be a valid
      ``initialize`` request (else ``400``, or the WebSocket closed) before
      ``handle`` is called.
    - ``token``: if set, every request must carry ``Authorization: Bearer
      <token>`` (else ``401``).
    - ``allowed_origins``: a request carrying an ``Origin`` header (a
      browser's) is refused (``403``) unless its origin is listed; requests
      without one (editors, command-line clients) are not affected.
    - ``queue_size``: the bound of each queue (messages POSTed and not read
      yet; messages for an SSE stream and not sent yet).
    - ``idle_timeout``: a Streamable HTTP connection with no request and no
      open stream for this many seconds is ended, as by DELETE (a client
      that went away); ``None``: never.
    - ``resumable``: resumable SSE streams (provisional: the durable
      transport draft after the RFD). Each event carries a per-stream
      cursor as its ``id:``; the last ``replay_size`` events sent on each
      stream are kept, and a GET with ``Last-Event-ID`` resumes after that
      cursor (those events replayed, then live); a cursor no longer held
      gets ``409``. Off by default: no ``id:``, nothing kept. Over
      WebSocket, a connection then outlives its WebSocket for
      ``disconnect_timeout`` seconds and a new WebSocket can take it up
      (a first ``stream/resume`` frame; see the README).

    The app must run on Trio (hypercorn's Trio worker does).
    """

    def __init__(
        self,
        handle: StreamHandler,
        *,
        path: str = "/acp",
        max_message_size: int = REMOTE_MAX_MESSAGE_SIZE,
        token: str | None = None,
        allowed_origins: Collection[str] = (),
        queue_size: int = 64,
        idle_timeout: float | None = 300.0,
        resumable: bool = False,
        replay_size: int = 256,
        disconnect_timeout: float = 30.0,
        limits: ServerLimits | None = None,
    ) -> None:
        if replay_size < 1:
            raise ValueError(f"replay_size must be at least 1, not {replay_size}")
        self.handle = handle
        self.resumable = resumable
        self.replay_size = replay_size
        self.disconnect_timeout = disconnect_timeout
        #: The WebSocket connections that can be resumed (resumable only).
        self.ws_sessions: dict[str, WsSession] = {}
        self.path = path
        self.max_message_size = max_message_size
        self.token = token
        self.allowed_origins = frozenset(allowed_origins)
        #: The ids of the WebSocket connections being served.
        self.connections: set[str] = set()
        #: The server's bounds, and the agents they admitted.
        self.limits = limits or ServerLimits()
        self.admission = Admission(self.limits)
        #: The Streamable HTTP profile (its connections: ``http.connections``).
        self.http = HttpProfile(
            self._handle,
            max_message_size=max_message_size,
            body_limit=library_limit(max_message_size),
            queue_size=queue_size,
            idle_timeout=idle_timeout,
            replay_size=replay_size if resumable else 0,
            limits=self.limits,
            admission=self.admission,
        )

    async def _handle(self, stream: MessageStream) -> None:
        await self.handle(stream)

    async def __call__(self, scope: Scope, receive: ASGIReceive, send: ASGISend) -> None:
        kind = scope["type"]
        if kind == "lifespan":
            await self._lifespan(receive, send)
        elif kind == "websocket":
            await self._websocket(scope, receive, send)
        elif kind == "http":
            await self._http(scope, receive, send)

    def refusal(self, scope: Scope) -> tuple[int, str] | None:
        """Why a request is refused (status, text), or ``None``."""
        if scope.get("path") != self.path:
            return 404, "not found"
        if self.token is not None:
            given = header(scope, "authorization")
            expected = f"Bearer {self.token}"
            if given is None:
                return 401, "a bearer token is required"
            if not hmac.compare_digest(given.encode(), expected.encode()):
                return 401, "the bearer token is not right"
        origin = header(scope, "origin")
        if origin is not None and origin not in self.allowed_origins:
            return 403, "origin not allowed"
        return None

    async def _websocket(self, scope: Scope, receive: ASGIReceive, send: ASGISend) -> None:
        event = await receive()
        if event["type"] != "websocket.connect":
            return
        refused = self.refusal(scope)
        if refused is not None:
            await _reject_websocket(scope, send, *refused)
            return
        client = client_of(scope)
        if self.resumable and self.http.nursery is not None:
            # (A new agent or a resume: told by the first frame.)
            connection_id = await self._accept(send)
            await self._resumable_websocket(receive, send, connection_id, self.http.nursery, client)
            return
        full = self.admission.take(client)
        if full is not None:
            await _reject_websocket(scope, send, *full, extra=self.admission.retry_after())
            return
        try:
            await self._admitted_websocket(scope, receive, send)
        finally:
            self.admission.give_back(client)

    async def _accept(self, send: ASGISend) -> str:
        connection_id = uuid.uuid4().hex
        await send(
            {
                "type": "websocket.accept",
                "headers": [(b"acp-connection-id", connection_id.encode())],
            }
        )
        return connection_id

    async def _admitted_websocket(self, scope: Scope, receive: ASGIReceive, send: ASGISend) -> None:
        connection_id = await self._accept(send)
        native = scope.get("extensions", {}).get(NATIVE)
        websocket = native.websocket if isinstance(native, NativeWebSocket) else None
        first = await self._first_message(receive, send, websocket)
        if first is None:
            return
        stream: MessageStream
        if websocket is not None:
            # Served by our own front: the WebSocket itself, in bursts.
            stream = WebSocketMessages(
                websocket, self.max_message_size, limits=self.limits, first=first
            )
        else:
            stream = AsgiWebSocketMessages(
                receive, send, self.max_message_size, limits=self.limits, first=first
            )
        self.connections.add(connection_id)
        try:
            await self.handle(stream)
        except Exception:
            _log.exception("serving WebSocket connection %s failed", connection_id)
        finally:
            self.connections.discard(connection_id)
            await stream.aclose()

    async def _first_message(
        self, receive: ASGIReceive, send: ASGISend, websocket: Any
    ) -> bytes | None:
        """A new WebSocket's first message, if it is a valid ``initialize``
        request within ``body_timeout``; else the WebSocket is closed (code
        1008; a message that is not one answered first) and ``None``."""
        text: str | None = None
        with trio.move_on_after(self.limits.body_timeout):
            while text is None:
                if websocket is not None:
                    try:
                        message = await websocket.get_message()
                    except WebSocketClosed:
                        return None
                    text = message if isinstance(message, str) else None
                else:
                    event = await receive()
                    if event["type"] == "websocket.disconnect":
                        return None
                    if event["type"] == "websocket.receive":
                        text = event.get("text")
        if text is None:
            await _close_websocket(send, 1008, "no initialize request in time")
            return None
        data = text.encode("utf-8")
        if len(data) > self.max_message_size:
            await _close_websocket(send, 1009, "the first message is too big")
            return None
        error = await _not_initialize(data, self.max_message_size, self.limits)
        if error is None:
            return data
        with trio.CancelScope(shield=True), trio.move_on_after(5):
            await send({"type": "websocket.send", "text": error.decode("utf-8")})
        await _close_websocket(send, 1008, "the first message must be initialize")
        return None

    async def _resumable_websocket(
        self,
        receive: ASGIReceive,
        send: ASGISend,
        connection_id: str,
        nursery: trio.Nursery,
        client: str | None,
    ) -> None:
        """A WebSocket that starts a resumable connection, or takes one up
        (its first frame ``stream/resume``), within ``body_timeout``."""
        first: str | None = None
        with trio.move_on_after(self.limits.body_timeout):
            while first is None:
                event = await receive()
                if event["type"] == "websocket.disconnect":
                    return
                if event["type"] == "websocket.receive":
                    first = event.get("text")
        if first is None:
            await _close_websocket(send, 1008, "no first message in time")
            return
        control = control_frame(first)
        code = 1000
        if control is not None and control[0] == RESUME:
            params = control[1]
            session = self.ws_sessions.get(str(params.get("connectionId")))
            replayed = None
            if session is None or session.ended:
                code = UNKNOWN_CONNECTION
            else:
                replayed = session.replay.after(str(params.get("cursor")))
                if replayed is None:
                    code = CURSOR_GONE
                else:
                    session.window.on_ack(params.get("cursor"))
            if session is None or replayed is None:
                await _close_websocket(send, code)
                return
            still_open = await session.attach(receive, send, replayed)
        elif control is not None and control[0] == CLOSE:
            still_open = True
        else:
            data = first.encode("utf-8")
            error = await _not_initialize(data, self.max_message_size, self.limits)
            if error is not None:
                with trio.CancelScope(shield=True), trio.move_on_after(5):
                    await send({"type": "websocket.send", "text": error.decode("utf-8")})
                await _close_websocket(send, 1008, "the first message must be initialize")
                return
            full = self.admission.take(client)
            if full is not None:
                await _close_websocket(send, TRY_AGAIN_LATER, full[1])
                return
            session = WsSession(
                connection_id,
                self.max_message_size,
                self.http.queue_size,
                self.replay_size,
                self.limits,
            )
            self.ws_sessions[connection_id] = session
            self.connections.add(connection_id)
            nursery.start_soon(self._serve_ws_session, session, client)
            still_open = await session.attach(receive, send, None, first)
        if still_open:
            await _close_websocket(send, code)

    async def _serve_ws_session(self, session: WsSession, client: str | None) -> None:
        try:
            with session.cancel_scope:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(session.expire, self.disconnect_timeout)
                    await self.handle(session)
                    nursery.cancel_scope.cancel()
        except Exception:
            _log.exception("serving WebSocket connection %s failed", session.id)
        finally:
            self.ws_sessions.pop(session.id, None)
            self.connections.discard(session.id)
            session.end()
            self.admission.give_back(client)

    async def _http(self, scope: Scope, receive: ASGIReceive, send: ASGISend) -> None:
        refused = self.refusal(scope)
        if refused is not None:
            # On its head: answered at once, its body not read.
            await answer_text(scope, receive, send, *refused)
            return
        await self.http(scope, receive, send)

    async def _lifespan(self, receive: ASGIReceive, send: ASGISend) -> None:
        # The lifespan's task holds the nursery of the HTTP connections,
        # which outlive the requests that start them.
        async with trio.open_nursery() as nursery:
            while True:
                event = await receive()
                if event["type"] == "lifespan.startup":
                    self.http.nursery = nursery
                    await send({"type": "lifespan.startup.complete"})
                elif event["type"] == "lifespan.shutdown":
                    self.http.nursery = None
                    nursery.cancel_scope.cancel()
                    await send({"type": "lifespan.shutdown.complete"})
                    return


async def _close_websocket(send: ASGISend, code: int, reason: str = "") -> None:
    with trio.CancelScope(shield=True), trio.move_on_after(5):
        await send({"type": "websocket.close", "code": code, "reason": reason})


async def send_text(
    send: ASGISend, status: int, text: str, *, extra: list[tuple[bytes, bytes]] | None = None
) -> None:
    """A whole plain-text response."""
    body = (text + "\n").encode()
    headers = [
        (b"content-type", b"text/plain; charset=utf-8"),
        (b"content-length", str(len(body)).encode()),
        *(extra or []),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _reject_websocket(
    scope: Scope,
    send: ASGISend,
    status: int,
    text: str,
    *,
    extra: list[tuple[bytes, bytes]] | None = None,
) -> None:
    if "websocket.http.response" in scope.get("extensions", {}):
        body = (text + "\n").encode()
        await send(
            {
                "type": "websocket.http.response.start",
                "status": status,
                "headers": [(b"content-type", b"text/plain; charset=utf-8"), *(extra or [])],
            }
        )
        await send({"type": "websocket.http.response.body", "body": body})
    else:
        await send({"type": "websocket.close", "code": 1008})
