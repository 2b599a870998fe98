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

The front also keeps the server's bounds (:class:`ServerLimits`) where
hypercorn has none: connections over the cap are answered ``503``
(``429`` for one client over its share) and closed at once; a request head,
and on HTTP/2 each frame and header block, has a deadline of its own; each
connection's :class:`FrontConnection` (in every scope's ``state``, under
:data:`FRONT`) lets the app grant ``100 Continue`` itself, reset an HTTP/2
stream it answered before its body ended, and wait before handing hypercorn
more of a response than its peer's window lets out (hypercorn's own HTTP/2
stream buffer grows without bound when the window is shut).

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
import math
import urllib.parse
from collections.abc import Awaitable, Callable
from typing import Any, Final

import h2.errors
import h2.exceptions
import trio
from hypercorn.config import Config
from hypercorn.protocol.h2 import H2Protocol
from hypercorn.trio.lifespan import Lifespan
from hypercorn.trio.tcp_server import TCPServer
from hypercorn.trio.worker_context import WorkerContext
from hypercorn.typing import ConnectionState
from hypercorn.utils import repr_socket_addr, wrap_app
from wsproto import ConnectionType, WSConnection
from wsproto.events import AcceptConnection, RejectConnection, RejectData, Request
from wsproto.utilities import RemoteProtocolError

from acp_trio.remote._http1_guard import FREE_CHUNKS, MIN_CHUNK, RequestGuard
from acp_trio.remote._limits import ServerLimits
from acp_trio.remote._websocket import WebSocket, WebSocketClosed
from acp_trio.remote._ws_frames import ABNORMAL, NORMAL

__all__ = ["FRONT", "NATIVE", "FrontConnection", "NativeWebSocket", "serve_front"]

#: The scope extension naming the :class:`NativeWebSocket` serving an upgrade.
NATIVE = "acp_trio.websocket"
#: The key of a scope's ``state`` naming its connection's :class:`FrontConnection`.
FRONT: Final = "acp_trio.front"

_log = logging.getLogger("acp_trio.remote")

#: The longest request head read before deciding (hypercorn's h11 default).
_MAX_HEAD = 16 * 1024


#: Streams whose DATA frames are counted at once (the rest forgotten).
_MAX_COUNTED_STREAMS: Final = 256


class _FrameClock:
    """Follows the HTTP/2 frames a client sends (their 9-byte headers only),
    to tell whether a frame or a header block (``HEADERS`` without
    ``END_HEADERS``, then ``CONTINUATION`` frames) is unfinished: no other
    frame may come in the middle of either, so one left unfinished holds
    the whole connection."""

    __slots__ = ("_data", "_header", "_in_block", "_preface", "_remaining", "abusive")

    _PREFACE: Final = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

    def __init__(self) -> None:
        self._preface = len(self._PREFACE)  # bytes of the preface still to skip
        self._header = bytearray()  # a frame header read in part
        self._remaining = 0  # bytes of the current frame's payload to come
        self._in_block = False
        # Each open stream's DATA frames so far, and their bytes.
        self._data: dict[int, tuple[int, int]] = {}
        #: A stream's body came in DATA frames too small to be anything but
        #: an attack on the server's time (as for HTTP/1.1 chunks: past
        #: FREE_CHUNKS frames they must average MIN_CHUNK bytes).
        self.abusive = False

    @property
    def unfinished(self) -> bool:
        return self._in_block or bool(self._remaining) or bool(self._header)

    def feed(self, data: bytes) -> bool:
        """Follow ``data``; whether a frame outside a header block, or a
        header block, was finished in it."""
        i, n = 0, len(data)
        finished = False
        if self._preface:
            done = len(self._PREFACE) - self._preface
            if self._PREFACE.startswith(data[: self._preface], done):
                i = min(self._preface, n)
                self._preface -= i
            else:
                self._preface = 0  # (no preface: frames from here)
        while i < n:
            if self._remaining:
                take = min(self._remaining, n - i)
                self._remaining -= take
                i += take
                if not self._remaining and not self._in_block:
                    finished = True
                continue
            part = data[i : i + 9 - len(self._header)]
            self._header += part
            i += len(part)
            if len(self._header) < 9:
                break
            header = self._header
            kind, flags = header[3], header[4]
            self._remaining = int.from_bytes(header[:3], "big")
            if kind in (0x0, 0x3):  # DATA, RST_STREAM
                self._count(kind, flags, int.from_bytes(header[5:9], "big") & 0x7FFFFFFF)
            header.clear()
            if kind in (0x1, 0x5, 0x9):  # HEADERS, PUSH_PROMISE, CONTINUATION
                was = self._in_block
                self._in_block = not flags & 0x4  # END_HEADERS
                if was and not self._in_block:
                    finished = True
            if not self._remaining and not self._in_block:
                finished = True
        return finished

    def _count(self, kind: int, flags: int, stream_id: int) -> None:
        data = self._data
        if kind == 0x3 or flags & 0x1:  # the stream's end (RST_STREAM, END_STREAM)
            data.pop(stream_id, None)
            if kind == 0x3:
                return
        frames, size = data.pop(stream_id, (0, 0))
        frames, size = frames + 1, size + self._remaining
        if frames > FREE_CHUNKS and size < frames * MIN_CHUNK:
            self.abusive = True
        if not flags & 0x1:
            if len(data) >= _MAX_COUNTED_STREAMS:
                data.clear()  # (streams the client never ended)
            data[stream_id] = (frames, size)


