"""The agent side of a v2 session: its turn, held prompts, tool calls,
terminals and background work, each in its own cancel scope.

A :class:`Turn` is what :meth:`acp_trio.v2.Agent.prompt` runs with: it sends
the turn's updates, and opens the turn's tool calls (:meth:`Turn.tool_call`)
and terminals (:meth:`Turn.terminal`) as scopes. ``tool_call/cancel`` and
``terminal/cancel`` cancel exactly that scope; ``session/cancel`` cancels the
turn's scope, and with it every tool call and terminal inside. Whatever ends
a scope, its final ``tool_call_update`` / ``terminal_update`` is sent.
"""

from __future__ import annotations

import base64
import logging
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress
from typing import Any

import trio

from acp_trio._core._groups import collapse_group
from acp_trio._exceptions import ACPError, RequestError
from acp_trio._public import NoPublicConstructor
from acp_trio.schema.v2 import (
    UNSET,
    BackgroundToolCall,
    BackgroundWork,
    Error,
    IdleStateUpdate,
    PromptRequest,
    RequestPermissionResponse,
    RequiresActionStateUpdate,
    RunningStateUpdate,
    SessionUpdate,
    TerminalCancelCapabilities,
    TerminalCapabilities,
    TerminalExitStatus,
    TerminalOutputChunk,
    TerminalUpdate,
    ToolCallCancelCapabilities,
    ToolCallCapabilities,
    ToolCallUpdate,
    UpdateSessionNotification,
)
from acp_trio.v2._client_proxy import ClientProxy

__all__ = ["Session", "TerminalHandle", "ToolCallHandle", "Turn"]

_log = logging.getLogger("acp_trio.v2.agent")

# How long a final update may wait for room in the output queue once its
# scope is cancelled (the connection closing, mostly).
_FINAL_UPDATE_GRACE = 5.0


async def _shielded(send: Awaitable[None]) -> None:
    """Await a final update even while cancelled; a closed connection is not
    an error there (there is nobody left to tell)."""
    with trio.CancelScope(shield=True), trio.move_on_after(_FINAL_UPDATE_GRACE), suppress(ACPError):
        await send


class _Entity:
    """A tool call or terminal with its own cancel scope."""

    def __init__(self, key: str, cancellable: bool) -> None:
        self.key = key
        self.cancellable = cancellable
        self.scope = trio.CancelScope()
        self.finished = False


class Session:
    """One v2 session as the agent side keeps it (made on first use)."""

    def __init__(self, session_id: str, client: ClientProxy, nursery: trio.Nursery) -> None:
        self.id = session_id
        self.client = client
        self.nursery = nursery
        #: The prompts not yet inserted, in arrival order: (scope, go).
        self.held: deque[tuple[trio.CancelScope, trio.Event]] = deque()
        self.turn: Turn | None = None
        self.tool_calls: dict[str, _Entity] = {}
        self.terminals: dict[str, _Entity] = {}
        #: Background work, in the order it started; None until there is any.
        self.background: dict[tuple[str, str], BackgroundWork] | None = None
        self.background_scopes: set[trio.CancelScope] = set()
        self.state: str = "idle"
        #: ``session/close`` has begun: prompts are refused from here.
        self.closing = False
        self.closed = False
        self._tasks = 0
        self._all_done = trio.Event()
        self._all_done.set()

    # -- sending -------------------------------------------------------------

    async def send(self, update: SessionUpdate) -> None:
        """Send ``update`` for this session; nothing once it is closed."""
        if self.closed:
            return
        await self.client.session_update(
            UpdateSessionNotification(session_id=self.id, update=update)
        )

    def _background_list(self) -> list[BackgroundWork] | None:
        return None if self.background is None else list(self.background.values())

    async def send_state(self, state: str, stop_reason: str | None = None, **kw: Any) -> None:
        """A ``state_update`` (``running``, ``requires_action``, ``idle``),
        with the background work once there has been any."""
        self.state = state
        background = self._background_list()
        update: SessionUpdate
        if state == "running":
            update = RunningStateUpdate(background=background)
        elif state == "requires_action":
            update = RequiresActionStateUpdate(background=background)
        else:
            update = IdleStateUpdate(background=background, stop_reason=stop_reason, **kw)
        await self.send(update)

    # -- held prompts --------------------------------------------------------

    def hold(self) -> tuple[trio.CancelScope, trio.Event]:
        entry = (trio.CancelScope(), trio.Event())
        self.held.append(entry)
        self.advance()
        return entry

    def unhold(self, entry: tuple[trio.CancelScope, trio.Event]) -> None:
        if entry in self.held:
            self.held.remove(entry)
        self.advance()

    def advance(self) -> None:
        """Let the first held prompt in, if no turn runs."""
        if self.turn is None and self.held:
            self.held[0][1].set()

    def cancel(self) -> None:
        """``session/cancel``: the running turn and every held prompt."""
        if self.turn is not None:
            self.turn.scope.cancel()
        for scope, _ in self.held:
            scope.cancel()

    # -- tasks ---------------------------------------------------------------

    def start(self, fn: Callable[[], Awaitable[None]]) -> None:
        """Run ``fn`` in the connection's nursery, counted for :meth:`drain`."""
        self._tasks += 1
        self._all_done = trio.Event() if self._all_done.is_set() else self._all_done

        async def run() -> None:
            try:
                await fn()
            finally:
                self._tasks -= 1
                if self._tasks == 0:
                    self._all_done.set()

        self.nursery.start_soon(run)

    async def drain(self) -> None:
        """Wait until the turn and the background work have ended."""
        await self._all_done.wait()

    def cancel_background(self) -> None:
        for scope in list(self.background_scopes):
            scope.cancel()

    # -- entities ------------------------------------------------------------

    def cancel_entity(self, table: dict[str, _Entity], key: str, what: str) -> None:
        entity = table.get(key)
        if entity is None or entity.finished or not entity.cancellable:
            raise RequestError.invalid_params(
                {"message": f"no cancellable running {what} {key!r}", what + "Id": key}
            )
        entity.scope.cancel()


