"""The agent side of the stdio transport: the protocol on fds 0 and 1.

While :func:`open_stdio_stream` is open, file descriptor 1 belongs to the
protocol alone. The real stdout is kept on a private duplicate, and fd 1 is
pointed at stderr, so ``print()``, ``sys.stdout.write`` and stray writes from
C extensions or child processes that inherited fd 1 all land on stderr
instead of corrupting the JSON stream.

Pipes and sockets are read and written with ``trio.lowlevel.FdStream``.
Terminals, regular files and ``/dev/null`` are not put into non-blocking mode
(that would leak to every other user of the same open file); they are served
by blocking calls in a worker thread instead.
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import trio

__all__ = ["StdioStream", "open_stdio_stream"]

StdioStream = trio.StapledStream[trio.abc.Stream, trio.abc.Stream]


def _is_pollable(fd: int) -> bool:
    mode = os.fstat(fd).st_mode
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


class _ThreadedFdStream(trio.abc.Stream):
    """Blocking reads and writes of one fd, run in worker threads."""

    def __init__(self, fd: int, *, readable: bool) -> None:
        self._fd = fd
        self._readable = readable
        self._closed = False

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        if self._closed:
            raise trio.ClosedResourceError("stream is closed")
        size = max_bytes or 65536
        # A blocked read cannot be interrupted; on cancellation the thread is
        # left to finish on its own (only at process exit, for a terminal).
        return await trio.to_thread.run_sync(os.read, self._fd, size, abandon_on_cancel=True)

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        if self._closed:
            raise trio.ClosedResourceError("stream is closed")
        view = memoryview(data)

        def write_all() -> None:
            written = 0
            while written < len(view):
                written += os.write(self._fd, view[written:])

        try:
            await trio.to_thread.run_sync(write_all)
        except OSError as exc:
            raise trio.BrokenResourceError(str(exc)) from exc

    async def wait_send_all_might_not_block(self) -> None:
        await trio.lowlevel.checkpoint()

    async def aclose(self) -> None:
        if not self._closed:
            self._closed = True
            os.close(self._fd)
        await trio.lowlevel.checkpoint()


def _fd_stream(fd: int, *, readable: bool) -> trio.abc.Stream:
    if _is_pollable(fd):
        return trio.lowlevel.FdStream(fd)
    return _ThreadedFdStream(fd, readable=readable)


@asynccontextmanager
async def open_stdio_stream() -> AsyncIterator[
    trio.StapledStream[trio.abc.Stream, trio.abc.Stream]
]:
    """This process's stdin and stdout as one Trio stream, for an agent.

    While open, fd 1 (and so ``sys.stdout``) writes to stderr; on exit fd 1 is
    restored. Unix only. Leaving the block, also by an exception or a
    cancellation, closes the stream shielded from the cancellation, then
    restores fd 1.
    """
    sys.stdout.flush()
    protocol_out = os.dup(1)
    saved_stdout = os.dup(1)
    protocol_in = os.dup(0)
    os.dup2(2, 1)
    stream = trio.StapledStream(
        _fd_stream(protocol_out, readable=False), _fd_stream(protocol_in, readable=True)
    )
    try:
        yield stream
    finally:
        with trio.CancelScope(shield=True):
            await stream.aclose()
        sys.stdout.flush()
        os.dup2(saved_stdout, 1)
        os.close(saved_stdout)
