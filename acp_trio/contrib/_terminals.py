"""Serving the ``terminal/*`` methods: run an agent's commands, safely (POSIX).

:func:`open_terminal_manager` yields a :class:`TerminalManager` whose five
methods are the bodies of a :class:`~acp_trio.Client`'s terminal methods
(or use :class:`TerminalsMixin`):

- ``terminal/create`` runs the command only once the application's async
  ``approve(params)`` callback returned ``True`` (anything else: a
  ``-32602`` refusal; the callback may also raise its own
  :class:`~acp_trio.RequestError`). The command is executed directly
  (``command`` is the program, ``args`` its arguments; no shell unless
  ``shell=`` is set), in a new session and process group, with stdin from
  ``/dev/null`` and stdout and stderr captured together. A bare program
  name is looked up in the manager's ``PATH``, never in one the request
  sets. The answer comes once the process has started.
- The output kept is bounded by the request's ``outputByteLimit`` and by the
  manager's ``max_output_bytes``: older output is dropped from the front, on
  a UTF-8 character boundary, and ``truncated`` is reported. Invalid UTF-8
  is replaced with U+FFFD; the text sent never exceeds the limit once
  encoded.
- ``terminal/output`` answers at once. ``terminal/wait_for_exit`` waits for
  the exit; cancelling that wait leaves the process alone.
- ``terminal/kill`` stops the whole process group (SIGTERM, a grace period,
  SIGKILL) and reaps it; the id stays valid for output and wait.
- ``terminal/release`` does the same if needed and forgets the id: later
  calls with it get ``-32002``, as do unknown ids and ids of another session.

Every process is supervised by a task in the manager's nursery. Leaving the
``async with`` block, normally, by an error or by cancellation, kills every
process group and reaps every process, shielded from cancellation and bounded
in time. A ``terminal/create`` whose request is cancelled while the process
is being started kills it again before answering ``-32800``.

Limits: a group counts as stopped once only zombies are left in it (read
from ``/proc`` on Linux; the command's orphaned children are init's to
reap). A process that leaves the group (``setsid``, daemons) escapes the
kill; only an OS sandbox (cgroups, containers) can hold those. Nothing here
restricts what an approved command may do.
"""

from __future__ import annotations

import logging
import os
import secrets
import shutil
import signal
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager, suppress
from typing import Final, NoReturn, final

import trio

from acp_trio._core._groups import plain_exceptions
from acp_trio._exceptions import ErrorCode, RequestError
from acp_trio._public import NoPublicConstructor
from acp_trio._transports._process import _group_running_sync, _signal_group
from acp_trio.contrib._terminal_output import exit_status, render_output
from acp_trio.schema import (
    CreateTerminalRequest,
    CreateTerminalResponse,
    KillTerminalRequest,
    KillTerminalResponse,
    ReleaseTerminalRequest,
    ReleaseTerminalResponse,
    TerminalExitStatus,
    TerminalOutputRequest,
    TerminalOutputResponse,
    WaitForTerminalExitRequest,
    WaitForTerminalExitResponse,
)

__all__ = ["ApproveFunc", "TerminalManager", "TerminalsMixin", "open_terminal_manager"]

_log = logging.getLogger("acp_trio.terminals")

#: ``approve(params)``: may the command of ``params`` run?
ApproveFunc = Callable[[CreateTerminalRequest], Awaitable[bool]]

DEFAULT_MAX_OUTPUT_BYTES: Final = 4 * 1024 * 1024

# After the process exits, how long its output may keep flowing (children
# holding the pipe) before the exit is reported anyway.
_DRAIN: Final = 0.5
# How long a SIGKILLed process (or group) may take to go away before we give
# up on it (a process stuck in the kernel).
_REAP_TIMEOUT: Final = 5.0
# While a finished command's children live on, how often to look whether
# its process group is empty yet.
_GROUP_POLL: Final = 0.5
# While a command is being killed, how often to look at its group.
_KILL_POLL: Final = 0.02
# How many released ids are remembered, for a clearer error message.
_RELEASED_MEMORY: Final = 1024


async def _group_running(pgid: int) -> bool:
    """Whether a process of group ``pgid`` still runs (zombies excepted)."""
    return await trio.to_thread.run_sync(_group_running_sync, pgid)


def _refuse(message: str, **data: object) -> NoReturn:
    raise RequestError(ErrorCode.INVALID_PARAMS, message, {"reason": message, **data})


def _manager_closed() -> NoReturn:
    raise RequestError(
        ErrorCode.INTERNAL_ERROR, "the client's terminal manager is closed", {"reason": "closed"}
    )


