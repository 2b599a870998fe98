"""The client side of the WebSocket profile, on our own WebSocket
(:mod:`acp_trio.remote._websocket`, wsproto underneath)."""

from __future__ import annotations

import functools
import ssl
import urllib.parse
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager

import trio

from acp_trio._core._groups import plain_exceptions
from acp_trio._core._message_stream import MessageStream, oversized
from acp_trio._jsonrpc import OversizedFrame, surely_within
from acp_trio.remote._limits import (
    DEFAULT_MAX_MESSAGE_SIZE,
    ServerLimits,
    check_structure,
    library_limit,
)
from acp_trio.remote._websocket import WebSocket, WebSocketClosed, client_handshake
from acp_trio.remote._ws_frames import TOO_BIG
from acp_trio.remote._ws_resume_client import ResumableWebSocketMessages, connection_id_of

__all__ = ["WebSocketMessages", "connect_websocket", "open_websocket_stream"]

CONNECTION_ID_HEADER = "acp-connection-id"


class WebSocketMessages(MessageStream):
    """A client WebSocket as a :class:`~acp_trio._core._message_stream.MessageStream`.

    The socket is read only when a message is asked for, so a slow reader
    slows the server down; sends are written behind, several frames to a
    write, within a bounded buffer (see :class:`~acp_trio.remote.WebSocket`).
    """

    def __init__(
        self,
        ws: WebSocket,
        max_message_size: int,
        *,
        limits: ServerLimits | None = None,
        first: bytes | None = None,
    ) -> None:
        self._ws = ws
        self._max_message_size = max_message_size
        self.connection_id: str | None = connection_id_of(ws)
        # A server's side: each message's JSON structure is checked first
        # (a message that needs the exact count waits for receive_message).
        self._limits = limits
        # A message read already (the first, by the server; or one that
        # receive_message_nowait could not check without waiting).
        self._held = first

    @property
    def max_message_size(self) -> int:
        return self._max_message_size

    @property
    def websocket(self) -> WebSocket:
        """The WebSocket this stream reads and writes (see
        :class:`~acp_trio.remote.WebSocket`)."""
        return self._ws

    async def receive_message(self) -> bytes | OversizedFrame | None:
        held, self._held = self._held, None
        if held is not None:
            return await self._checked(held)
        while True:
            try:
                message = await self._ws.get_message()
            except WebSocketClosed as exc:
                if exc.code == TOO_BIG:
                    raise trio.BrokenResourceError(
                        f"the WebSocket was closed: a message was too big "
                        f"({exc.reason or 'code 1009'})"
                    ) from exc
                return None
            if isinstance(message, bytes):
                continue  # binary frames are ignored
            return await self._checked(message.encode("utf-8"))

    async def _checked(self, data: bytes) -> bytes | OversizedFrame:
        if len(data) > self._max_message_size:
            return oversized(data, self._max_message_size)
        if self._limits is None:
            return data
        return await check_structure(data, self._max_message_size, self._limits)

    def receive_message_nowait(self) -> bytes | OversizedFrame | None:
        """A message already read, if any (text only; binary frames are
        skipped), without waiting."""
        if self._held is not None:
            return None
        while (message := self._ws.get_message_nowait()) is not None:
            if isinstance(message, bytes):
                continue
            data = message.encode("utf-8")
            if len(data) > self._max_message_size:
                return oversized(data, self._max_message_size)
            limits = self._limits
            if limits is not None and not surely_within(
                data, limits.max_json_depth, limits.max_json_values
            ):
                self._held = data  # counted by receive_message, in steps
                return None
            return data
        return None

    @property
    def messages_pending(self) -> bool:
        """Whether frames already read wait to be taken."""
        return self._held is not None or self._ws.pending

    def interrupt_reading(self) -> None:
        """Wake a task waiting for a message (it sees the end): the stream
        is about to be closed; nothing is read after this."""
        self._ws.interrupt_reading()

    def send_message_nowait(self, message: bytes) -> bool:
        """Send without waiting if the write buffer has room; ``False``
        (nothing sent) if not."""
        return self._ws.send_text_nowait(message)

    async def send_message(self, message: bytes) -> None:
        try:
            await self._ws.send_text(message)
        except WebSocketClosed as exc:
            raise trio.BrokenResourceError("the WebSocket is closed") from exc

    async def aclose(self) -> None:
        await self._ws.aclose()


def _headers(token: str | None, headers: Mapping[str, str] | None) -> list[tuple[bytes, bytes]]:
    result = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in (headers or {}).items()]
    if token is not None:
        result.append((b"authorization", f"Bearer {token}".encode("latin-1")))
    return result


