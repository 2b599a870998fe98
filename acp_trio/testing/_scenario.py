"""The reference scenario agent and its matching test client.

Both follow the shared vocabulary of ``docs/scenario-agent.md``: the text of a
prompt picks what the agent does (``echo``, ``stream``, ``read``, ``write``,
``wait_for_cancel``, ``nested``, ``deadline``, ``permission``, ``fail``,
``sleep``), and the test client holds the requests a scenario needs held
until they are cancelled. Neither contains any cancellation code: the SDK
cancels nested requests on the wire and answers cancelled turns.

Public in :mod:`acp_trio.testing`; it sits below both the test kit and
:mod:`acp_trio.v2` (whose scenario router serves this agent for v1).
"""

from __future__ import annotations

import contextvars
import functools
import itertools
import sys
from collections.abc import Awaitable, Callable, Mapping
from contextlib import suppress
from typing import Any, ClassVar, Final, NoReturn

import trio

from acp_trio._exceptions import ConnectionClosed, RequestError
from acp_trio._typed._agent import Agent, run_agent
from acp_trio._typed._client import Client
from acp_trio._version import __version__
from acp_trio.schema import (
    PROTOCOL_VERSION,
    AgentCapabilities,
    ClientCapabilities,
    ContentChunk,
    CreateTerminalRequest,
    CreateTerminalResponse,
    FileSystemCapabilities,
    Implementation,
    InitializeRequest,
    InitializeResponse,
    NewSessionRequest,
    NewSessionResponse,
    PermissionOption,
    PromptRequest,
    PromptResponse,
    ReadTextFileRequest,
    ReadTextFileResponse,
    ReleaseTerminalRequest,
    RequestPermissionRequest,
    RequestPermissionResponse,
    SelectedPermissionOutcome,
    SessionNotification,
    TextContent,
    ToolCallUpdate,
    WriteTextFileRequest,
    WriteTextFileResponse,
)

__all__ = [
    "HOLD_PATH",
    "SCENARIO_AGENT_COMMAND",
    "SCENARIO_CLIENT_CAPABILITIES",
    "ScenarioAgent",
    "ScenarioClient",
    "run_scenario_agent",
]

#: The command serving the scenario agent on stdio, with this interpreter.
SCENARIO_AGENT_COMMAND: Final = (sys.executable, "-m", "acp_trio", "scenario-agent")

#: The path the test client never answers a read of (until cancelled).
HOLD_PATH: Final = "/hold"

#: What the matching test client advertises: files both ways and terminals.
SCENARIO_CLIENT_CAPABILITIES: Final = ClientCapabilities(
    fs=FileSystemCapabilities(read_text_file=True, write_text_file=True), terminal=True
)

_END_TURN: Final = PromptResponse(stop_reason="end_turn")


def _first_text(params: PromptRequest) -> str:
    for block in params.prompt:
        if isinstance(block, TextContent):
            return block.text.strip()
    return ""


def _permission_request(session_id: str) -> RequestPermissionRequest:
    return RequestPermissionRequest(
        session_id=session_id,
        tool_call=ToolCallUpdate(tool_call_id="scenario-call", title="scenario tool call"),
        options=[
            PermissionOption(option_id="allow", name="Allow", kind="allow_once"),
            PermissionOption(option_id="reject", name="Reject", kind="reject_once"),
        ],
    )


def _permission_text(response: RequestPermissionResponse) -> str:
    outcome = response.outcome
    if isinstance(outcome, SelectedPermissionOutcome):
        return f"permission: selected {outcome.option_id}"
    return "permission: cancelled"


class _BadCommand(Exception):
    pass


def _int(word: str, what: str) -> int:
    try:
        return int(word)
    except ValueError:
        raise _BadCommand(f"{what} must be an integer, not {word!r}") from None


