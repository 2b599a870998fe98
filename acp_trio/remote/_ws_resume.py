"""Resumable WebSockets, server side (provisional: our reading of the
durable-transport draft after the RFD, whose frame shapes we could not
find; see the README). With resumable streams on, an ACP connection served
over WebSocket outlives its WebSocket for ``disconnect_timeout`` seconds,
and a new WebSocket can take it up:

- Cursors are implicit: the ``n``-th text frame each side sends on the ACP
  connection (over all its WebSockets) has cursor ``n``; WebSocket keeps
  order and loses nothing within one socket, so each side knows the cursor
  of what it received by counting. Binary frames are not counted (ignored).
- A new WebSocket whose first text frame is
  ``{"jsonrpc":"2.0","method":"stream/resume","params":{"connectionId":ID,"cursor":N}}``
  (``N``: how many frames the client received) takes up connection ``ID``:
  the server answers ``{"jsonrpc":"2.0","method":"stream/resumed","params":{"cursor":M}}``
  (``M``: how many the server received; the client sends again what it
  sent after it), then sends what it sent after ``N``, then goes on live.
  An unknown ``ID`` is closed with code ``4404``, a cursor no longer held
  with ``4409``.
- Each side acknowledges what it received, every ``window / 2`` frames:
  ``{"jsonrpc":"2.0","method":"stream/ack","params":{"cursor":N}}``, and
  never has more than ``window`` frames unacknowledged (its sends wait):
  so what the peer may have missed is always still held to send again
  (``window`` is the replay buffer's size). Control frames (``stream/*``)
  are not counted.
- ``{"jsonrpc":"2.0","method":"stream/close"}`` ends the ACP connection at
  once (as DELETE does over HTTP): a WebSocket closing otherwise may be a
  network failure (the ASGI server cannot tell us the close code).
- While no WebSocket is attached, what the agent sends waits (its writes
  block); after ``disconnect_timeout`` seconds the connection ends.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

import trio

from acp_trio._core._message_stream import oversized
from acp_trio._jsonrpc import OversizedFrame
from acp_trio.remote._http_connection import ReplayBuffer
from acp_trio.remote._limits import ServerLimits, check_structure
from acp_trio.remote._ws_server import ASGIReceive, ASGISend

__all__ = ["ACK", "CLOSE", "RESUME", "RESUMED", "Window", "WsSession", "control_frame"]

_log = logging.getLogger("acp_trio.remote")

RESUME = "stream/resume"
RESUMED = "stream/resumed"
CLOSE = "stream/close"
ACK = "stream/ack"
#: Close codes: the connection is unknown (ended), the cursor is gone.
UNKNOWN_CONNECTION = 4404
CURSOR_GONE = 4409


def control_frame(text: str) -> tuple[str, dict[str, Any]] | None:
    """``(method, params)`` if ``text`` is one of the stream control frames."""
    if '"stream/' not in text[:80]:
        return None
    try:
        obj = json.loads(text)
    except ValueError:
        return None
    if not isinstance(obj, dict) or "id" in obj:
        return None
    method = obj.get("method")
    if method not in (RESUME, RESUMED, CLOSE, ACK):
        return None
    params = obj.get("params")
    return method, params if isinstance(params, dict) else {}


def frame(method: str, **params: Any) -> str:
    """A control frame's text."""
    return json.dumps({"jsonrpc": "2.0", "method": method, "params": params})


