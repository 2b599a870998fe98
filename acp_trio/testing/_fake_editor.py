"""A ready fake editor for agent tests: an in-memory workspace, a permission
policy, fake terminals, and a record of everything the agent sent.

:class:`FakeEditor` is a :class:`~acp_trio.Client` (a
:class:`ScenarioClient`, so :meth:`~ScenarioClient.wait_for_requests`,
:meth:`~ScenarioClient.texts` and :meth:`~ScenarioClient.received` work)
that an agent under test talks to, in memory
(:func:`~acp_trio.testing.open_memory_pair`) or as a process
(:func:`~acp_trio.open_spawned_agent`)::

    editor = FakeEditor({"main.py": "prnt('hi')\\n"}, permission="allow")
    async with open_memory_pair(MyAgent, editor) as pair:
        sid = await pair.new_session(editor.cwd)
        await pair.to_agent.prompt_text(sid, f"fix {editor.path('main.py')}")
    assert editor.files[editor.path("main.py")] == "print('hi')\\n"
    assert editor.states[sid].tool_calls  # the typed view of the session

Every method can be overridden (call ``super()`` for the default): each call
is recorded first, whether or not the override calls ``super()``; there is
no private method to call.
"""

from __future__ import annotations

import itertools
import posixpath
from collections.abc import Callable, Mapping
from typing import Any, Final, Literal

import attrs
import trio

from acp_trio._exceptions import RequestError
from acp_trio._version import __version__
from acp_trio.contrib import (
    Approver,
    PendingPermission,
    PermissionBroker,
    SessionStates,
    auto_allow,
    auto_reject,
)
from acp_trio.schema import (
    PROTOCOL_VERSION,
    ClientCapabilities,
    CreateTerminalRequest,
    CreateTerminalResponse,
    FileSystemCapabilities,
    Implementation,
    InitializeRequest,
    KillTerminalRequest,
    KillTerminalResponse,
    ReadTextFileRequest,
    ReadTextFileResponse,
    ReleaseTerminalRequest,
    ReleaseTerminalResponse,
    RequestPermissionRequest,
    RequestPermissionResponse,
    SessionNotification,
    TerminalExitStatus,
    TerminalOutputRequest,
    TerminalOutputResponse,
    WaitForTerminalExitRequest,
    WaitForTerminalExitResponse,
    WriteTextFileRequest,
    WriteTextFileResponse,
)
from acp_trio.testing._scenario import _RECORDED, HOLD_PATH, ScenarioClient, _recorded

__all__ = ["FakeCommand", "FakeEditor", "FakeTerminal", "PermissionPolicy"]

#: ``"allow"`` (:func:`~acp_trio.contrib.auto_allow`), ``"reject"``
#: (:func:`~acp_trio.contrib.auto_reject`), ``"cancel"`` (never answer: the
#: request waits until the turn is cancelled, then the SDK answers
#: ``cancelled``, or ``-32800`` for a ``$/cancel_request``), or any approver.
PermissionPolicy = Literal["allow", "reject", "cancel"] | Approver

# The terminal methods, recorded too (ScenarioClient records the others).
_TERMINAL_RECORDED: Final[dict[str, str | None]] = {
    "terminal_output": "terminal/output",
    "wait_for_terminal_exit": "terminal/wait_for_exit",
    "kill_terminal": "terminal/kill",
    "release_terminal": "terminal/release",
}
_ALL_RECORDED: Final = {**_RECORDED, **_TERMINAL_RECORDED}


@attrs.frozen
class FakeCommand:
    """What a fake terminal's command does: prints ``output`` and exits with
    ``exit_code`` (or is ended by ``signal``) after ``duration`` seconds
    (of Trio's clock: instant with the autojump clock)."""

    output: str = ""
    exit_code: int | None = 0
    signal: str | None = None
    duration: float = 0.0


@attrs.define(eq=False)
class FakeTerminal:
    """A terminal the agent created; nothing runs."""

    id: str
    params: CreateTerminalRequest
    command: FakeCommand
    output: str = ""
    exit_status: TerminalExitStatus | None = None
    killed: bool = False
    released: bool = False
    #: When the command ends on its own (Trio's clock).
    ends_at: float = 0.0
    exited: trio.Event = attrs.Factory(trio.Event)

    def exit(self, status: TerminalExitStatus) -> None:
        """End the command (if it is still running) with ``status``."""
        if self.exit_status is None:
            self.exit_status = status
            self.exited.set()

    def settle(self) -> None:
        """The command's own end, if its time has come."""
        if self.exit_status is None and trio.current_time() >= self.ends_at:
            self.output = self.command.output
            self.exit(
                TerminalExitStatus(exit_code=self.command.exit_code, signal=self.command.signal)
            )


