"""A spawned agent's stderr: read it always, show it without ever blocking.

An agent's stderr is where its tracebacks and debug prints go, so the user
must see it; but it is also a pipe the agent blocks on when it fills, and our
own stderr may be a pipe nobody reads. So two tasks, decoupled by a bounded
queue:

- the *reader* never stops: each chunk goes into the bounded tail (for
  :class:`~acp_trio.ConnectionClosed`), is cut into lines (a line longer than
  the limit is cut, the rest of it skipped), and each line is queued; when the
  queue is full the line is counted as dropped instead. It does no I/O but the
  pipe read, so the agent never waits on us.
- the *writer* hands batches of lines to a worker thread that writes them to
  the destination (``sys.stderr`` or a :class:`logging.Logger`), which may
  block as long as it likes: the queue fills and lines are dropped, with a
  ``[acp_trio: N lines of agent stderr dropped]`` line once it moves again.
  The threads have a limiter of their own, so a destination stuck for good
  holds one thread, not the default limiter's tokens that other parts of
  acp_trio need.

Memory is bounded by the tail, one line being assembled, and the queue's
byte limit, however much the agent writes.
"""

from __future__ import annotations

import logging
import os
import sys
from collections import deque
from collections.abc import Callable, Sequence
from contextlib import suppress

import attrs
import trio

__all__ = [
    "StderrPump",
    "StderrStatistics",
    "TailBuffer",
    "default_prefix",
    "log_sink",
    "stream_sink",
]

#: A logger's records for the agent's stderr lines (``stderr="log"``).
AGENT_STDERR_LOGGER = "acp_trio.agent_stderr"

# Per line: bytes kept (the rest is cut). Queue: bytes of lines waiting for
# the destination or being written; a line costs its length plus this, for
# its object, so the byte bound also bounds the number of lines.
MAX_LINE = 8 * 1024
QUEUE_BYTES = 256 * 1024
_LINE_OVERHEAD = 64

# Interpreters and launchers: the program is their first non-option argument.
_LAUNCHERS = ("python", "node", "bun", "deno", "npx", "pnpx", "uvx", "bunx")
# Per launcher: options whose value is the program's code (the name is then
# the launcher and the option: ``python -c``), options that take a value
# (skipped with it), and subcommands before the program (``deno run``).
_INLINE = {
    "python": ("-c",),
    "node": ("-e", "--eval", "-p", "--print"),
    "bun": ("-e", "--eval", "-p", "--print"),
    "deno": ("eval",),
}
_VALUED = {
    "python": ("-W", "-X", "--check-hash-based-pycs"),
    "node": ("-r", "--require", "--import", "--loader", "--experimental-loader"),
    "npx": ("-p", "--package"),
    "uvx": ("--from", "--with", "-p", "--python"),
}
_SUBCOMMANDS = {"deno": ("run",), "bun": ("run",)}
# A longer "name", or one with spaces, is code or a command line, not a name.
_MAX_NAME = 64

#: Writes a batch of decoded lines (drop notices included) somewhere; runs in
#: a worker thread and may block.
Sink = Callable[[list[str]], None]


