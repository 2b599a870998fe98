"""The typed agent side: subclass :class:`Agent`, run it with :func:`run_agent`.

Each client→agent method of ACP v1 is one async method taking its schema
params class and returning its schema result class. The defaults answer
``-32601`` (method not found), except ``initialize`` (answers protocol
version 1) and ``session/cancel`` (nothing to do: the SDK already cancelled
the turn). The ``initialize`` answer sent advertises the session methods
the class overrides (``loadSession``, ``sessionCapabilities`` ``list`` /
``resume`` / ``close`` / ``delete``, ``auth.logout``), added to what the
agent's own ``initialize`` returns: nothing that answer advertises is
changed or removed.

``session/cancel`` is built in. The SDK keeps the scope of each session's
running prompt; on ``session/cancel`` (or ``session/close``) it cancels that
scope at once, every request the prompt was waiting on is cancelled on the
wire with its own ``$/cancel_request``, the turn's ``session/update``s
already sent stay ahead of the answer, and the SDK itself answers the prompt
``stopReason: "cancelled"``. A prompt that arrives on a session whose
previous prompt is still running or finishing waits for it: the prompts of
a session run one at a time, in the order they arrived.

The agent calls the client through :attr:`Agent.client`, a
:class:`ClientProxy` that refuses (with :class:`CapabilityError`, nothing
sent) the fs, terminal and elicitation calls the client did not advertise.

An :class:`Agent` object serves one connection at a time (``self.client``
is that connection's). The serving functions take the agent, or a factory
(its class, or any function of no arguments returning one) that makes one
per connection; serving an object that is already on a connection raises
``RuntimeError``, which names the fix.
"""

from __future__ import annotations

import signal
import threading
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any, Final

import attrs
import trio

from acp_trio._core._connection import Connection, ConnectionConfig
from acp_trio._core._framed import FramedStream
from acp_trio._core._groups import plain_exceptions
from acp_trio._core._message_stream import MessageStream
from acp_trio._core._open import open_connection, serve_connection
from acp_trio._core._requests import RequestContext, current_request
from acp_trio._exceptions import RequestError
from acp_trio._transports import open_stdio_stream
from acp_trio._typed._client_proxy import ClientProxy
from acp_trio._typed._dispatch import (
    Extensible,
    Route,
    SessionScopes,
    TypedHandler,
    implemented,
    one_connection,
)
from acp_trio._typed._sessions import AgentSessions, keep_sessions
from acp_trio.schema import (
    METHODS,
    PROTOCOL_VERSION,
    AgentCapabilities,
    AuthenticateRequest,
    AuthenticateResponse,
    CancelNotification,
    CloseSessionRequest,
    CloseSessionResponse,
    DeleteSessionRequest,
    DeleteSessionResponse,
    Implementation,
    InitializeRequest,
    InitializeResponse,
    ListSessionsRequest,
    ListSessionsResponse,
    LoadSessionRequest,
    LoadSessionResponse,
    LogoutCapabilities,
    LogoutRequest,
    LogoutResponse,
    NewSessionRequest,
    NewSessionResponse,
    PromptRequest,
    PromptResponse,
    ResumeSessionRequest,
    ResumeSessionResponse,
    SchemaConverter,
    SessionCloseCapabilities,
    SessionDeleteCapabilities,
    SessionListCapabilities,
    SessionResumeCapabilities,
    SetSessionConfigOptionRequest,
    SetSessionConfigOptionResponse,
    SetSessionModeRequest,
    SetSessionModeResponse,
    converter,
)
from acp_trio.schema._generated_proxies import AGENT_METHOD_NAMES

__all__ = ["AGENT_METHODS", "Agent", "ClientProxy", "open_agent", "run_agent", "serve_agent"]

#: Wire name -> :class:`Agent` method name, for every method an agent handles.
AGENT_METHODS: Final[dict[str, str]] = dict(AGENT_METHOD_NAMES)


def _not_found(method: str) -> RequestError:
    return RequestError.method_not_found(method)


