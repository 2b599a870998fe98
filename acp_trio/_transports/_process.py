"""The client side of the stdio transport: spawn an agent and own it.

:func:`open_agent_process` starts the agent in a process group of its own,
with its stdin and stdout as the protocol stream, and guarantees that when
the block ends nothing of it is left: stdin is closed (the polite way to ask
an ACP agent to exit), then after a grace period the whole group gets
SIGTERM, then SIGKILL, and the agent is always reaped. Teardown is shielded
from cancellation and bounded in time.

Its stderr stays visible and never blocks anyone (see ``_stderr``):
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

import logging
import os
import signal
import subprocess
from collections.abc import AsyncIterator, Mapping, Sequence
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
    ) -> None:
        self.process = process
        self.stream = stream
        self._pump = pump

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

    ``stderr`` says where the agent's stderr goes (see the module's
    docstring); forwarded lines start with ``stderr_prefix``, by default
    ``"name[pid]: "``. Forwarding never blocks the agent or the connection:
    lines the destination cannot take in time are dropped and counted
    (:attr:`AgentProcess.stderr_lines_dropped`), lines are cut at 8 KiB,
    invalid UTF-8 is replaced.
    """
    if not command:
        raise ValueError("command must not be empty")
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
    agent = AgentProcess._create(process, stream, pump)
    with plain_exceptions():
        async with trio.open_nursery() as nursery:
            if pump is not None and process.stderr is not None:
                nursery.start_soon(pump.read, process.stderr)
                nursery.start_soon(pump.write)
            try:
                yield agent
            finally:
                with trio.CancelScope(shield=True):
                    await _shutdown(process, process.stdin, shutdown_grace, terminate_grace)
                    with suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                        await process.stdout.aclose()
                # The stderr tasks end at its EOF, once the last lines are
                # written; don't wait long on grandchildren that may still
                # hold the pipe open, or on a destination that is stuck.
                nursery.cancel_scope.deadline = trio.current_time() + 0.5