def _cancel_pending() -> bool:
    """Whether the calling task's scope is cancelled (or its deadline passed)."""
    return trio.current_effective_deadline() <= trio.current_time()


class _Terminal:
    __slots__ = (
        "buffer",
        "eof",
        "exited",
        "group_gone",
        "id",
        "limit",
        "process",
        "scope",
        "session_id",
        "truncated",
    )

    def __init__(self, terminal_id: str, session_id: str, process: trio.Process, limit: int):
        self.id = terminal_id
        self.session_id = session_id
        self.process = process
        self.limit = limit
        self.buffer = bytearray()
        self.truncated = False
        self.eof = trio.Event()
        self.exited = trio.Event()
        self.scope = trio.CancelScope()
        # Set once the process is reaped and its group seen empty: from then
        # on its pgid may name someone else's group and is never signalled.
        self.group_gone = False

    @property
    def pgid(self) -> int:
        return self.process.pid  # start_new_session: it leads its own group

    def add(self, chunk: bytes | bytearray) -> None:
        self.buffer += chunk
        excess = len(self.buffer) - self.limit
        if excess > 0:
            del self.buffer[:excess]
            self.truncated = True

    def exit_status(self) -> tuple[int | None, str | None]:
        return exit_status(self.process.returncode)

    def output(self) -> TerminalOutputResponse:
        text, truncated = render_output(
            self.buffer, self.limit, self.truncated, complete=self.eof.is_set()
        )
        status = None
        if self.exited.is_set():
            code, sig = self.exit_status()
            status = TerminalExitStatus(exit_code=code, signal=sig)
        return TerminalOutputResponse(output=text, truncated=truncated, exit_status=status)