class _GivenBack(trio.abc.HalfCloseableStream):
    """A socket stream with the bytes already read from it put back in
    front: what hypercorn's connection handler reads first.

    Reads keep the head deadline: while part of an HTTP/1.1 head is held
    (the guard holds a head until it is whole), or an HTTP/2 frame or header
    block is unfinished, the time spent waiting for the client counts, and
    past ``head_timeout`` the read ends the stream (hypercorn closes the
    connection)."""

    def __init__(
        self, stream: trio.SocketStream, head: bytes, head_timeout: float = math.inf
    ) -> None:
        self._stream: trio.abc.Stream = stream
        self._guard = RequestGuard()
        self._frames: _FrameClock | None = None
        self._head_timeout = head_timeout
        self._waited = 0.0  # time spent waiting for an unfinished head
        self._head = self._feed(head)
        #: Called when reading ends (the client's end, or a deadline).
        self.on_end: Callable[[], None] | None = None
        self.socket = stream.socket  # hypercorn reads the addresses from it

    def _feed(self, data: bytes) -> bytes:
        frames = self._frames
        if frames is not None:
            if frames.feed(data):
                self._waited = 0.0
            return data
        guard = self._guard
        out = guard.feed(data)
        if guard.http2_start is not None:
            # HTTP/2 from here: what the guard let through from its start
            # on, then everything.
            self._frames = _FrameClock()
            self._frames.feed(out[guard.http2_start :])
            self._waited = 0.0
        elif not guard.holding_head:
            self._waited = 0.0
        return out

    def _ended(self) -> bytes:
        if self.on_end is not None:
            self.on_end()
            self.on_end = None
        return b""

    def _unfinished(self) -> bool:
        frames = self._frames
        return frames.unfinished if frames is not None else self._guard.holding_head

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        if self._head:
            head, self._head = self._head, b""
            await trio.lowlevel.checkpoint()
            if self._frames is not None and self._frames.abusive:
                return self._ended()
            return head
        while True:
            data: bytes | bytearray | None = None
            if self._unfinished():
                started = trio.current_time()
                with trio.move_on_after(max(0.0, self._head_timeout - self._waited)):
                    data = await self._stream.receive_some(max_bytes)
                self._waited += trio.current_time() - started
                if data is None:
                    _log.info("a request head or an HTTP/2 frame stopped coming: closed")
                    return self._ended()
            else:
                data = await self._stream.receive_some(max_bytes)
            if not data:
                return self._ended()
            if not isinstance(data, bytes):  # (TLS streams may give a bytearray)
                data = bytes(data)
            # Only what the guard hands on (a head is held until whole;
            # after a forbidden request, nothing: the connection ends).
            data = self._feed(data)
            if self._frames is not None and self._frames.abusive:
                _log.info("HTTP/2 DATA frames too small: connection closed")
                return self._ended()
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


