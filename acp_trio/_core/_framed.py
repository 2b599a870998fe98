"""The message-level seam under the connection, and its NDJSON side.

:class:`FrameTransport` is what a :class:`~acp_trio.lowlevel.Connection` reads from
and writes to: whole frames (one JSON-RPC message each). It has two
implementations:

- :class:`FramedStream`: NDJSON over any ``trio.abc.ReceiveStream`` and
  ``trio.abc.SendStream`` (a socket, a pair of pipes, a memory stream), with
  the stdio fast paths (reading a pipe's descriptor directly, writing at
  once when the writer is idle). The sans-IO
  :class:`~acp_trio._jsonrpc.LineDecoder` does the splitting.
- :class:`~acp_trio._core._message_stream.MessageTransport`: whole messages from a
  :class:`~acp_trio._core._message_stream.MessageStream` (WebSocket, HTTP).
"""

from __future__ import annotations

import errno
import os
import stat
from collections import deque
from collections.abc import Callable
from typing import Protocol, cast

import trio

from acp_trio._jsonrpc import DEFAULT_MAX_MESSAGE_SIZE, LineDecoder, OversizedFrame

__all__ = ["RECEIVE_SIZE", "FrameTransport", "FramedStream"]

# One read: a default pipe's whole capacity (16 pages of 4 KiB), so that a
# pipe full of small frames is one call, and no more. Python allocates the
# full size for every read and then shrinks it; from 128 KiB (glibc's initial
# mmap threshold) that is an mmap, an mremap and an munmap per read, three
# system calls and fresh zeroed pages on every message, unless something
# earlier in the process happened to raise the threshold.
RECEIVE_SIZE = 64 * 1024

try:
    import fcntl as _fcntl_module
except ImportError:  # pragma: no cover - Windows
    _fcntl_module = None  # type: ignore[assignment]
# Linux only (Python 3.10+ names it).
_F_GETPIPE_SZ: int | None = getattr(_fcntl_module, "F_GETPIPE_SZ", None)


class FrameTransport(Protocol):
    """Whole frames in and out: what the connection reads and writes.

    A frame read is one message without its line end (or the
    :class:`~acp_trio._jsonrpc.OversizedFrame` marker of one over the cap); a
    frame written ends with ``\\n`` (compact JSON holds no other line end).
    """

    @property
    def max_message_size(self) -> int:
        """The largest frame, in bytes, read whole."""
        ...

    @property
    def buffered(self) -> int:
        """Bytes of an unfinished frame held in memory."""
        ...

    @property
    def frames_pending(self) -> bool:
        """Whether frames already read wait to be taken (a request read
        while one waits is not run eagerly: a cancel may be behind it)."""
        ...

    async def receive_frame(self) -> bytes | OversizedFrame | None:
        """The next frame, or ``None`` at the end. Cancelling loses nothing."""
        ...

    def receive_frame_nowait(self) -> bytes | OversizedFrame | None:
        """A frame already read, without waiting (``None`` if none)."""
        ...

    def direct_writer(self) -> Callable[[bytes], int] | None:
        """A function writing without blocking, or ``None``."""
        ...

    async def send_batch(self, frames: list[bytes]) -> None:
        """Write whole frames, in order. The connection never cancels it
        halfway (its writer is shielded)."""
        ...

    async def aclose(self) -> None:
        """Close; the peer sees the end."""
        ...


def _big_read_size(fd: int) -> int:
    """From how many bytes a read of ``fd`` may have left more behind: half
    a pipe's capacity (a read cannot return more than the pipe holds, and a
    pipe filled by many small writes blocks its writer well before its
    capacity: each write takes a fresh page unless it fits the last one),
    else half of :data:`RECEIVE_SIZE`; ``0`` for a descriptor epoll cannot
    wait on (a regular file, which never blocks), so that it is always read
    directly. Misjudging costs little either way: one read that finds
    nothing, or one wait that returns at once."""
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
            return 0
        if stat.S_ISFIFO(mode) and _F_GETPIPE_SZ is not None:
            return min(RECEIVE_SIZE, _fcntl_module.fcntl(fd, _F_GETPIPE_SZ)) // 2
    except OSError:
        pass
    return RECEIVE_SIZE // 2