@final
class TerminalManager(metaclass=NoPublicConstructor):
    """Runs the commands an agent asks for. Made by :func:`open_terminal_manager`.

    The five ``async`` methods take and return the schema classes of the
    ``terminal/*`` methods, like :class:`~acp_trio.Client`'s.
    """

    def __init__(
        self,
        nursery: trio.Nursery,
        approve: ApproveFunc,
        *,
        env: Mapping[str, str] | None,
        cwd: str | None,
        shell: str | None,
        max_output_bytes: int,
        max_terminals: int,
        terminate_grace: float,
    ) -> None:
        self._nursery = nursery
        self._approve = approve
        self._env = None if env is None else dict(env)
        self._cwd = cwd
        self._shell = shell
        self._max_output_bytes = max_output_bytes
        self._max_terminals = max_terminals
        self._grace = terminate_grace
        self._terminals: dict[str, _Terminal] = {}
        # Every terminal whose processes may still be around, released or not.
        self._live: set[_Terminal] = set()
        self._released: dict[str, None] = {}
        self._starting = 0  # creates past approval, not in _terminals yet
        self._closed = False

    # ------------------------------------------------------------------
    # The ACP methods

    async def create_terminal(self, params: CreateTerminalRequest) -> CreateTerminalResponse:
        """``terminal/create``: ask ``approve``, then start the command.

        Raises :class:`~acp_trio.RequestError`: ``-32602`` when ``approve``
        did not return ``True``, for a missing program or working directory, or
        past ``max_terminals``; ``-32603`` once the manager is closed.
        Cancelled while ``approve`` runs, nothing is started; the start itself
        is shielded, and a cancel that came meanwhile kills the new process
        again before ``trio.Cancelled`` propagates.
        """
        argv, env, cwd, limit = self._prepare(params)
        allowed = await self._approve(params)
        if allowed is not True:
            shown = " ".join([params.command, *(params.args or [])])
            raise RequestError(
                ErrorCode.INVALID_PARAMS,
                f"the client refused to run the command: {shown}",
                {"reason": "refused", "command": params.command, "args": params.args or []},
            )
        self._check_capacity()
        self._starting += 1
        try:
            with trio.CancelScope(shield=True):
                term = await self._start(params.session_id, argv, env, cwd, limit)
        finally:
            self._starting -= 1
        # A cancel that came while the process was starting: nobody will
        # learn its id, so it must not outlive this request.
        if _cancel_pending():
            await self._release(term)
            await trio.lowlevel.checkpoint()  # raises Cancelled
        return CreateTerminalResponse(terminal_id=term.id)

    async def terminal_output(self, params: TerminalOutputRequest) -> TerminalOutputResponse:
        """``terminal/output``: the output so far, at once.

        An unknown or released id, or one of another session, is refused with
        :class:`~acp_trio.RequestError` ``-32002``. Only a checkpoint: a
        cancellation raises ``trio.Cancelled`` before anything is read.
        """
        await trio.lowlevel.checkpoint()
        return self._get(params.session_id, params.terminal_id).output()

    async def wait_for_terminal_exit(
        self, params: WaitForTerminalExitRequest
    ) -> WaitForTerminalExitResponse:
        """``terminal/wait_for_exit``: wait for the exit and answer its code or
        signal. An unknown or released id, or one of another session, is refused with
        :class:`~acp_trio.RequestError` ``-32002``. Cancelling the wait does not stop the process.
        """
        term = self._get(params.session_id, params.terminal_id)
        await term.exited.wait()
        code, sig = term.exit_status()
        return WaitForTerminalExitResponse(exit_code=code, signal=sig)

    async def kill_terminal(self, params: KillTerminalRequest) -> KillTerminalResponse:
        """``terminal/kill``: stop the process group (SIGTERM, the grace
        period, SIGKILL) and reap it; the id stays valid. An unknown or
        released id, or one of another session, is refused with
        :class:`~acp_trio.RequestError` ``-32002``. The kill is shielded and
        bounded: a cancellation takes effect once it is done.
        """
        term = self._get(params.session_id, params.terminal_id)
        await self._kill(term)
        with trio.CancelScope(shield=True), trio.move_on_after(_DRAIN + 1):
            await term.exited.wait()
        return KillTerminalResponse()

    async def release_terminal(self, params: ReleaseTerminalRequest) -> ReleaseTerminalResponse:
        """``terminal/release``: stop the process group if needed; forget the id.
        An unknown or released id, or one of another session, is refused with
        :class:`~acp_trio.RequestError` ``-32002``. The kill is shielded and
        bounded: a cancellation takes effect once it is done.
        """
        term = self._get(params.session_id, params.terminal_id)
        await self._release(term)
        return ReleaseTerminalResponse()

    # ------------------------------------------------------------------
    # For the application

    async def release_session(self, session_id: str) -> int:
        """Release every terminal of ``session_id`` (e.g. when the session
        closes); returns how many there were. The kills are shielded and bounded:
        a cancellation takes effect once they are done.
        """
        terms = [t for t in self._terminals.values() if t.session_id == session_id]
        with plain_exceptions():
            async with trio.open_nursery() as nursery:
                for term in terms:
                    nursery.start_soon(self._release, term)
        return len(terms)

    def output(self, terminal_id: str) -> TerminalOutputResponse:
        """A terminal's current output, for the application's own display
        (any session). Raises :class:`RequestError` for an unknown id."""
        term = self._terminals.get(terminal_id)
        if term is None:
            self._unknown(terminal_id)
        return term.output()

    def terminal_ids(self, session_id: str | None = None) -> list[str]:
        """The ids not released yet (of one session, or all)."""
        return [t.id for t in self._terminals.values() if session_id in (None, t.session_id)]

    @property
    def closed(self) -> bool:
        """Whether the manager's block has ended (its processes were killed);
        new terminals are refused then.
        """
        return self._closed

    # ------------------------------------------------------------------
    # Internals

    def _prepare(
        self, params: CreateTerminalRequest
    ) -> tuple[list[str], dict[str, str], str | None, int]:
        self._check_capacity()
        command, args = params.command, list(params.args or [])
        if not command:
            _refuse("the command is empty")
        if any("\0" in part for part in (command, *args)):
            _refuse("the command or its arguments contain a NUL character")
        if self._shell is not None and not args:
            argv = [self._shell, "-c", command]
        else:
            argv = [command, *args]
        env = dict(os.environ) if self._env is None else dict(self._env)
        for var in params.env or []:
            if not var.name or "=" in var.name or "\0" in var.name or "\0" in var.value:
                _refuse(f"invalid environment variable name or value: {var.name!r}")
            env[var.name] = var.value
        cwd = params.cwd if params.cwd is not None else self._cwd
        if cwd is not None and (not os.path.isabs(cwd) or "\0" in cwd):
            _refuse(f"the working directory must be an absolute path: {cwd!r}")
        limit = self._max_output_bytes
        if params.output_byte_limit is not None:
            if params.output_byte_limit < 0:
                _refuse("outputByteLimit must not be negative")
            limit = min(limit, params.output_byte_limit)
        return argv, env, cwd, limit

    def _check_capacity(self) -> None:
        if self._closed:
            _manager_closed()
        if len(self._terminals) + self._starting >= self._max_terminals:
            _refuse(
                f"too many terminals (at most {self._max_terminals}); release some first",
                max_terminals=self._max_terminals,
            )

    async def _start(
        self, session_id: str, argv: list[str], env: dict[str, str], cwd: str | None, limit: int
    ) -> _Terminal:
        if cwd is not None and not await trio.to_thread.run_sync(os.path.isdir, cwd):
            _refuse(f"the working directory does not exist: {cwd}", cwd=cwd)
        program = argv[0]
        if "/" not in program:
            # Look the program up in *our* PATH (or the configured one), not
            # in a PATH the request sets: an agent must not be able to make
            # an approved "ls" mean its own ./ls.
            base = os.environ if self._env is None else self._env
            search = base.get("PATH", os.defpath)
            found = await trio.to_thread.run_sync(shutil.which, program, os.F_OK | os.X_OK, search)
            if found is None:
                _refuse(f"command not found: {program}", command=program)
            program = found
        try:
            process = await trio.lowlevel.open_process(
                argv,
                executable=program,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                cwd=cwd,
                env=env,
                start_new_session=True,
            )
        except FileNotFoundError:
            _refuse(f"command not found: {argv[0]}", command=argv[0])
        except PermissionError:
            _refuse(f"permission denied: {argv[0]}", command=argv[0])
        except OSError as exc:
            reason = exc.strerror or type(exc).__name__
            raise RequestError(
                ErrorCode.INTERNAL_ERROR,
                f"cannot start {argv[0]}: {reason}",
                {"reason": reason, "command": argv[0]},
            ) from exc
        term = _Terminal(f"term-{secrets.token_hex(8)}", session_id, process, limit)
        self._live.add(term)
        if self._closed:
            # The manager closed while the process started: no supervisor.
            await self._kill(term)
            if process.stdout is not None:
                await process.stdout.aclose()
            self._live.discard(term)
            _manager_closed()
        self._terminals[term.id] = term
        self._nursery.start_soon(self._supervise, term)
        return term

    async def _supervise(self, term: _Terminal) -> None:
        stdout = term.process.stdout
        assert stdout is not None
        try:
            with term.scope:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._pump, term, stdout)
                    await term.process.wait()
                    with trio.move_on_after(_DRAIN):
                        await term.eof.wait()
                    term.exited.set()
                    # The pump goes on while children keep the pipe open;
                    # watch the group until it is empty.
                    while await _group_running(term.pgid):  # noqa: ASYNC110 - no event for this
                        await trio.sleep(_GROUP_POLL)
                    self._group_gone(term)
        finally:
            with trio.CancelScope(shield=True), suppress(OSError, trio.ClosedResourceError):
                await stdout.aclose()

    @staticmethod
    async def _pump(term: _Terminal, stream: trio.abc.ReceiveStream) -> None:
        try:
            while chunk := await stream.receive_some(65536):
                term.add(chunk)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass
        term.eof.set()

    def _get(self, session_id: str, terminal_id: str) -> _Terminal:
        term = self._terminals.get(terminal_id)
        # Another session's terminal reads as unknown.
        if term is None or term.session_id != session_id:
            self._unknown(terminal_id)
        return term

    def _unknown(self, terminal_id: str) -> NoReturn:
        if self._closed:
            _manager_closed()
        if terminal_id in self._released:
            message, reason = f"terminal {terminal_id} was released", "released"
        else:
            message, reason = f"unknown terminal: {terminal_id}", "unknown"
        raise RequestError(
            ErrorCode.RESOURCE_NOT_FOUND, message, {"terminalId": terminal_id, "reason": reason}
        )

    async def _release(self, term: _Terminal) -> None:
        if self._terminals.pop(term.id, None) is not None:
            self._released[term.id] = None
            while len(self._released) > _RELEASED_MEMORY:
                del self._released[next(iter(self._released))]
        await self._kill(term)
        term.scope.cancel()
        # Waiters on a released terminal learn how it ended.
        term.exited.set()

    async def _kill(self, term: _Terminal) -> None:
        """SIGTERM the process group, give it ``terminate_grace`` seconds,
        then SIGKILL it; the process is reaped, and the group waited for
        until no process of it runs. Shielded and time-bounded."""
        with trio.CancelScope(shield=True):
            if term.group_gone:
                return
            process, pgid = term.process, term.pgid
            if process.returncode is not None and not await _group_running(pgid):
                self._group_gone(term)
                return
            for sig, seconds in ((signal.SIGTERM, self._grace), (signal.SIGKILL, _REAP_TIMEOUT)):
                _signal_group(pgid, sig)
                with trio.move_on_after(seconds):
                    await process.wait()
                    while await _group_running(pgid):  # noqa: ASYNC110 - no event for this
                        await trio.sleep(_KILL_POLL)
                    self._group_gone(term)
                    return
            _log.warning("process group %d of terminal %s survived SIGKILL", pgid, term.id)

    def _group_gone(self, term: _Terminal) -> None:
        term.group_gone = True
        self._live.discard(term)

    async def _shutdown(self) -> None:
        self._closed = True
        with trio.CancelScope(shield=True):
            async with trio.open_nursery() as nursery:
                for term in list(self._live):
                    nursery.start_soon(self._kill, term)
            self._terminals.clear()


