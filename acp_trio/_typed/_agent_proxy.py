"""The client's view of its agent: :class:`AgentProxy`, made by the SDK.

Every agent method takes its request object or its fields (the generated
:class:`~acp_trio.schema._generated_proxies.AgentProxyMethods`); calls
before ``initialize``, or needing a capability the agent did not
advertise, raise and send nothing. The proxy keeps each session's prompt
turns: a cancelled turn must be answered before the session's next prompt
is sent (within :attr:`AgentProxy.cancel_grace`).

It talks to the client side of the connection through :class:`ClientSide`,
a narrow protocol that the client's handler implements.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final, Protocol, overload

import attrs
import trio

from acp_trio._core._connection import Connection
from acp_trio._core._requests import PendingRequest
from acp_trio._exceptions import (
    CapabilityError,
    LocalProtocolError,
    TurnNotAnswered,
    UnsupportedProtocolVersion,
)
from acp_trio._public import NoPublicConstructor
from acp_trio._typed._dispatch import (
    ProxyBase,
    adopt_hook_docs,
)
from acp_trio._typed._early_updates import EarlyUpdates
from acp_trio.schema import (
    PROTOCOL_VERSION,
    AgentCapabilities,
    AuthMethod,
    CancelNotification,
    ClientCapabilities,
    CloseSessionRequest,
    CloseSessionResponse,
    DeleteSessionRequest,
    DeleteSessionResponse,
    Implementation,
    InitializeRequest,
    InitializeResponse,
    LoadSessionRequest,
    LoadSessionResponse,
    NewSessionRequest,
    NewSessionResponse,
    PromptRequest,
    PromptResponse,
    ResumeSessionRequest,
    ResumeSessionResponse,
    SchemaConverter,
    SetSessionConfigOptionRequest,
    SetSessionConfigOptionRequestBoolean,
    SetSessionConfigOptionRequestValueId,
    SetSessionConfigOptionResponse,
    TextContent,
)
from acp_trio.schema._generated_proxies import AgentProxyMethods

__all__ = ["AgentProxy", "ClientSide"]

#: Wire name -> (does the agent advertise it, the capability's name), for
#: the agent methods that need a capability (``session/load`` and
#: ``session/resume`` are checked by their hooks, before the session is
#: recorded).
_AGENT_NEEDS: Final[Mapping[str, tuple[Callable[[AgentCapabilities], bool], str]]] = {
    "logout": (lambda caps: caps.auth.logout is not None, "auth.logout"),
    "session/list": (
        lambda caps: caps.session_capabilities.list is not None,
        "sessionCapabilities.list",
    ),
    "session/close": (
        lambda caps: caps.session_capabilities.close is not None,
        "sessionCapabilities.close",
    ),
    "session/delete": (
        lambda caps: caps.session_capabilities.delete is not None,
        "sessionCapabilities.delete",
    ),
}

_UNSET_CAPABILITIES: Final = attrs.fields(InitializeRequest).client_capabilities.default


class ClientSide(Protocol):
    """What :class:`AgentProxy` needs of the client's handler."""

    early: EarlyUpdates
    #: By session: its cancelled prompts (their requests), until each ends.
    cancelled_turns: dict[str, set[PendingRequest]]

    def cancel_permissions(self, session_id: str) -> None:
        """Answer the session's pending permission requests ``cancelled``."""

    def implemented_capabilities(self) -> ClientCapabilities:
        """The client capabilities its class implements."""


