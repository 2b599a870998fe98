"""The server side of the WebSocket profile: an ASGI WebSocket seen as a
:class:`~acp_trio._core._message_stream.MessageStream`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import trio

from acp_trio._core._message_stream import oversized
from acp_trio._jsonrpc import OversizedFrame
from acp_trio.remote._limits import ServerLimits, check_structure

__all__ = ["ASGIReceive", "ASGISend", "AsgiWebSocketMessages"]

ASGIReceive = Callable[[], Awaitable[MutableMapping[str, Any]]]
ASGISend = Callable[[MutableMapping[str, Any]], Awaitable[None]]


class AsgiWebSocketMessages:
    """One accepted ASGI WebSocket carrying one ACP connection: one JSON-RPC
    message per text frame; binary frames are ignored, as the RFD says.

    The ASGI server's receive queue is bounded (hypercorn: ``max_app_queue_size``),
    and a send waits until the frame is written, so a slow peer slows us down
    instead of growing a buffer.
    """

    def __init__(
        self,
        receive: ASGIReceive,
        send: ASGISend,
        max_message_size: int,
        *,
        limits: ServerLimits | None = None,
        first: bytes | None = None,
    ) -> None:
        self._receive = receive
        self._send = send
        self._max_message_size = max_message_size
        self._limits = limits
        self._first = first
        self._ended = False  # the peer disconnected
        self._closed = False  # we closed
        self.close_code: int | None = None

    @property
    def max_message_size(self) -> int:
        return self._max_message_size

    async def receive_message(self) -> bytes | OversizedFrame | None:
        first, self._first = self._first, None
        if first is not None:
            return await self._checked(first)
        while True:
            if self._closed:
                raise trio.ClosedResourceError("the WebSocket was closed")
            if self._ended:
                return None
            event = await self._receive()
            kind = event["type"]
            if kind == "websocket.disconnect":
                self._ended = True
                self.close_code = event.get("code")
                return None
            if kind != "websocket.receive":
                continue
            text = event.get("text")
            if text is None:
                continue  # a binary frame: ignored
            return await self._checked(str(text).encode("utf-8"))

    async def _checked(self, data: bytes) -> bytes | OversizedFrame:
        if len(data) > self._max_message_size:
            return oversized(data, self._max_message_size)
        if self._limits is None:
            return data
        return await check_structure(data, self._max_message_size, self._limits)

    async def send_message(self, message: bytes) -> None:
        if self._closed:
            raise trio.ClosedResourceError("the WebSocket was closed")
        if self._ended:
            raise trio.BrokenResourceError("the peer closed the WebSocket")
        await self._send({"type": "websocket.send", "text": message.decode("utf-8")})

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        if not self._ended:
            with trio.CancelScope(shield=True), trio.move_on_after(5):
                await self._send({"type": "websocket.close", "code": 1000})