class _Scoped(metaclass=NoPublicConstructor):
    """The part of :class:`ToolCallHandle` and :class:`TerminalHandle` that
    is the same: the entity, its session, its cancel scope."""

    def __init__(self, session: Session, entity: _Entity) -> None:
        self.session = session
        self._entity = entity

    @property
    def cancel_scope(self) -> trio.CancelScope:
        """The scope the entity's work runs in; ``tool_call/cancel`` /
        ``terminal/cancel`` cancel it (also fine to cancel yourself)."""
        return self._entity.scope

    @property
    def cancelled(self) -> bool:
        """Whether this entity (rather than the whole turn) was cancelled."""
        return self._entity.scope.cancel_called


class ToolCallHandle(_Scoped):
    """One tool call of a turn (see :meth:`Turn.tool_call`)."""

    @property
    def id(self) -> str:
        """The tool call's ``toolCallId``."""
        return self._entity.key

    async def update(self, **fields: Any) -> None:
        """Send a ``tool_call_update`` for this call with ``fields``
        (:class:`~acp_trio.schema.v2.ToolCallUpdate`'s, e.g. ``content=``,
        ``raw_output=``); omitted fields stay as they were. Cancelled while
        waiting for room in the output queue, nothing is sent."""
        await self.session.send(ToolCallUpdate(tool_call_id=self.id, **fields))


class TerminalHandle(_Scoped):
    """One agent-owned display terminal of a turn (see :meth:`Turn.terminal`)."""

    exit_status: TerminalExitStatus | None = None

    @property
    def id(self) -> str:
        """The terminal's ``terminalId``."""
        return self._entity.key

    async def output(self, data: bytes) -> None:
        """Send ``data`` as a ``terminal_output_chunk`` (base64 on the wire).
        Cancelled while waiting for room in the output queue, nothing is sent."""
        await self.session.send(
            TerminalOutputChunk(terminal_id=self.id, data=base64.b64encode(data).decode("ascii"))
        )

    def exited(self, exit_code: int | None = None, signal: str | None = None) -> None:
        """Record how the command ended: sent in the final ``terminal_update``."""
        self.exit_status = TerminalExitStatus(exit_code=exit_code, signal=signal)