class Agent(Extensible):
    """Base class of an ACP agent: override the methods you support.

    :attr:`client` is set by the SDK before any method is called: the proxy
    to the client of the one connection this object serves (to serve many,
    give the serving function a factory, such as the class itself).
    Extension methods (names starting with ``_``) go to
    :meth:`ext_method` / :meth:`ext_notification`, or to handlers added with
    :meth:`add_extension_method` / :meth:`add_extension_notification`.
    """

    client: ClientProxy

    #: Sent as ``agentInfo`` (name, version) by the default :meth:`initialize`.
    info: Implementation | None = None

    async def initialize(self, params: InitializeRequest) -> InitializeResponse:
        """``initialize``: agree on the protocol version and advertise what the
        agent can do.

        Default: the SDK's protocol version, no optional capability, and
        :attr:`info` as ``agentInfo``; the SDK adds the capabilities of the
        methods the class overrides.
        A :class:`~acp_trio.RequestError` raised is answered.
        ``$/cancel_request`` or the connection closing cancels it (let
        ``trio.Cancelled`` propagate: ``-32800`` is answered).
        """
        return InitializeResponse(protocol_version=PROTOCOL_VERSION, agent_info=self.info)

    async def authenticate(self, params: AuthenticateRequest) -> AuthenticateResponse | None:
        """``authenticate``: sign in with one of the advertised auth methods.

        Default: ``-32601`` (method not found).
        A :class:`~acp_trio.RequestError` raised is answered.
        ``$/cancel_request`` or the connection closing cancels it (let
        ``trio.Cancelled`` propagate: ``-32800`` is answered).
        """
        raise _not_found("authenticate")

    async def logout(self, params: LogoutRequest) -> LogoutResponse | None:
        """``logout``: sign out.

        Default: ``-32601`` (method not found). Overriding it advertises it.
        A :class:`~acp_trio.RequestError` raised is answered.
        ``$/cancel_request`` or the connection closing cancels it (let
        ``trio.Cancelled`` propagate: ``-32800`` is answered).
        """
        raise _not_found("logout")

    async def new_session(self, params: NewSessionRequest) -> NewSessionResponse:
        """``session/new``: create a session and answer its id.

        Default: ``-32601`` (method not found).
        A :class:`~acp_trio.RequestError` raised is answered.
        ``$/cancel_request`` or the connection closing cancels it (let
        ``trio.Cancelled`` propagate: ``-32800`` is answered).
        """
        raise _not_found("session/new")

    async def load_session(self, params: LoadSessionRequest) -> LoadSessionResponse | None:
        """``session/load``: replay a stored session's history to the client
        (as ``session/update`` notifications), then answer.

        Default: ``-32601`` (method not found). Overriding it advertises it.
        A :class:`~acp_trio.RequestError` raised is answered.
        ``$/cancel_request`` or the connection closing cancels it (let
        ``trio.Cancelled`` propagate: ``-32800`` is answered).
        """
        raise _not_found("session/load")

    async def list_sessions(self, params: ListSessionsRequest) -> ListSessionsResponse:
        """``session/list``: the sessions this agent knows.

        Default: ``-32601`` (method not found). Overriding it advertises it.
        A :class:`~acp_trio.RequestError` raised is answered.
        ``$/cancel_request`` or the connection closing cancels it (let
        ``trio.Cancelled`` propagate: ``-32800`` is answered).
        """
        raise _not_found("session/list")

    async def resume_session(self, params: ResumeSessionRequest) -> ResumeSessionResponse | None:
        """``session/resume``: take up a stored session without replaying it.

        Default: ``-32601`` (method not found). Overriding it advertises it.
        A :class:`~acp_trio.RequestError` raised is answered.
        ``$/cancel_request`` or the connection closing cancels it (let
        ``trio.Cancelled`` propagate: ``-32800`` is answered).
        """
        raise _not_found("session/resume")

    async def close_session(self, params: CloseSessionRequest) -> CloseSessionResponse | None:
        """``session/close``: forget a session; the SDK cancels its running turn
        first.

        Default: ``-32601`` (method not found). Overriding it advertises it.
        A :class:`~acp_trio.RequestError` raised is answered.
        ``$/cancel_request`` or the connection closing cancels it (let
        ``trio.Cancelled`` propagate: ``-32800`` is answered).
        """
        raise _not_found("session/close")

    async def delete_session(self, params: DeleteSessionRequest) -> DeleteSessionResponse | None:
        """``session/delete``: delete a stored session.

        Default: ``-32601`` (method not found). Overriding it advertises it.
        A :class:`~acp_trio.RequestError` raised is answered.
        ``$/cancel_request`` or the connection closing cancels it (let
        ``trio.Cancelled`` propagate: ``-32800`` is answered).
        """
        raise _not_found("session/delete")

    async def set_session_mode(
        self, params: SetSessionModeRequest
    ) -> SetSessionModeResponse | None:
        """``session/set_mode``: switch a session to another of its modes.

        Default: ``-32601`` (method not found).
        A :class:`~acp_trio.RequestError` raised is answered.
        ``$/cancel_request`` or the connection closing cancels it (let
        ``trio.Cancelled`` propagate: ``-32800`` is answered).
        """
        raise _not_found("session/set_mode")

    async def set_session_config_option(
        self, params: SetSessionConfigOptionRequest
    ) -> SetSessionConfigOptionResponse:
        """``session/set_config_option``: change one of a session's config options
        and answer them all.

        Default: ``-32601`` (method not found).
        A :class:`~acp_trio.RequestError` raised is answered.
        ``$/cancel_request`` or the connection closing cancels it (let
        ``trio.Cancelled`` propagate: ``-32800`` is answered).
        """
        raise _not_found("session/set_config_option")

    async def prompt(self, params: PromptRequest) -> PromptResponse:
        """``session/prompt``: run one turn and answer its stop reason.

        Default: refuse with ``-32601`` (method not found). Raise
        :class:`~acp_trio.RequestError` to answer an error. Turns of one session
        run one at a time, in order. ``session/cancel`` for the session cancels
        this call (``trio.Cancelled`` at the next checkpoint; let it propagate):
        the SDK then answers ``stopReason: "cancelled"`` once the turn's updates
        are written, and every request the turn made of the client is cancelled
        on the wire. ``$/cancel_request`` or the connection closing cancels it
        too, answered ``-32800``.
        """
        raise _not_found("session/prompt")

    async def cancel(self, params: CancelNotification) -> None:
        """``session/cancel``: called, in wire order, after the SDK has already
        cancelled the session's running prompt, if any. Override for extra clean-up.

        A notification: nothing is answered, and an exception is logged, not
        sent. It runs in the connection's notification consumer, which only the
        connection closing cancels.
        """

    async def ext_method(self, method: str, params: Any) -> Any:
        """An extension request (a method whose name starts with ``_``) that no
        handler added with :meth:`add_extension_method` takes.

        Default: refuse with ``-32601`` (method not found).
        A :class:`~acp_trio.RequestError` raised is answered.
        ``$/cancel_request`` or the connection closing cancels it (let
        ``trio.Cancelled`` propagate: ``-32800`` is answered).
        """
        raise _not_found(method)

    async def ext_notification(self, method: str, params: Any) -> None:
        """An extension notification (name starting with ``_``) that no handler
        added with :meth:`add_extension_notification` takes; ignored by default.

        Runs in wire order in the connection's notification consumer, which only
        the connection closing cancels; an exception is logged, not sent.
        """


