"""Resumable WebSockets, client side (provisional; the frames are described
in :mod:`acp_trio.remote._ws_resume`): when the WebSocket is lost, a new one
takes up the same ACP connection with ``stream/resume``; each side sends
again what the other had not received."""

from __future__ import annotations

import contextlib
import logging
import random
from collections.abc import Awaitable, Callable
from typing import NoReturn

import trio

from acp_trio._core._message_stream import MessageStream, oversized
from acp_trio._jsonrpc import OversizedFrame
from acp_trio.remote._http_connection import ReplayBuffer
from acp_trio.remote._websocket import WebSocket, WebSocketClosed, WebSocketError
from acp_trio.remote._ws_frames import TOO_BIG
from acp_trio.remote._ws_resume import (
    ACK,
    CLOSE,
    CURSOR_GONE,
    RESUME,
    RESUMED,
    UNKNOWN_CONNECTION,
    Window,
    control_frame,
    frame,
)

__all__ = ["ResumableWebSocketMessages"]

_log = logging.getLogger("acp_trio.remote")

CONNECTION_ID_HEADER = "acp-connection-id"

Connect = Callable[[], Awaitable[tuple[WebSocket, trio.abc.Stream]]]


def connection_id_of(ws: WebSocket) -> str | None:
    """The ``Acp-Connection-Id`` the server gave in its handshake, if any."""
    for name, value in ws.handshake_headers:
        if name.decode("latin-1").lower() == CONNECTION_ID_HEADER:
            return value.decode("latin-1")
    return None