class ScenarioAgent(Agent):
    """The reference agent of the scenario vocabulary (typed API).

    Serve it on stdio with ``python -m acp_trio scenario-agent`` (or
    :func:`run_scenario_agent`), or in memory with
    :func:`acp_trio.testing.open_memory_pair`. Subclass it to add commands:
    :meth:`run_command` receives the command's words.
    """

    name: ClassVar[str] = "acp_trio-scenario-agent"
    version: ClassVar[str] = __version__
    #: Seconds ``nested`` waits for its ``terminal/release`` on the way out,
    #: cancelled or not: a client that never answers must not hold the turn.
    release_timeout: ClassVar[float] = 5.0

    def __init__(self) -> None:
        super().__init__()
        self._session_ids = itertools.count(1)
        self.sessions: set[str] = set()

    async def initialize(self, params: InitializeRequest) -> InitializeResponse:
        # Protocol version 1 whatever the client asked: it is our only (and
        # so our latest) version.
        return InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_capabilities=AgentCapabilities(load_session=False),
            agent_info=Implementation(name=self.name, version=self.version),
        )

    async def new_session(self, params: NewSessionRequest) -> NewSessionResponse:
        session_id = f"scenario-{next(self._session_ids)}"
        self.sessions.add(session_id)
        return NewSessionResponse(session_id=session_id)

    async def prompt(self, params: PromptRequest) -> PromptResponse:
        text = _first_text(params)
        words = text.split()
        try:
            return await self.run_command(params.session_id, text, words)
        except _BadCommand as exc:
            raise RequestError.invalid_params({"command": text, "problem": str(exc)}) from None

    async def run_command(self, session_id: str, text: str, words: list[str]) -> PromptResponse:
        """Run one command: ``text`` is the trimmed prompt, ``words`` its
        words. Override to add commands; call ``super()`` for the rest.

        An unknown command streams the text ``unknown command``; ``fail CODE``
        raises :class:`~acp_trio.RequestError` ``CODE``. Runs inside the
        prompt's turn: ``session/cancel`` cancels it like the rest of the turn
        (the prompt answers ``cancelled``).
        """
        command = words[0] if words else ""
        args = words[1:]
        send = self.client.send_text
        if command == "echo":
            await send(session_id, text[len("echo ") :] if len(text) > 4 else "")
        elif command == "stream" and 1 <= len(args) <= 2:
            count = _int(args[0], "n")
            size = _int(args[1], "size") if len(args) > 1 else 16
            for i in range(count):
                await send(session_id, str(i).ljust(size, "."))
        elif command == "read" and len(args) == 2:
            count, path = _int(args[0], "n"), args[1]
            total = 0
            for _ in range(count):
                read = await self.client.read_text_file(
                    ReadTextFileRequest(session_id=session_id, path=path)
                )
                total += len(read.content)
            await send(session_id, f"read {count} {total}")
        elif command == "write" and len(args) == 3:
            count, path, size = _int(args[0], "n"), args[1], _int(args[2], "size")
            content = "x" * size
            for _ in range(count):
                await self.client.write_text_file(
                    WriteTextFileRequest(session_id=session_id, path=path, content=content)
                )
        elif command == "wait_for_cancel" and not args:
            await trio.sleep_forever()
        elif command == "nested" and not args:
            await self._nested(session_id)
        elif command == "deadline" and len(args) == 1:
            await self._deadline(session_id, _int(args[0], "ms"))
        elif command == "permission" and not args:
            try:
                response = await self.client.request_permission(_permission_request(session_id))
                answer = _permission_text(response)
            except RequestError as exc:
                if not exc.is_cancelled:
                    raise
                answer = "permission: cancelled"
            await send(session_id, answer)
        elif command == "fail" and args:
            code = _int(args[0], "code")
            message = text.split(None, 2)[2] if len(args) > 1 else None
            raise RequestError(code, message)
        elif command == "sleep" and len(args) == 1:
            await trio.sleep(_int(args[0], "ms") / 1000)
        else:
            await send(session_id, "unknown command")
        return _END_TURN

    async def _nested(self, session_id: str) -> None:
        caps = self.client.capabilities or ClientCapabilities()
        answers: dict[str, str] = {}
        terminals: list[str] = []

        async def answer(key: str, call: Any) -> None:
            try:
                answers[key] = await call()
            except RequestError as exc:
                answers[key] = f"{key}: error {exc.code}"

        async def terminal() -> str:
            created = await self.client.create_terminal(
                CreateTerminalRequest(session_id=session_id, command="sleep", args=["3600"])
            )
            terminals.append(created.terminal_id)
            return f"terminal: {created.terminal_id}"

        async def permission() -> str:
            return _permission_text(
                await self.client.request_permission(_permission_request(session_id))
            )

        async def read() -> str:
            result = await self.client.read_text_file(
                ReadTextFileRequest(session_id=session_id, path=HOLD_PATH)
            )
            return f"read: {len(result.content)} characters"

        try:
            async with trio.open_nursery() as nursery:
                if caps.terminal:
                    nursery.start_soon(answer, "terminal", terminal)
                nursery.start_soon(answer, "permission", permission)
                if caps.fs.read_text_file:
                    nursery.start_soon(answer, "read", read)
            chunks = [answers[key] for key in ("terminal", "permission", "read") if key in answers]
            for i, chunk in enumerate(chunks):
                # Chunks are parts of one message: a space between answers.
                await self.client.send_text(session_id, chunk if i == 0 else f" {chunk}")
        finally:
            await self._release_terminals(session_id, terminals)

    async def _release_terminals(self, session_id: str, terminal_ids: list[str]) -> None:
        """``terminal/release`` each terminal we created, on every way out.

        The client runs ``sleep 3600`` until it is released, so a cancelled
        turn must release too: shielded from the cancellation, and bounded by
        :attr:`release_timeout` (then the release is cancelled on the wire).
        Errors are ignored: the turn's outcome does not depend on them.
        """
        with trio.CancelScope(shield=True) as scope:
            scope.deadline = trio.current_time() + self.release_timeout
            for terminal_id in terminal_ids:
                with suppress(RequestError, ConnectionClosed):
                    await self.client.release_terminal(
                        ReleaseTerminalRequest(session_id=session_id, terminal_id=terminal_id)
                    )

    async def _deadline(self, session_id: str, ms: int) -> None:
        caps = self.client.capabilities or ClientCapabilities()
        with trio.move_on_after(ms / 1000) as deadline:
            if caps.fs.read_text_file:
                result = await self.client.read_text_file(
                    ReadTextFileRequest(session_id=session_id, path=HOLD_PATH)
                )
                await self.client.send_text(session_id, f"read: {len(result.content)} characters")
                return
            await trio.sleep_forever()
        if deadline.cancelled_caught:
            # The read was cancelled on the wire as the scope unwound.
            raise RequestError.request_cancelled({"reason": f"deadline of {ms} ms"})