def _advertise_implemented(agent: Agent, caps: AgentCapabilities) -> AgentCapabilities:
    """``caps`` (what the agent's ``initialize`` answered) with the methods
    its class overrides added: ``loadSession``, ``sessionCapabilities``
    ``list`` / ``resume`` / ``close`` / ``delete``, ``auth.logout``. Only
    what ``caps`` leaves off (``false`` or absent) is added; nothing it
    advertises is changed."""
    load_session = caps.load_session or implemented(agent, Agent, "load_session")
    session = caps.session_capabilities
    added: dict[str, Any] = {}
    for field, attr, value in (
        ("list", "list_sessions", SessionListCapabilities),
        ("resume", "resume_session", SessionResumeCapabilities),
        ("close", "close_session", SessionCloseCapabilities),
        ("delete", "delete_session", SessionDeleteCapabilities),
    ):
        if getattr(session, field) is None and implemented(agent, Agent, attr):
            added[field] = value()
    if added:
        session = attrs.evolve(session, **added)
    auth = caps.auth
    if auth.logout is None and implemented(agent, Agent, "logout"):
        auth = attrs.evolve(auth, logout=LogoutCapabilities())
    if (
        load_session == caps.load_session
        and session is caps.session_capabilities
        and auth is caps.auth
    ):
        return caps
    return attrs.evolve(caps, load_session=load_session, session_capabilities=session, auth=auth)


class _Turn:
    """One prompt of a session: the scope ``session/cancel`` cancels, and
    its place in the session's queue (``ready`` is set once it is first)."""

    __slots__ = ("ready", "scope", "session_id")

    def __init__(self, session_id: str, scope: trio.CancelScope) -> None:
        self.session_id = session_id
        self.scope = scope
        self.ready = trio.Event()


