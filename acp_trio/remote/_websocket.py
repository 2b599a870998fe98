"""A WebSocket on a Trio byte stream: the one both sides of the
WebSocket profile use (the server's front for an upgrade, the client's
connection).

Why our own and not a library's connection object: every message is a
frame, and a connection that writes each frame with a system call of its
own spends most of its time there. Here sends are written behind: a send
puts its frame in a bounded buffer and returns, and one task writes what
has gathered with one call. A sender waits only while more than
``write_buffer`` bytes wait to be written, so a peer that stops reading
still slows its sender down. Reads take whatever the socket has (up to
64 KiB) and parse every frame in it; the socket is read only when a
message is asked for, so a slow reader slows its peer.

The protocol (frames parsed and built, messages assembled, the closing
handshake, the limits) is :class:`~acp_trio.remote._ws_core.WebSocketCore`,
without I/O, which decides as wsproto's frame protocol does (a
differential test holds it to that) at a fraction of its cost (wsproto's
parser costs some 9 us a frame, several times what the rest of a message
costs); this module only drives it with Trio. The handshakes are wsproto's.
Control replies (pongs, closes) obey the write buffer's bound: while it is
over ``write_buffer`` bytes, nothing more is read. No extension is offered
or accepted (permessage-deflate would cost more CPU than it saves on
loopback-sized JSON-RPC messages).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence

import trio
from wsproto import ConnectionType, WSConnection
from wsproto.events import AcceptConnection, RejectConnection, RejectData, Request
from wsproto.utilities import LocalProtocolError, RemoteProtocolError

from acp_trio.remote._ws_core import FRAGMENT_COST, WebSocketCore
from acp_trio.remote._ws_frames import ABNORMAL, NORMAL, build_frame

__all__ = [
    "FRAGMENT_COST",
    "WebSocket",
    "WebSocketClosed",
    "WebSocketError",
    "WebSocketRejected",
    "client_handshake",
]

_READ_SIZE = 65536


class WebSocketError(Exception):
    """The WebSocket handshake failed (the base of the more specific
    :class:`WebSocketRejected`)."""


class WebSocketRejected(WebSocketError):
    """The server answered the upgrade with an HTTP response instead of
    accepting it: ``status_code``, ``headers`` (lower-case names) and
    ``body``."""

    def __init__(self, status_code: int, headers: list[tuple[str, str]], body: bytes) -> None:
        text = body.decode("utf-8", "replace").strip()
        super().__init__(
            f"the server refused the WebSocket: HTTP {status_code}" + (f": {text}" if text else "")
        )
        self.status_code = status_code
        self.headers = headers
        self.body = body


class WebSocketClosed(Exception):
    """The WebSocket is closed: ``code`` (1006: the connection was lost
    without a closing handshake) and ``reason`` from the side that closed
    it."""

    def __init__(self, code: int, reason: str = "") -> None:
        super().__init__(f"the WebSocket is closed (code {code}{': ' + reason if reason else ''})")
        self.code = code
        self.reason = reason


class WebSocket:
    """One open WebSocket (after its handshake) on ``stream``, carrying
    whole messages; ``client``: our side is the client (it masks what it
    sends). ``leftover``: bytes read with the handshake after it.

    Messages over ``max_message_size`` bytes close the WebSocket with 1009
    (each fragment of a message counting :data:`FRAGMENT_COST` bytes more).
    The writer (:meth:`run_writer`) must run in a nursery before anything
    is sent; :func:`client_handshake` and the server's front start it.
    """

    def __init__(
        self,
        stream: trio.abc.Stream,
        *,
        client: bool,
        max_message_size: int,
        write_buffer: int = 65536,
        handshake_headers: Sequence[tuple[bytes, bytes]] = (),
        leftover: bytes = b"",
    ) -> None:
        self._stream = stream
        self._limit = write_buffer
        self.handshake_headers = list(handshake_headers)
        # The protocol (sans I/O); what it must send goes through _put.
        self._core = WebSocketCore(
            client=client, max_message_size=max_message_size, send=self._put_quietly
        )
        self._core.receive_data(leftover)
        keys = self._core.keys
        self._next_key = None if keys is None else keys.next  # (bound once: per send)
        self._closed: WebSocketClosed | None = None
        self._reading = False
        self._read_done = trio.Event()  # set (and replaced) after each read
        self._read_scope: trio.CancelScope | None = None
        self._interrupted = False
        self._out: list[bytes] = []
        self._out_size = 0
        self._writing = False
        self._has_data = trio.Event()
        self._written = trio.Event()
        self._write_error: BaseException | None = None
        #: How long :meth:`aclose` waits for the peer (seconds).
        self.close_timeout = 5.0
        self._writer_scope: trio.CancelScope | None = None
        self._aclosed = False
        # A plain socket's descriptor (non-blocking, as Trio keeps it): with
        # nothing buffered and the writer idle, a frame is written at once
        # by its sender, which saves the writer's task switch per message
        # on request/reply traffic (what it leaves over is buffered).
        # (Asked each time: a closed socket's number may already be another's.)
        self._socket = stream.socket if type(stream) is trio.SocketStream else None

    @property
    def closed(self) -> WebSocketClosed | None:
        """Set once closing or closed: the code and reason (see
        :class:`WebSocketClosed`)."""
        if self._closed is None and (code := self._core.close_code) is not None:
            self._closed = WebSocketClosed(code, self._core.close_reason)
        return self._closed

    # -- writing ---------------------------------------------------------

    def _key(self) -> bytes | None:
        """A fresh masking key for a client's frame; ``None`` for a server's."""
        return None if self._next_key is None else self._next_key()

    def _put_quietly(self, data: bytes) -> None:
        """:meth:`_put` for the core's own frames (a lost connection is
        seen elsewhere)."""
        with contextlib.suppress(WebSocketClosed):
            self._put(data)

    async def run_writer(
        self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Write what sends gather, each gathering with one call, until
        the WebSocket is closed (or this task is cancelled)."""
        with trio.CancelScope() as self._writer_scope:
            task_status.started()
            while True:
                await self._has_data.wait()
                self._has_data = trio.Event()
                data = b"".join(self._out)
                self._out.clear()
                self._writing = True
                try:
                    await self._stream.send_all(data)
                except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                    self._write_error = exc
                    self._out_size = 0
                    self._written.set()
                    return
                finally:
                    self._writing = False
                self._out_size -= len(data)
                written, self._written = self._written, trio.Event()
                written.set()

    def _put(self, data: bytes) -> None:
        if self._write_error is not None:
            raise WebSocketClosed(ABNORMAL, f"the connection was lost: {self._write_error}")
        if (
            self._socket is not None
            and not self._out
            and not self._writing
            and (fd := self._socket.fileno()) >= 0
        ):
            try:
                written = os.write(fd, data)
            except OSError:
                written = 0  # the writer meets the error, if any, and reports it
            if written == len(data):
                return
            data = data[written:]
        self._out.append(data)
        self._out_size += len(data)
        self._has_data.set()

    async def _wait_for_room(self, limit: int) -> None:
        while self._out_size > limit and self._write_error is None:
            await self._written.wait()

    def _check_open(self) -> None:
        if self._core.sent_close or self._core.close_code is not None:
            raise self.closed or WebSocketClosed(NORMAL, "the WebSocket is closing")

    async def send_message(self, message: str | bytes) -> None:
        """Send ``message`` (text for a ``str``, binary for ``bytes``):
        returns once it is buffered, waiting while the buffer is over
        ``write_buffer`` bytes. Raises :class:`WebSocketClosed` once the
        WebSocket is closing or closed, or its connection is lost.
        Cancelled while waiting for room, the message is still sent (it
        was buffered first)."""
        if isinstance(message, str):
            await self.send_text(message.encode("utf-8"))
            return
        self._check_open()
        self._put(build_frame(0x2, bytes(message), self._key()))
        await self._after_put()

    async def send_text(self, message: bytes) -> None:
        """Send ``message``, UTF-8 already, as a text frame (not checked:
        the caller vouches for it); otherwise, cancellation included, as
        :meth:`send_message`."""
        self._check_open()
        self._put(build_frame(0x1, message, self._key()))
        await self._after_put()

    async def _after_put(self) -> None:
        if self._out_size > self._limit:
            await self._wait_for_room(self._limit)
        else:
            await trio.lowlevel.checkpoint()

    def send_text_nowait(self, message: bytes) -> bool:
        """:meth:`send_text` when it needs no wait: ``False`` (nothing
        sent) while the buffer is over ``write_buffer`` bytes or the
        WebSocket is closing or lost; then use :meth:`send_text`."""
        if (
            self._out_size > self._limit
            or self._core.close_code is not None
            or self._core.sent_close
            or self._write_error is not None
        ):
            return False
        self._put(build_frame(0x1, message, self._key()))
        return True

    async def flush(self) -> None:
        """Wait until everything sent so far is written (or the connection
        is lost). Cancelling the wait leaves the data to be written."""
        if self._out_size == 0 or self._write_error is not None:
            await trio.lowlevel.checkpoint()
            return
        await self._wait_for_room(0)

    # -- reading ---------------------------------------------------------

    async def get_message(self) -> str | bytes:
        """The next whole message (``str`` for text, ``bytes`` for
        binary). Answers pings; raises :class:`WebSocketClosed` when the
        peer closes (after answering its close), when the connection is
        lost (1006), or when the peer breaks the protocol or sends a
        message over the cap (after closing with 1002, 1007 or 1009).
        Cancelling a wait loses nothing: what was read stays buffered."""
        core = self._core
        while True:
            # (Also once we are closing: the peer's close frame is read
            # here, and messages still coming are dropped.)
            message = core.next_message()
            if message is not None:
                await trio.lowlevel.checkpoint_if_cancelled()
                await trio.lowlevel.cancel_shielded_checkpoint()
                return message
            if core.close_code is not None and self.closed is not None:
                await trio.lowlevel.checkpoint()
                raise self.closed
            if self._out_size > self._limit:
                # Our replies to its pings (and closes) wait to be written:
                # read no more until there is room, so a peer that sends
                # and never reads meets the same bound as everything else.
                await self._wait_for_room(self._limit)
                continue
            await self._read()

    def get_message_nowait(self) -> str | bytes | None:
        """The next whole message if one was already read, else ``None``
        (then use :meth:`get_message`)."""
        if self._core.close_code is not None:
            return None
        return self._core.next_message()

    @property
    def pending(self) -> bool:
        """Whether bytes already read wait to be taken."""
        return self._core.reader.buffered > 0

    def interrupt_reading(self) -> None:
        """Wake a task waiting in :meth:`get_message`: it raises
        :class:`WebSocketClosed` (1006) as if the connection were lost, and
        nothing is read after this (for a closing connection)."""
        self._interrupted = True
        if self._read_scope is not None:
            self._read_scope.cancel()

    async def _read(self) -> None:
        data: bytes | bytearray = b""
        if not self._interrupted:
            self._reading = True
            try:
                with trio.CancelScope() as self._read_scope:
                    data = await self._stream.receive_some(_READ_SIZE)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass
            finally:
                self._read_scope = None
                self._reading = False
                done, self._read_done = self._read_done, trio.Event()
                done.set()
        if not data:
            self._core.connection_lost()
            return
        self._core.receive_data(data)

    # -- closing ---------------------------------------------------------

    async def aclose(self, code: int = NORMAL, reason: str = "") -> None:
        """Close: write what is buffered, send a close frame, wait (up to
        ``close_timeout`` seconds) for the peer's, then close the byte
        stream. Idempotent; shielded from cancellation (bounded by
        ``close_timeout``)."""
        if self._aclosed:
            await trio.lowlevel.checkpoint()
            return
        self._aclosed = True
        with trio.CancelScope(shield=True), trio.move_on_after(self.close_timeout):
            core = self._core
            core.close(code, reason)
            await self.flush()
            # Wait for the peer's close frame, dropping what comes before it.
            while core.reading and not self._write_error:
                if self._reading:
                    # Another task is reading: see what it read first.
                    await self._read_done.wait()
                    continue
                core.next_message()
                if core.reading:
                    await self._read()
            await self.flush()
        if self._writer_scope is not None:
            self._writer_scope.cancel()
        with trio.CancelScope(shield=True):
            await self._stream.aclose()


