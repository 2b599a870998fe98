"""The two per-request objects of a connection, made by it only:
:class:`RequestContext` (what a handler of an *incoming* request sees) and
:class:`PendingRequest` (an *outgoing* request we sent). A registry of
handler tasks names the incoming request a task serves (walking up the
nursery tree), so a call made from a handler knows its parent: the request
tree. What they are made of that needs neither protocol nor each other
(:class:`CancelCause`, their shared base, a sent request's answer) is in
:mod:`~acp_trio._core._request_base`, below.

They import nothing of the connection: they talk to it through
:class:`RequestOwner`, and a handler sees it as :class:`ConnectionAPI`
(which :class:`~acp_trio.lowlevel.Connection` satisfies; a test keeps the
two in step)."""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any, Final, Protocol, final

import trio

from acp_trio._core._records import ConnectionStatistics, RequestNode
from acp_trio._core._request_base import _ERROR, _VALUE, WAITING, CancelCause, _Answer, _Request
from acp_trio._exceptions import ACPError, ConnectionClosed
from acp_trio._jsonrpc import IncomingRequest, OutgoingRequest, RequestId

__all__ = [
    "ConnectionAPI",
    "PendingRequest",
    "RequestContext",
    "RequestOwner",
    "current_request",
]


class ConnectionAPI(Protocol):
    """What a handler can do with the connection its request arrived on: the
    type of :attr:`RequestContext.connection`, for code of one's own that
    takes that connection. Every public member of :class:`Connection` (the
    one class that has them; each is documented there) but those only the
    code that made the connection uses: ``config``, ``handler``, ``serve``.
    """

    @property
    def closed(self) -> bool:
        """True once the connection started closing (:attr:`Connection.closed`)."""

    async def call(self, method: str, params: Any = None) -> Any:
        """Send a request and wait for its result; cancelled, the call sends
        one ``$/cancel_request`` (:meth:`Connection.call`)."""

    async def send_request(self, method: str, params: Any = None) -> PendingRequest:
        """Send a request and return it without waiting for the answer; cancelled
        while waiting for room, nothing is sent (:meth:`Connection.send_request`)."""

    def open_request(
        self, method: str, params: Any = None
    ) -> AbstractAsyncContextManager[PendingRequest]:
        """Send a request for the ``async with`` block; leaving it unanswered
        cancels the request (:meth:`Connection.open_request`)."""

    def fail_request(self, request_id: RequestId, error: ACPError) -> bool:
        """Settle a pending request with ``error``, as if its reply had come
        (:meth:`Connection.fail_request`)."""

    async def notify(self, method: str, params: Any = None) -> None:
        """Send a notification; cancelled while waiting for room, nothing is
        sent (:meth:`Connection.notify`)."""

    def notify_nowait(self, method: str, params: Any = None) -> None:
        """Send a notification without waiting, or raise ``trio.WouldBlock``
        (:meth:`Connection.notify_nowait`)."""

    def notify_past_limit_nowait(self, method: str, params: Any = None) -> bool:
        """Queue a notification at once, past the output limit
        (:meth:`Connection.notify_past_limit_nowait`)."""

    def run_in_notification_order_soon(self, fn: Callable[[], Awaitable[None]]) -> bool:
        """Have ``fn`` run after the notifications read so far, in their task
        (:meth:`Connection.run_in_notification_order_soon`)."""

    def start_soon(
        self, async_fn: Callable[..., Awaitable[object]], *args: object, name: object = None
    ) -> None:
        """Start a task of the connection's own, cancelled when it closes
        (:meth:`Connection.start_soon`)."""

    def statistics(self) -> ConnectionStatistics:
        """A snapshot of the connection's counters (:meth:`Connection.statistics`)."""

    def output_settled(self) -> bool:
        """Whether nothing waits to go out (:meth:`Connection.output_settled`)."""

    def request_tree(self) -> list[RequestNode]:
        """The live requests, as a tree (:meth:`Connection.request_tree`)."""

    def dump_request_tree(self) -> str:
        """The request tree as indented text (:meth:`Connection.dump_request_tree`)."""

    def closed_error(self) -> ConnectionClosed:
        """The error calls raise once the connection is closing
        (:meth:`Connection.closed_error`)."""

    def close_soon(self) -> None:
        """Start closing the connection without waiting (:meth:`Connection.close_soon`)."""

    async def aclose(self) -> None:
        """Close the connection and wait until it is closed; from one of its
        handlers, that handler is cancelled too (:meth:`Connection.aclose`)."""

    async def wait_closed(self) -> None:
        """Wait until the connection has fully closed; cancelling the wait
        leaves the connection as it is (:meth:`Connection.wait_closed`)."""


