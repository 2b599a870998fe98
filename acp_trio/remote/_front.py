"""The server's front door: hypercorn's Trio worker, with WebSocket upgrades
answered by our own WebSocket.

Each accepted connection's request head is read first. A WebSocket upgrade
(``GET`` with ``Upgrade: websocket``) is served here: wsproto makes the
handshake, the app sees an ordinary ASGI WebSocket, and its sends are
written behind, many frames to a write (:mod:`acp_trio.remote._websocket`),
where hypercorn writes each frame with a call of its own. Anything else
(HTTP/1.1, h2c, an upgrade wsproto refuses) goes to hypercorn's own
connection handler with the head given back, so hypercorn answers it as if
it had read it itself.

This runs hypercorn's connection handler, lifespan and worker context
directly (``hypercorn.trio.tcp_server.TCPServer`` and friends), as
``hypercorn.trio.serve`` does. Those names are not hypercorn's public API:
tests/remote/test_hypercorn_contract.py checks each one used here (a
hypercorn that changes one fails it, naming the name), and
``make test-hypercorn-latest`` runs the remote tests against the newest
hypercorn.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import logging
import urllib.parse
from collections.abc import Awaitable, Callable
from typing import Any

import trio
from hypercorn.config import Config
from hypercorn.trio.lifespan import Lifespan
from hypercorn.trio.tcp_server import TCPServer
from hypercorn.trio.worker_context import WorkerContext
from hypercorn.typing import ConnectionState
from hypercorn.utils import repr_socket_addr, wrap_app
from wsproto import ConnectionType, WSConnection
from wsproto.events import AcceptConnection, RejectConnection, RejectData, Request
from wsproto.utilities import RemoteProtocolError

from acp_trio.remote._http1_guard import RequestGuard
from acp_trio.remote._websocket import WebSocket, WebSocketClosed
from acp_trio.remote._ws_frames import ABNORMAL, NORMAL

__all__ = ["NATIVE", "NativeWebSocket", "serve_front"]

#: The scope extension naming the :class:`NativeWebSocket` serving an upgrade.
NATIVE = "acp_trio.websocket"

_log = logging.getLogger("acp_trio.remote")

#: The longest request head read before deciding (hypercorn's h11 default).
_MAX_HEAD = 16 * 1024


class _GivenBack(trio.abc.HalfCloseableStream):
    """A socket stream with the bytes already read from it put back in
    front: what hypercorn's connection handler reads first."""

    def __init__(self, stream: trio.SocketStream, head: bytes) -> None:
        self._stream: trio.abc.Stream = stream
        self._guard = RequestGuard()
        self._head = self._guard.feed(head)
        self.socket = stream.socket  # hypercorn reads the addresses from it

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        if self._head:
            head, self._head = self._head, b""
            await trio.lowlevel.checkpoint()
            return head
        while True:
            data = await self._stream.receive_some(max_bytes)
            if not data:
                return b""
            if not isinstance(data, bytes):  # (TLS streams may give a bytearray)
                data = bytes(data)
            # Only what the guard hands on (a head is held until whole;
            # after a forbidden request, nothing: the connection ends).
            data = self._guard.feed(data)
            if data:
                return data

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        if not data:
            # hypercorn writes the empty end of every HTTP/1.1 body with a
            # length (h11's EndOfMessage; one a POST answered 202): nothing
            # to send, so no schedule point is spent on it.
            await trio.lowlevel.checkpoint_if_cancelled()
            return
        await self._stream.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self._stream.wait_send_all_might_not_block()

    async def send_eof(self) -> None:
        stream = self._stream
        if isinstance(stream, trio.abc.HalfCloseableStream):
            await stream.send_eof()

    async def aclose(self) -> None:
        await self._stream.aclose()


class _IdleTask:
    """The task of one connection's idle timeout, in place of hypercorn's
    (``TCPServer.idle_task``). hypercorn stops it when a request comes and
    starts it again when the answer is sent, two changes for every HTTP/1.1
    request; its own starts the new task with ``nursery.start`` under a
    lock, the connection's task waiting for the new one to run (three
    schedule points). This one cancels the old task and spawns the new one
    (the task group's ``spawn``) without waiting: the same timeout, one task
    at a time, none of those schedule points (1,000 HTTP/1.1 clients at once:
    a tenth of the server's CPU went to hypercorn's)."""

    def __init__(self) -> None:
        self._scope: trio.CancelScope | None = None

    async def restart(self, task_group: Any, action: Callable[[], Awaitable[None]]) -> None:
        await trio.lowlevel.checkpoint_if_cancelled()
        if self._scope is not None:
            self._scope.cancel()
        scope = self._scope = trio.CancelScope()

        async def run() -> None:
            with scope:
                await action()

        task_group.spawn(run)

    async def stop(self) -> None:
        await trio.lowlevel.checkpoint_if_cancelled()
        if self._scope is not None:
            self._scope.cancel()
            self._scope = None


