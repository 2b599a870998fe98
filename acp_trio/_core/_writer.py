"""The writing part of a connection, and the transport it runs on.

The writer task takes whole frames from the :class:`Outbox` in FIFO order
and writes them; it is shielded, so no write is ever cut halfway through a
frame (only a close deadline stops a peer that stopped reading).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, final

import trio

from acp_trio._core._framed import FramedStream, FrameTransport
from acp_trio._core._message_stream import MessageStream, MessageTransport

if TYPE_CHECKING:
    from acp_trio._core._outbox import Outbox

__all__ = ["Writer", "frame_transport", "stock_stream"]

_log = logging.getLogger("acp_trio.connection")


def frame_transport(
    stream: trio.abc.Stream | FramedStream | MessageStream, max_message_size: int
) -> FrameTransport:
    """What a connection reads and writes frames on, for ``stream``."""
    if isinstance(stream, FramedStream | MessageTransport):
        return stream
    if isinstance(stream, MessageStream):
        return MessageTransport(stream)
    return FramedStream(stream, stream, max_message_size=max_message_size)


def stock_stream(transport: FrameTransport) -> bool:
    """Whether ``transport`` reads the stock way: frames already decoded are
    then taken without a coroutine per frame (eager handlers need that too:
    they trust ``frames_pending``)."""
    return type(transport) is MessageTransport or (
        type(transport).receive_frame is FramedStream.receive_frame
        and type(transport).receive_frame_nowait is FramedStream.receive_frame_nowait
    )


def readable_by_callers(transport: FrameTransport) -> FramedStream | MessageTransport | None:
    """``transport``, if a caller waiting for its reply may read it: a stock
    FramedStream reading a pipe, or a message stream that reads in bursts
    (such as our WebSocket); both can be interrupted."""
    if isinstance(transport, FramedStream):
        return transport if stock_stream(transport) and transport.reads_pipe else None
    if type(transport) is MessageTransport and transport.callers_may_read:
        return transport
    return None


@final
class Writer:
    """The writing part of a connection: the writer task and its scope."""

    __slots__ = ("_lost", "_outbox", "_scope", "_stream")

    def __init__(
        self,
        *,
        stream: FrameTransport,
        outbox: Outbox,
        lost: Callable[[str, BaseException | None], None],
    ) -> None:
        self._stream = stream
        self._outbox = outbox
        self._lost = lost
        # Shielded: only the close deadline stops it (give_up_at).
        self._scope = trio.CancelScope(shield=True)

    def give_up_at(self, deadline: float) -> None:
        """Closing: the writer stops at ``deadline`` if its output is not
        written by then (a peer that stopped reading); what is left is dropped."""
        self._scope.deadline = deadline

    async def run(self) -> None:
        """The writer task, until the outbox is closed and empty."""
        stream = self._stream
        outbox = self._outbox
        # A stock FramedStream's send_batch joins and calls send_frames: do
        # that here (one coroutine less per write, on the hot path).
        send_joined = (
            stream.send_frames
            if isinstance(stream, FramedStream)
            and type(stream).send_batch is FramedStream.send_batch
            else None
        )
        with self._scope:
            while (batch := await outbox.get_batch()) is not None:
                try:
                    if send_joined is not None:
                        await send_joined(b"".join(batch))
                    else:
                        await stream.send_batch(batch)
                except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
                    self._lost(f"connection lost while writing: {exc!r}", exc)
                    outbox.close()
                    dropped = outbox.clear()
                    if dropped:
                        _log.debug("dropped %d queued frames after a write failure", dropped)
                    return
        if self._scope.cancelled_caught:
            dropped = outbox.clear()
            _log.warning("output not flushed within close_timeout; %d frames dropped", dropped)