class RequestOwner(Protocol):
    """All the per-request objects ask of the connection that made them (one
    object implementing this is handed to each; they import nothing of it)."""

    @property
    def connection(self) -> ConnectionAPI:
        """The public connection (for :attr:`RequestContext.connection`)."""

    @property
    def notifications_handled(self) -> int:
        """How many notifications read so far were handled."""

    def scope_exposed(self, scope: trio.CancelScope) -> None:
        """A handler took ``scope`` (the reader's, if it runs eagerly)."""

    async def await_reply(self, pending: PendingRequest) -> None:
        """Wait until ``pending`` is settled (a checkpoint either way)."""

    async def wait_for_notifications(self, barrier: int) -> None:
        """Wait until the notifications up to number ``barrier`` are handled."""

    def send_cancel(self, pending: PendingRequest) -> None:
        """Send ``$/cancel_request`` for ``pending`` (at most once)."""

    def cancel_due(self, pending: PendingRequest) -> None:
        """``pending``'s call was cancelled: its ``$/cancel_request`` is due
        (called from an abort function: it only records it)."""


# The handler task of each incoming request in flight (all connections):
# cheaper than a contextvar, and it follows the nursery tree.
handler_tasks: Final[dict[trio.lowlevel.Task, RequestContext]] = {}


def current_request() -> RequestContext | None:
    """The incoming request whose handler task is, or started the nursery of,
    the calling task; ``None`` outside any handler."""
    try:
        task: trio.lowlevel.Task | None = trio.lowlevel.current_task()
    except RuntimeError:  # not in a Trio task
        return None
    while task is not None:
        ctx = handler_tasks.get(task)
        if ctx is not None:
            return ctx
        nursery = task.parent_nursery
        task = None if nursery is None else nursery.parent_task
    return None


@final
class RequestContext(_Request[RequestId]):
    """An incoming request, as its handler sees it.

    By default a cancel (``$/cancel_request``, ``session/cancel``, the
    deadline, shutdown) cancels the handler's scope: every checkpoint in the
    handler raises ``trio.Cancelled``, every outgoing request it is waiting on
    is cancelled on the wire, and the SDK answers ``-32800``.

    Set :attr:`cooperative` to handle a cancel yourself: the handler keeps
    running, :attr:`cancel_requested` is set, and whatever the handler
    returns (a partial result) is the answer. The deadline and shutdown still
    cancel hard. To protect a critical section, use
    ``with trio.CancelScope(shield=True):`` as usual.
    """

    __slots__ = ("_cause", "_children", "_deadline", "_event", "_scope", "cooperative")

    _conn: RequestOwner
    _entry: IncomingRequest[RequestContext]

    def __init__(self, conn: RequestOwner, entry: IncomingRequest[RequestContext]) -> None:
        self._conn = conn
        self._entry = entry
        # The handler's scope: made when it starts (or is asked for).
        self._scope: trio.CancelScope | None = None
        self._deadline = math.inf
        self._event: trio.Event | None = None
        self._cause: CancelCause | None = None
        self._children: set[PendingRequest] | None = None
        # The last notification read before it, if not yet handled.
        self._barrier = 0
        self.cooperative = False

    @property
    def connection(self) -> ConnectionAPI:
        """The connection the request arrived on (to make calls of one's own):
        the :class:`Connection`, typed as what a handler does with it."""
        return self._conn.connection

    @property
    def cancel_scope(self) -> trio.CancelScope:
        """The scope the handler runs in (set its ``deadline`` to add one).
        Cancelling it after the handler finished does nothing."""
        scope = self._scope
        if scope is None:
            scope = self._scope = trio.CancelScope()
        else:
            # Eagerly, in the reader's scope: the reader moves to a fresh one.
            self._conn.scope_exposed(scope)
        return scope

    @property
    def cancel_requested(self) -> trio.Event:
        """Set once a cancel of this request was asked for, by anyone."""
        if self._event is None:
            self._event = trio.Event()
            if self._cause is not None:
                self._event.set()
        return self._event

    @property
    def cancel_cause(self) -> CancelCause | None:
        """Who cancelled the request first, or ``None``."""
        if self._cause is None and self._scope is not None and self._scope.cancel_called:
            # request_cancel() records its cause: this is the scope's deadline.
            return CancelCause.DEADLINE
        return self._cause

    @property
    def children(self) -> frozenset[PendingRequest]:
        """The outgoing requests this handler is waiting on right now."""
        return frozenset(self._children or ())

    def request_cancel(self, cause: CancelCause = CancelCause.LOCAL) -> None:
        """Cancel this request as if the peer had asked (idempotent).

        Hard-cancels the scope unless the handler is :attr:`cooperative` and
        the cause is one a handler may answer itself (peer, session, local).
        """
        first = self._cause is None
        if first:
            self._cause = cause
            if self._event is not None:
                self._event.set()
        if self._scope is not None and (
            not self.cooperative or cause in (CancelCause.SHUTDOWN, CancelCause.DEADLINE)
        ):
            self._scope.cancel()

    def _adopt(self, child: PendingRequest) -> None:
        if self._children is None:
            self._children = set()
        self._children.add(child)

    def _release(self, child: PendingRequest) -> None:
        if self._children is not None:
            self._children.discard(child)

    def __repr__(self) -> str:
        return f"<RequestContext {self.method} id={self.id!r} phase={self._entry.phase.value}>"