@adopt_hook_docs
class AgentProxy(AgentProxyMethods, ProxyBase, metaclass=NoPublicConstructor):
    """What a client can ask of its agent. Made by the SDK.

    After :meth:`initialize`: :attr:`protocol_version`, :attr:`capabilities`,
    :attr:`agent_info` and :attr:`auth_methods` describe the agent. Every
    agent method takes its request object or its fields:
    ``await agent.new_session(cwd)`` is
    ``await agent.new_session(NewSessionRequest(cwd=cwd, mcp_servers=[]))``.
    Before :meth:`initialize`, any other method raises
    :class:`LocalProtocolError`; one the agent did not advertise the
    capability of raises :class:`CapabilityError`; neither sends anything.
    """

    def __init__(
        self, connection: Connection, schema_converter: SchemaConverter, handler: ClientSide
    ) -> None:
        super().__init__(connection, schema_converter)
        self._handler = handler
        self._early = handler.early
        # By session: the prompt turns sent and not answered yet, in order
        # (a cancelled one stays until its reply arrives).
        self._turns: dict[str, list[_Turn]] = {}
        #: Seconds a cancelled turn has to be answered, from its
        #: ``session/cancel``, before the next :meth:`prompt` on the session
        #: raises :class:`TurnNotAnswered` (and :meth:`cancel_turn` too).
        self.cancel_grace: float = 5.0
        # By session: the prompts waiting to be sent behind a cancelled turn
        # (a cancel of the session cancels them too).
        self._queued: dict[str, set[_Queued]] = {}
        self.protocol_version: int | None = None
        self.capabilities: AgentCapabilities | None = None
        self.agent_info: Implementation | None = None
        self.auth_methods: list[AuthMethod] = []
        #: The client capabilities sent in ``initialize``.
        self.client_capabilities: ClientCapabilities | None = None

    async def _send_initialize(self, params: InitializeRequest) -> InitializeResponse:
        """Negotiate: send our protocol version and capabilities; check the
        agent's answer. Raises :class:`UnsupportedProtocolVersion`.

        Without ``params``, or with params made without
        ``client_capabilities``, the capabilities sent are those the client
        implements: ``fs.readTextFile`` / ``fs.writeTextFile`` for the
        methods its class overrides (itself or through
        :class:`WorkspaceFilesMixin`), ``terminal`` if it overrides all five
        ``terminal/*`` methods (:class:`TerminalsMixin` does), both
        elicitation modes if it overrides ``create_elicitation``. A
        ``client_capabilities`` object given explicitly is sent as it is
        (to advertise less, or only one elicitation mode). The capabilities
        sent are at :attr:`client_capabilities`.
        """
        if params.client_capabilities is _UNSET_CAPABILITIES:
            params = attrs.evolve(
                params, client_capabilities=self._handler.implemented_capabilities()
            )
        self.client_capabilities = params.client_capabilities
        result: InitializeResponse = await self._request("initialize", params, InitializeResponse)
        if result.protocol_version != PROTOCOL_VERSION:
            self.connection.close_soon()
            raise UnsupportedProtocolVersion(result.protocol_version, PROTOCOL_VERSION)
        self.protocol_version = result.protocol_version
        self.capabilities = result.agent_capabilities
        self.agent_info = result.agent_info
        self.auth_methods = list(result.auth_methods)
        return result

    def _caps(self, method: str) -> AgentCapabilities:
        if self.connection.closed:  # e.g. after a version mismatch
            raise self.connection.closed_error()
        if self.capabilities is None:
            raise LocalProtocolError(f"call initialize() before {method}")
        return self.capabilities

    def _require(self, advertised: bool, what: str, method: str) -> None:
        if not advertised:
            raise CapabilityError(
                f"the agent did not advertise {what} (needed for {method}); nothing was sent",
                capability=what,
                method=method,
                peer="agent",
            )

    async def _request(self, method: str, params: Any, result_type: Any) -> Any:
        # Every typed request but initialize passes here: refuse, sending
        # nothing, before initialize, or one the agent did not advertise.
        if method != "initialize":
            caps = self._caps(method)
            needs = _AGENT_NEEDS.get(method)
            if needs is not None:
                advertised, what = needs
                self._require(advertised(caps), what, method)
        return await super()._request(method, params, result_type)

    @property
    def known_sessions(self) -> frozenset[str]:
        """The ids of the sessions made (:meth:`new_session`), loaded or
        resumed through this proxy, and not closed or deleted since."""
        return frozenset(self._early.known)

    @property
    def early_update_limit(self) -> int:
        """Most ``session/update`` notifications held back, over all
        sessions, for sessions a pending :meth:`new_session` may be about
        to create (default 4096); past it they are delivered as they are."""
        return self._early.limit

    @early_update_limit.setter
    def early_update_limit(self, limit: int) -> None:
        if limit < 0:
            raise ValueError("early_update_limit must not be negative")
        self._early.limit = limit

    def prompts_in_flight(self) -> dict[str, int]:
        """By session: the prompts sent through this proxy and not answered
        yet (a cancelled turn counts until the agent answers it), plus those
        waiting to be sent behind a cancelled turn; sessions with none are
        left out. A snapshot, for diagnostics and tests."""
        # (Both tables drop a session once it has none: a 0 here is a leak.)
        counts = {sid: len(turns) for sid, turns in self._turns.items()}
        for sid, waiting in self._queued.items():
            counts[sid] = counts.get(sid, 0) + len(waiting)
        return counts

    async def _send_new_session(self, params: NewSessionRequest) -> NewSessionResponse:
        """Create a session. ``session/update`` notifications the agent sends
        for it before its answer are not lost: they are delivered, in order,
        once this call has returned, as soon as the caller lets other tasks
        run (and before the result of any later call), so the application
        has recorded the session when they arrive."""
        self._caps("session/new")  # before anything is recorded
        self._early.creating()
        try:
            result: NewSessionResponse = await self._request(
                "session/new", params, NewSessionResponse
            )
        except BaseException:
            self._early.creation_failed()
            raise
        self._early.created(result.session_id)
        return result

    async def _send_load_session(self, params: LoadSessionRequest) -> LoadSessionResponse:
        self._require(self._caps("session/load").load_session, "loadSession", "session/load")
        named = self._early.naming(params.session_id)
        try:
            result: LoadSessionResponse = await self._request(
                "session/load", params, LoadSessionResponse
            )
        except BaseException:
            if named:
                self._early.forget(params.session_id)
            raise
        return result

    async def _send_resume_session(self, params: ResumeSessionRequest) -> ResumeSessionResponse:
        caps = self._caps("session/resume").session_capabilities
        self._require(caps.resume is not None, "sessionCapabilities.resume", "session/resume")
        named = self._early.naming(params.session_id)
        try:
            result: ResumeSessionResponse = await self._request(
                "session/resume", params, ResumeSessionResponse
            )
        except BaseException:
            if named:
                self._early.forget(params.session_id)
            raise
        return result

    async def _send_close_session(self, params: CloseSessionRequest) -> CloseSessionResponse:
        result: CloseSessionResponse = await self._request(
            "session/close", params, CloseSessionResponse
        )
        self._early.forget(params.session_id)
        return result

    async def _send_delete_session(self, params: DeleteSessionRequest) -> DeleteSessionResponse:
        result: DeleteSessionResponse = await self._request(
            "session/delete", params, DeleteSessionResponse
        )
        self._early.forget(params.session_id)
        return result

    @overload
    async def set_session_config_option(
        self, params: SetSessionConfigOptionRequest, /
    ) -> SetSessionConfigOptionResponse: ...
    @overload
    async def set_session_config_option(
        self,
        session_id: str,
        config_id: str,
        value: bool | str,
        *,
        meta: dict[str, Any] | None = None,
    ) -> SetSessionConfigOptionResponse: ...
    async def set_session_config_option(
        self,
        session_id: SetSessionConfigOptionRequest | str,
        config_id: str | None = None,
        value: bool | str | None = None,
        *,
        meta: dict[str, Any] | None = None,
    ) -> SetSessionConfigOptionResponse:
        """Send ``session/set_config_option``: pass a
        :class:`SetSessionConfigOptionRequest` variant, or ``session_id,
        config_id, value``: a ``bool`` value sets a boolean option, a ``str``
        picks a value id. Raises ``TypeError`` for arguments that do not fit
        (nothing is sent), :class:`RequestError` if the agent answers an
        error; cancelling the caller sends ``$/cancel_request`` for it."""
        params = session_id
        if not isinstance(params, str):
            if config_id is not None or value is not None or meta is not None:
                raise TypeError(
                    "set_session_config_option() takes a request or its fields, not both"
                )
            return await self._send_set_session_config_option(params)
        if config_id is None or value is None:
            raise TypeError("set_session_config_option() missing 'config_id' or 'value'")
        request: SetSessionConfigOptionRequest
        if isinstance(value, bool):
            request = SetSessionConfigOptionRequestBoolean(
                session_id=params, config_id=config_id, value=value, meta=meta
            )
        elif isinstance(value, str):
            request = SetSessionConfigOptionRequestValueId(
                session_id=params, config_id=config_id, value=value, meta=meta
            )
        else:
            raise TypeError(
                f"set_session_config_option(): value takes a bool or a str,"
                f" not {type(value).__name__}"
            )
        return await self._send_set_session_config_option(request)

    async def _send_prompt(self, params: PromptRequest) -> PromptResponse:
        """Run one prompt turn; returns when the agent answers it.

        If the calling task is cancelled (a deadline, a cancelled scope, an
        enclosing request's cancel) while the turn runs, ``session/cancel``
        is sent for the session at once and the cancellation goes on: this
        call does not wait for the agent. The turn stays tracked until its
        reply arrives (the reply is then consumed quietly), and the next
        :meth:`prompt` on the session is sent only after that, waiting at
        most :attr:`cancel_grace` seconds from the cancel; past it, it raises
        :class:`TurnNotAnswered` without sending anything. A prompt cancelled
        before it was sent sends nothing; one waiting behind a cancelled turn
        when the session is cancelled again (:meth:`cancel`,
        :meth:`cancel_turn`) is not sent either, and returns
        ``stop_reason == "cancelled"``.
        """
        self._caps("session/prompt")
        session_id = params.session_id
        if await self._wait_for_cancelled_turns(session_id):
            # The session was cancelled while this prompt waited to be sent:
            # its turn is cancelled before it started, and never sent.
            return PromptResponse(stop_reason="cancelled")
        pending = await self.connection.send_request(
            "session/prompt", self.converter.unstructure(params)
        )
        turn = _Turn(pending)
        self._track(session_id, turn)
        try:
            raw = await pending.result()
        except BaseException:
            if not pending.done:
                # Our caller is cancelled: the protocol's way to end a turn
                # is session/cancel, which agents MUST honour (answering
                # stopReason "cancelled"). It is queued synchronously, past
                # the output limit, so it is neither lost to this
                # cancellation nor waits for it. No $/cancel_request as
                # well: agents may ignore it (the official Python SDK answers
                # "Method not found"), and those that honour it may answer
                # -32800 instead of the turn's stop reason.
                self._cancel_now(session_id)
            raise
        result: PromptResponse = self._structure_result("session/prompt", raw, PromptResponse)
        return result

    async def prompt_text(self, session_id: str, text: str) -> PromptResponse:
        """:meth:`prompt` with one text block; raises and cancels as
        :meth:`prompt` does (a cancelled caller sends ``session/cancel``)."""
        return await self.prompt(
            PromptRequest(session_id=session_id, prompt=[TextContent(text=text)])
        )

    async def _send_cancel(self, params: CancelNotification) -> None:
        """Cancel the session's running turn (``session/cancel``), and answer
        its pending permission requests ``cancelled``. Does not wait for the
        turn to end (see :meth:`cancel_turn`). The notification is queued at
        once, never waiting for room in the output queue."""
        await trio.lowlevel.checkpoint_if_cancelled()
        if self.connection.closed:
            raise self.connection.closed_error()
        self._cancel_now(params.session_id, params)
        await trio.lowlevel.cancel_shielded_checkpoint()

    async def cancel_turn(
        self, session_id: str, *, grace: float | None = None
    ) -> PromptResponse | None:
        """Cancel the session's running turn and wait for the agent's answer
        to it: sends ``session/cancel`` (as :meth:`cancel`), then returns the
        turn's :class:`PromptResponse` (``stop_reason == "cancelled"`` from an
        agent that follows ACP, or whatever it answered, if the turn had
        already ended). ``None`` if no turn was running on the session.

        Waits at most ``grace`` seconds (default :attr:`cancel_grace`), then
        raises :class:`TurnNotAnswered`. Raises :class:`RequestError` if the
        agent answered the prompt with an error, and
        :class:`ConnectionClosed` if the connection ends first. The task
        that called :meth:`prompt` for the turn, if still waiting, gets the
        same answer.
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        if self.connection.closed:
            raise self.connection.closed_error()
        turns = list(self._turns.get(session_id, ()))
        self._cancel_now(session_id, grace=grace)
        if not turns:
            await trio.lowlevel.cancel_shielded_checkpoint()
            return None
        for turn in turns:
            await self._wait_for_turn(session_id, turn)
        # Answered, so no task waits in result() any more (and it waits only
        # for the notifications read before the answer).
        raw = await turns[-1].pending.result()
        result: PromptResponse = self._structure_result("session/prompt", raw, PromptResponse)
        return result

    def _track(self, session_id: str, turn: _Turn) -> None:
        self._turns.setdefault(session_id, []).append(turn)

        # Runs when the reply is read (or the connection fails), whether or
        # not the prompt's caller is still waiting for it.
        def answered() -> None:
            turn.answered.set()
            turns = self._turns.get(session_id)
            if turns is not None and turn in turns:
                turns.remove(turn)
                if not turns:
                    del self._turns[session_id]
            cancelled = self._handler.cancelled_turns.get(session_id)
            if cancelled is not None:
                cancelled.discard(turn.pending)
                if not cancelled:
                    del self._handler.cancelled_turns[session_id]

        turn.pending.add_done_callback(answered)

    def _cancel_now(
        self,
        session_id: str,
        params: CancelNotification | None = None,
        *,
        grace: float | None = None,
    ) -> None:
        """``session/cancel`` for the session, synchronously: the running
        turns count as cancelled (from now, for the grace), the pending
        permission requests are answered ``cancelled``, and the notification
        is queued (past the output limit, like ``$/cancel_request``)."""
        for queued in self._queued.get(session_id, ()):
            queued.cancelled = True
        if grace is None:
            grace = self.cancel_grace
        deadline = trio.current_time() + grace
        running = self._turns.get(session_id, ())
        for turn in running:
            # Each session/cancel starts the grace again.
            turn.grace = grace
            turn.cancel_deadline = deadline
        if running:
            self._handler.cancelled_turns.setdefault(session_id, set()).update(
                turn.pending for turn in running
            )
        self._handler.cancel_permissions(session_id)
        if params is None:
            params = CancelNotification(session_id=session_id)
        cancel = self.converter.unstructure(params)
        self.connection.notify_past_limit_nowait("session/cancel", cancel)

    async def _wait_for_cancelled_turns(self, session_id: str) -> bool:
        """Before a prompt is sent: wait for the session's cancelled turns
        to be answered, each up to its grace. ``True`` if the session was
        cancelled meanwhile."""
        turn = self._first_cancelled_turn(session_id)
        if turn is None:
            await trio.lowlevel.checkpoint()
            return False
        queued = _Queued()
        waiting = self._queued.setdefault(session_id, set())
        waiting.add(queued)
        try:
            while turn is not None:
                await self._wait_for_turn(session_id, turn)
                turn = self._first_cancelled_turn(session_id)
        finally:
            waiting.discard(queued)
            if not waiting:
                del self._queued[session_id]
        return queued.cancelled

    def _first_cancelled_turn(self, session_id: str) -> _Turn | None:
        return next(
            (t for t in self._turns.get(session_id, ()) if t.cancel_deadline is not None), None
        )

    async def _wait_for_turn(self, session_id: str, turn: _Turn) -> None:
        deadline = turn.cancel_deadline
        assert deadline is not None
        with trio.move_on_at(deadline):
            await turn.answered.wait()
        if not turn.answered.is_set():
            raise TurnNotAnswered(session_id, turn.pending.id, turn.grace)


@attrs.define(eq=False)
class _Queued:
    """A prompt waiting to be sent behind a cancelled turn."""

    cancelled: bool = False


@attrs.define(eq=False)
class _Turn:
    """A ``session/prompt`` sent and not answered yet."""

    pending: PendingRequest
    answered: trio.Event = attrs.Factory(trio.Event)
    #: Set by session/cancel: the time by which the agent must answer.
    cancel_deadline: float | None = None
    grace: float = 0.0