class TailBuffer:
    """The last ``limit`` bytes written to it."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._data = bytearray()
        #: Bytes ever added (kept or not).
        self.total = 0

    def add(self, chunk: bytes | bytearray) -> None:
        self.total += len(chunk)
        if len(chunk) >= self._limit:
            self._data[:] = chunk[len(chunk) - self._limit :]
            return
        self._data += chunk
        if len(self._data) > self._limit:
            del self._data[: len(self._data) - self._limit]

    def get(self, since: int = 0) -> bytes:
        """What is kept of the bytes added after the first ``since``."""
        keep = max(0, min(len(self._data), self.total - since))
        return bytes(self._data[len(self._data) - keep :]) if keep else b""


def default_prefix(command: Sequence[str], pid: int) -> str:
    """``"name[pid]: "``, where name is the program's file name, or for an
    interpreter or launcher (``python agent.py``, ``npx some-agent``) its
    first argument that is not an option: what tells two agents apart. Code
    given inline is not a name: ``python -c CODE`` is ``python -c``."""
    return f"{_program_name(command)}[{pid}]: "


def _program_name(command: Sequence[str]) -> str:
    name = os.path.basename(command[0])
    family = next((launcher for launcher in _LAUNCHERS if name.startswith(launcher)), None)
    if family is None:
        return name
    args = iter(command[1:])
    for arg in args:
        if arg in _INLINE.get(family, ()):
            return f"{name} {arg}"
        if arg in _VALUED.get(family, ()):
            next(args, None)
            continue
        if arg.startswith("-") or arg in _SUBCOMMANDS.get(family, ()):
            continue
        program = os.path.basename(arg.rstrip("/")) or arg
        if len(program) > _MAX_NAME or any(c.isspace() for c in program):
            return name
        return program
    return name


def stream_sink(prefix: str) -> Sink:
    """Write to ``sys.stderr`` as it is when writing (so a redirection, or
    pytest's capture, applies), one write and one flush per batch. Errors
    (a closed stream, a pipe whose reader went away) drop the batch: they
    must not end the agent's connection."""

    def write(lines: list[str]) -> None:
        stream = sys.stderr
        if stream is None:  # pythonw, or closed on purpose
            return
        with suppress(Exception):
            stream.write("".join(f"{prefix}{line}\n" for line in lines))
            stream.flush()

    return write


def log_sink(logger: logging.Logger, prefix: str, pid: int, program: str) -> Sink:
    """One INFO record per line (drop notices are WARNING), with the agent in
    ``extra`` (``agent_pid``, ``agent_program``) for handlers that want it."""
    extra = {"agent_pid": pid, "agent_program": program}

    def write(lines: list[str]) -> None:
        for line in lines:
            level = logging.WARNING if line.startswith("[acp_trio: ") else logging.INFO
            with suppress(Exception):
                logger.log(level, "%s%s", prefix, line, extra=extra)

    return write


@attrs.frozen
class StderrStatistics:
    """What :meth:`AgentProcess.stderr_statistics` reports: the bytes of
    stderr lines waiting for the destination now and at most so far (the
    queue's bound is 256 KiB), the lines dropped because it was behind, and
    whether everything read so far was handed on (nothing queued, no drop
    left to report, nothing being written).
    """

    queued_bytes: int
    peak_queued_bytes: int
    lines_dropped: int
    idle: bool


class StderrPump:
    """Reads a stderr pipe into a tail and, optionally, forwards its lines."""

    def __init__(
        self,
        tail: TailBuffer,
        sink: Sink | None,
        *,
        max_line: int = MAX_LINE,
        queue_bytes: int = QUEUE_BYTES,
    ) -> None:
        self.tail = tail
        self._sink = sink
        self._max_line = max_line
        self._queue_bytes = queue_bytes
        self._queue: deque[bytes] = deque()
        self._queued_bytes = 0
        self._partial = bytearray()
        self._skipping = False  # inside a line already cut and queued
        self._wake = trio.Event()
        self._eof = False
        self._pending_drops = 0
        self._writing = False  # a batch is with the destination
        #: Lines not forwarded because the destination was behind.
        self.dropped = 0
        #: The most bytes the queue held, for tests of the bound.
        self.peak_queued_bytes = 0
        # One thread at most, stuck or not: never the default limiter's.
        self._limiter = trio.CapacityLimiter(1)
        #: Set once reading ended (end of file, or the reader cancelled).
        self.eof = trio.Event()
        #: Set once the writer handed on all there was (or was cancelled).
        self.flushed = trio.Event()

    # -- reader ---------------------------------------------------------

    async def read(self, stream: trio.abc.ReceiveStream) -> None:
        """Until end of file: never waits on anything but the pipe. Cancelled
        (a grandchild holds the pipe open), what was read still goes out:
        the last line, even without its newline, is queued, and the writer
        is told that nothing more comes."""
        try:
            with suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                while chunk := await stream.receive_some(65536):
                    self.tail.add(chunk)
                    if self._sink is not None:
                        self._feed(chunk)
        finally:
            if self._partial and not self._skipping:
                self._push(bytes(self._partial))
            self._partial.clear()
            self._eof = True
            self._wake.set()
            self.eof.set()

    @property
    def idle(self) -> bool:
        """Nothing queued, no drop unreported, nothing being written."""
        return not (self._queue or self._pending_drops or self._writing)

    def statistics(self) -> StderrStatistics:
        """A snapshot of the counters (see :class:`StderrStatistics`)."""
        return StderrStatistics(
            queued_bytes=self._queued_bytes,
            peak_queued_bytes=self.peak_queued_bytes,
            lines_dropped=self.dropped,
            idle=self.idle,
        )

    def _full(self) -> bool:
        return self._queued_bytes >= self._queue_bytes

    def _feed(self, chunk: bytes | bytearray) -> None:
        view = memoryview(chunk)
        pos, end = 0, len(chunk)
        while pos < end:
            newline = chunk.find(b"\n", pos)
            if newline < 0:
                self._add_partial(view[pos:])
                return
            self._add_partial(view[pos:newline])
            self._end_line()
            pos = newline + 1
            if self._full():
                # Nowhere to put them: count the whole lines left, unsplit.
                last = chunk.rfind(b"\n", pos)
                if last >= 0:
                    self._drop(chunk.count(b"\n", pos, last + 1))
                    pos = last + 1

    def _add_partial(self, data: memoryview) -> None:
        if self._skipping:
            return
        room = self._max_line - len(self._partial)
        if len(data) <= room:
            self._partial += data
            return
        self._partial += data[:room]
        cut = f" [acp_trio: line cut at {self._max_line} bytes]".encode()
        self._push(bytes(self._partial) + cut)
        self._partial.clear()
        self._skipping = True

    def _end_line(self) -> None:
        if self._skipping:
            self._skipping = False
        else:
            self._push(bytes(self._partial))
        self._partial.clear()

    def _push(self, line: bytes) -> None:
        size = len(line) + _LINE_OVERHEAD
        if self._queued_bytes + size > self._queue_bytes:
            self._drop(1)
            return
        self._queue.append(line)
        self._queued_bytes += size
        self.peak_queued_bytes = max(self.peak_queued_bytes, self._queued_bytes)
        self._wake.set()

    def _drop(self, count: int) -> None:
        self.dropped += count
        self._pending_drops += count

    # -- writer ---------------------------------------------------------

    async def write(self) -> None:
        """Hands the queued lines to the destination until end of file."""
        try:
            await self._write()
        finally:
            self.flushed.set()

    async def _write(self) -> None:
        if self._sink is None:
            return
        while True:
            if not self._queue and not self._pending_drops:
                if self._eof:
                    return
                await self._wake.wait()
                self._wake = trio.Event()
                continue
            batch = list(self._queue)
            self._queue.clear()
            lines: list[str] = []
            if self._pending_drops:
                lines.append(f"[acp_trio: {self._pending_drops} lines of agent stderr dropped]")
                self._pending_drops = 0
            lines += [line.decode("utf-8", "replace").rstrip("\r") for line in batch]
            self._writing = True
            try:
                # Abandoned if cancelled (teardown): a destination that never
                # returns keeps its thread, not us.
                await trio.to_thread.run_sync(
                    self._sink, lines, limiter=self._limiter, abandon_on_cancel=True
                )
            finally:
                self._writing = False
                # Counted until written: the bound covers lines in flight.
                self._queued_bytes -= sum(len(line) + _LINE_OVERHEAD for line in batch)
