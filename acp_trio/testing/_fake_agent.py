"""A scriptable fake agent for client tests.

:class:`FakeAgent` answers ``initialize`` and ``session/new`` with the
capabilities it is given, and runs a script of steps for each prompt::

    agent = FakeAgent([
        SendText("Looking..."),
        StartToolCall("call-1", "Edit main.py", kind="edit"),
        AskPermission("call-1"),
        ReadFile("/w/main.py"),
        WriteFile("/w/main.py", "print('hi')\\n"),
        UpdateToolCall("call-1", status="completed"),
        EndTurn("end_turn"),
    ])
    async with open_memory_pair(agent, MyClient()) as pair:
        sid = await pair.new_session()
        await pair.to_agent.prompt_text(sid, "fix it")
    turn = agent.turns[0]
    assert turn.results[2] is not None     # the option the client chose

What each step got back is in :attr:`FakeTurn.results` (in step order); what
the client sent is in :attr:`FakeAgent.received`. A step is any object with
``async def run(self, turn: FakeTurn) -> Any`` (the built-in ones below, or
:class:`Call` around a function). Cancellation needs nothing: a
``session/cancel`` cancels the running step (:class:`WaitForCancel` waits
for it) and the SDK answers ``stopReason: "cancelled"``; the turn is
marked :attr:`~FakeTurn.cancelled`.
"""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol

import attrs
import trio

from acp_trio import build
from acp_trio._exceptions import RequestError
from acp_trio._typed._agent import Agent, ClientProxy
from acp_trio._version import __version__
from acp_trio.schema import (
    PROTOCOL_VERSION,
    AgentCapabilities,
    AuthMethod,
    CancelNotification,
    Implementation,
    InitializeRequest,
    InitializeResponse,
    NewSessionRequest,
    NewSessionResponse,
    PermissionOption,
    PromptRequest,
    PromptResponse,
    ReadTextFileRequest,
    SessionUpdate,
    StopReason,
    ToolCallContent,
    ToolCallUpdate,
    WriteTextFileRequest,
)
from acp_trio.schema._generated_types import ToolCallStatus, ToolKind

__all__ = [
    "AskPermission",
    "Call",
    "EndTurn",
    "Fail",
    "FakeAgent",
    "FakeTurn",
    "ReadFile",
    "SendText",
    "SendThought",
    "SendUpdate",
    "Sleep",
    "StartToolCall",
    "Step",
    "UpdateToolCall",
    "WaitForCancel",
    "WriteFile",
]


@attrs.define(eq=False)
class FakeTurn:
    """One prompt turn of a :class:`FakeAgent`, as it ran."""

    agent: FakeAgent
    #: The prompt as the client sent it.
    params: PromptRequest
    #: What each step returned, in step order (so far).
    results: list[Any] = attrs.Factory(list)
    #: The stop reason answered (``None`` while running, or if it failed).
    stop_reason: StopReason | None = None
    #: Whether ``session/cancel`` (or the connection's end) cancelled it.
    cancelled: bool = False

    @property
    def session_id(self) -> str:
        """The id of the session the turn belongs to."""
        return self.params.session_id

    @property
    def client(self) -> ClientProxy:
        """The proxy to the client, for a :class:`Call` step."""
        return self.agent.client


class Step(Protocol):
    """One step of a :class:`FakeAgent` script."""

    async def run(self, turn: FakeTurn) -> Any:
        """Do it; the return value goes to :attr:`FakeTurn.results`.

        A cancellation of the turn (``session/cancel``, ``$/cancel_request``, a
        deadline) is raised inside it: let it propagate.
        """
        ...


@attrs.frozen
class SendText:
    """Stream an agent message chunk."""

    text: str

    async def run(self, turn: FakeTurn) -> None:
        """Send the message chunk.

        Raises :class:`~acp_trio.ConnectionClosed` once the connection is
        closing; cancelled with the turn while waiting for room in the output
        queue, it sends nothing.
        """
        await turn.client.session_update(turn.session_id, build.agent_message(self.text))


@attrs.frozen
class SendThought:
    """Stream an agent thought chunk."""

    text: str

    async def run(self, turn: FakeTurn) -> None:
        """Send the thought chunk.

        Raises :class:`~acp_trio.ConnectionClosed` once the connection is
        closing; cancelled with the turn while waiting for room in the output
        queue, it sends nothing.
        """
        await turn.client.session_update(turn.session_id, build.agent_thought(self.text))