def _default_command(params: CreateTerminalRequest) -> FakeCommand:
    return FakeCommand()


class FakeEditor(ScenarioClient):
    """A fake editor client for agent tests.

    - ``files``: the workspace, in memory (:attr:`files`, by absolute path;
      relative keys are under ``cwd``). Reads honour ``line`` and ``limit``;
      a missing file is ``-32002``; writes create or replace. A read of
      :data:`~acp_trio.testing.HOLD_PATH` (``/hold``) is never answered
      until it is cancelled, as the scenario vocabulary's test client does
      (``docs/scenario-agent.md``), so the scenario agent's ``nested`` and
      ``deadline`` behave with it as with :class:`ScenarioClient`.
    - ``permission``: the :data:`PermissionPolicy` of the
      :attr:`permissions` broker (default ``"allow"``).
    - ``read``, ``write``, ``terminal``: the capabilities advertised by
      :meth:`initialize_request` (``open_memory_pair`` sends it; with
      ``open_spawned_agent``, pass it to ``agent.initialize()``); a method
      not advertised answers ``-32601``.
    - ``commands``: what each terminal's command does (a
      :class:`FakeCommand` per ``terminal/create``; default: exits 0 at
      once, no output). Created terminals are kept in :attr:`terminals`,
      released or not.

    Recorded: :attr:`updates` (and :attr:`states`, one
    :class:`~acp_trio.contrib.SessionAccumulator` per session),
    :attr:`requests` (every request, in arrival order), :attr:`cancelled`.
    """

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name in _TERMINAL_RECORDED:
            if name in vars(cls):
                setattr(cls, name, _recorded(name, vars(cls)[name], _ALL_RECORDED))

    def __init__(
        self,
        files: Mapping[str, str] | None = None,
        *,
        cwd: str = "/workspace",
        permission: PermissionPolicy = "allow",
        read: bool = True,
        write: bool = True,
        terminal: bool = True,
        commands: Callable[[CreateTerminalRequest], FakeCommand] = _default_command,
    ) -> None:
        super().__init__()
        if not posixpath.isabs(cwd):
            raise ValueError(f"the workspace cwd must be absolute, not {cwd!r}")
        #: The workspace directory (what a test passes to ``session/new``).
        self.cwd = cwd
        #: The workspace: absolute path -> text.
        self.files: dict[str, str] = {self.path(k): v for k, v in (files or {}).items()}
        self.capabilities = ClientCapabilities(
            fs=FileSystemCapabilities(read_text_file=read, write_text_file=write),
            terminal=terminal,
        )
        #: The typed view of each session, folded from :attr:`updates`.
        self.states = SessionStates()
        self.permissions = PermissionBroker(self._approver(permission), states=self.states)
        self.commands = commands
        #: The terminals created, by id.
        self.terminals: dict[str, FakeTerminal] = {}
        self._terminal_ids = itertools.count(1)

    def _approver(self, permission: PermissionPolicy) -> Approver:
        if permission == "allow":
            return auto_allow
        if permission == "reject":
            return auto_reject
        if permission == "cancel":
            return self._hold_permission
        if isinstance(permission, str):
            raise ValueError(f"unknown permission policy {permission!r}")
        return permission

    async def _hold_permission(self, request: PendingPermission) -> str:
        await self.hold("session/request_permission", request.params)

    def path(self, path: str) -> str:
        """``path`` made absolute under :attr:`cwd` (an absolute one as is)."""
        return posixpath.normpath(posixpath.join(self.cwd, path))

    def initialize_request(self) -> InitializeRequest:
        """The ``initialize`` params: the capabilities chosen here."""
        return InitializeRequest(
            protocol_version=PROTOCOL_VERSION,
            client_capabilities=self.capabilities,
            client_info=Implementation(name="acp_trio-fake-editor", version=__version__),
        )

    @property
    def running_terminals(self) -> list[FakeTerminal]:
        """The terminals created and not released (a leak, after a turn)."""
        return [t for t in self.terminals.values() if not t.released]

    # -- what the agent calls

    async def session_update(self, params: SessionNotification) -> None:
        self.states.apply(params)

    async def request_permission(
        self, params: RequestPermissionRequest
    ) -> RequestPermissionResponse:
        return await self.permissions.handle(params)

    def _absolute(self, path: str) -> str:
        if not posixpath.isabs(path):
            raise RequestError.invalid_params({"path": path, "reason": "not an absolute path"})
        return posixpath.normpath(path)

    async def read_text_file(self, params: ReadTextFileRequest) -> ReadTextFileResponse:
        if not self.capabilities.fs.read_text_file:
            raise RequestError.method_not_found("fs/read_text_file")
        path = self._absolute(params.path)
        if path == HOLD_PATH:
            await self.hold("fs/read_text_file", params)
        if path not in self.files:
            raise RequestError.resource_not_found({"path": params.path})
        await trio.lowlevel.checkpoint()
        content = self.files[path]
        if params.line is None and params.limit is None:
            return ReadTextFileResponse(content=content)
        lines = content.splitlines(keepends=True)
        start = max((params.line or 1) - 1, 0)
        end = None if params.limit is None else start + params.limit
        return ReadTextFileResponse(content="".join(lines[start:end]))

    async def write_text_file(self, params: WriteTextFileRequest) -> WriteTextFileResponse:
        if not self.capabilities.fs.write_text_file:
            raise RequestError.method_not_found("fs/write_text_file")
        path = self._absolute(params.path)
        await trio.lowlevel.checkpoint()
        self.files[path] = params.content
        return WriteTextFileResponse()

    def _terminal(self, terminal_id: str) -> FakeTerminal:
        if not self.capabilities.terminal:
            raise RequestError.method_not_found("terminal")
        found = self.terminals.get(terminal_id)
        if found is None or found.released:
            raise RequestError.resource_not_found({"terminalId": terminal_id})
        return found

    async def create_terminal(self, params: CreateTerminalRequest) -> CreateTerminalResponse:
        if not self.capabilities.terminal:
            raise RequestError.method_not_found("terminal/create")
        command = self.commands(params)
        term = FakeTerminal(
            f"term-{next(self._terminal_ids)}",
            params,
            command,
            ends_at=trio.current_time() + command.duration,
        )
        self.terminals[term.id] = term
        term.settle()
        await trio.lowlevel.checkpoint()
        return CreateTerminalResponse(terminal_id=term.id)

    async def terminal_output(self, params: TerminalOutputRequest) -> TerminalOutputResponse:
        term = self._terminal(params.terminal_id)
        term.settle()
        await trio.lowlevel.checkpoint()
        return TerminalOutputResponse(
            output=term.output, truncated=False, exit_status=term.exit_status
        )

    async def wait_for_terminal_exit(
        self, params: WaitForTerminalExitRequest
    ) -> WaitForTerminalExitResponse:
        term = self._terminal(params.terminal_id)
        with trio.move_on_at(term.ends_at):
            await term.exited.wait()
        term.settle()
        status = term.exit_status
        assert status is not None
        await trio.lowlevel.checkpoint()
        return WaitForTerminalExitResponse(exit_code=status.exit_code, signal=status.signal)

    async def kill_terminal(self, params: KillTerminalRequest) -> KillTerminalResponse:
        term = self._terminal(params.terminal_id)
        term.killed = True
        term.exit(TerminalExitStatus(signal="SIGKILL"))
        await trio.lowlevel.checkpoint()
        return KillTerminalResponse()

    async def release_terminal(self, params: ReleaseTerminalRequest) -> ReleaseTerminalResponse:
        term = self._terminal(params.terminal_id)
        if term.exit_status is None:
            term.killed = True
            term.exit(TerminalExitStatus(signal="SIGKILL"))
        term.released = True
        await trio.lowlevel.checkpoint()
        return ReleaseTerminalResponse()


# FakeEditor's own terminal methods record the same way as a subclass's.
for _name in _TERMINAL_RECORDED:
    setattr(FakeEditor, _name, _recorded(_name, vars(FakeEditor)[_name], _ALL_RECORDED))
del _name
