"""Whole messages in and out: the seam under the connection for transports
whose unit is a message (a WebSocket frame, an HTTP body, an SSE event)
rather than a byte stream.

A :class:`MessageStream` carries one JSON-RPC message (a JSON text, no line
end) per call. NDJSON over a byte stream is the other side of the seam
(:class:`~acp_trio._framed.FramedStream`); a :class:`~acp_trio.Connection`
takes either. Transports enforce the connection's size cap the same way on
both sides: a message over ``max_message_size`` bytes is not handed on
whole but as an :class:`~acp_trio._jsonrpc.OversizedFrame` (its size, its
first and last bytes), which the connection answers as it answers an
oversized line on stdio.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from acp_trio._framed import FramedStream
from acp_trio._jsonrpc import OversizedFrame
from acp_trio._jsonrpc._framing import _HEAD_SIZE, _TAIL_SIZE

__all__ = ["MessageFramedStream", "MessageStream", "oversized"]


@runtime_checkable
class MessageStream(Protocol):
    """A bidirectional stream of whole JSON-RPC messages."""

    @property
    def max_message_size(self) -> int:
        """The largest message, in bytes, received whole."""
        ...

    async def receive_message(self) -> bytes | OversizedFrame | None:
        """The next message (one JSON text, without a line end), an
        :class:`OversizedFrame` for one over the cap, or ``None`` once the
        peer closed. Raises ``trio.BrokenResourceError`` or
        ``trio.ClosedResourceError`` when the transport fails or was closed.
        Cancelling a wait loses no message."""
        ...

    async def send_message(self, message: bytes) -> None:
        """Send one message (one JSON text, without a line end). Raises as
        :meth:`receive_message` does. A cancelled send may have sent it or
        not; the connection never cancels a send halfway."""
        ...

    async def aclose(self) -> None:
        """Close the stream; the peer sees the end. Idempotent."""
        ...


def oversized(message: bytes | bytearray, limit: int) -> OversizedFrame:
    """The marker for a whole message over ``limit`` bytes, kept as the
    NDJSON decoder keeps an oversized line (first and last bytes)."""
    return OversizedFrame(
        len(message), limit, bytes(message[:_HEAD_SIZE]), bytes(message[-_TAIL_SIZE:])
    )


class MessageFramedStream(FramedStream):
    """A :class:`MessageStream` seen as the frames a connection reads and
    writes. Frames written by the connection end with ``\\n`` and may come
    several at once; each is sent as one message."""

    __slots__ = ("_messages",)

    def __init__(self, messages: MessageStream) -> None:
        # No byte streams: every FramedStream method that touches them is
        # overridden below.
        self._messages = messages
        self._send_fd = None
        self._receive_fd = None

    @property
    def max_message_size(self) -> int:
        return self._messages.max_message_size

    @property
    def buffered(self) -> int:
        return 0

    @property
    def frames_pending(self) -> bool:
        return False

    async def receive_frame(self) -> bytes | OversizedFrame | None:
        message = await self._messages.receive_message()
        if isinstance(message, bytes | bytearray) and len(message) > self.max_message_size:
            return oversized(message, self.max_message_size)
        return message

    def receive_frame_nowait(self) -> bytes | OversizedFrame | None:
        return None

    def direct_writer(self) -> None:
        return None

    async def send_frames(self, data: bytes) -> None:
        # The connection's frames are compact JSON, which never holds a raw
        # line end: splitting on b"\n" gives back exactly the messages.
        for frame in data.split(b"\n"):
            if frame:
                await self._messages.send_message(frame)

    async def aclose(self) -> None:
        await self._messages.aclose()