async def run_scenario_agent() -> None:
    """Serve a :class:`ScenarioAgent` on this process's stdio, until the
    client closes it; SIGINT and SIGTERM shut it down in order (see
    :func:`~acp_trio.run_agent`: running requests cancelled, answered
    ``-32800``, output flushed).
    """
    await run_agent(ScenarioAgent())


# Set while a recorded call runs in this task: a subclass's override that
# calls super() is recorded once.
_recording: contextvars.ContextVar[bool] = contextvars.ContextVar("_recording", default=False)

#: The ScenarioClient methods whose calls it records, and under what name.
_RECORDED: Final = {
    "read_text_file": "fs/read_text_file",
    "write_text_file": "fs/write_text_file",
    "create_terminal": "terminal/create",
    "request_permission": "session/request_permission",
    "session_update": None,  # kept in .updates
}


def _recorded(
    name: str, func: Callable[..., Awaitable[Any]], table: Mapping[str, str | None] = _RECORDED
) -> Callable[..., Awaitable[Any]]:
    method = table[name]

    @functools.wraps(func)
    async def record_then_run(self: ScenarioClient, params: Any) -> Any:
        if _recording.get():
            return await func(self, params)
        token = _recording.set(True)
        try:
            if method is None:
                self.updates.append(params)
            else:
                self._record(method, params)
            return await func(self, params)
        finally:
            _recording.reset(token)

    return record_then_run


