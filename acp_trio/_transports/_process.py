"""The client side of the stdio transport: spawn an agent and own it.

:func:`open_agent_process` starts the agent in a process group of its own,
with its stdin and stdout as the protocol stream, and guarantees that when
the block ends nothing of it is left: stdin is closed (the polite way to ask
an ACP agent to exit), then after a grace period the whole group gets
SIGTERM, then SIGKILL, and the agent is always reaped. Teardown is shielded
from cancellation and bounded in time.

Its stderr stays visible to the end and never blocks anyone (see ``_stderr``):
``"forward"`` (the default) writes its lines, prefixed with the program's name
and pid, to our ``sys.stderr``; ``"log"`` (or a :class:`logging.Logger`) makes
them log records; ``"capture"`` only keeps the tail; ``"inherit"`` shares our
stderr; ``"discard"`` sends it to ``/dev/null``. The piped modes always drain
the pipe, so a chatty agent never blocks on it, and keep the last
``stderr_tail_size`` bytes. When the agent's stdout ends, the stream waits
briefly for the process to exit, so the connection's
:class:`~acp_trio.ConnectionClosed` carries the exit code and the stderr tail.
"""

from __future__ import annotations

import functools
import logging
import os
import signal
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager, suppress
from typing import Literal, final

import trio

from acp_trio._core._groups import plain_exceptions
from acp_trio._public import NoPublicConstructor
from acp_trio._transports._stderr import (
    AGENT_STDERR_LOGGER,
    Sink,
    StderrPump,
    StderrStatistics,
    TailBuffer,
    default_prefix,
    log_sink,
    stream_sink,
)

__all__ = ["AgentProcess", "StderrMode", "open_agent_process", "with_telemetry"]

#: Where a spawned agent's stderr goes; a :class:`logging.Logger` works as
#: ``"log"`` with that logger.
StderrMode = Literal["forward", "log", "capture", "inherit", "discard"]

# How long an EOF on stdout waits for the exit code before reporting it.
_EXIT_WAIT = 1.0
# Once the agent is gone: how long its stderr may stay open (a grandchild
# holding the pipe), then how long the lines read may take to be written.
_STDERR_EOF_WAIT = 0.5
_STDERR_FLUSH_WAIT = 2.0


class _ProcessStdout(trio.abc.ReceiveStream):
    """The agent's stdout; at EOF, waits a moment for the exit status."""

    def __init__(self, stream: trio.abc.ReceiveStream, process: trio.Process) -> None:
        self._stream = stream
        self._process = process

    @property
    def raw_fd_stream(self) -> trio.abc.ReceiveStream:
        """The pipe itself: a framed reader may read it directly, and comes
        back to :meth:`receive_some` at end of stream."""
        return self._stream

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        data = await self._stream.receive_some(max_bytes)
        if not data:
            with trio.move_on_after(_EXIT_WAIT):
                await self._process.wait()
        return data

    async def aclose(self) -> None:
        await self._stream.aclose()


@final
class AgentProcess(metaclass=NoPublicConstructor):
    """A running agent: its process and its protocol stream."""

    def __init__(
        self,
        process: trio.Process,
        stream: trio.StapledStream[trio.abc.SendStream, trio.abc.ReceiveStream],
        pump: StderrPump | None,
        stopper: _Stopper,
    ) -> None:
        self.process = process
        self.stream = stream
        self._pump = pump
        self._stopper = stopper

    def stop_soon(self) -> None:
        """Start the stop sequence now, without waiting: stdin closed,
        ``shutdown_grace``, SIGTERM to the group, ``terminate_grace``,
        SIGKILL, reaped; the same sequence leaving the block runs, which
        then waits for this one. Its protocol stream ends with it (a
        connection on it closes). Idempotent; for code that must end an
        agent that stopped answering (``abandon_policy="stop_process"``)."""
        self._stopper.start_soon()

    @property
    def stopping(self) -> bool:
        """Whether the stop sequence has started."""
        return self._stopper.started

    @property
    def pid(self) -> int:
        """The agent's process id (also its process group's id)."""
        return self.process.pid

    @property
    def returncode(self) -> int | None:
        """The agent's exit code once it has exited and been reaped, else
        ``None`` (negative: killed by that signal).
        """
        return self.process.returncode

    def stderr_tail(self, since: int = 0) -> bytes | None:
        """The last bytes of its stderr (``forward``, ``log`` and ``capture``
        modes), else ``None``; ``since``: only of what it wrote after its
        first ``since`` bytes (see :attr:`stderr_written`)."""
        return None if self._pump is None else self._pump.tail.get(since)

    @property
    def stderr_written(self) -> int:
        """How many bytes of stderr were read from it so far (0 without capture)."""
        return 0 if self._pump is None else self._pump.tail.total

    @property
    def stderr_lines_dropped(self) -> int:
        """Lines of its stderr not forwarded because the destination (our
        stderr, the logger's handlers) was behind; each gap is also reported
        at the destination once it catches up."""
        return 0 if self._pump is None else self._pump.dropped

    def stderr_statistics(self) -> StderrStatistics:
        """How the forwarding of its stderr is doing (``forward`` and ``log``
        modes; without forwarding, nothing is ever queued): bytes queued for
        the destination now and at most so far, lines dropped, and whether
        all it read was handed on. A snapshot, cheap."""
        if self._pump is None:
            return StderrStatistics(0, 0, 0, idle=True)
        return self._pump.statistics()

    def exit_details(self) -> tuple[int | None, bytes | None]:
        """``(exit code or None, stderr tail or None)``, for ConnectionClosed."""
        return self.process.returncode, self.stderr_tail()