class Turn(metaclass=NoPublicConstructor):
    """One inserted prompt of a session, running in its own cancel scope.

    ``session/cancel`` (or ``session/close``) cancels :attr:`scope`: the
    handler gets ``trio.Cancelled`` at its next checkpoint (let it
    propagate), every request it waits on is cancelled on the wire, and the
    SDK reports ``idle`` with ``stopReason: "cancelled"``.
    """

    def __init__(self, session: Session, params: PromptRequest, message_id: str) -> None:
        self.session = session
        self.params = params
        self.message_id = message_id
        self.scope = trio.CancelScope()

    @property
    def session_id(self) -> str:
        """The id of the session the turn runs in."""
        return self.session.id

    @property
    def client(self) -> ClientProxy:
        """The proxy to the client (the agent's ``client``)."""
        return self.session.client

    async def send(self, update: SessionUpdate) -> None:
        """Send one ``session/update`` for the turn's session (nothing once
        it is closed). Cancelled while waiting for room in the output queue,
        nothing is sent."""
        await self.session.send(update)

    @asynccontextmanager
    async def requires_action(self) -> AsyncIterator[None]:
        """Report ``requires_action`` for the block (the turn waits on the
        user), then ``running`` again if the turn goes on; if the turn is
        cancelled in the block, its ``idle`` follows instead."""
        await self.session.send_state("requires_action")
        try:
            yield
        finally:
            if not self.scope.cancel_called:
                await _shielded(self.session.send_state("running"))

    async def request_permission(self, *args: Any, **kwargs: Any) -> RequestPermissionResponse:
        """``session/request_permission`` (the params object or its fields, as
        :meth:`ClientProxy.request_permission`), reporting ``requires_action``
        while the client decides; cancelling the turn cancels it on the wire."""
        async with self.requires_action():
            return await self.client.request_permission(*args, **kwargs)

    @asynccontextmanager
    async def tool_call(
        self, tool_call_id: str, *, cancellable: bool = True, **fields: Any
    ) -> AsyncIterator[ToolCallHandle]:
        """Run the block as the tool call ``tool_call_id``, in its own scope.

        Announces it (``status: "in_progress"``, ``fields`` such as
        ``title=``/``kind=``, and ``capabilities.cancel`` if
        ``cancellable``); ``tool_call/cancel`` cancels the block alone (the
        turn goes on). On the way out the final ``tool_call_update`` says
        ``completed``, ``cancelled`` (this call or the whole turn was
        cancelled) or ``failed`` (the block raised: the error goes on).
        Raises ``ValueError`` if a tool call ``tool_call_id`` is already
        running in the session.
        """
        async with _entity_scope(
            self.session,
            self.session.tool_calls,
            tool_call_id,
            cancellable,
            _ToolCallReports(fields),
        ) as handle:
            assert isinstance(handle, ToolCallHandle)
            yield handle

    @asynccontextmanager
    async def terminal(
        self, terminal_id: str, *, cancellable: bool = True, **fields: Any
    ) -> AsyncIterator[TerminalHandle]:
        """Run the block as the display terminal ``terminal_id`` (``fields``
        such as ``command=``, ``cwd=``), in its own scope; ``terminal/cancel``
        cancels the block alone. The final ``terminal_update`` carries the
        :meth:`TerminalHandle.exited` status, or ``signal: "SIGTERM"`` if
        the block was cancelled, or ``signal: "SIGABRT"`` if it raised.
        Raises ``ValueError`` if a terminal ``terminal_id`` is already running
        in the session.
        """
        async with _entity_scope(
            self.session, self.session.terminals, terminal_id, cancellable, _TerminalReports(fields)
        ) as handle:
            assert isinstance(handle, TerminalHandle)
            yield handle

    async def start_background(
        self,
        tool_call_id: str,
        fn: Callable[[ToolCallHandle], Awaitable[None]],
        *,
        cancellable: bool = True,
        **fields: Any,
    ) -> None:
        """Run ``fn(handle)`` as background work of the session, listed on
        every state update until it ends; it outlives the turn, and only
        ``tool_call/cancel``, ``session/close`` or the connection closing
        stop it. Its end is reported by its final ``tool_call_update``, then
        a state snapshot without it.

        Returns once the work's tool call is announced (its first
        ``tool_call_update`` is queued) and listed, so no state update lists
        it before the client has heard of it. Raises ``ValueError`` if a tool
        call ``tool_call_id`` is already running in the session. Cancelled
        while waiting, the work goes on (``tool_call/cancel`` stops it)."""
        session = self.session
        old = session.tool_calls.get(tool_call_id)
        if old is not None and not old.finished:
            raise ValueError(f"{tool_call_id!r} is already running in session {session.id!r}")
        key = ("tool_call", tool_call_id)
        listed = trio.Event()

        async def run() -> None:
            registered = False
            try:
                async with self.tool_call(tool_call_id, cancellable=cancellable, **fields) as h:
                    # Announced: from here state updates list it.
                    if session.background is None:
                        session.background = {}
                    session.background[key] = BackgroundToolCall(tool_call_id=tool_call_id)
                    registered = True
                    session.background_scopes.add(h.cancel_scope)
                    listed.set()
                    try:
                        await fn(h)
                    finally:
                        session.background_scopes.discard(h.cancel_scope)
            except Exception:
                _log.exception("background work %s of session %s failed", tool_call_id, session.id)
            finally:
                listed.set()
                if registered:
                    assert session.background is not None
                    session.background.pop(key, None)
                    await _shielded(session.send_state(session.state))

        session.start(run)
        await listed.wait()