@final
class PendingRequest(_Answer):
    """An outgoing request on its way, from :meth:`Connection.open_request`.

    Leaving the ``async with`` block while the request is unanswered cancels
    it on the wire (one ``$/cancel_request``) unless :meth:`detach` was
    called. The peer's late answer is then dropped quietly.
    """

    __slots__ = ("_detached", "_parent")

    _conn: RequestOwner
    _entry: OutgoingRequest[PendingRequest]

    def __init__(
        self,
        conn: RequestOwner,
        entry: OutgoingRequest[PendingRequest],
        parent: RequestContext | None,
    ) -> None:
        self._conn = conn
        self._entry = entry
        self._parent = parent
        self._task = None
        self._state = WAITING
        self._value = None
        self._error = None
        self._barrier = 0
        self._detached = False
        self._callbacks = None

    @property
    def cancel_sent(self) -> bool:
        """Whether ``$/cancel_request`` was sent for this request."""
        return self._entry.cancel_sent

    @property
    def parent(self) -> RequestContext | None:
        """The incoming request whose handler made this one, if any."""
        return self._parent

    async def result(self) -> Any:
        """Wait for the answer: the result, or raise :class:`RequestError`
        (the peer's error), :class:`ConnectionClosed` or
        :class:`RemoteProtocolError`.

        Being cancelled while waiting here does not cancel the request; leaving
        the ``async with`` block does.
        """
        if self._task is not None:
            raise RuntimeError("another task is already waiting for this request")
        await self._conn.await_reply(self)
        if self._barrier > self._conn.notifications_handled:
            await self._conn.wait_for_notifications(self._barrier)
        return self._outcome()

    async def cancel_and_wait(self) -> Any:
        """Send ``$/cancel_request`` and wait for the peer's final answer.

        Returns the peer's (possibly partial) result, or raises
        :class:`RequestError` (``-32800`` when the peer cut the work short).
        To bound the wait, wrap it in ``trio.move_on_after``/``fail_after``;
        leaving the ``async with`` block then abandons the request.
        """
        self._conn.send_cancel(self)
        return await self.result()

    def detach(self) -> None:
        """Let the peer finish; ignore its answer; never send a cancel."""
        self._detached = True

    @property
    def detached(self) -> bool:
        """Whether :meth:`detach` was called."""
        return self._detached

    def cancel(self) -> None:
        """Send ``$/cancel_request`` for the request now, without waiting
        and without a checkpoint (queued past the output limit, so it works
        from a task being cancelled). Idempotent: at most one is ever sent,
        and none once the answer is in. The request stays pending: its
        answer (``-32800``, or a partial result) still comes, to
        :meth:`result` or :meth:`add_done_callback`. The synchronous form
        of :meth:`cancel_and_wait`."""
        self._conn.send_cancel(self)

    def _abort_call(self, _: Any) -> trio.lowlevel.Abort:
        # The task in call() is cancelled (Trio runs this inside whatever
        # cancelled it). No user code, no I/O: the cancel is recorded as due;
        # the reader sends it after the frame that caused it, or call() as it unwinds.
        self._task = None
        self._conn.cancel_due(self)
        return trio.lowlevel.Abort.SUCCEEDED

    def _settle(self, value: Any, error: BaseException | None, barrier: int) -> None:
        if self._state != WAITING:
            return
        if error is None:
            self._state = _VALUE
            self._value = value
        else:
            self._state = _ERROR
            self._error = error
        self._barrier = barrier
        if self._parent is not None:
            self._parent._release(self)
        if (task := self._task) is not None:
            self._task = None
            trio.lowlevel.reschedule(task)
        if (callbacks := self._callbacks) is not None:
            self._callbacks = None
            for callback in callbacks:
                callback()

    def __repr__(self) -> str:
        state = {WAITING: "pending", _VALUE: "answered", _ERROR: "failed"}[self._state]
        return f"<PendingRequest {self.method} id={self.id} {state}>"
