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

from collections.abc import Callable
from typing import Protocol, runtime_checkable

from acp_trio._jsonrpc import OversizedFrame
from acp_trio._jsonrpc._framing import _HEAD_SIZE, _TAIL_SIZE

__all__ = ["BufferedMessageStream", "MessageStream", "MessageTransport", "oversized"]


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


@runtime_checkable
class BufferedMessageStream(MessageStream, Protocol):
    """A :class:`MessageStream` that also takes and gives messages without
    waiting (a WebSocket that reads many frames at once and writes behind):
    the connection then hands over bursts as it does on a pipe."""

    def receive_message_nowait(self) -> bytes | OversizedFrame | None:
        """A message already read, if any (capped as :meth:`receive_message`
        caps), without waiting; ``None``: use :meth:`receive_message`."""
        ...

    @property
    def messages_pending(self) -> bool:
        """Whether messages (or parts of them) already read wait to be
        taken (when unsure: ``True``)."""
        ...

    def send_message_nowait(self, message: bytes) -> bool:
        """Send ``message`` if that needs no wait; ``False`` (nothing sent)
        if it would: use :meth:`send_message`."""
        ...

    def interrupt_reading(self) -> None:
        """Wake a task waiting in :meth:`receive_message` (it then fails
        or sees the end): the stream is about to be closed, and nothing is
        read after this."""
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

    __slots__ = ("_buffered", "_messages")

    def __init__(self, messages: MessageStream) -> None:
        self._messages = messages
        self._buffered = messages if isinstance(messages, BufferedMessageStream) else None

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
        """Whether messages already read wait (a :class:`BufferedMessageStream`
        may hold some; another stream never does)."""
        return self._buffered is not None and self._buffered.messages_pending

    async def receive_frame(self) -> bytes | OversizedFrame | None:
        """The next message, capped (see the module docstring)."""
        message = await self._messages.receive_message()
        if isinstance(message, bytes | bytearray) and len(message) > self.max_message_size:
            return oversized(message, self.max_message_size)
        return message

    def receive_frame_nowait(self) -> bytes | OversizedFrame | None:
        """A message already read (a :class:`BufferedMessageStream`'s), else
        ``None``."""
        if self._buffered is None:
            return None
        message = self._buffered.receive_message_nowait()
        if isinstance(message, bytes | bytearray) and len(message) > self.max_message_size:
            return oversized(message, self.max_message_size)
        return message

    @property
    def callers_may_read(self) -> bool:
        """Whether a caller may read its own reply (see ``_read_right``):
        over a :class:`BufferedMessageStream`, which can be interrupted."""
        return self._buffered is not None

    def interrupt_reading(self) -> None:
        """Wake a task waiting to read: the stream is about to be closed
        (a :class:`BufferedMessageStream` only)."""
        if self._buffered is not None:
            self._buffered.interrupt_reading()

    def direct_writer(self) -> Callable[[bytes], int] | None:
        """For a :class:`BufferedMessageStream`: a function sending one
        frame (as one message) without waiting, returning its length, or 0
        if nothing was sent; else ``None``."""
        buffered = self._buffered
        if buffered is None:
            return None

        def write(frame: bytes) -> int:
            message = frame[:-1] if frame.endswith(b"\n") else frame
            return len(frame) if buffered.send_message_nowait(message) else 0

        return write

    async def send_batch(self, frames: list[bytes]) -> None:
        """Send each frame as one message, in order (cancelled, some may
        have been sent; the connection never cancels it halfway)."""
        for frame in frames:
            await self._messages.send_message(frame[:-1] if frame.endswith(b"\n") else frame)

    async def aclose(self) -> None:
        """Close the message stream."""
        await self._messages.aclose()