class ResumableWebSocketMessages(MessageStream):
    """A client WebSocket that is replaced, not ended, when lost: made by
    :func:`~acp_trio.remote.open_websocket_stream` with ``resumable=True``.
    Up to ``attempts`` tries in a row, with exponential backoff and jitter
    up to ``max_backoff`` seconds; the last ``replay_size`` messages sent
    are kept to send again. Fails with ``trio.BrokenResourceError`` when it
    cannot resume (the server no longer holds what we missed: close code
    ``4409``; out of attempts); ends (``None``) when the server no longer
    knows the connection (``4404``: it ended)."""

    def __init__(
        self,
        connect: Connect,
        ws: WebSocket,
        sockets: list[trio.abc.Stream],
        max_message_size: int,
        *,
        replay_size: int = 256,
        attempts: int = 8,
        max_backoff: float = 5.0,
        handshake_timeout: float = 10.0,
    ) -> None:
        self._connect = connect
        self._ws = ws
        self._sockets = sockets  # every socket opened, closed by the owner
        self._max_message_size = max_message_size
        self._attempts = attempts
        self._max_backoff = max_backoff
        self._handshake_timeout = handshake_timeout
        self.connection_id = connection_id_of(ws)
        self._window = Window(replay_size)
        self._sent = ReplayBuffer(replay_size)
        self._resent_upto = 0
        self._generation = 0
        self._lock = trio.Lock()
        self._closing = False
        self._ended = False
        self._broken: BaseException | None = None
        #: How many times a lost WebSocket was replaced.
        self.resumes = 0

    @property
    def max_message_size(self) -> int:
        return self._max_message_size

    @property
    def websocket(self) -> WebSocket:
        """The WebSocket in use now."""
        return self._ws

    def _give_up(self, reason: str) -> NoReturn:
        self._broken = trio.BrokenResourceError(reason)
        self._check()
        raise AssertionError("unreachable")  # pragma: no cover

    def _check(self) -> None:
        if self._broken is not None:
            self._window.wake()
            raise trio.BrokenResourceError(str(self._broken)) from self._broken

    def _over(self) -> bool:
        return self._ended or self._closing

    async def receive_message(self) -> bytes | OversizedFrame | None:
        while True:
            if self._over():
                return None
            self._check()
            ws, generation = self._ws, self._generation
            try:
                message = await ws.get_message()
            except WebSocketClosed as exc:
                if self._over():
                    return None
                if exc.code == TOO_BIG:
                    raise trio.BrokenResourceError(
                        f"the WebSocket was closed: a message was too big "
                        f"({exc.reason or 'code 1009'})"
                    ) from exc
                await self._resume(generation)
                continue
            if isinstance(message, bytes):
                continue  # binary frames are ignored (and not counted)
            control = control_frame(message)
            if control is not None:
                if control[0] == ACK:
                    self._window.on_ack(control[1].get("cursor"))
                continue
            self._window.received += 1
            cursor = self._window.ack_due()
            if cursor is not None:
                # (Lost with the WebSocket? The resume acknowledges it.)
                with contextlib.suppress(WebSocketClosed):
                    await ws.send_message(frame(ACK, cursor=cursor))
            data = message.encode("utf-8")
            if len(data) > self._max_message_size:
                return oversized(data, self._max_message_size)
            return data

    async def send_message(self, message: bytes) -> None:
        if self._closing:
            raise trio.ClosedResourceError("the WebSocket was closed")
        await self._window.wait_for_room(self._sent.last, self._over)
        if self._closing:
            raise trio.ClosedResourceError("the WebSocket was closed")
        cursor = self._sent.add(message)  # kept first: a send cut short is sent again
        while True:
            if self._ended:
                raise trio.BrokenResourceError("the server ended the connection")
            self._check()
            ws, generation = self._ws, self._generation
            try:
                await ws.send_text(message)
                return
            except WebSocketClosed as exc:
                if self._closing:
                    raise trio.ClosedResourceError("the WebSocket was closed") from exc
                await self._resume(generation)
                if cursor <= self._resent_upto:
                    return  # the resume sent it

    async def _resume(self, generation: int) -> None:
        """Replace the lost WebSocket (once, whichever task saw it go)."""
        async with self._lock:
            if self._generation != generation or self._ended or self._closing:
                return
            self._check()
            failures = 0
            while True:
                if failures:
                    if failures >= self._attempts:
                        self._give_up(f"the WebSocket could not be resumed in {failures} tries")
                    delay = min(self._max_backoff, 0.05 * 2**failures)
                    await trio.sleep(delay * (0.5 + random.random() / 2))
                failures += 1
                try:
                    if await self._try_resume():
                        return
                except (OSError, trio.TooSlowError, WebSocketError) as exc:
                    _log.debug("resuming the WebSocket failed: %r", exc)

    async def _try_resume(self) -> bool:
        ws, socket = await self._connect()
        self._sockets.append(socket)
        try:
            done = await self._handshake(ws)
        except BaseException:
            with trio.CancelScope(shield=True), trio.move_on_after(1):
                await ws.aclose()
            raise
        if not done:
            return False
        self._resent_upto = self._sent.last
        old, self._ws = self._ws, ws
        self._generation += 1
        self.resumes += 1
        with trio.CancelScope(shield=True), trio.move_on_after(1):
            await old.aclose()
        return True

    async def _handshake(self, ws: WebSocket) -> bool:
        """``stream/resume`` on ``ws``, and send again what the server
        missed; whether ``ws`` now carries the connection."""
        try:
            cursor = self._window.received
            await ws.send_message(frame(RESUME, connectionId=self.connection_id, cursor=cursor))
            first: str | bytes = b""
            with trio.move_on_after(self._handshake_timeout):
                while isinstance(first, bytes):
                    first = await ws.get_message()
            if isinstance(first, bytes):
                # It took the WebSocket but does not answer: it will not.
                self._give_up(f"the server does not resume WebSockets (no {RESUMED})")
            control = control_frame(first)
            if control is None or control[0] != RESUMED:
                self._give_up(
                    f"the server does not resume WebSockets (it answered {first[:200]!r})"
                )
            self._window.on_ack(control[1].get("cursor"))
            missed = self._sent.after(str(control[1].get("cursor")))
            if missed is None:
                self._give_up("the server missed messages we no longer hold: cannot resume")
            for _, message in missed:
                await ws.send_text(message)
        except WebSocketClosed as exc:
            code = exc.code
            if code == UNKNOWN_CONNECTION:
                self._ended = True
                self._window.wake()
                return True
            if code == CURSOR_GONE:
                self._give_up("the server no longer holds what we missed (4409): cannot resume")
            return False
        return True

    async def aclose(self) -> None:
        if self._closing:
            return
        self._closing = True
        self._window.wake()
        with trio.CancelScope(shield=True), trio.move_on_after(5):
            # The end of the connection, not a network failure.
            with contextlib.suppress(WebSocketClosed):
                await self._ws.send_message(frame(CLOSE))
            await self._ws.aclose()