@asynccontextmanager
async def open_terminal_manager(
    approve: ApproveFunc,
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    shell: str | None = None,
    max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
    max_terminals: int = 64,
    terminate_grace: float = 2.0,
) -> AsyncIterator[TerminalManager]:
    """A :class:`TerminalManager` for the block's duration; leaving the block
    kills and reaps every process it started (POSIX only).

    Leaving it by an exception or a cancellation does the same, shielded
    from the cancellation and bounded by ``terminate_grace``. Raises
    ``ValueError`` for a limit out of range or a relative ``cwd``.

    - ``approve(params)``: awaited before each command runs; only ``True``
      lets it run. Show the user the exact ``command``, ``args``, ``cwd`` and
      ``env`` of ``params``.
    - ``env``: the environment commands start from (default: ours, at the
      time of each start); the request's ``env`` entries are added to it.
    - ``cwd``: the working directory when the request names none (default:
      ours).
    - ``shell``: e.g. ``"/bin/sh"`` to run a request that has no ``args``
      as ``shell -c command`` (agents that send whole command lines);
      default: never use a shell.
    - ``max_output_bytes``: output kept per terminal, whatever the agent asks.
    - ``max_terminals``: terminals not released yet, at most.
    - ``terminate_grace``: seconds between SIGTERM and SIGKILL.
    """
    if max_output_bytes < 0 or max_terminals < 1 or terminate_grace < 0:
        raise ValueError("max_output_bytes, max_terminals or terminate_grace out of range")
    start_dir = None if cwd is None else os.fspath(cwd)
    if start_dir is not None and not os.path.isabs(start_dir):
        raise ValueError(f"cwd must be an absolute path, not {start_dir!r}")
    with plain_exceptions():
        async with trio.open_nursery() as nursery:
            manager = TerminalManager._create(
                nursery,
                approve,
                env=env,
                cwd=start_dir,
                shell=shell,
                max_output_bytes=max_output_bytes,
                max_terminals=max_terminals,
                terminate_grace=terminate_grace,
            )
            try:
                yield manager
            finally:
                await manager._shutdown()
                nursery.cancel_scope.cancel()


