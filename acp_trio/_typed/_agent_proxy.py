"""The client's view of its agent: :class:`AgentProxy`, made by the SDK.

Every agent method takes its request object or its fields (the generated
:class:`~acp_trio.schema._generated_proxies.AgentProxyMethods`); calls
before ``initialize``, or needing a capability the agent did not
advertise, raise and send nothing. Each session's prompt turns are kept
by a :class:`~acp_trio._typed._turn.TurnBook` (``_turn.py``): a cancelled
turn climbs the cancel ladder (``session/cancel``, then
``$/cancel_request``, then abandoned) and the session's next prompt waits
for it to end.

It talks to the client side of the connection through :class:`ClientSide`,
a narrow protocol that the client's handler implements.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import suppress
from typing import Any, Final, Protocol, overload

import attrs
import trio

from acp_trio._core._connection import Connection
from acp_trio._exceptions import (
    ACPError,
    CapabilityError,
    LocalProtocolError,
    UnsupportedProtocolVersion,
)
from acp_trio._public import NoPublicConstructor
from acp_trio._typed._dispatch import (
    ProxyBase,
    adopt_hook_docs,
)
from acp_trio._typed._early_updates import EarlyUpdates
from acp_trio._typed._turn import (
    ABANDON_POLICIES,
    AbandonPolicy,
    CancelOutcome,
    TurnBook,
    TurnState,
)
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
    #: The proxy's turns (set by the proxy): a permission request of a
    #: cancelled turn is answered ``cancelled`` by the SDK.
    turns: TurnBook
    #: Set when the connection's block is being left: ``session/update``
    #: notifications are dropped from then on.
    leaving: bool

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
        # By session: the prompt turns in flight and the prompts waiting
        # behind a cancelled one (a cancelled turn stays until it ends).
        self._turns = handler.turns = TurnBook(
            connection,
            lambda raw: self._structure_result("session/prompt", raw, PromptResponse),
            handler.cancel_permissions,
        )
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

    @property
    def cancel_grace(self) -> float:
        """Seconds a cancelled turn has to be answered after
        ``session/cancel`` (default 5) before the ladder's next rung:
        ``$/cancel_request`` for its prompt."""
        return self._turns.cancel_grace

    @cancel_grace.setter
    def cancel_grace(self, seconds: float) -> None:
        self._turns.cancel_grace = _seconds("cancel_grace", seconds)

    @property
    def escalation_grace(self) -> float:
        """Seconds a cancelled turn has to be answered after
        ``$/cancel_request`` (default 2) before it is abandoned: so a
        cancelled turn ends within ``cancel_grace + escalation_grace`` of
        its ``session/cancel``, whatever the agent does."""
        return self._turns.escalation_grace

    @escalation_grace.setter
    def escalation_grace(self, seconds: float) -> None:
        self._turns.escalation_grace = _seconds("escalation_grace", seconds)

    @property
    def abandon_policy(self) -> AbandonPolicy:
        """What happens when a cancelled turn is abandoned (the agent
        answered neither cancel): ``"free_session"`` (default: the session
        takes its next prompt; a late answer is dropped and logged),
        ``"close_connection"``, or ``"stop_process"`` (a spawned agent only:
        its process is stopped as leaving :func:`open_spawned_agent` would).
        Prompts waiting behind the abandoned turn are sent under the first,
        and fail with :class:`PromptNotSent` under the others."""
        return self._turns.abandon_policy

    @abandon_policy.setter
    def abandon_policy(self, policy: AbandonPolicy) -> None:
        if policy not in ABANDON_POLICIES:
            raise ValueError(
                f"abandon_policy takes one of {', '.join(map(repr, ABANDON_POLICIES))}, "
                f"not {policy!r}"
            )
        if policy == "stop_process" and self._turns.stop_process is None:
            raise ValueError(
                "abandon_policy 'stop_process' needs an agent process: use "
                "open_spawned_agent (this agent is at the end of a stream)"
            )
        self._turns.abandon_policy = policy

    def prompts_in_flight(self) -> dict[str, int]:
        """By session: the prompts sent through this proxy and not ended yet
        (a cancelled turn counts until it is answered or abandoned), plus
        those waiting to be sent behind a cancelled turn; sessions with none
        are left out. A snapshot, for diagnostics and tests."""
        # (The book drops a session once it has none: a 0 here is a leak.)
        return self._turns.counts()

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
        call does not wait for the agent. The turn then climbs the cancel
        ladder by itself (see :meth:`cancel_turn`): ``$/cancel_request``
        after :attr:`cancel_grace`, abandoned after
        :attr:`escalation_grace` more. The session's next :meth:`prompt`
        waits for that turn to end, then is sent, or raises
        :class:`PromptNotSent` if the session was cancelled again while it
        waited or the abandon policy ended the connection. Leaving the
        connection's block waits (shielded) for cancelled turns to end, so
        an agent gets its grace even when the cancel that ended the turn
        ends the connection too.

        Raises :class:`RequestError` for the agent's error answer,
        :class:`TurnNotAnswered` if the turn was abandoned while this call
        still waited for it (another task's :meth:`cancel_turn`), and
        :class:`ConnectionClosed`. A prompt cancelled before it was sent
        sends nothing.
        """
        self._caps("session/prompt")
        session_id = params.session_id
        book = self._turns
        await book.before_prompt(session_id)
        pending = await self.connection.send_request(
            "session/prompt", self.converter.unstructure(params)
        )
        turn = book.sent(session_id, pending)
        try:
            raw = await pending.result()
        except BaseException:
            if turn.state is TurnState.SENT:
                # Our caller is cancelled: the protocol's way to end a turn
                # is session/cancel, which agents MUST honour (answering
                # stopReason "cancelled"). It is queued synchronously, past
                # the output limit, so it is neither lost to this
                # cancellation nor waits for it. $/cancel_request only if
                # the agent has not answered within the grace: agents may
                # ignore it, and those that honour it may answer -32800
                # instead of the turn's stop reason.
                book.cancel_session(session_id)
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
        turn to end (see :meth:`cancel_turn`): its ladder goes on by itself.
        The notification is queued at once, never waiting for room in the
        output queue."""
        await trio.lowlevel.checkpoint_if_cancelled()
        if self.connection.closed:
            raise self.connection.closed_error()
        self._turns.cancel_session(params.session_id, self.converter.unstructure(params))
        await trio.lowlevel.cancel_shielded_checkpoint()

    async def cancel_turn(self, session_id: str, *, grace: float | None = None) -> CancelOutcome:
        """Cancel the session's running turn and wait until it has ended;
        return how it did (a :class:`CancelOutcome`).

        The ladder: ``session/cancel`` (as :meth:`cancel`: the session's
        pending permission requests are answered ``cancelled`` at once);
        no answer within ``grace`` seconds (default :attr:`cancel_grace`):
        ``$/cancel_request`` for the prompt; no answer within
        :attr:`escalation_grace` more: the turn is abandoned (its late
        answer dropped), and the :attr:`abandon_policy` applies. So this
        returns within ``grace + escalation_grace``: ``how`` is
        ``"answered"``, ``"escalated"`` or ``"abandoned"``, and ``response``
        / ``error`` hold what the agent answered. With no turn running it
        sends nothing, changes nothing, and returns ``how == "idle"``.

        A turn already cancelled (its :meth:`prompt` cancelled by a
        deadline, say) is already on the ladder: this sends
        ``session/cancel`` again and waits for it; a ``grace`` shorter than
        what is left of its own brings the next rung closer. The task that
        called :meth:`prompt` for the turn, if still waiting, gets the
        answer too (or :class:`TurnNotAnswered` if abandoned). Raises
        :class:`ConnectionClosed` if the connection ends first (an agent
        that exits mid-turn: at once).
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        if grace is not None:
            grace = _seconds("grace", grace)
        if self.connection.closed:
            raise self.connection.closed_error()
        book = self._turns
        turns = book.in_flight(session_id)
        if not turns:
            await trio.lowlevel.cancel_shielded_checkpoint()
            return CancelOutcome(session_id, "idle")
        book.cancel_session(session_id, grace=grace)
        for turn in turns:
            await turn.ended.wait()
        last = turns[-1]
        if last.outcome is None:  # the connection closed first
            raise self.connection.closed_error()
        if last.outcome.how != "abandoned":
            # The answer is in: wait for the notifications read before it
            # to be handled, as prompt() does.
            with suppress(ACPError):
                await last.pending.result()
        return last.outcome

    async def _wind_down(self) -> None:
        """Leaving the connection's block: let each cancelled turn end
        (answered, or abandoned at the end of its ladder) before the
        connection closes. The updates read meanwhile are dropped, as
        closing drops them: the application is done with them."""
        self._handler.leaving = True
        await self._turns.wind_down()


def _seconds(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        raise ValueError(f"{name} must be a number of seconds >= 0, not {value!r}")
    return float(value)