class _GivenBackTLS(_GivenBack):
    """:class:`_GivenBack` over TLS: what hypercorn asks of a TLS stream
    (its handshake, done already; the protocol ALPN chose; the socket
    under it), so it serves the connection as ``https``."""

    def __init__(self, stream: trio.SSLStream[trio.SocketStream], head: bytes) -> None:
        super().__init__(stream.transport_stream, head)
        self._stream = stream
        self.transport_stream = stream.transport_stream

    async def do_handshake(self) -> None:
        stream = self._stream
        assert isinstance(stream, trio.SSLStream)
        await stream.do_handshake()

    def selected_alpn_protocol(self) -> str | None:
        stream = self._stream
        assert isinstance(stream, trio.SSLStream)
        protocol: str | None = stream.selected_alpn_protocol()
        return protocol


def _is_upgrade(head: bytes) -> bool:
    """Whether the request head asks for a WebSocket (``GET`` with an
    ``Upgrade: websocket`` header)."""
    if not head.startswith(b"GET ") or b"\r\n\r\n" not in head:
        return False
    for line in head.split(b"\r\n\r\n", 1)[0].split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"upgrade" and value.strip().lower() == b"websocket":
            return True
    return False


def _handshake_refusal(head: bytes) -> bytes | None:
    """The response refusing an upgrade whose key or version RFC 6455
    §4.2.1 forbids (``None`` if both are right): 400 for a
    ``Sec-WebSocket-Key`` that is not 16 bytes in base64, 426 for a
    version other than 13 (400 without one), both naming version 13."""
    key: bytes | None = None
    versions: list[bytes] = []
    for line in head.split(b"\r\n\r\n", 1)[0].split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        name = name.strip().lower()
        if name == b"sec-websocket-key":
            key = b"" if key is not None else value.strip()  # (two keys: refused)
        elif name == b"sec-websocket-version":
            versions.append(value.strip())
    if versions != [b"13"]:
        status, text = (426, b"Upgrade Required") if versions else (400, b"Bad Request")
        body = b"Sec-WebSocket-Version 13 is required\n"
    else:
        try:
            if key is not None and len(base64.b64decode(key, validate=True)) == 16:
                return None
        except binascii.Error:
            pass
        status, text = 400, b"Bad Request"
        body = b"Sec-WebSocket-Key must be 16 bytes in base64\n"
    return (
        b"HTTP/1.1 %d %s\r\nSec-WebSocket-Version: 13\r\n"
        b"Content-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\n"
        b"Connection: close\r\n\r\n%s" % (status, text, len(body), body)
    )


