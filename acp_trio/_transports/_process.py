"""The client side of the stdio transport: spawn an agent and own it.

:func:`open_agent_process` starts the agent in a process group of its own,
with its stdin and stdout as the protocol stream, and guarantees that when
the block ends nothing of it is left: stdin is closed (the polite way to ask
an ACP agent to exit), then after a grace period the whole group gets
SIGTERM, then SIGKILL, and the agent is always reaped. Teardown is shielded
from cancellation and bounded in time.

Its stderr is always drained, so a chatty agent can never block on a full
pipe: ``"inherit"`` (share ours), ``"discard"``, or ``"capture"`` (keep the
last ``stderr_tail_size`` bytes). When the agent's stdout ends, the stream
waits briefly for the process to exit, so the connection's
:class:`~acp_trio.ConnectionClosed` carries the exit code and the stderr tail.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager, suppress
from typing import Literal, final

import trio

from acp_trio._groups import plain_exceptions

__all__ = ["AgentProcess", "open_agent_process"]

StderrMode = Literal["inherit", "discard", "capture"]

# How long an EOF on stdout waits for the exit code before reporting it.
_EXIT_WAIT = 1.0


class _TailBuffer:
    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._data = bytearray()

    def add(self, chunk: bytes | bytearray) -> None:
        self._data += chunk
        if len(self._data) > self._limit:
            del self._data[: len(self._data) - self._limit]

    def get(self) -> bytes:
        return bytes(self._data)


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
class AgentProcess:
    """A running agent: its process and its protocol stream."""

    def __init__(
        self,
        process: trio.Process,
        stream: trio.StapledStream[trio.abc.SendStream, trio.abc.ReceiveStream],
        tail: _TailBuffer | None,
    ) -> None:
        self.process = process
        self.stream = stream
        self._tail = tail

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def returncode(self) -> int | None:
        return self.process.returncode

    def stderr_tail(self) -> bytes | None:
        """The last bytes of its stderr (``capture`` mode), else ``None``."""
        return None if self._tail is None else self._tail.get()

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


@asynccontextmanager
async def open_agent_process(
    command: Sequence[str],
    *,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    stderr: StderrMode = "capture",
    stderr_tail_size: int = 64 * 1024,
    shutdown_grace: float = 2.0,
    terminate_grace: float = 2.0,
) -> AsyncIterator[AgentProcess]:
    """Spawn ``command`` as an ACP agent over stdio (Unix).

    ``env`` replaces the environment when given (pass ``{**os.environ, ...}``
    to extend it). Raises ``OSError`` if the program cannot be started.
    On leaving the block: stdin is closed, the agent gets ``shutdown_grace``
    seconds to exit, then the group gets SIGTERM and ``terminate_grace``
    seconds, then SIGKILL; the agent is always reaped.
    """
    if not command:
        raise ValueError("command must not be empty")
    stderr_arg = {"inherit": None, "discard": subprocess.DEVNULL, "capture": subprocess.PIPE}[
        stderr
    ]
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
    tail = _TailBuffer(stderr_tail_size) if stderr == "capture" else None
    stdout: trio.abc.ReceiveStream = _ProcessStdout(process.stdout, process)
    stream = trio.StapledStream(process.stdin, stdout)
    agent = AgentProcess(process, stream, tail)
    with plain_exceptions():
        async with trio.open_nursery() as nursery:
            if tail is not None and process.stderr is not None:
                nursery.start_soon(_drain, process.stderr, tail)
            try:
                yield agent
            finally:
                with trio.CancelScope(shield=True):
                    await _shutdown(process, process.stdin, shutdown_grace, terminate_grace)
                    with suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                        await process.stdout.aclose()
                # The drain task ends at the stderr EOF; don't wait long on
                # grandchildren that may still hold the pipe open.
                nursery.cancel_scope.deadline = trio.current_time() + 0.5


async def _drain(stream: trio.abc.ReceiveStream, tail: _TailBuffer) -> None:
    with suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError):
        while chunk := await stream.receive_some(65536):
            tail.add(chunk)