class Window:
    """One side's count of frames sent and acknowledged: sends wait while
    ``size`` are unacknowledged, so the replay buffer (``size`` frames)
    always holds every frame the peer may have missed; and the count of
    frames received, acknowledged every ``size / 2``."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.acked = 0  # frames the peer said it received
        self._moved = trio.Event()
        self.received = 0
        self._acked_received = 0

    def on_ack(self, cursor: Any) -> None:
        if isinstance(cursor, int) and cursor > self.acked:
            self.acked = cursor
            self._moved.set()
            self._moved = trio.Event()

    async def wait_for_room(self, sent: int, stop: Callable[[], bool]) -> None:
        """Wait while ``sent`` frames leave no room (or until ``stop()``)."""
        while sent - self.acked >= self.size and not stop():
            await self._moved.wait()

    def wake(self) -> None:
        self._moved.set()
        self._moved = trio.Event()

    def ack_due(self) -> int | None:
        """The cursor to acknowledge now, if one is due."""
        if self.received - self._acked_received >= max(1, self.size // 2):
            self._acked_received = self.received
            return self.received
        return None


class WsSession:
    """One ACP connection over resumable WebSockets: the message stream its
    handler reads and writes, whichever WebSocket is attached now."""

    def __init__(
        self,
        connection_id: str,
        max_message_size: int,
        queue_size: int,
        replay_size: int,
        limits: ServerLimits | None = None,
    ) -> None:
        self.id = connection_id
        self._max_message_size = max_message_size
        self._limits = limits
        self._inbound_send, self._inbound = trio.open_memory_channel[bytes | OversizedFrame](
            queue_size
        )
        self.replay = ReplayBuffer(replay_size, 2 * max_message_size)
        self.window = Window(replay_size)
        self._send: ASGISend | None = None
        self._send_lock = trio.Lock()
        self._attached = trio.Event()
        self._current: trio.CancelScope | None = None
        #: Cancelled to end the connection (its handler runs inside).
        self.cancel_scope = trio.CancelScope()
        self.ended = False
        # Set when a WebSocket attaches / goes (each replaced by a fresh one
        # at the other change).
        self._reattached = trio.Event()
        self._detached = trio.Event()

    # -- the MessageStream side -------------------------------------------

    @property
    def max_message_size(self) -> int:
        return self._max_message_size

    async def receive_message(self) -> bytes | OversizedFrame | None:
        try:
            return await self._inbound.receive()
        except (trio.EndOfChannel, trio.ClosedResourceError):
            return None

    async def send_message(self, message: bytes) -> None:
        await self.window.wait_for_room(self.replay.last, lambda: self.ended)
        while self._send is None:
            if self.ended:
                raise trio.BrokenResourceError("the connection ended")
            await self._attached.wait()
        if self.ended:
            raise trio.BrokenResourceError("the connection ended")
        self.replay.add(message)  # kept first: a send cut short is replayed
        await self._write(self._send, message.decode("utf-8"))

    async def _write(self, send: ASGISend, text: str) -> None:
        try:
            async with self._send_lock:
                await send({"type": "websocket.send", "text": text})
        except Exception as exc:  # the WebSocket went: resumable
            _log.debug("WebSocket send failed (kept for a resume): %r", exc)

    async def aclose(self) -> None:
        self.end()

    # -- the WebSocket side -----------------------------------------------

    def end(self) -> None:
        if self.ended:
            return
        self.ended = True
        self._inbound_send.close()
        self._attached.set()
        self.window.wake()
        if self._current is not None:
            self._current.cancel()
        self.cancel_scope.cancel()

    async def attach(
        self,
        receive: ASGIReceive,
        send: ASGISend,
        replayed: list[tuple[int, bytes]] | None,
        first: str | None = None,
    ) -> bool:
        """Serve this connection on one WebSocket until it goes (or a newer
        one takes over, or the connection ends). ``replayed``: after a
        resume, what to send again (``None``: a new connection, whose
        ``first`` frame was read). Whether the WebSocket is still open."""
        if self._current is not None:
            self._current.cancel()  # an older WebSocket: replaced
        open_ = True
        with trio.CancelScope() as scope:
            self._current = scope
            if replayed is not None:
                async with self._send_lock:
                    resumed = frame(RESUMED, cursor=self.window.received)
                    await send({"type": "websocket.send", "text": resumed})
                    for _, message in replayed:
                        await send({"type": "websocket.send", "text": message.decode("utf-8")})
            self._send = send
            self._attached.set()
            self._reattached.set()
            self._detached = trio.Event()
            if first is not None:
                await self._deliver(first)
            while True:
                event = await receive()
                if event["type"] == "websocket.disconnect":
                    open_ = False
                    break
                text = event.get("text")
                if event["type"] != "websocket.receive" or text is None:
                    continue
                control = control_frame(text)
                if control is not None:
                    if control[0] == CLOSE:
                        self.end()
                        break
                    if control[0] == ACK:
                        self.window.on_ack(control[1].get("cursor"))
                    continue
                await self._deliver(text)
                cursor = self.window.ack_due()
                if cursor is not None:
                    await self._write(send, frame(ACK, cursor=cursor))
        if self._current is scope:
            self._current = None
            self._send = None
            self._attached = trio.Event()
            self._reattached = trio.Event()
            self._detached.set()
        return open_

    async def _deliver(self, text: str) -> None:
        data = text.encode("utf-8")
        item: bytes | OversizedFrame = data
        if len(data) > self._max_message_size:
            item = oversized(data, self._max_message_size)
        elif self._limits is not None:
            item = await check_structure(data, self._max_message_size, self._limits)
        try:
            await self._inbound_send.send(item)
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            return
        self.window.received += 1

    async def expire(self, limit: float) -> None:
        """End the connection once no WebSocket was attached for ``limit``
        seconds."""
        while not self.ended:
            await self._detached.wait()
            reattached = self._reattached
            with trio.move_on_after(limit):
                await reattached.wait()
            if not reattached.is_set() and not self.ended:
                _log.info("WebSocket connection %s not resumed in %.0f s: ended", self.id, limit)
                self.end()
