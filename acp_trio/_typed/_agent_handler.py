"""The agent side's handler: routes client-to-agent messages to an
:class:`~acp_trio.Agent` (only the methods its class overrides, the rest
``-32601``), runs each session's prompts one at a time in the order they
were read, and keeps the ``session/cancel`` bookkeeping; also what an
agent's ``initialize`` answer advertises of the methods it implements.
Split from ``_agent.py`` (the :class:`Agent` base class and the serving
functions), which passes the ``Agent`` class in; this module knows an agent
only as a :class:`ServedAgent`.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Final, Protocol

import attrs
import trio

from acp_trio._core._requests import RequestContext, current_request
from acp_trio._typed._client_proxy import ClientProxy
from acp_trio._typed._dispatch import (
    ExtensionHandlers,
    Route,
    SessionScopes,
    TypedHandler,
    implemented,
)
from acp_trio._typed._sessions import AgentSessions, keep_sessions
from acp_trio.schema import (
    METHODS,
    AgentCapabilities,
    CloseSessionRequest,
    CloseSessionResponse,
    InitializeRequest,
    InitializeResponse,
    LogoutCapabilities,
    PromptRequest,
    PromptResponse,
    SessionCloseCapabilities,
    SessionDeleteCapabilities,
    SessionListCapabilities,
    SessionResumeCapabilities,
)
from acp_trio.schema._generated_proxies import AGENT_METHOD_NAMES


class ServedAgent(Protocol):
    """What the handler calls on an agent by name; the other methods it
    routes are looked up with ``getattr`` (those its class overrides).
    :class:`~acp_trio.Agent` is one."""

    async def initialize(self, params: InitializeRequest, /) -> InitializeResponse: ...

    async def prompt(self, params: PromptRequest, /) -> PromptResponse: ...

    async def close_session(
        self, params: CloseSessionRequest, /
    ) -> CloseSessionResponse | None: ...

    async def ext_method(self, method: str, params: Any, /) -> Any: ...

    async def ext_notification(self, method: str, params: Any, /) -> None: ...

    def _extension_handlers(self) -> ExtensionHandlers: ...


#: Wire name -> :class:`Agent` method name, for every method an agent handles.
AGENT_METHODS: Final[dict[str, str]] = dict(AGENT_METHOD_NAMES)


def advertise_implemented(
    agent: ServedAgent, caps: AgentCapabilities, base: type
) -> AgentCapabilities:
    """``caps`` (what the agent's ``initialize`` answered) with the methods
    its class overrides added: ``loadSession``, ``sessionCapabilities``
    ``list`` / ``resume`` / ``close`` / ``delete``, ``auth.logout``. Only
    what ``caps`` leaves off (``false`` or absent) is added; nothing it
    advertises is changed."""
    load_session = caps.load_session or implemented(agent, base, "load_session")
    session = caps.session_capabilities
    added: dict[str, Any] = {}
    for field, attr, value in (
        ("list", "list_sessions", SessionListCapabilities),
        ("resume", "resume_session", SessionResumeCapabilities),
        ("close", "close_session", SessionCloseCapabilities),
        ("delete", "delete_session", SessionDeleteCapabilities),
    ):
        if getattr(session, field) is None and implemented(agent, base, attr):
            added[field] = value()
    if added:
        session = attrs.evolve(session, **added)
    auth = caps.auth
    if auth.logout is None and implemented(agent, base, "logout"):
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


class AgentHandler(TypedHandler):
    """Routes client→agent messages to an :class:`Agent`, with the
    ``session/cancel`` bookkeeping."""

    def __init__(self, agent: ServedAgent, proxy: ClientProxy, base: type) -> None:
        self.agent = agent
        # The Agent class (passed in: that module imports this one).
        self._base = base
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
            if attr not in ("initialize", "cancel") and not implemented(agent, base, attr):
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
        caps = advertise_implemented(self.agent, given, self._base)
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