async def serve_front(
    app: Any,
    config: Config,
    *,
    task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve the ASGI ``app`` on ``config``'s binds, as
    ``hypercorn.trio.serve`` does, WebSocket upgrades on our own WebSocket;
    reports the bound URLs. With a certificate and key (``config.certfile``
    and ``config.keyfile``) its ``bind`` addresses are served over TLS
    (``https://``, ``wss://``; HTTP/2 by ALPN) and only ``insecure_bind``
    ones in plain text, as hypercorn does. Half a TLS configuration (one of
    the two files) or a ``quic_bind`` (HTTP/3, not served here) raises
    ``ValueError`` before anything is bound. Cancelled, it stops every
    connection."""
    if (config.certfile is None) != (config.keyfile is None):
        raise ValueError(
            "a TLS configuration needs both certfile and keyfile "
            f"(certfile={config.certfile!r}, keyfile={config.keyfile!r}); "
            "refusing to serve it in plain text"
        )
    if config.quic_bind:
        raise ValueError(f"HTTP/3 (quic_bind={config.quic_bind!r}) is not served by acp_trio")
    # Checked before anything is bound: a certificate that cannot be
    # loaded raises here (ssl.SSLError, OSError).
    ssl_context = config.create_ssl_context()
    wrapped = wrap_app(app, config.wsgi_max_body_size, "asgi")
    lifespan_state: dict[str, Any] = {}
    lifespan = Lifespan(wrapped, config, lifespan_state)
    context = WorkerContext(None)
    async with trio.open_nursery() as lifespan_nursery:
        await lifespan_nursery.start(lifespan.handle_lifespan)
        await lifespan.wait_for_startup()
        async with trio.open_nursery() as server_nursery:
            sockets = config.create_sockets()
            listeners: list[trio.abc.Listener[Any]] = []
            binds = []
            for sock in sockets.secure_sockets:
                assert ssl_context is not None  # (secure sockets only with TLS)
                sock.listen(config.backlog)
                listeners.append(
                    trio.SSLListener(
                        trio.SocketListener(trio.socket.from_stdlib_socket(sock)),
                        ssl_context,
                        https_compatible=True,
                    )
                )
                bind = repr_socket_addr(sock.family, sock.getsockname())
                binds.append(f"https://{bind}")
                await config.log.info(f"Running on https://{bind} (CTRL + C to quit)")
            for sock in sockets.insecure_sockets:
                sock.listen(config.backlog)
                listeners.append(trio.SocketListener(trio.socket.from_stdlib_socket(sock)))
                bind = repr_socket_addr(sock.family, sock.getsockname())
                binds.append(f"http://{bind}")
                await config.log.info(f"Running on http://{bind} (CTRL + C to quit)")
            state = ConnectionState(lifespan_state.copy())

            def hypercorn(stream: trio.abc.Stream) -> TCPServer:
                server = TCPServer(wrapped, config, context, state, stream)  # type: ignore[arg-type]
                server.idle_task = _IdleTask()  # type: ignore[assignment]
                return server

            front = _Front(app, config, hypercorn, lifespan_state)
            task_status.started(binds)
            try:
                await trio.serve_listeners(
                    front.connection, listeners, handler_nursery=server_nursery
                )
            finally:
                await context.terminated.set()
                server_nursery.cancel_scope.deadline = trio.current_time() + config.graceful_timeout


class _Front:
    def __init__(
        self, app: Any, config: Config, hypercorn: Any, lifespan_state: dict[str, Any]
    ) -> None:
        self.app = app
        self.config = config
        self.hypercorn = hypercorn
        #: What the app's lifespan startup kept (each scope has a copy).
        self.lifespan_state = lifespan_state

    async def connection(self, stream: trio.abc.Stream) -> None:
        # One connection's failure (hypercorn's own included: a header not
        # in ASCII can make it raise) must not end the server.
        try:
            await self._connection(stream)
        except Exception:
            _log.exception("serving a connection failed")
            with trio.CancelScope(shield=True):
                await stream.aclose()

    async def _connection(self, stream: trio.abc.Stream) -> None:
        if isinstance(stream, trio.SSLStream):
            try:
                with trio.fail_after(self.config.ssl_handshake_timeout):
                    await stream.do_handshake()
            except (trio.BrokenResourceError, trio.ClosedResourceError, trio.TooSlowError):
                with trio.CancelScope(shield=True):
                    await stream.aclose()
                return
            if stream.selected_alpn_protocol() == "h2":
                await self.hypercorn(_GivenBackTLS(stream, b""))
                return
        head = b""
        with trio.move_on_after(self.config.keep_alive_timeout):
            try:
                while b"\r\n\r\n" not in head and len(head) < _MAX_HEAD:
                    data = await stream.receive_some(_MAX_HEAD)
                    if not data:
                        break
                    head += data
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                with trio.CancelScope(shield=True):
                    await stream.aclose()
                return
        if _is_upgrade(head):
            refusal = _handshake_refusal(head)
            if refusal is not None:
                with trio.CancelScope(shield=True):
                    with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                        await stream.send_all(refusal)
                    await stream.aclose()
                return
            connection = WSConnection(ConnectionType.SERVER)
            end = head.index(b"\r\n\r\n") + 4
            try:
                connection.receive_data(head[:end])
                request = next(iter(connection.events()), None)
            except (RemoteProtocolError, ValueError):  # (ValueError: bytes not ASCII)
                request = None  # hypercorn answers it
            if isinstance(request, Request):
                try:
                    native = NativeWebSocket(
                        self, stream, connection, request, head[:end], head[end:]
                    )
                    await native.run()
                finally:
                    with trio.CancelScope(shield=True):
                        await stream.aclose()
                return
        if isinstance(stream, trio.SSLStream):
            await self.hypercorn(_GivenBackTLS(stream, head))
        else:
            assert isinstance(stream, trio.SocketStream)
            await self.hypercorn(_GivenBack(stream, head))


class NativeWebSocket:
    """One upgrade, served to the app as an ASGI WebSocket; an app that
    knows it (the scope's :data:`NATIVE` extension) may use the
    :class:`WebSocket` itself once it has accepted (:attr:`websocket`)."""

    def __init__(
        self,
        front: _Front,
        stream: trio.abc.Stream,
        connection: WSConnection,
        request: Request,
        head: bytes,
        leftover: bytes,
    ) -> None:
        self.front = front
        self.head = head
        self.leftover = leftover
        self.stream = stream
        self.connection = connection
        self.request = request
        self.ws: WebSocket | None = None
        self.connected = False  # "websocket.connect" delivered
        self.done = False  # rejected or closed before being accepted
        self.response: dict[str, Any] | None = None
        self.body: list[bytes] = []
        self.nursery: trio.Nursery | None = None

    @property
    def websocket(self) -> WebSocket | None:
        """The WebSocket, once accepted."""
        return self.ws

    def scope(self) -> dict[str, Any]:
        request = self.request
        raw_path, _, query = request.target.partition("?")
        # The request's headers as they came (wsproto keeps some aside).
        headers = []
        for line in self.head.split(b"\r\n")[1:]:
            name, colon, value = line.partition(b":")
            if colon:
                headers.append((name.strip().lower(), value.strip()))
        stream = self.stream
        tls = isinstance(stream, trio.SSLStream)
        sock = stream.transport_stream.socket if tls else stream.socket  # type: ignore[attr-defined]
        return {
            "type": "websocket",
            "asgi": {"spec_version": "2.3", "version": "3.0"},
            "scheme": "wss" if tls else "ws",
            "http_version": "1.1",
            "path": urllib.parse.unquote(raw_path),
            "raw_path": raw_path.encode("latin-1"),
            "query_string": query.encode("latin-1"),
            "root_path": self.front.config.root_path,
            "headers": headers,
            "client": _address(sock.getpeername()),
            "server": _address(sock.getsockname()),
            "subprotocols": list(request.subprotocols),
            "extensions": {"websocket.http.response": {}, NATIVE: self},
            # What the lifespan startup kept, a copy per connection, as in
            # hypercorn's own scopes.
            "state": self.front.lifespan_state.copy(),
        }

    async def run(self) -> None:
        async with trio.open_nursery() as nursery:
            self.nursery = nursery
            try:
                await self.front.app(self.scope(), self.receive, self.send)
            except Exception:
                _log.exception("the app failed serving a WebSocket")
            finally:
                with trio.CancelScope(shield=True):
                    if self.ws is not None:
                        await self.ws.aclose()
                    elif not self.done:
                        await self._reject(500, [], b"")
                nursery.cancel_scope.cancel()

    async def receive(self) -> dict[str, Any]:
        if not self.connected:
            self.connected = True
            return {"type": "websocket.connect"}
        if self.ws is None:
            await trio.lowlevel.checkpoint()
            return {"type": "websocket.disconnect", "code": ABNORMAL}
        try:
            message = await self.ws.get_message()
        except WebSocketClosed as exc:
            return {"type": "websocket.disconnect", "code": exc.code}
        if isinstance(message, str):
            return {"type": "websocket.receive", "text": message}
        return {"type": "websocket.receive", "bytes": message}

    async def send(self, event: Any) -> None:
        kind = event["type"]
        if kind == "websocket.send":
            if self.ws is None:
                raise RuntimeError("websocket.send before websocket.accept")
            text = event.get("text")
            try:
                await self.ws.send_message(text if text is not None else event["bytes"])
            except WebSocketClosed as exc:
                raise trio.BrokenResourceError(str(exc)) from exc
        elif kind == "websocket.accept":
            await self._accept(event)
        elif kind == "websocket.close":
            if self.ws is not None:
                await self.ws.aclose(int(event.get("code", NORMAL)), event.get("reason") or "")
            elif not self.done:
                await self._reject(403, [], b"")
        elif kind == "websocket.http.response.start" and self.ws is None and not self.done:
            self.response = dict(event)
        elif kind == "websocket.http.response.body" and self.response is not None:
            self.body.append(bytes(event.get("body", b"")))
            if not event.get("more_body", False):
                headers = [(bytes(k), bytes(v)) for k, v in self.response.get("headers", [])]
                await self._reject(int(self.response["status"]), headers, b"".join(self.body))
        else:
            raise RuntimeError(f"unexpected ASGI message {kind!r} for this WebSocket")

    async def _accept(self, event: Any) -> None:
        if self.ws is not None or self.done:
            raise RuntimeError("websocket.accept twice, or after a rejection")
        headers = [(bytes(k), bytes(v)) for k, v in event.get("headers", [])]
        data = self.connection.send(
            AcceptConnection(subprotocol=event.get("subprotocol"), extra_headers=headers)
        )
        await self.stream.send_all(data)
        ws = WebSocket(
            self.stream,
            client=False,
            max_message_size=self.front.config.websocket_max_message_size,
            handshake_headers=headers,
            leftover=self.leftover,
        )
        assert self.nursery is not None
        await self.nursery.start(ws.run_writer)
        self.ws = ws

    async def _reject(self, status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
        self.done = True
        headers = [
            *headers,
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
        ]
        data = self.connection.send(
            RejectConnection(status_code=status, headers=headers, has_body=True)
        )
        data += self.connection.send(RejectData(data=body, body_finished=True))
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            await self.stream.send_all(data)


def _address(address: Any) -> tuple[str, int] | None:
    if isinstance(address, tuple) and len(address) >= 2:
        return str(address[0]), int(address[1])
    return None