async def client_handshake(
    stream: trio.abc.Stream,
    nursery: trio.Nursery,
    host: str,
    resource: str,
    *,
    headers: Sequence[tuple[bytes, bytes]] = (),
    max_message_size: int,
    write_buffer: int = 65536,
) -> WebSocket:
    """Open a WebSocket as its client over ``stream`` (its writer task in
    ``nursery``). Raises :class:`WebSocketRejected` when the server answers
    with an HTTP response, :class:`WebSocketError` for anything else that
    is not a WebSocket (the stream is left for the caller to close)."""
    connection = WSConnection(ConnectionType.CLIENT)
    await stream.send_all(
        connection.send(Request(host=host, target=resource, extra_headers=list(headers)))
    )
    rejected: RejectConnection | None = None
    body: list[bytes] = []
    done = False
    head = b""  # the response head, until it is whole
    while not done:
        try:
            data = await stream.receive_some(_READ_SIZE)
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            raise WebSocketError(f"the connection was lost during the handshake: {exc}") from exc
        leftover = b""
        if rejected is None:
            # Only the head goes to wsproto: what follows it is frames.
            head += data
            end = head.find(b"\r\n\r\n")
            if end < 0:
                if not data:
                    raise WebSocketError("the connection was closed during the handshake")
                if len(head) > _READ_SIZE:
                    raise WebSocketError("the server's handshake response is too long")
                continue
            data, leftover = (head, b"") if end < 0 else (head[: end + 4], head[end + 4 :])
        try:
            connection.receive_data(bytes(data) or None)
            events = list(connection.events())
            if leftover and any(isinstance(e, RejectConnection) for e in events):
                connection.receive_data(leftover)  # the start of the body
                events += connection.events()
        except (LocalProtocolError, RemoteProtocolError) as exc:
            raise WebSocketError(f"not a WebSocket handshake: {exc}") from exc
        for event in events:
            if isinstance(event, AcceptConnection):
                ws = WebSocket(
                    stream,
                    client=True,
                    max_message_size=max_message_size,
                    write_buffer=write_buffer,
                    handshake_headers=[(bytes(k), bytes(v)) for k, v in event.extra_headers],
                    leftover=leftover,
                )
                await nursery.start(ws.run_writer)
                return ws
            if isinstance(event, RejectConnection):
                rejected = event
                done = not event.has_body
            elif isinstance(event, RejectData):
                body.append(bytes(event.data))
                done = event.body_finished
        if not data and not done:
            if rejected is None:
                raise WebSocketError("the connection was closed during the handshake")
            done = True
    assert rejected is not None
    raise WebSocketRejected(
        rejected.status_code,
        [
            (bytes(k).decode("latin-1").lower(), bytes(v).decode("latin-1"))
            for k, v in rejected.headers
        ],
        b"".join(body),
    )