@attrs.frozen
class SendUpdate:
    """Send any ``session/update`` (see :mod:`acp_trio.build`)."""

    update: SessionUpdate

    async def run(self, turn: FakeTurn) -> None:
        """Send the update as it is.

        Raises :class:`~acp_trio.ConnectionClosed` once the connection is
        closing; cancelled with the turn while waiting for room in the output
        queue, it sends nothing.
        """
        await turn.client.session_update(turn.session_id, self.update)


@attrs.frozen
class StartToolCall:
    """Announce a tool call (``tool_call``)."""

    tool_call_id: str
    title: str
    kind: ToolKind | None = None
    status: ToolCallStatus = "pending"
    content: Sequence[ToolCallContent] = ()

    async def run(self, turn: FakeTurn) -> None:
        """Send the ``tool_call`` start.

        Raises :class:`~acp_trio.ConnectionClosed` once the connection is
        closing; cancelled with the turn while waiting for room in the output
        queue, it sends nothing.
        """
        update = build.tool_call_start(
            self.tool_call_id, self.title, kind=self.kind, status=self.status, content=self.content
        )
        await turn.client.session_update(turn.session_id, update)


@attrs.frozen
class UpdateToolCall:
    """Update a tool call (``tool_call_update``): only what is given."""

    tool_call_id: str
    status: ToolCallStatus | None = None
    title: str | None = None
    content: Sequence[ToolCallContent] | None = None
    raw_output: Any = None

    async def run(self, turn: FakeTurn) -> None:
        """Send the ``tool_call_update``.

        Raises :class:`~acp_trio.ConnectionClosed` once the connection is
        closing; cancelled with the turn while waiting for room in the output
        queue, it sends nothing.
        """
        update = build.tool_call_update(
            self.tool_call_id,
            status=self.status,
            title=self.title,
            content=self.content,
            raw_output=self.raw_output,
        )
        await turn.client.session_update(turn.session_id, update)


@attrs.frozen
class AskPermission:
    """``session/request_permission`` for a tool call; the result is the
    option chosen, or ``None`` if the client answered ``cancelled``."""

    tool_call_id: str
    options: Sequence[PermissionOption] = build.ALLOW_OR_REJECT
    title: str | None = None

    async def run(self, turn: FakeTurn) -> PermissionOption | None:
        """Ask, and return the option chosen (``None`` for ``cancelled``).

        Raises :class:`~acp_trio.RequestError` for the client's refusal; the
        turn's cancellation cancels the request on the wire (``$/cancel_request``).
        """
        call = ToolCallUpdate(tool_call_id=self.tool_call_id, title=self.title)
        return await turn.client.ask_permission(turn.session_id, call, self.options)


@attrs.frozen
class ReadFile:
    """``fs/read_text_file``; the result is the text read."""

    path: str
    line: int | None = None
    limit: int | None = None

    async def run(self, turn: FakeTurn) -> str:
        """Read the file and return its text.

        Raises :class:`~acp_trio.RequestError` for the client's refusal; the
        turn's cancellation cancels the request on the wire (``$/cancel_request``).
        """
        request = ReadTextFileRequest(
            session_id=turn.session_id, path=self.path, line=self.line, limit=self.limit
        )
        return (await turn.client.read_text_file(request)).content


@attrs.frozen
class WriteFile:
    """Write ``content`` to ``path`` with ``fs/write_text_file``."""

    path: str
    content: str

    async def run(self, turn: FakeTurn) -> None:
        """Write the file.

        Raises :class:`~acp_trio.RequestError` for the client's refusal; the
        turn's cancellation cancels the request on the wire (``$/cancel_request``).
        """
        request = WriteTextFileRequest(
            session_id=turn.session_id, path=self.path, content=self.content
        )
        await turn.client.write_text_file(request)


@attrs.frozen
class Sleep:
    """Wait (Trio's clock: instant with the autojump clock)."""

    seconds: float

    async def run(self, turn: FakeTurn) -> None:
        """Sleep for :attr:`seconds`; the turn's cancellation ends the sleep at once."""
        await trio.sleep(self.seconds)


