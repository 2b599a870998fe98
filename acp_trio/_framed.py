"""A framed, message-level view of Trio byte streams.

:class:`FramedStream` is what a :class:`~acp_trio.Connection` reads from and
writes to: whole NDJSON frames, over any ``trio.abc.ReceiveStream`` and
``trio.abc.SendStream`` (a socket, a pair of pipes, a memory stream).
The sans-IO :class:`~acp_trio._jsonrpc.LineDecoder` does the splitting.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable
from typing import cast

import trio

from acp_trio._jsonrpc import DEFAULT_MAX_MESSAGE_SIZE, LineDecoder, OversizedFrame

__all__ = ["RECEIVE_SIZE", "FramedStream"]

# One read: large enough that a pipe full of small frames is one call.
RECEIVE_SIZE = 256 * 1024


def _raw_fd(stream: trio.abc.SendStream) -> int | None:
    """The file descriptor under a Trio pipe stream (FdStream puts it in
    non-blocking mode), if there is one."""
    if isinstance(stream, trio.StapledStream):
        stream = stream.send_stream
    if isinstance(stream, trio.lowlevel.FdStream):
        return stream.fileno()
    return None


class FramedStream:
    """Frames in and out of a receive stream and a send stream.

    The two may be the same object (a socket) or two (a process's stdout and
    stdin). :meth:`aclose` closes both, once.
    """

    __slots__ = ("_decoder", "_eof", "_frames", "_receive", "_send", "_send_fd")

    def __init__(
        self,
        send_stream: trio.abc.SendStream,
        receive_stream: trio.abc.ReceiveStream,
        *,
        max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
    ) -> None:
        self._send = send_stream
        self._receive = receive_stream
        self._decoder = LineDecoder(max_message_size)
        self._frames: deque[bytes | OversizedFrame] = deque()
        self._eof = False
        self._send_fd = _raw_fd(send_stream)

    @property
    def max_message_size(self) -> int:
        return self._decoder.max_message_size

    @property
    def buffered(self) -> int:
        """Bytes of an unfinished frame held in memory."""
        return self._decoder.buffered

    async def receive_frame(self) -> bytes | OversizedFrame | None:
        """The next frame, or ``None`` at end of stream.

        Raises what the underlying stream raises (``trio.BrokenResourceError``,
        ``trio.ClosedResourceError``).
        """
        frames = self._frames
        while not frames:
            if self._eof:
                return None
            data = await self._receive.receive_some(RECEIVE_SIZE)
            if data:
                frames.extend(self._decoder.feed(bytes(data)))
            else:
                self._eof = True
                frames.extend(self._decoder.feed_eof())
        return frames.popleft()

    def receive_frame_nowait(self) -> bytes | OversizedFrame | None:
        """A frame already decoded, if any, without reading (``None`` if none)."""
        return self._frames.popleft() if self._frames else None

    def direct_writer(self) -> Callable[[bytes], int] | None:
        """A function writing without blocking (``os.write`` on the send
        stream's non-blocking file descriptor), or ``None`` when the send
        stream has no descriptor. Only to be called while no ``send_frames``
        is in progress."""
        if self._send_fd is None:
            return None
        return self._write_now

    def _write_now(self, data: bytes) -> int:
        fd = self._send_fd
        if fd is None:
            return 0
        try:
            return os.write(fd, data)
        except BlockingIOError:
            return 0

    async def send_frames(self, data: bytes) -> None:
        """Write whole frames (already joined)."""
        await self._send.send_all(data)

    async def aclose(self) -> None:
        """Close both streams (the send side first: the peer then sees EOF)."""
        self._send_fd = None
        try:
            await self._send.aclose()
        finally:
            if self._receive is not cast(object, self._send):
                await self._receive.aclose()
