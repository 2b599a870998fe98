"""Whole messages in and out: the seam under the connection for transports
whose unit is a message (a WebSocket frame, an HTTP body, an SSE event)
rather than a byte stream.

A :class:`MessageStream` carries one JSON-RPC message (a JSON text, no line
end) per call. NDJSON over a byte stream is the other side of the seam
(:class:`~acp_trio._core._framed.FramedStream`); a :class:`~acp_trio.lowlevel.Connection`
takes either. Transports enforce the connection's size cap the same way on
both sides: a message over ``max_message_size`` bytes is not handed on
whole but as an :class:`~acp_trio._jsonrpc.OversizedFrame` (its size, its
first and last bytes), which the connection answers as it answers an
oversized line on stdio.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from acp_trio._jsonrpc import OversizedFrame
from acp_trio._jsonrpc._framing import _HEAD_SIZE, _TAIL_SIZE

__all__ = ["MessageStream", "MessageTransport", "oversized"]


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
        """Close the stream; the peer sees the end. Idempotent; cancelled,
        it still closes the stream (as Trio's ``aclose`` does), then raises
        ``trio.Cancelled``."""
        ...


def oversized(message: bytes | bytearray, limit: int) -> OversizedFrame:
    """The marker for a whole message over ``limit`` bytes, kept as the
    NDJSON decoder keeps an oversized line (first and last bytes)."""
    return OversizedFrame(
        len(message), limit, bytes(message[:_HEAD_SIZE]), bytes(message[-_TAIL_SIZE:])
    )


class MessageTransport:
    """A :class:`MessageStream` as the connection's
    :class:`~acp_trio._core._framed.FrameTransport`: each message read is one
    frame (over the cap, its :class:`OversizedFrame` marker), each frame
    written is one message (without its line end)."""

    __slots__ = ("_messages",)

    def __init__(self, messages: MessageStream) -> None:
        self._messages = messages

    @property
    def max_message_size(self) -> int:
        """The largest message, in bytes, received whole."""
        return self._messages.max_message_size

    @property
    def buffered(self) -> int:
        """Nothing is held between messages."""
        return 0

    @property
    def frames_pending(self) -> bool:
        """Never: every message is taken as it is read."""
        return False

    async def receive_frame(self) -> bytes | OversizedFrame | None:
        """The next message, capped (see the module docstring)."""
        message = await self._messages.receive_message()
        if isinstance(message, bytes | bytearray) and len(message) > self.max_message_size:
            return oversized(message, self.max_message_size)
        return message

    def receive_frame_nowait(self) -> None:
        """Nothing is ever read ahead."""
        return None

    def direct_writer(self) -> None:
        """No write can be made without waiting."""
        return None

    async def send_batch(self, frames: list[bytes]) -> None:
        """Send each frame as one message, in order (cancelled, some may
        have been sent; the connection never cancels it halfway)."""
        for frame in frames:
            await self._messages.send_message(frame[:-1] if frame.endswith(b"\n") else frame)

    async def aclose(self) -> None:
        """Close the message stream."""
        await self._messages.aclose()