@attrs.frozen
class WaitForCancel:
    """Wait until the turn is cancelled (the SDK then answers ``cancelled``)."""

    async def run(self, turn: FakeTurn) -> None:
        """Sleep until the turn's cancellation (``session/cancel``,
        ``$/cancel_request``) ends it.
        """
        await trio.sleep_forever()


@attrs.frozen
class Fail:
    """Answer the prompt with a JSON-RPC error."""

    code: int
    message: str | None = None

    async def run(self, turn: FakeTurn) -> None:
        """Raise :class:`~acp_trio.RequestError` (``code``, ``message``) at once:
        it never waits, so no cancellation reaches it.
        """
        raise RequestError(self.code, self.message)


@attrs.frozen
class EndTurn:
    """End the turn now with ``stop_reason`` (a script without one ends
    ``end_turn`` after its last step)."""

    stop_reason: StopReason = "end_turn"

    async def run(self, turn: FakeTurn) -> StopReason:
        """Return :attr:`stop_reason` after one checkpoint (where a pending
        cancellation of the turn is raised instead).
        """
        await trio.lowlevel.checkpoint()
        return self.stop_reason


@attrs.frozen
class Call:
    """Run ``func(turn)``: anything the other steps do not cover."""

    func: Callable[[FakeTurn], Awaitable[Any]]

    async def run(self, turn: FakeTurn) -> Any:
        """Await ``func(turn)`` and return its result; the turn's cancellation
        is raised inside ``func``.
        """
        return await self.func(turn)


#: A script: the same steps for every prompt, or steps chosen per prompt.
Script = Sequence[Step] | Callable[[PromptRequest], Sequence[Step]]


class FakeAgent(Agent):
    """A scriptable agent for client tests.

    ``script`` runs for each ``session/prompt`` (see :data:`Script`);
    ``capabilities``, ``auth_methods`` and ``info`` are what ``initialize``
    answers (protocol version 1). Sessions are ``fake-1``, ``fake-2``, ...

    Recorded: :attr:`received` (``(method, params)`` of every
    ``initialize``, ``session/new``, ``session/prompt`` and
    ``session/cancel``, in arrival order), :attr:`turns`,
    :attr:`sessions`. Override any :class:`~acp_trio.Agent` method for
    more.
    """

    def __init__(
        self,
        script: Script = (),
        *,
        capabilities: AgentCapabilities | None = None,
        auth_methods: Sequence[AuthMethod] = (),
        info: Implementation | None = None,
    ) -> None:
        super().__init__()
        self.script = script
        self.capabilities = capabilities or AgentCapabilities()
        self.auth_methods = list(auth_methods)
        self.info = info or Implementation(name="acp_trio-fake-agent", version=__version__)
        self.received: list[tuple[str, Any]] = []
        self.turns: list[FakeTurn] = []
        self.sessions: list[str] = []
        self._ids = itertools.count(1)

    def steps(self, params: PromptRequest) -> Sequence[Step]:
        """The steps for this prompt."""
        return self.script(params) if callable(self.script) else self.script

    async def initialize(self, params: InitializeRequest) -> InitializeResponse:
        self.received.append(("initialize", params))
        return InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_capabilities=self.capabilities,
            auth_methods=self.auth_methods,
            agent_info=self.info,
        )

    async def new_session(self, params: NewSessionRequest) -> NewSessionResponse:
        self.received.append(("session/new", params))
        session_id = f"fake-{next(self._ids)}"
        self.sessions.append(session_id)
        return NewSessionResponse(session_id=session_id)

    async def prompt(self, params: PromptRequest) -> PromptResponse:
        self.received.append(("session/prompt", params))
        turn = FakeTurn(self, params)
        self.turns.append(turn)
        stop: StopReason = "end_turn"
        try:
            for step in self.steps(params):
                result = await step.run(turn)
                turn.results.append(result)
                if isinstance(step, EndTurn):
                    stop = step.stop_reason
                    break
        except trio.Cancelled:
            turn.cancelled = True
            raise
        turn.stop_reason = stop
        return PromptResponse(stop_reason=stop)

    async def cancel(self, params: CancelNotification) -> None:
        self.received.append(("session/cancel", params))