def _target(url: str) -> tuple[str, int, str, str, bool]:
    """(host, port, Host header, resource, TLS) of a ``ws:``/``wss:`` URL."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("ws", "wss"):
        raise ValueError(f"a WebSocket URL starts with ws:// or wss://, not {url!r}")
    host = parts.hostname
    if not host:
        raise ValueError(f"no host in {url!r}")
    tls = parts.scheme == "wss"
    port = parts.port or (443 if tls else 80)
    name = f"[{host}]" if ":" in host else host
    host_header = name if port in (80, 443) else f"{name}:{port}"
    resource = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return host, port, host_header, resource, tls


@asynccontextmanager
async def open_websocket_stream(
    url: str,
    *,
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
    token: str | None = None,
    headers: Mapping[str, str] | None = None,
    connect_timeout: float = 30,
    write_buffer: int = 65536,
    ssl_context: ssl.SSLContext | None = None,
    resumable: bool = False,
) -> AsyncIterator[WebSocketMessages | ResumableWebSocketMessages]:
    """Open a WebSocket to an ACP server (``ws://host:port/acp``) for the
    duration of the block, as a message stream for
    :func:`~acp_trio.open_agent` or :func:`~acp_trio.lowlevel.open_connection`.

    ``token`` is sent as ``Authorization: Bearer <token>``. Messages over
    ``max_message_size`` bytes are answered as on stdio; the library's own
    limit is set a little above it (see :func:`library_limit`). The socket
    is read only when the connection asks for a message; sends wait while
    more than ``write_buffer`` bytes wait to be written.

    Raises ``OSError`` if no connection can be made, ``trio.TooSlowError``
    after ``connect_timeout`` seconds, and
    :class:`~acp_trio.remote.WebSocketRejected` (with the HTTP
    ``status_code``) if the server refuses the upgrade
    (:class:`~acp_trio.remote.WebSocketError` if it answers with something
    else). Leaving the block closes the WebSocket
    and its socket (bounded in time, also when cancelled).

    ``resumable=True`` (for a server serving resumable streams;
    provisional, see the README): a WebSocket lost is replaced by a new one
    that takes up the same ACP connection (``stream/resume``), nothing lost
    or repeated either way (:class:`ResumableWebSocketMessages`).
    """
    connect = functools.partial(
        connect_websocket,
        url,
        token=token,
        headers=headers,
        max_message_size=max_message_size,
        connect_timeout=connect_timeout,
        write_buffer=write_buffer,
        ssl_context=ssl_context,
    )
    with plain_exceptions():
        async with trio.open_nursery() as nursery:
            tcps: list[trio.abc.Stream] = []
            try:
                ws, tcp = await connect(nursery)
                tcps.append(tcp)
                stream: WebSocketMessages | ResumableWebSocketMessages
                if resumable:
                    stream = ResumableWebSocketMessages(
                        functools.partial(connect, nursery), ws, tcps, max_message_size
                    )
                else:
                    stream = WebSocketMessages(ws, max_message_size)
                try:
                    yield stream
                finally:
                    with trio.CancelScope(shield=True), trio.move_on_after(5):
                        await stream.aclose()
            finally:
                # Each socket is closed, also one whose WebSocket was lost.
                with trio.CancelScope(shield=True):
                    for tcp in tcps:
                        await tcp.aclose()
                nursery.cancel_scope.cancel()


async def connect_websocket(
    url: str,
    nursery: trio.Nursery,
    *,
    token: str | None,
    headers: Mapping[str, str] | None,
    max_message_size: int,
    connect_timeout: float,
    write_buffer: int,
    ssl_context: ssl.SSLContext | None,
) -> tuple[WebSocket, trio.abc.Stream]:
    """Open a client WebSocket (its writer task in ``nursery``); the
    WebSocket and its socket, which the caller closes."""
    host, port, host_header, resource, tls = _target(url)
    with trio.fail_after(connect_timeout):
        tcp: trio.SocketStream | trio.SSLStream[trio.SocketStream]
        if tls:
            tcp = await trio.open_ssl_over_tcp_stream(
                host,
                port,
                ssl_context=ssl_context or ssl.create_default_context(),
                https_compatible=True,
            )
        else:
            tcp = await trio.open_tcp_stream(host, port)
    try:
        with trio.fail_after(connect_timeout):
            ws = await client_handshake(
                tcp,
                nursery,
                host_header,
                resource,
                headers=_headers(token, headers),
                max_message_size=library_limit(max_message_size),
                write_buffer=write_buffer,
            )
    except BaseException:
        with trio.CancelScope(shield=True):
            await tcp.aclose()
        raise
    return ws, tcp