class _Gone:
    """What an HTTP/2 stream hypercorn has forgotten is taken for: events
    for it (body data that came after the answer) are dropped. (hypercorn
    looks each event's stream up with ``streams[id]``, a ``KeyError`` out of
    its whole connection for a stream already answered; its flow control is
    still acknowledged, after the lookup.)"""

    async def handle(self, event: object) -> None:
        await trio.lowlevel.checkpoint()


_GONE: Final = _Gone()


class _Streams(dict[int, Any]):
    def __missing__(self, key: int) -> Any:
        return _GONE


class FrontConnection:
    """One TCP connection, for the app (its scopes' ``state[FRONT]``): what
    hypercorn does not let an ASGI app do.

    - :meth:`grant_continue`: answer ``100 Continue`` (HTTP/1.1), once the
      app has decided to read the body (the front kept ``Expect:
      100-continue`` from hypercorn, which would grant it to any request).
    - :meth:`reset`: reset an HTTP/2 stream (``NO_ERROR``) after its answer,
      so its client stops sending a body the app will not read.
    - :meth:`wait_writable`: wait while hypercorn holds more than a given
      number of bytes of an HTTP/2 stream's response (its peer's window
      shut: hypercorn's StreamBuffer would take any amount).
    """

    def __init__(self, stream: _GivenBack, client: str | None) -> None:
        self.stream = stream
        #: The client's address (``None`` if unknown).
        self.client = client
        self.server: Any = None

    def _http2(self) -> Any:
        protocol = getattr(getattr(self.server, "protocol", None), "protocol", None)
        return protocol if isinstance(protocol, H2Protocol) else None

    @property
    def http2(self) -> bool:
        return self._http2() is not None

    def stream_id(self, scope: Any) -> int | None:
        """The HTTP/2 stream of the request ``scope`` (``None`` on HTTP/1.1,
        or once hypercorn has forgotten it)."""
        protocol = self._http2()
        if protocol is None:
            return None
        for stream_id, stream in protocol.streams.items():
            if getattr(stream, "scope", None) is scope:
                return int(stream_id)
        return None

    async def grant_continue(self) -> None:
        """Send ``100 Continue`` on HTTP/1.1 (nothing else is being written
        then: the response has not started, the one before it is done)."""
        if self.server is None or self.http2:
            await trio.lowlevel.checkpoint()
            return
        async with self.server.send_lock:
            with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                await self.stream.send_all(b"HTTP/1.1 100 Continue\r\n\r\n")

    async def reset(self, stream_id: int) -> None:
        """Reset HTTP/2 stream ``stream_id`` with ``NO_ERROR`` ("stop
        sending: all is said"), once its answer has gone out (waited for a
        moment at most)."""
        protocol = self._http2()
        if protocol is None:
            await trio.lowlevel.checkpoint()
            return
        with trio.move_on_after(1):
            # (No event: hypercorn's send task drops the buffer once the
            # stream's end is written.)
            while stream_id in protocol.stream_buffers:  # noqa: ASYNC110
                await trio.sleep(0.001)
        try:
            protocol.connection.reset_stream(stream_id, h2.errors.ErrorCodes.NO_ERROR)
        except h2.exceptions.H2Error:
            await trio.lowlevel.checkpoint()
            return  # closed already
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            await protocol._flush()

    async def wait_writable(self, stream_id: int, limit: int) -> None:
        """Wait while hypercorn holds more than ``limit`` bytes of HTTP/2
        stream ``stream_id``'s response."""
        protocol = self._http2()
        buffer = None if protocol is None else protocol.stream_buffers.get(stream_id)
        if buffer is None or len(buffer.buffer) <= limit:
            await trio.lowlevel.checkpoint()
            return
        while len(buffer.buffer) > limit and protocol.stream_buffers.get(stream_id) is buffer:
            await buffer.drain()  # (until it is empty, or the stream closed)


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

    def __init__(self, server: Any = None) -> None:
        self._scope: trio.CancelScope | None = None
        # hypercorn's connection handler, its protocol wrapper watched once
        # it exists (its first idle_task.restart comes right after).
        self._server = server
        self._read_all = False

    def reading_ended(self) -> None:
        """The connection will read no more (the client's end, or a head
        deadline): no idle timeout to wait for, so hypercorn closes the
        connection once its answers are out, not a keep-alive timeout
        later (a client's end held its socket and its task for 30 s)."""
        self._read_all = True
        if self._scope is not None:
            self._scope.cancel()
            self._scope = None

    async def restart(self, task_group: Any, action: Callable[[], Awaitable[None]]) -> None:
        if self._server is not None:
            _watch_protocol(self._server.protocol)
            self._server = None
        await trio.lowlevel.checkpoint_if_cancelled()
        if self._scope is not None:
            self._scope.cancel()
            self._scope = None
        if self._read_all:
            return
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


