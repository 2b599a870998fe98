"""The typed ACP v2 agent side: subclass :class:`Agent`, serve it with
:func:`serve_agent` / :func:`open_client` / :func:`run_agent`.

The v2 prompt lifecycle is built in. A ``session/prompt`` that arrives while
the session's turn runs is *held*: it is answered only when it is inserted,
after that turn ends. Inserting a prompt sends its ``user_message`` (with a
new ``messageId``) and ``state_update: running``, answers the request with
the ``messageId``, and runs :meth:`Agent.prompt` as the turn, in its own
cancel scope; the turn ends with ``state_update: idle`` and its stop reason,
exactly once: what :meth:`Agent.prompt` returns (default ``end_turn``),
``cancelled`` if ``session/cancel`` or ``session/close`` cancelled it, or
``error`` with the error if it raised.

``session/cancel`` cancels the running turn and answers every held prompt
``-32800``. ``tool_call/cancel`` / ``terminal/cancel`` cancel one tool call or
terminal opened with :meth:`Turn.tool_call` / :meth:`Turn.terminal` (``-32602``
for one that is unknown, finished or not cancellable). ``session/close`` does
what ``session/cancel`` does, also stops the session's background work, waits
for their final updates, and sends nothing for the session after its reply; a
prompt read once it has begun is answered ``-32002`` (session not found).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any, Final

import trio

from acp_trio._core._connection import Connection, ConnectionConfig
from acp_trio._core._framed import FramedStream
from acp_trio._core._groups import collapse_group, plain_exceptions
from acp_trio._core._open import open_connection, serve_connection
from acp_trio._core._requests import RequestContext, current_request
from acp_trio._exceptions import RequestError
from acp_trio._transports import open_stdio_stream
from acp_trio._typed._dispatch import (
    Extensible,
    Route,
    TypedHandler,
    implemented,
    one_connection,
)
from acp_trio._version import __version__
from acp_trio.schema import SchemaConverter
from acp_trio.schema.v2 import (
    METHODS,
    PROTOCOL_VERSION,
    AgentCapabilities,
    CancelSessionNotification,
    CancelTerminalRequest,
    CancelTerminalResponse,
    CancelToolCallRequest,
    CancelToolCallResponse,
    CloseSessionRequest,
    CloseSessionResponse,
    DeleteSessionRequest,
    DeleteSessionResponse,
    Error,
    Implementation,
    InitializeRequest,
    InitializeResponse,
    ListSessionsRequest,
    ListSessionsResponse,
    LoginAuthRequest,
    LoginAuthResponse,
    LogoutAuthRequest,
    LogoutAuthResponse,
    NewSessionRequest,
    NewSessionResponse,
    PromptRequest,
    PromptResponse,
    ResumeSessionRequest,
    ResumeSessionResponse,
    SessionCapabilities,
    SetSessionConfigOptionRequest,
    SetSessionConfigOptionResponse,
    UserMessage,
    converter,
)
from acp_trio.v2._client_proxy import ClientProxy
from acp_trio.v2._turn import Session, Turn, _shielded, error_of

__all__ = ["AGENT_METHODS", "Agent", "ClientProxy", "open_client", "run_agent", "serve_agent"]

_log = logging.getLogger("acp_trio.v2.agent")

#: The error code of an ``initialize`` asking for a version nobody serves.
UNSUPPORTED_PROTOCOL_VERSION: Final = -32022

#: Wire name -> :class:`Agent` method name, for every v2 method an agent handles.
AGENT_METHODS: Final[dict[str, str]] = {
    "initialize": "initialize",
    "auth/login": "login",
    "auth/logout": "logout",
    "session/new": "new_session",
    "session/list": "list_sessions",
    "session/resume": "resume_session",
    "session/close": "close_session",
    "session/delete": "delete_session",
    "session/set_config_option": "set_session_config_option",
    "session/prompt": "prompt",
    "session/cancel": "cancel",
}


def _not_found(method: str) -> RequestError:
    return RequestError.method_not_found(method)


class Agent(Extensible):
    """Base class of an ACP v2 agent: override the methods you support.

    :attr:`client` is the proxy to the client of the one connection this
    object serves. The defaults answer ``-32601`` except :meth:`initialize`
    (protocol version 2, :attr:`info`, ``capabilities.session``),
    :meth:`close_session` (the SDK has already ended the session's work) and
    :meth:`cancel` (the SDK has already cancelled).
    """

    client: ClientProxy

    #: Sent as ``info`` by the default :meth:`initialize`.
    info: Implementation = Implementation(name="acp_trio", version=__version__)

    async def initialize(self, params: InitializeRequest) -> InitializeResponse:
        """``initialize``: protocol version 2 and what the agent can do.
        ``$/cancel_request`` or the connection closing cancels it (let ``trio.Cancelled`` propagate:
        ``-32800`` is answered)."""
        return InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            info=self.info,
            capabilities=AgentCapabilities(session=SessionCapabilities()),
        )

    async def login(self, params: LoginAuthRequest) -> LoginAuthResponse | None:
        """``auth/login``. Default: ``-32601``. ``$/cancel_request`` or the connection closing
        cancels it (let ``trio.Cancelled`` propagate: ``-32800`` is answered)."""
        raise _not_found("auth/login")

    async def logout(self, params: LogoutAuthRequest) -> LogoutAuthResponse | None:
        """``auth/logout``. Default: ``-32601``. ``$/cancel_request`` or the connection closing
        cancels it (let ``trio.Cancelled`` propagate: ``-32800`` is answered)."""
        raise _not_found("auth/logout")

    async def new_session(self, params: NewSessionRequest) -> NewSessionResponse:
        """``session/new``. Default: ``-32601``. ``$/cancel_request`` or the connection closing
        cancels it (let ``trio.Cancelled`` propagate: ``-32800`` is answered)."""
        raise _not_found("session/new")

    async def list_sessions(self, params: ListSessionsRequest) -> ListSessionsResponse:
        """``session/list``, part of the ``capabilities.session`` baseline.
        Default: no sessions (an agent that keeps none). ``$/cancel_request`` or
        the connection closing cancels it (let ``trio.Cancelled`` propagate:
        ``-32800`` is answered)."""
        return ListSessionsResponse(sessions=[])

    async def resume_session(self, params: ResumeSessionRequest) -> ResumeSessionResponse:
        """``session/resume``, part of the ``capabilities.session`` baseline.
        Default: ``-32002`` (session not found) with ``{sessionId}``, as for an
        agent that keeps no sessions. ``$/cancel_request`` or the connection
        closing cancels it (let ``trio.Cancelled`` propagate: ``-32800`` is
        answered)."""
        raise RequestError.resource_not_found({"sessionId": params.session_id})

    async def close_session(self, params: CloseSessionRequest) -> CloseSessionResponse | None:
        """``session/close``, called after the SDK ended the session's turn,
        held prompts and background work. Default: success. ``$/cancel_request`` or the connection
        closing cancels it (let ``trio.Cancelled`` propagate: ``-32800`` is answered)."""
        return None

    async def delete_session(self, params: DeleteSessionRequest) -> DeleteSessionResponse | None:
        """``session/delete``. Default: ``-32601``. ``$/cancel_request`` or the connection closing
        cancels it (let ``trio.Cancelled`` propagate: ``-32800`` is answered)."""
        raise _not_found("session/delete")

    async def set_session_config_option(
        self, params: SetSessionConfigOptionRequest
    ) -> SetSessionConfigOptionResponse:
        """``session/set_config_option``. Default: ``-32601``. ``$/cancel_request`` or the
        connection closing cancels it (let ``trio.Cancelled`` propagate: ``-32800`` is answered)."""
        raise _not_found("session/set_config_option")

    async def prompt(self, params: PromptRequest, turn: Turn) -> str | None:
        """Run one inserted prompt as ``turn``; return its stop reason
        (``None`` means ``"end_turn"``).

        The request was already answered (accepted, with
        ``turn.message_id``). Send output with ``turn.send(...)``; open tool
        calls and terminals with :meth:`Turn.tool_call` /
        :meth:`Turn.terminal`. ``session/cancel`` cancels the call (let
        ``trio.Cancelled`` propagate): the SDK reports ``idle`` with
        ``cancelled``. An exception is reported as ``idle`` with
        ``stopReason: "error"`` and the error. Default: ``end_turn`` at once.
        """
        return None

    async def cancel(self, params: CancelSessionNotification) -> None:
        """``session/cancel``, called after the SDK cancelled the session's
        turn and held prompts. It runs in the notification consumer, which only
        the connection closing cancels."""

    async def ext_method(self, method: str, params: Any) -> Any:
        """An extension request no added handler takes. Default: ``-32601``. ``$/cancel_request`` or
        the connection closing cancels it (let ``trio.Cancelled`` propagate: ``-32800`` is
        answered)."""
        raise _not_found(method)

    async def ext_notification(self, method: str, params: Any) -> None:
        """An extension notification no added handler takes; ignored. It runs in
        wire order in the notification consumer, which only the connection
        closing cancels."""


class _AgentHandler(TypedHandler):
    def __init__(self, agent: Agent, proxy: ClientProxy, nursery: trio.Nursery) -> None:
        self.agent = agent
        self.proxy = proxy
        self.nursery = nursery
        self.sessions: dict[str, Session] = {}
        self._initialized = False
        self._held: dict[RequestContext, tuple[Session, tuple[trio.CancelScope, trio.Event]]] = {}
        #: Prompts read while their session was closing: answered -32002.
        self._refused: set[RequestContext] = set()
        requests: dict[str, Route] = {}
        notifications: dict[str, Route] = {}
        for wire, attr in AGENT_METHODS.items():
            info = METHODS[wire]
            table = requests if info.kind == "request" else notifications
            table[wire] = Route(info.params, getattr(agent, attr))
        requests["session/prompt"] = Route(PromptRequest, self._prompt)
        requests["session/close"] = Route(CloseSessionRequest, self._close)
        requests["tool_call/cancel"] = Route(CancelToolCallRequest, self._cancel_tool_call)
        requests["terminal/cancel"] = Route(CancelTerminalRequest, self._cancel_terminal)
        requests["initialize"] = Route(InitializeRequest, self._initialize)
        super().__init__(
            requests,
            notifications,
            agent.ext_method,
            agent.ext_notification,
            agent._extension_handlers(),
            intercepts={"session/cancel": self._cancel_now},
            schema_converter=proxy.converter,
        )

    def session(self, session_id: str) -> Session:
        session = self.sessions.get(session_id)
        if session is None or session.closed:
            session = self.sessions[session_id] = Session(session_id, self.proxy, self.nursery)
        return session

    async def handle_request(self, ctx: RequestContext, method: str, params: Any) -> Any:
        if method == "initialize":
            # On the number, before the params' shape: a v1 initialize has no
            # ``info`` and would read as -32602.
            requested = params.get("protocolVersion") if isinstance(params, dict) else None
            if isinstance(requested, int) and not isinstance(requested, bool) and requested < 2:
                if self._initialized:
                    # A repeat must ask for the version chosen first.
                    raise RequestError.invalid_request(
                        {"message": "initialize was already answered with version 2"}
                    )
                raise RequestError(
                    UNSUPPORTED_PROTOCOL_VERSION,
                    "Unsupported protocol version",
                    {"requested": requested, "supported": [PROTOCOL_VERSION]},
                )
        return await super().handle_request(ctx, method, params)

    async def _initialize(self, params: InitializeRequest) -> InitializeResponse:
        self.proxy.capabilities = params.capabilities
        result = await self.agent.initialize(params)
        self._initialized = True
        return result

    # Held prompts are queued the moment they are read (before their task
    # starts), so a session/cancel read right after them answers them too.
    def request_received(self, ctx: RequestContext, params: Any) -> None:
        if ctx.method == "session/prompt" and isinstance(params, dict):
            session_id = params.get("sessionId")
            if isinstance(session_id, str):
                if self._closing(session_id):
                    self._refused.add(ctx)
                else:
                    session = self.session(session_id)
                    self._held[ctx] = (session, session.hold())

    def request_finished(self, ctx: RequestContext) -> None:
        self._refused.discard(ctx)
        held = self._held.pop(ctx, None)
        if held is not None:
            held[0].unhold(held[1])

    def _closing(self, session_id: str) -> bool:
        session = self.sessions.get(session_id)
        return session is not None and session.closing

    async def _prompt(self, params: PromptRequest) -> PromptResponse:
        ctx = current_request()
        if self._closing(params.session_id) or ctx in self._refused:
            # Read after session/close began: the session is gone (and close
            # must not wait for a turn that starts behind it).
            raise RequestError.resource_not_found({"sessionId": params.session_id})
        # Held when read: a close since then has cancelled its entry.
        held = self._held.get(ctx) if ctx is not None else None
        if held is None or held[0].id != params.session_id:
            session = self.session(params.session_id)
            if ctx is not None:
                self._held[ctx] = held = (session, session.hold())
            else:
                held = (session, session.hold())
        session, entry = held
        scope, go = entry
        try:
            with scope:
                await go.wait()
        finally:
            if scope.cancel_called or not go.is_set():
                session.unhold(entry)
        if scope.cancel_called:
            raise RequestError.request_cancelled()
        # Inserted: from here nothing may stop the prompt's answer.
        session.held.remove(entry)
        message_id = str(uuid.uuid4())
        turn = Turn._create(session, params, message_id)
        session.turn = turn
        await _shielded(session.send(UserMessage(message_id=message_id, content=params.prompt)))
        await _shielded(session.send_state("running"))
        session.start(lambda: self._run_turn(turn))
        return PromptResponse(message_id=message_id)

    async def _run_turn(self, turn: Turn) -> None:
        session = turn.session
        stop_reason: str = "cancelled"
        error = None
        try:
            try:
                with turn.scope:
                    result = await self.agent.prompt(turn.params, turn)
                    stop_reason = "end_turn" if result is None else result
            except BaseExceptionGroup as group:
                # A nursery of the handler: its errors are the turn's; what
                # else it holds (an outer cancellation) goes on.
                failed, rest = group.split(Exception)
                if failed is not None:
                    error = self._failed(turn, failed)
                if rest is not None:
                    raise rest from None
            except Exception as exc:
                error = self._failed(turn, exc)
            if error is not None:
                stop_reason = "error"
            elif turn.scope.cancel_called:
                stop_reason = "cancelled"
        finally:
            # Every exit path, also the connection closing: the turn ends
            # once, and the next held prompt goes in after its idle.
            extra = {"error": error} if error is not None else {}
            await _shielded(session.send_state("idle", stop_reason, **extra))
            session.turn = None
            session.advance()

    @staticmethod
    def _failed(turn: Turn, exc: BaseException) -> Error | None:
        """The error the turn's idle reports for ``exc``; none if the turn
        was cancelled (the error is then a consequence, only logged)."""
        leaf = collapse_group(exc) if isinstance(exc, BaseExceptionGroup) else exc
        # A RequestError is the handler's answer; anything else a bug.
        trace = not isinstance(leaf, RequestError)
        if turn.scope.cancel_called:
            _log.debug("turn of session %s failed while cancelled", turn.session.id, exc_info=exc)
            return None
        _log.warning("turn of session %s failed", turn.session.id, exc_info=exc if trace else False)
        return error_of(leaf)

    async def _close(self, params: CloseSessionRequest) -> CloseSessionResponse | None:
        session = self.sessions.get(params.session_id)
        if session is not None:
            session.closing = True
            session.cancel()
            session.cancel_background()
            await session.drain()
            session.closed = True
            del self.sessions[params.session_id]
        return await self.agent.close_session(params)

    async def _cancel_tool_call(self, params: CancelToolCallRequest) -> CancelToolCallResponse:
        session = self.sessions.get(params.session_id)
        if session is None:
            raise RequestError.invalid_params({"toolCallId": params.tool_call_id})
        session.cancel_entity(session.tool_calls, params.tool_call_id, "toolCall")
        return CancelToolCallResponse()

    async def _cancel_terminal(self, params: CancelTerminalRequest) -> CancelTerminalResponse:
        session = self.sessions.get(params.session_id)
        if session is None:
            raise RequestError.invalid_params({"terminalId": params.terminal_id})
        session.cancel_entity(session.terminals, params.terminal_id, "terminal")
        return CancelTerminalResponse()

    def _cancel_now(self, params: dict[str, Any]) -> None:
        session_id = params.get("sessionId")
        session = self.sessions.get(session_id) if isinstance(session_id, str) else None
        if session is not None:
            session.cancel()


def _make_agent(agent: Agent | Callable[[], Agent]) -> Agent:
    if isinstance(agent, Agent):
        return agent
    if not callable(agent) or (isinstance(agent, type) and not issubclass(agent, Agent)):
        raise TypeError(
            f"expected your v2 Agent (or a factory of one), got {agent!r}; a v2 "
            f"Client talks to an agent with acp_trio.v2.open_agent(client, stream) "
            f"or acp_trio.v2.open_spawned_agent(client, command)"
        )
    made = agent()
    if not isinstance(made, Agent):
        raise TypeError(f"the agent factory {agent!r} returned {made!r}, not a v2 Agent")
    return made


@contextmanager
def _serving(agent: Agent | Callable[[], Agent]) -> Iterator[Agent]:
    made = _make_agent(agent)
    name = type(made).__name__
    error = (
        f"this {name} object is already serving a connection; pass a factory "
        f"(e.g. the class {name}) to serve one agent per connection"
    )
    with one_connection(made, error):
        yield made


def agent_handler(
    agent: Agent, nursery: trio.Nursery, schema_converter: SchemaConverter = converter
) -> Callable[[Connection], _AgentHandler]:
    """The handler factory of a v2 agent whose turns run in ``nursery``."""

    def make(connection: Connection) -> _AgentHandler:
        proxy = ClientProxy._create(connection, schema_converter)
        agent.client = proxy
        return _AgentHandler(agent, proxy, nursery)

    return make


async def serve_agent(
    agent: Agent | Callable[[], Agent],
    stream: trio.abc.Stream | FramedStream,
    *,
    config: ConnectionConfig | None = None,
    task_status: trio.TaskStatus[Connection] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve the v2 ``agent`` (or a new one from the factory) on ``stream``
    until the connection closes; the turns and background work still
    running then are cancelled."""
    with _serving(agent) as made, plain_exceptions():
        async with trio.open_nursery() as nursery:
            await serve_connection(
                stream, agent_handler(made, nursery), config=config, task_status=task_status
            )
            nursery.cancel_scope.cancel()


@asynccontextmanager
async def open_client(
    agent: Agent | Callable[[], Agent],
    stream: trio.abc.Stream | FramedStream,
    *,
    config: ConnectionConfig | None = None,
) -> AsyncIterator[ClientProxy]:
    """Serve the v2 ``agent`` on ``stream`` for the block; yields the proxy
    to the client. Leaving the block, also by an exception or a
    cancellation, closes the connection and cancels the running turns."""
    with _serving(agent) as made, plain_exceptions():
        async with trio.open_nursery() as nursery:
            async with open_connection(stream, agent_handler(made, nursery), config=config):
                yield made.client
            nursery.cancel_scope.cancel()


async def run_agent(
    agent: Agent | Callable[[], Agent], *, config: ConnectionConfig | None = None
) -> None:
    """Serve the v2 ``agent`` on this process's stdin and stdout until the
    client closes them (see :func:`acp_trio.v2.run_router` to serve v1 and v2
    clients alike). Cancelling it closes the connection: running requests
    are answered ``-32800`` and the turns cancelled."""
    async with open_stdio_stream() as stream:
        await serve_agent(agent, stream, config=config)


def implemented_methods(agent: Agent) -> list[str]:
    """The wire methods ``agent``'s class overrides (for diagnostics)."""
    return [w for w, a in AGENT_METHODS.items() if implemented(agent, Agent, a)]
