"""The I/O the Trio floors share: the least a Trio program does to read and
write newline-delimited frames on non-blocking pipes, with acp_trio's own
policy and nothing else.

- :class:`LeanWriter`: a frame is written at once (``os.write`` on the
  non-blocking descriptor) while nothing waits; what a full pipe refuses,
  and everything after it, waits in one list that a writer task joins and
  writes as one ``os.write`` when the pipe has room: batches exactly where
  acp_trio batches. A sender waits only while ``limit`` frames wait
  (acp_trio's default ``outbox_limit``): memory stays bounded.
- :class:`LeanReader`: reads up to 64 KiB at a time and splits lines; after
  a read that emptied the pipe it waits first, after a big one it tries
  first (as acp_trio's reader does: a try that finds nothing costs a raised
  ``BlockingIOError``, a wait that finds data costs a pass of the
  scheduler). Data read at once costs one schedule point that cannot be
  cancelled, as every Trio read must yield to be fair to the other tasks.

Standard library and Trio only; no parsing (the callers decode with
orjson, the fastest JSON the repository uses).
"""

from __future__ import annotations

import os

import trio

RECEIVE_SIZE = 64 * 1024
#: After a read of fewer bytes than this the pipe was emptied (half a pipe).
BIG_READ = RECEIVE_SIZE // 2
#: Frames waiting for the writer task before a sender waits for room.
LIMIT = 1024


class LeanWriter:
    """Frames out of one non-blocking descriptor, in order."""

    __slots__ = ("_fd", "_queue", "_room", "_wake", "limit")

    def __init__(self, fd: int, limit: int = LIMIT) -> None:
        os.set_blocking(fd, False)
        self._fd = fd
        self._queue: list[bytes] = []
        self._wake = trio.lowlevel.ParkingLot()
        self._room = trio.lowlevel.ParkingLot()
        self.limit = limit

    def write(self, frame: bytes) -> None:
        """Write ``frame`` after everything written before, without waiting."""
        queue = self._queue
        if not queue:
            try:
                written = os.write(self._fd, frame)
            except BlockingIOError:
                written = 0
            if written == len(frame):
                return
            frame = frame[written:]
            self._wake.unpark()
        queue.append(frame)

    async def send(self, frame: bytes) -> None:
        """:meth:`write`, as an async send must be: a checkpoint, waiting
        while ``limit`` frames wait for the writer."""
        while len(self._queue) >= self.limit:
            await self._room.park()
        self.write(frame)
        await trio.lowlevel.checkpoint()

    async def flush(self) -> None:
        """Wait until everything written is out (the writer task runs)."""
        while self._queue:  # noqa: ASYNC110 (only at the end: a poll is enough)
            await trio.sleep(0.001)

    async def run(self) -> None:
        """The writer task: what :meth:`write` could not write at once."""
        queue, fd = self._queue, self._fd
        while True:
            while not queue:
                await self._wake.park()
            await trio.lowlevel.wait_writable(fd)
            data = b"".join(queue)
            try:
                written = os.write(fd, data)
            except BlockingIOError:
                written = 0
            queue.clear()
            if written < len(data):
                queue.append(data[written:])
            if self._room:
                self._room.unpark_all()


class LeanReader:
    """Lines (frames without their ``\\n``) from one non-blocking descriptor."""

    __slots__ = ("_drained", "_fd", "_lines", "_rest")

    def __init__(self, fd: int) -> None:
        os.set_blocking(fd, False)
        self._fd = fd
        self._lines: list[bytes] = []  # in reverse order: pop() takes the next
        self._rest = b""
        self._drained = True

    async def line(self) -> bytes | None:
        """The next line, or ``None`` at the end of the input."""
        lines = self._lines
        while not lines:
            data = await self._read()
            if not data:
                return None
            parts = data.split(b"\n")
            if self._rest:
                parts[0] = self._rest + parts[0]
            self._rest = parts.pop()
            parts.reverse()
            self._lines = lines = parts
        return lines.pop()

    def pending(self) -> list[bytes]:
        """The lines already read and not taken, in order (taken now)."""
        lines = self._lines[::-1]
        self._lines = []
        return lines

    async def read(self) -> bytes:
        """One read: ``b""`` at the end of the input."""
        return await self._read()

    async def _read(self) -> bytes:
        fd = self._fd
        if not self._drained:
            try:
                data = os.read(fd, RECEIVE_SIZE)
            except BlockingIOError:
                pass
            else:
                self._drained = len(data) < BIG_READ
                await trio.lowlevel.cancel_shielded_checkpoint()
                return data
        while True:
            await trio.lowlevel.wait_readable(fd)
            try:
                data = os.read(fd, RECEIVE_SIZE)
            except BlockingIOError:
                continue
            self._drained = len(data) < BIG_READ
            return data