class TerminalsMixin:
    """Mixin for a :class:`~acp_trio.Client` subclass: serves the
    ``terminal/*`` methods through :attr:`terminals`, which the subclass
    sets (from :func:`open_terminal_manager`). Put it before
    :class:`~acp_trio.Client` in the bases."""

    terminals: TerminalManager

    async def create_terminal(self, params: CreateTerminalRequest) -> CreateTerminalResponse:
        """Serve ``terminal/create`` with :attr:`terminals`: see
        :meth:`TerminalManager.create_terminal` for what it raises and what a cancellation does.
        """
        return await self.terminals.create_terminal(params)

    async def terminal_output(self, params: TerminalOutputRequest) -> TerminalOutputResponse:
        """Serve ``terminal/output`` with :attr:`terminals`: see
        :meth:`TerminalManager.terminal_output` for what it raises and what a cancellation does.
        """
        return await self.terminals.terminal_output(params)

    async def wait_for_terminal_exit(
        self, params: WaitForTerminalExitRequest
    ) -> WaitForTerminalExitResponse:
        """Serve ``terminal/wait_for_exit`` with :attr:`terminals`: see
        :meth:`TerminalManager.wait_for_terminal_exit` for what it raises and
        what a cancellation does.
        """
        return await self.terminals.wait_for_terminal_exit(params)

    async def kill_terminal(self, params: KillTerminalRequest) -> KillTerminalResponse:
        """Serve ``terminal/kill`` with :attr:`terminals`: see
        :meth:`TerminalManager.kill_terminal` for what it raises and what a cancellation does.
        """
        return await self.terminals.kill_terminal(params)

    async def release_terminal(self, params: ReleaseTerminalRequest) -> ReleaseTerminalResponse:
        """Serve ``terminal/release`` with :attr:`terminals`: see
        :meth:`TerminalManager.release_terminal` for what it raises and what a cancellation does.
        """
        return await self.terminals.release_terminal(params)