class ScenarioClient(Client):
    """The matching test client of the scenario vocabulary. (To test your
    own agent, :class:`~acp_trio.testing.FakeEditor`, a subclass with a
    workspace, a permission policy and terminals, is the one to reach for.)

    It advertises :data:`SCENARIO_CLIENT_CAPABILITIES` (see
    :meth:`initialize_request`), answers reads of any path but
    :data:`HOLD_PATH` with 64 ``x``, writes with ``{}``, and holds reads of
    :data:`HOLD_PATH`, ``terminal/create`` and ``session/request_permission``
    until they are cancelled (the SDK answers them: ``-32800`` after a
    ``$/cancel_request``, ``cancelled`` for a permission request of a
    session the client cancelled).

    What it saw: :attr:`updates`, :attr:`requests` (``(method, params)`` in
    arrival order), :attr:`cancelled` (methods whose held request was
    cancelled). Override :meth:`hold` to answer held requests differently,
    or any method: a subclass's ``session_update``, ``read_text_file``,
    ``write_text_file``, ``create_terminal`` and ``request_permission`` are
    recorded too (once, also when they call ``super()``), so
    :meth:`wait_for_requests` and :meth:`texts` keep working.
    """

    capabilities: ClientCapabilities = SCENARIO_CLIENT_CAPABILITIES

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name in _RECORDED:
            if name in vars(cls):
                setattr(cls, name, _recorded(name, vars(cls)[name]))

    def __init__(self) -> None:
        super().__init__()
        self.updates: list[SessionNotification] = []
        self.requests: list[tuple[str, Any]] = []
        self.cancelled: list[str] = []
        self._changed = trio.Event()

    def initialize_request(self) -> InitializeRequest:
        """The ``initialize`` params this client sends."""
        return InitializeRequest(
            protocol_version=PROTOCOL_VERSION,
            client_capabilities=self.capabilities,
            client_info=Implementation(name="acp_trio-scenario-client", version=__version__),
        )

    def _record(self, method: str, params: Any) -> None:
        self.requests.append((method, params))
        self._changed.set()
        self._changed = trio.Event()

    def texts(self, session_id: str | None = None) -> list[str]:
        """The text of every agent message chunk received, in order."""
        out: list[str] = []
        for note in self.updates:
            if session_id is not None and note.session_id != session_id:
                continue
            update = note.update
            if isinstance(update, ContentChunk) and isinstance(update.content, TextContent):
                out.append(update.content.text)
        return out

    def received(self, method: str) -> list[Any]:
        """Params of the requests of ``method`` received so far."""
        return [params for name, params in self.requests if name == method]

    async def wait_for_requests(self, method: str, count: int = 1) -> list[Any]:
        """Wait until ``count`` requests of ``method`` arrived; return their
        params. Bound it with ``trio.fail_after``: it never times out itself,
        and cancelling the wait changes nothing.
        """
        while len(found := self.received(method)) < count:
            await self._changed.wait()
        return found

    async def hold(self, method: str, params: Any) -> NoReturn:
        """Never answer on our own; wait to be cancelled."""
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            self.cancelled.append(method)
            raise

    async def session_update(self, params: SessionNotification) -> None:
        pass  # recorded in .updates by the wrapper (see __init_subclass__)

    async def read_text_file(self, params: ReadTextFileRequest) -> ReadTextFileResponse:
        if params.path == HOLD_PATH:
            await self.hold("fs/read_text_file", params)
        return ReadTextFileResponse(content="x" * 64)

    async def write_text_file(self, params: WriteTextFileRequest) -> WriteTextFileResponse:
        return WriteTextFileResponse()

    async def create_terminal(self, params: CreateTerminalRequest) -> CreateTerminalResponse:
        await self.hold("terminal/create", params)

    async def request_permission(
        self, params: RequestPermissionRequest
    ) -> RequestPermissionResponse:
        await self.hold("session/request_permission", params)


# ScenarioClient's own methods record the same way as a subclass's.
for _name in _RECORDED:
    setattr(ScenarioClient, _name, _recorded(_name, vars(ScenarioClient)[_name]))
del _name