class _ToolCallReports:
    def __init__(self, fields: dict[str, Any]) -> None:
        self.fields = fields

    def handle(self, session: Session, entity: _Entity) -> _Scoped:
        return ToolCallHandle._create(session, entity)

    def first(self, entity: _Entity) -> SessionUpdate:
        caps = (
            ToolCallCapabilities(cancel=ToolCallCancelCapabilities())
            if entity.cancellable
            else UNSET
        )
        fields = {"status": "in_progress", **self.fields}
        return ToolCallUpdate(tool_call_id=entity.key, capabilities=caps, **fields)

    def last(self, entity: _Entity, handle: _Scoped, outcome: str) -> SessionUpdate:
        status = {"ok": "completed", "cancelled": "cancelled", "error": "failed"}[outcome]
        caps = None if entity.cancellable else UNSET
        return ToolCallUpdate(tool_call_id=entity.key, status=status, capabilities=caps)


class _TerminalReports:
    def __init__(self, fields: dict[str, Any]) -> None:
        self.fields = fields

    def handle(self, session: Session, entity: _Entity) -> _Scoped:
        return TerminalHandle._create(session, entity)

    def first(self, entity: _Entity) -> SessionUpdate:
        caps = (
            TerminalCapabilities(cancel=TerminalCancelCapabilities())
            if entity.cancellable
            else UNSET
        )
        return TerminalUpdate(terminal_id=entity.key, capabilities=caps, **self.fields)

    def last(self, entity: _Entity, handle: _Scoped, outcome: str) -> SessionUpdate:
        assert isinstance(handle, TerminalHandle)
        status = handle.exit_status
        if status is None or outcome == "cancelled":
            signal = {"ok": None, "cancelled": "SIGTERM", "error": "SIGABRT"}[outcome]
            status = TerminalExitStatus(exit_code=0 if outcome == "ok" else None, signal=signal)
        caps = None if entity.cancellable else UNSET
        return TerminalUpdate(terminal_id=entity.key, exit_status=status, capabilities=caps)


@asynccontextmanager
async def _entity_scope(
    session: Session,
    table: dict[str, _Entity],
    key: str,
    cancellable: bool,
    reports: _ToolCallReports | _TerminalReports,
) -> AsyncIterator[_Scoped]:
    old = table.get(key)
    if old is not None and not old.finished:
        raise ValueError(f"{key!r} is already running in session {session.id!r}")
    entity = _Entity(key, cancellable)
    table[key] = entity
    handle = reports.handle(session, entity)
    outcome = "cancelled"
    try:
        await session.send(reports.first(entity))
        with entity.scope:
            try:
                yield handle
            except trio.Cancelled:
                raise
            except BaseException:
                if not entity.scope.cancel_called:
                    outcome = "error"
                raise
            outcome = "ok"
    finally:
        if entity.scope.cancel_called and outcome == "ok":
            outcome = "cancelled"
        entity.finished = True
        await _shielded(session.send(reports.last(entity, handle, outcome)))


def error_of(exc: BaseException) -> Error:
    """The ``Error`` an idle ``stopReason: "error"`` reports for ``exc`` (a
    group holding one real error, as from a nursery of the handler, as that
    error)."""
    if isinstance(exc, BaseExceptionGroup):
        exc = collapse_group(exc)
    if isinstance(exc, RequestError):
        data = exc.data if exc.has_data else None
        return Error(code=exc.code, message=exc.message, data=data)
    return Error(code=-32603, message=f"{type(exc).__name__}: {exc}")