class _AgentHandler(TypedHandler):
    """Routes client→agent messages to an :class:`Agent`, with the
    ``session/cancel`` bookkeeping."""

    def __init__(self, agent: Agent, proxy: ClientProxy) -> None:
        self.agent = agent
        self.proxy = proxy
        self.turns = SessionScopes()
        # By session: its prompts in arrival order; the first one runs. A
        # FIFO woken one at a time, not a lock: prompts read together start
        # their tasks in the scheduler's random order, and a lock would serve
        # them in that order rather than in the order they arrived.
        self._queues: dict[str, deque[_Turn]] = {}
        # The turn of each prompt, queued under its session as soon as the
        # prompt is read (see request_received).
        self._turn_of: dict[RequestContext, _Turn] = {}
        requests: dict[str, Route] = {}
        notifications: dict[str, Route] = {}
        for wire, attr in AGENT_METHODS.items():
            if attr not in ("initialize", "cancel") and not implemented(agent, Agent, attr):
                continue  # -32601, whatever the params
            info = METHODS[wire]
            table = requests if info.kind == "request" else notifications
            table[wire] = Route(info.params, getattr(agent, attr))
        requests["initialize"] = Route(InitializeRequest, self._initialize)
        if "session/prompt" in requests:
            requests["session/prompt"] = Route(PromptRequest, self._prompt)
        if "session/close" in requests:
            requests["session/close"] = Route(CloseSessionRequest, self._close)
        sessions = getattr(agent, "sessions", None)
        if isinstance(sessions, AgentSessions):
            for wire, route in requests.items():
                requests[wire] = Route(route.params, keep_sessions(sessions, wire, route.func))
        super().__init__(
            requests,
            notifications,
            agent.ext_method,
            agent.ext_notification,
            agent._extension_handlers(),
            intercepts={"session/cancel": self._cancel_now},
            schema_converter=proxy.converter,
        )

    async def _initialize(self, params: InitializeRequest) -> InitializeResponse:
        self.proxy.capabilities = params.client_capabilities
        result = await self.agent.initialize(params)
        given = getattr(result, "agent_capabilities", None)
        if not isinstance(given, AgentCapabilities):
            return result  # not an InitializeResponse: the converter says so
        caps = _advertise_implemented(self.agent, given)
        if caps is given:
            return result
        return attrs.evolve(result, agent_capabilities=caps)

    def request_received(self, ctx: RequestContext, params: Any) -> None:
        # Tie a prompt to its session the moment it is read, so that a
        # session/cancel read right after it (even in the same chunk, before
        # the prompt's task starts) or while it waits for the session's
        # previous turn ends it too: every prompt sent before the cancel is
        # cancelled.
        # The read order is also the order the session's prompts run in.
        if ctx.method == "session/prompt" and isinstance(params, dict):
            session_id = params.get("sessionId")
            if isinstance(session_id, str):
                self._turn_of[ctx] = self._queue_turn(session_id)

    def request_finished(self, ctx: RequestContext) -> None:
        # Also for a prompt cancelled before its handler ever ran.
        turn = self._turn_of.pop(ctx, None)
        if turn is not None:
            self._end_turn(turn)

    def _queue_turn(self, session_id: str) -> _Turn:
        turn = _Turn(session_id, self.turns.add(session_id))
        queue = self._queues.get(session_id)
        if queue is None:
            queue = self._queues[session_id] = deque()
        queue.append(turn)
        if len(queue) == 1:
            turn.ready.set()
        return turn

    def _end_turn(self, turn: _Turn) -> None:
        """Take ``turn`` out of its session (idempotent); wake the next one
        if it was running."""
        self.turns.discard(turn.session_id, turn.scope)
        queue = self._queues.get(turn.session_id)
        if queue is None:
            return
        if queue[0] is turn:
            queue.popleft()
            if queue:
                queue[0].ready.set()
        elif turn in queue:
            queue.remove(turn)  # cancelled while it waited
        if not queue:
            del self._queues[turn.session_id]

    async def _prompt(self, params: PromptRequest) -> PromptResponse:
        session_id = params.session_id
        ctx = current_request()
        turn = self._turn_of.get(ctx) if ctx is not None else None
        if turn is None or turn.session_id != session_id:
            # Not read by a connection (or the params differ): queue it now.
            if turn is not None:
                self._end_turn(turn)
            turn = self._queue_turn(session_id)
        scope = turn.scope
        try:
            try:
                with scope:
                    if turn.ready.is_set():
                        # A prompt cancelled before it started runs no code.
                        await trio.lowlevel.checkpoint_if_cancelled()
                    else:
                        await turn.ready.wait()
                    result = await self.agent.prompt(params)
            except Exception:
                # A library call aborted by the cancel may raise its own
                # error, alone or in a group (the scope took the Cancelled
                # out of it): the turn still ends "cancelled".
                if not scope.cancel_called:
                    raise
            if scope.cancel_called:
                return PromptResponse(stop_reason="cancelled")
            return result
        finally:
            # The next prompt starts only after this one's answer is queued:
            # nothing yields between here and the reply.
            self._end_turn(turn)

    async def _close(self, params: CloseSessionRequest) -> CloseSessionResponse | None:
        self._cancel_session(params.session_id)
        return await self.agent.close_session(params)

    def _cancel_now(self, params: dict[str, Any]) -> None:
        session_id = params.get("sessionId")
        if isinstance(session_id, str):
            self._cancel_session(session_id)

    def _cancel_session(self, session_id: str) -> None:
        self.turns.cancel(session_id)