def _watch_protocol(wrapper: Any) -> None:
    """Have each HTTP/2 protocol ``wrapper`` (hypercorn's ProtocolWrapper)
    switches to look streams up in a :class:`_Streams` (unknown ones:
    :data:`_GONE`)."""
    handle = wrapper.handle

    def guard() -> None:
        protocol = wrapper.protocol
        if isinstance(protocol, H2Protocol) and type(protocol.streams) is not _Streams:
            protocol.streams = _Streams(protocol.streams)

    async def watched(event: Any) -> None:
        guard()
        await handle(event)
        guard()

    guard()
    wrapper.handle = watched


class _GivenBackTLS(_GivenBack):
    """:class:`_GivenBack` over TLS: what hypercorn asks of a TLS stream
    (its handshake, done already; the protocol ALPN chose; the socket
    under it), so it serves the connection as ``https``."""

    def __init__(
        self, stream: trio.SSLStream[trio.SocketStream], head: bytes, head_timeout: float
    ) -> None:
        super().__init__(stream.transport_stream, head, head_timeout)
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
    limits: ServerLimits | None = None,
    task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve the ASGI ``app`` on ``config``'s binds, as
    ``hypercorn.trio.serve`` does, WebSocket upgrades on our own WebSocket,
    within ``limits`` (connections, head deadlines; default
    :class:`ServerLimits`); reports the bound URLs. With a certificate and key (``config.certfile``
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
            base_state = lifespan_state.copy()

            def hypercorn(stream: _GivenBack, client: str | None) -> TCPServer:
                # Each connection's scopes carry its FrontConnection.
                handle = FrontConnection(stream, client)
                state = ConnectionState({**base_state, FRONT: handle})
                server = TCPServer(wrapped, config, context, state, stream)  # type: ignore[arg-type]
                idle = server.idle_task = _IdleTask(server)  # type: ignore[assignment]
                stream.on_end = idle.reading_ended
                handle.server = server
                return server

            front = _Front(app, config, hypercorn, lifespan_state, limits or ServerLimits())
            task_status.started(binds)
            try:
                await trio.serve_listeners(
                    front.connection, listeners, handler_nursery=server_nursery
                )
            finally:
                await context.terminated.set()
                server_nursery.cancel_scope.deadline = trio.current_time() + config.graceful_timeout


#: Connections refused (over the caps) that may linger at once, to let their
#: answer reach the client before the close.
_MAX_LINGERING: Final = 64


def _peer_host(stream: trio.abc.Stream) -> str | None:
    sock = stream.transport_stream.socket if isinstance(stream, trio.SSLStream) else None
    if sock is None:
        sock = getattr(stream, "socket", None)
    try:
        address = sock.getpeername() if sock is not None else None
    except OSError:
        return None
    return str(address[0]) if isinstance(address, tuple) and address else None


def _simple_response(status: int, reason: bytes, text: bytes, extra: bytes = b"") -> bytes:
    return (
        b"HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\n"
        b"Content-Length: %d\r\n%sConnection: close\r\n\r\n%s"
        % (status, reason, len(text), extra, text)
    )


class _Front:
    def __init__(
        self,
        app: Any,
        config: Config,
        hypercorn: Any,
        lifespan_state: dict[str, Any],
        limits: ServerLimits,
    ) -> None:
        self.app = app
        self.config = config
        self.hypercorn = hypercorn
        #: What the app's lifespan startup kept (each scope has a copy).
        self.lifespan_state = lifespan_state
        self.limits = limits
        self._max_connections = limits.connections
        self._max_per_client = limits.connections_per_client
        #: Connections served now, all and by client address.
        self.open = 0
        self.by_client: dict[str | None, int] = {}
        self._lingering = 0

    async def connection(self, stream: trio.abc.Stream) -> None:
        # Admission: over the caps, a connection is answered and closed at
        # once (never served, never read beyond a moment).
        client = _peer_host(stream)
        if self.open >= self._max_connections:
            await self._refuse(stream, 503, b"Service Unavailable", b"too many connections")
            return
        if self.by_client.get(client, 0) >= self._max_per_client:
            await self._refuse(
                stream, 429, b"Too Many Requests", b"too many connections from your address"
            )
            return
        self.open += 1
        self.by_client[client] = self.by_client.get(client, 0) + 1
        # One connection's failure (hypercorn's own included: a header not
        # in ASCII can make it raise) must not end the server.
        try:
            await self._connection(stream, client)
        except Exception:
            _log.exception("serving a connection failed")
            with trio.CancelScope(shield=True):
                await stream.aclose()
        finally:
            self.open -= 1
            left = self.by_client[client] - 1
            if left:
                self.by_client[client] = left
            else:
                del self.by_client[client]

    async def _refuse(
        self, stream: trio.abc.Stream, status: int, reason: bytes, text: bytes
    ) -> None:
        """Answer ``status`` and close: at once, without reading the request
        (a TLS connection is closed, no handshake spent on it); what the
        client already sent is read and dropped for a moment, so that the
        close does not reset the answer away."""
        with trio.CancelScope(shield=True):
            if isinstance(stream, trio.SSLStream) or self._lingering >= _MAX_LINGERING:
                await stream.aclose()
                return
            self._lingering += 1
            try:
                retry = b"Retry-After: %d\r\n" % self.limits.retry_after
                with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                    await stream.send_all(_simple_response(status, reason, text + b"\n", retry))
                    if isinstance(stream, trio.abc.HalfCloseableStream):
                        await stream.send_eof()
                    with trio.move_on_after(0.5):
                        dropped = 0
                        while dropped < 65536 and (data := await stream.receive_some(16384)):
                            dropped += len(data)
            finally:
                self._lingering -= 1
                await stream.aclose()

    async def _connection(self, stream: trio.abc.Stream, client: str | None) -> None:
        head_timeout = self.limits.head_timeout
        if isinstance(stream, trio.SSLStream):
            try:
                with trio.fail_after(self.config.ssl_handshake_timeout):
                    await stream.do_handshake()
            except (trio.BrokenResourceError, trio.ClosedResourceError, trio.TooSlowError):
                with trio.CancelScope(shield=True):
                    await stream.aclose()
                return
            if stream.selected_alpn_protocol() == "h2":
                await self.hypercorn(_GivenBackTLS(stream, b"", head_timeout), client)
                return
        # The first head, under the head deadline (from the connection's
        # start): a head cut off is answered 408, a silent connection closed.
        head = b""
        whole = False
        with trio.move_on_after(head_timeout):
            try:
                while b"\r\n\r\n" not in head and len(head) < _MAX_HEAD:
                    data = await stream.receive_some(_MAX_HEAD)
                    if not data:
                        break
                    head += data
                whole = True
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                with trio.CancelScope(shield=True):
                    await stream.aclose()
                return
        if not whole:
            with trio.CancelScope(shield=True):
                if head:
                    with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                        await stream.send_all(
                            _simple_response(408, b"Request Timeout", b"the request head is late\n")
                        )
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
            await self.hypercorn(_GivenBackTLS(stream, head, head_timeout), client)
        else:
            assert isinstance(stream, trio.SocketStream)
            await self.hypercorn(_GivenBack(stream, head, head_timeout), client)


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