def _signal_group(pgid: int, sig: int) -> bool:
    """Send ``sig`` to the group; ``False`` if no process of it is left."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _group_running_sync(pgid: int) -> bool:
    if not _signal_group(pgid, 0):
        return False
    # Zombies count for kill(2) but run nothing: orphans wait there until
    # init reaps them, which some inits do only every second or so. On
    # Linux, look for a member that is not a zombie.
    try:
        entries = os.listdir("/proc")
    except OSError:
        return True
    if "self" not in entries:
        return True
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as file:
                data = file.read()
        except OSError:
            continue
        # "pid (comm) state ppid pgrp ...", where comm may hold anything.
        fields = data[data.rfind(b")") + 1 :].split()
        if len(fields) > 2 and fields[2] == b"%d" % pgid and fields[0] not in (b"Z", b"X"):
            return True
    return False


async def _wait_group_gone(pgid: int, seconds: float) -> bool:
    with trio.move_on_after(seconds):
        # No event exists for this: poll.
        while await trio.to_thread.run_sync(_group_running_sync, pgid):  # noqa: ASYNC110
            await trio.sleep(0.02)
        return True
    return False


async def _shutdown(
    process: trio.Process, stdin: trio.abc.SendStream, grace: float, term_grace: float
) -> None:
    pgid = process.pid  # start_new_session: the agent leads its own group
    with suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError):
        await stdin.aclose()
    with trio.move_on_after(grace):
        await process.wait()
    if process.returncode is None:
        _signal_group(pgid, signal.SIGTERM)
        with trio.move_on_after(term_grace):
            await process.wait()
    if process.returncode is None:
        _signal_group(pgid, signal.SIGKILL)
        await process.wait()
    # Children the agent left behind in its group (npx-style wrappers).
    if await trio.to_thread.run_sync(_group_running_sync, pgid):
        _signal_group(pgid, signal.SIGTERM)
        if not await _wait_group_gone(pgid, term_grace):
            _signal_group(pgid, signal.SIGKILL)
            await _wait_group_gone(pgid, term_grace)


class _Stopper:
    """The stop sequence of one agent: run once, by whoever asks first (the
    block's end, or :meth:`AgentProcess.stop_soon` in the block's nursery);
    shielded and bounded by its two graces."""

    def __init__(
        self, process: trio.Process, stdin: trio.abc.SendStream, grace: float, term_grace: float
    ) -> None:
        self._process = process
        self._stdin = stdin
        self._grace = grace
        self._term_grace = term_grace
        self._nursery: trio.Nursery | None = None
        self.started = False
        self._done = trio.Event()

    def start_soon(self) -> None:
        if not self.started and self._nursery is not None:
            self._nursery.start_soon(self.run, name="acp agent stop")

    async def run(self) -> None:
        """Stop the agent, or wait until the stop already under way ends."""
        with trio.CancelScope(shield=True):
            if self.started:
                await self._done.wait()
                return
            self.started = True
            try:
                await _shutdown(self._process, self._stdin, self._grace, self._term_grace)
            finally:
                self._done.set()


async def _forward_stderr(
    pump: StderrPump, stderr: trio.abc.ReceiveStream, scopes: dict[str, trio.CancelScope]
) -> None:
    # Shielded: the lines come until the agent's end, however the block is
    # left; the block's end stops these two tasks itself (bounded).
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_within, scopes["read"], functools.partial(pump.read, stderr))
        nursery.start_soon(_within, scopes["write"], pump.write)


async def _within(scope: trio.CancelScope, task: Callable[[], Awaitable[None]]) -> None:
    with scope:
        await task()


def with_telemetry(
    env: Mapping[str, str] | None, telemetry: Mapping[str, str] | None
) -> Mapping[str, str] | None:
    """The environment for an agent spawned with ``env`` (``None``: ours)
    and the ``telemetry`` settings (``OTEL_*``): each one added unless the
    environment already sets it (what the user set wins)."""
    if not telemetry:
        return env
    merged = dict(os.environ if env is None else env)
    for key, value in telemetry.items():
        merged.setdefault(key, value)
    return merged


@asynccontextmanager
async def open_agent_process(
    command: Sequence[str],
    *,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    stderr: StderrMode | logging.Logger = "forward",
    stderr_tail_size: int = 64 * 1024,
    stderr_prefix: str | None = None,
    shutdown_grace: float = 2.0,
    terminate_grace: float = 2.0,
) -> AsyncIterator[AgentProcess]:
    """Spawn ``command`` as an ACP agent over stdio (Unix).

    ``env`` replaces the environment when given (pass ``{**os.environ, ...}``
    to extend it). Raises ``OSError`` if the program cannot be started and
    ``ValueError`` for an empty command or an unknown ``stderr``.
    On leaving the block: stdin is closed, the agent gets ``shutdown_grace``
    seconds to exit, then the group gets SIGTERM and ``terminate_grace``
    seconds, then SIGKILL; the agent is always reaped. That shutdown is
    shielded from cancellation (and bounded by the two graces), so leaving
    by an exception or a cancellation stops the agent the same way.
    :meth:`AgentProcess.stop_soon` starts it earlier.

    ``stderr`` says where the agent's stderr goes (see the module's
    docstring); forwarded lines start with ``stderr_prefix``, by default
    ``"name[pid]: "``. Every line the agent writes until it exits is
    forwarded, however the block is left: a cancel of the scope around it
    does not stop the forwarding, the block's end does, once the agent is
    gone and its stderr read to the end (bounded: half a second for a
    grandchild still holding the pipe, two more for the destination).
    Forwarding never blocks the agent or the connection: lines the
    destination cannot take in time are dropped and counted
    (:attr:`AgentProcess.stderr_lines_dropped`), lines are cut at 8 KiB,
    invalid UTF-8 is replaced.
    """
    if not command:
        raise ValueError("command must not be empty")
    for name, grace in (("shutdown_grace", shutdown_grace), ("terminate_grace", terminate_grace)):
        if isinstance(grace, bool) or not isinstance(grace, int | float) or not grace >= 0:
            raise ValueError(f"{name} must be a number of seconds >= 0, not {grace!r}")
    if isinstance(stderr, logging.Logger):
        stderr_arg: int | None = subprocess.PIPE
    elif stderr in ("forward", "log", "capture"):
        stderr_arg = subprocess.PIPE
    elif stderr == "inherit":
        stderr_arg = None
    elif stderr == "discard":
        stderr_arg = subprocess.DEVNULL
    else:
        raise ValueError(
            f"stderr must be 'forward', 'log', 'capture', 'inherit', 'discard' "
            f"or a logging.Logger, not {stderr!r}"
        )
    process = await trio.lowlevel.open_process(
        list(command),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=stderr_arg,
        cwd=cwd,
        env=dict(env) if env is not None else None,
        start_new_session=True,
    )
    assert process.stdin is not None
    assert process.stdout is not None
    pump = None
    if process.stderr is not None:
        prefix = default_prefix(command, process.pid) if stderr_prefix is None else stderr_prefix
        program = os.path.basename(command[0])
        sink: Sink | None = None
        if isinstance(stderr, logging.Logger):
            sink = log_sink(stderr, prefix, process.pid, program)
        elif stderr == "log":
            sink = log_sink(logging.getLogger(AGENT_STDERR_LOGGER), prefix, process.pid, program)
        elif stderr == "forward":
            sink = stream_sink(prefix)
        pump = StderrPump(TailBuffer(stderr_tail_size), sink)
    stdout: trio.abc.ReceiveStream = _ProcessStdout(process.stdout, process)
    stream = trio.StapledStream(process.stdin, stdout)
    stopper = _Stopper(process, process.stdin, shutdown_grace, terminate_grace)
    agent = AgentProcess._create(process, stream, pump, stopper)
    # The stderr tasks' scopes (made here: one cancelled before its task
    # starts still stops it).
    scopes = {"read": trio.CancelScope(shield=True), "write": trio.CancelScope(shield=True)}
    with plain_exceptions():
        async with trio.open_nursery() as nursery:
            stopper._nursery = nursery
            if pump is not None and process.stderr is not None:
                nursery.start_soon(_forward_stderr, pump, process.stderr, scopes)
            try:
                yield agent
            finally:
                with trio.CancelScope(shield=True):
                    await stopper.run()
                    with suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                        await process.stdout.aclose()
                    if pump is not None:
                        await _end_stderr(pump, scopes)
                nursery.cancel_scope.cancel()


async def _end_stderr(pump: StderrPump, scopes: dict[str, trio.CancelScope]) -> None:
    """The agent is gone: its stderr lines are read to the end of the pipe
    and handed on. Bounded: a grandchild may hold the pipe open (reading
    stops after a moment), and the destination may be stuck (the lines
    left are dropped after a while; see ``_stderr``)."""
    with trio.move_on_after(_STDERR_EOF_WAIT):
        await pump.eof.wait()
    scopes["read"].cancel()  # what it read is queued, the writer told
    with trio.move_on_after(_STDERR_FLUSH_WAIT):
        await pump.flushed.wait()
    for scope in scopes.values():
        scope.cancel()