def _make_agent(agent: Agent | Callable[[], Agent]) -> Agent:
    if isinstance(agent, Agent):
        return agent
    made = agent()
    if not isinstance(made, Agent):
        raise TypeError(f"the agent factory {agent!r} returned {made!r}, not an Agent")
    return made


@contextmanager
def _serving(agent: Agent | Callable[[], Agent]) -> Iterator[Agent]:
    """The agent to serve one connection with, marked busy for the block."""
    made = _make_agent(agent)
    name = type(made).__name__
    error = (
        f"this {name} object is already serving a connection (its .client is that "
        f"connection's client); pass a factory to serve one agent per connection, "
        f"e.g. serve_agent({name}, stream) rather than serve_agent({name}(), stream)"
    )
    with one_connection(made, error):
        yield made


def _agent_handler(
    agent: Agent, schema_converter: SchemaConverter
) -> Callable[[Connection], _AgentHandler]:
    def make(connection: Connection) -> _AgentHandler:
        proxy = ClientProxy._create(connection, schema_converter)
        agent.client = proxy
        return _AgentHandler(agent, proxy)

    return make


async def serve_agent(
    agent: Agent | Callable[[], Agent],
    stream: trio.abc.Stream | FramedStream | MessageStream,
    *,
    config: ConnectionConfig | None = None,
    schema_converter: SchemaConverter = converter,
    task_status: trio.TaskStatus[Connection] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ``agent`` (or a new one from the factory ``agent``) on
    ``stream`` until the connection closes.

    With a factory, one function serves many connections, e.g.
    ``serve_tcp(functools.partial(serve_agent, MyAgent), port)``. Raises
    ``RuntimeError`` if the agent object is already serving a connection.
    Cancelling the call closes the connection: running handlers are
    cancelled and answered ``-32800`` and queued output is flushed (bounded),
    then ``trio.Cancelled`` propagates.
    """
    with _serving(agent) as made:
        await serve_connection(
            stream, _agent_handler(made, schema_converter), config=config, task_status=task_status
        )


@asynccontextmanager
async def open_agent(
    agent: Agent | Callable[[], Agent],
    stream: trio.abc.Stream | FramedStream | MessageStream,
    *,
    config: ConnectionConfig | None = None,
    schema_converter: SchemaConverter = converter,
) -> AsyncIterator[ClientProxy]:
    """Serve ``agent`` (or a new one from the factory ``agent``) on
    ``stream`` for the duration of the block; yields the proxy to the client
    (also at ``agent.client``). Raises ``RuntimeError`` if the agent object
    is already serving a connection.

    Leaving the block, also by an exception or a cancellation, closes the
    connection: running handlers are cancelled and answered ``-32800``,
    pending calls to the client fail, queued output is flushed (bounded).
    """
    with _serving(agent) as made:
        async with open_connection(stream, _agent_handler(made, schema_converter), config=config):
            yield made.client


async def run_agent(
    agent: Agent | Callable[[], Agent],
    *,
    config: ConnectionConfig | None = None,
    schema_converter: SchemaConverter = converter,
    handle_signals: bool = True,
) -> None:
    """Serve ``agent`` (or a new one from the factory ``agent``) on this
    process's stdin and stdout until the client closes them. While it runs,
    ``print()`` goes to stderr.

    With ``handle_signals`` (and called from the main thread), SIGTERM and
    SIGINT shut the agent down in order instead of interrupting it wherever
    it is: running requests are cancelled and answered ``-32800``, queued
    output is flushed, then this returns; after SIGINT it then raises
    ``KeyboardInterrupt``.
    """
    received: list[int] = []
    with _serving(agent) as made:
        async with open_stdio_stream() as stream:
            connection = Connection(stream, _agent_handler(made, schema_converter), config)
            with plain_exceptions():
                async with trio.open_nursery() as nursery:
                    if handle_signals and threading.current_thread() is threading.main_thread():
                        await nursery.start(_close_on_signal, connection, received)
                    await connection._run()
                    nursery.cancel_scope.cancel()
    if signal.SIGINT in received:
        raise KeyboardInterrupt


async def _close_on_signal(
    connection: Connection,
    received: list[int],
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        task_status.started()
        async for signum in signals:
            received.append(signum)
            connection.close_soon()