def _raw_fd(stream: trio.abc.SendStream) -> int | None:
    """The file descriptor under a Trio pipe stream (FdStream puts it in
    non-blocking mode), if there is one."""
    if isinstance(stream, trio.StapledStream):
        stream = stream.send_stream
    if isinstance(stream, trio.lowlevel.FdStream):
        return stream.fileno()
    return None


def _raw_receive(stream: trio.abc.ReceiveStream) -> trio.lowlevel.FdStream | None:
    """The ``FdStream`` a receive stream reads from, if reading its
    descriptor directly is equivalent: a bare ``FdStream``, the receive side
    of a ``StapledStream``, or a wrapper naming it as ``raw_fd_stream``
    (whose own ``receive_some`` is still used once data ends)."""
    if isinstance(stream, trio.StapledStream):
        stream = stream.receive_stream
    if isinstance(stream, trio.lowlevel.FdStream):
        return stream
    raw = getattr(stream, "raw_fd_stream", None)
    return raw if isinstance(raw, trio.lowlevel.FdStream) else None


class FramedStream:
    """Frames in and out of a receive stream and a send stream.

    The two may be the same object (a socket) or two (a process's stdout and
    stdin). :meth:`aclose` closes both, once.
    """

    __slots__ = (
        "_big_read",
        "_decoder",
        "_drained",
        "_eof",
        "_frames",
        "_interrupted",
        "_receive",
        "_receive_fd",
        "_send",
        "_send_fd",
    )

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
        self._receive_fd = _raw_receive(receive_stream)
        self._interrupted = False
        self._drained = False
        self._big_read = (
            _big_read_size(self._receive_fd.fileno()) if self._receive_fd is not None else 0
        )

    @property
    def max_message_size(self) -> int:
        """The largest frame, in bytes, read whole; a longer one comes out as
        an ``OversizedFrame`` marker instead.
        """
        return self._decoder.max_message_size

    @property
    def reads_pipe(self) -> bool:
        """Whether reading is from a pipe's descriptor (see
        :meth:`interrupt_reading`)."""
        return self._receive_fd is not None

    def interrupt_reading(self) -> None:
        """Wake a task waiting to read the pipe with
        ``trio.ClosedResourceError``: the stream is about to be closed.
        (Only for a pipe: see :attr:`reads_pipe`.)"""
        if self._receive_fd is not None:
            self._interrupted = True
            fd = self._receive_fd.fileno()
            if fd >= 0:
                trio.lowlevel.notify_closing(fd)

    # What of the input is held in memory: part of a frame, whole frames.

    @property
    def buffered(self) -> int:
        """Bytes of an unfinished frame held in memory."""
        return self._decoder.buffered

    @property
    def frames_pending(self) -> bool:
        """Whether frames already read wait to be taken."""
        return bool(self._frames)

    async def receive_frame(self) -> bytes | OversizedFrame | None:
        """The next frame, or ``None`` at end of stream.

        Raises what the underlying stream raises (``trio.BrokenResourceError``,
        ``trio.ClosedResourceError``). Cancelling a wait loses nothing: data
        already read stays buffered for the next call.
        """
        frames = self._frames
        while not frames:
            if self._eof:
                return None
            raw = self._receive_fd
            data: bytes | bytearray
            if raw is not None:
                data = await self._read_fd(raw)
                if not data:  # the wrapper's own end-of-stream handling
                    self._receive_fd = None
                    data = await self._receive.receive_some(RECEIVE_SIZE)
            else:
                data = await self._receive.receive_some(RECEIVE_SIZE)
            if data:
                data = bytes(data)
                # One whole line (a request or a reply): no list, no queue.
                line = self._decoder.feed_line(data)
                if line is not None:
                    return line
                frames.extend(self._decoder.feed(data))
            else:
                self._eof = True
                frames.extend(self._decoder.feed_eof())
        return frames.popleft()

    async def _read_fd(self, stream: trio.lowlevel.FdStream) -> bytes:
        """One read from a pipe, with exactly one schedule point.

        ``FdStream.receive_some`` yields twice when it has to wait (the wait,
        then a second yield), which on a request/response round trip is one
        more pass of the scheduler per message. Here a wait is the only
        yield; data that is already there costs one that cannot be
        cancelled, so that data once read is never dropped by a cancel.

        After a small read (the pipe was emptied) the next read waits first
        instead of trying the pipe: a try that finds it empty costs a raised
        ``BlockingIOError``, and the wait sees data that came meanwhile at
        once (epoll reports a readable pipe as soon as it is waited on).
        After a big read (see :func:`_big_read_size`) the next one tries the
        pipe first.
        """
        found_empty = False
        while True:
            if not self._drained:
                await trio.lowlevel.checkpoint_if_cancelled()
                try:
                    data = os.read(stream.fileno(), RECEIVE_SIZE)
                except BlockingIOError:
                    found_empty = True
                except OSError as exc:
                    if exc.errno == errno.EBADF:  # closed under us (fileno() is -1)
                        raise trio.ClosedResourceError("the stream was closed") from None
                    raise trio.BrokenResourceError from exc
                else:
                    self._drained = len(data) < self._big_read
                    await trio.lowlevel.cancel_shielded_checkpoint()
                    return data
            if self._interrupted:  # (a wait now would outlast notify_closing)
                raise trio.ClosedResourceError("reading was interrupted: the stream is closing")
            try:
                await trio.lowlevel.wait_readable(stream.fileno())
            except OSError as exc:
                if exc.errno == errno.EPERM:
                    if found_empty:
                        # Neither waited on nor read: trying again would
                        # spin without a schedule point.
                        raise trio.BrokenResourceError(
                            "the stream's descriptor can neither be waited on nor read now"
                        ) from exc
                    # Not a descriptor epoll can wait on (a regular file
                    # fstat did not recognise): it never blocks, so it is
                    # read directly from now on.
                    self._big_read = 0
                    self._drained = False
                    continue
                raise trio.ClosedResourceError("the stream was closed") from exc
            try:
                data = os.read(stream.fileno(), RECEIVE_SIZE)
            except BlockingIOError:
                self._drained = True
                continue  # woken without data: wait again
            except OSError as exc:
                if exc.errno == errno.EBADF:
                    raise trio.ClosedResourceError("the stream was closed") from None
                raise trio.BrokenResourceError from exc
            self._drained = len(data) < self._big_read
            return data

    def unread(self, frame: bytes) -> None:
        """Put back a frame just taken: it is the next one taken again."""
        self._frames.appendleft(frame)

    def receive_frame_nowait(self) -> bytes | OversizedFrame | None:
        """A frame already decoded, if any, without reading (``None`` if none)."""
        return self._frames.popleft() if self._frames else None

    def direct_writer(self) -> Callable[[bytes], int] | None:
        """A function writing without blocking (``os.write`` on the send
        stream's non-blocking file descriptor), or ``None`` when the send
        stream has no descriptor. Only to be called while no ``send_batch``
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
        """Write whole frames (already joined).

        Raises what the underlying stream raises. A cancelled write may have
        sent part of the data: the stream is then unusable for frames (the
        connection never cancels a write halfway).
        """
        await self._send.send_all(data)

    async def send_batch(self, frames: list[bytes]) -> None:
        """Write whole frames (each with its line end) as one write, with
        :meth:`send_frames` (which a subclass may override). Cancelled, as
        :meth:`send_frames`."""
        await self.send_frames(b"".join(frames))

    async def aclose(self) -> None:
        """Close both streams (the send side first: the peer then sees EOF).

        Idempotent per stream; cancelled, it still closes both (as Trio's
        ``aclose`` does) and then raises ``trio.Cancelled``.
        """
        self._send_fd = None
        try:
            await self._send.aclose()
        finally:
            if self._receive is not cast(object, self._send):
                await self._receive.aclose()
