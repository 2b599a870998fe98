"""The two per-request objects of a connection, made by it only:
:class:`RequestContext` (what a handler of an *incoming* request sees) and
:class:`PendingRequest` (an *outgoing* request we sent), with what they are
made of (:class:`CancelCause`, the base they share). A registry of handler
tasks names the incoming request a task serves (walking up the nursery
tree), so a call made from a handler knows its parent: the request tree.

Their fields are read and written in this module only. What the
connection's parts do to them (settle a call, wait for it in a task, lend a
handler the reader's scope, ...) is a function here, beside the fields it
touches (the end of the module): no other module of ``_core`` touches them
(``tests/test_architecture.py``).

They import nothing of the connection: a :class:`PendingRequest` talks to
the part that sent it through :class:`CallOwner` (which
``OutgoingCalls`` satisfies), and a handler sees the connection as
:class:`ConnectionAPI` (which :class:`~acp_trio.lowlevel.Connection`
satisfies; a test keeps the two in step)."""

from __future__ import annotations

import enum
import math
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any, Final, Protocol, final, overload

import trio

from acp_trio._core._records import ConnectionStatistics, RequestNode
from acp_trio._exceptions import ACPError, ConnectionClosed, RequestError
from acp_trio._jsonrpc import IncomingRequest, OutgoingRequest, RequestId

__all__ = [
    "CallOwner",
    "CancelCause",
    "ConnectionAPI",
    "PendingRequest",
    "RequestContext",
    "adopt",
    "barrier_of",
    "current_request",
    "entry_of",
    "NOT_HANDLED",
    "handler_scope",
    "lend_scope",
    "new_pending_request",
    "new_request_context",
    "outcome",
    "return_scope",
    "settle",
    "wait_here",
]


class CancelCause(enum.Enum):
    """Why a request was cancelled. The wire code is ``-32800`` for all of
    them; this says who asked, for logs and for applications."""

    PEER = "peer"  # the peer sent $/cancel_request
    SESSION = "session"  # session/cancel (or session/close) for its session
    DEADLINE = "deadline"  # the per-request deadline passed
    LOCAL = "local"  # local code called RequestContext.request_cancel()
    SHUTDOWN = "shutdown"  # the connection is closing


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


class CallOwner(Protocol):
    """What a :class:`PendingRequest` asks of the part that sent it (the
    connection's ``OutgoingCalls``, which it imports nothing of)."""

    async def result(self, pending: PendingRequest, call: bool) -> Any:
        """Wait for ``pending``'s answer, then for the notifications read
        before it; return it or raise (a checkpoint either way)."""

    def send_cancel(self, entry: OutgoingRequest[PendingRequest]) -> None:
        """Send ``$/cancel_request`` for the request of ``entry`` (at most once)."""

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


# The ``_lent`` states of a RequestContext: its scope is its own, or the
# reader's, lent while the handler runs eagerly (and perhaps taken: the
# handler read ``cancel_scope``, and may cancel it later).
_OWN: Final = 0
_LENT: Final = 1
_TAKEN: Final = 2


@final
class RequestContext:
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

    __slots__ = (
        "_barrier",
        "_cancel_scope",
        "_cause",
        "_children",
        "_connection_api",
        "_deadline",
        "_entry",
        "_event",
        "_lent",
        "cooperative",
    )

    _connection_api: ConnectionAPI
    _entry: IncomingRequest[RequestContext]
    # The last notification read before it, if not yet handled (else 0).
    _barrier: int
    # When the handler's scope is cancelled (math.inf: never).
    _deadline: float
    # The handler's scope: made when it starts (or is asked for).
    _cancel_scope: trio.CancelScope | None
    _lent: int
    _event: trio.Event | None
    _cause: CancelCause | None
    _children: set[PendingRequest] | None
    #: Set it (in the handler, or in ``Handler.request_received``) to handle
    #: a cancel yourself: see above.
    cooperative: bool

    def __init__(self) -> None:
        raise TypeError("a RequestContext is made by its connection only")

    @property
    def id(self) -> RequestId:
        """The request's JSON-RPC id, as the peer sent it."""
        return self._entry.id

    @property
    def method(self) -> str:
        """The request's method name."""
        return self._entry.method

    @property
    def connection(self) -> ConnectionAPI:
        """The connection the request arrived on (to make calls of one's own):
        the :class:`Connection`, typed as what a handler does with it."""
        return self._connection_api

    @property
    def cancel_scope(self) -> trio.CancelScope:
        """The scope the handler runs in (set its ``deadline`` to add one).
        Cancelling it after the handler finished does nothing."""
        scope = self._cancel_scope
        if scope is None:
            scope = self._cancel_scope = trio.CancelScope()
        elif self._lent:
            # Run eagerly, in the reader's scope: the reader moves to a
            # fresh one after the handler (see return_scope).
            self._lent = _TAKEN
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
        scope = self._cancel_scope
        if self._cause is None and scope is not None and scope.cancel_called:
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
        if self._cancel_scope is not None and (
            not self.cooperative or cause in (CancelCause.SHUTDOWN, CancelCause.DEADLINE)
        ):
            self._cancel_scope.cancel()

    def __repr__(self) -> str:
        return f"<RequestContext {self.method} id={self.id!r} phase={self._entry.phase.value}>"


# The states of a PendingRequest's answer.
_WAITING: Final = 0
_VALUE: Final = 1
_ERROR: Final = 2


@final
class PendingRequest:
    """An outgoing request on its way, from :meth:`Connection.open_request`.

    Leaving the ``async with`` block while the request is unanswered cancels
    it on the wire (one ``$/cancel_request``) unless :meth:`detach` was
    called. The peer's late answer is then dropped quietly.
    """

    __slots__ = (
        "_barrier",
        "_callbacks",
        "_detached",
        "_entry",
        "_error",
        "_owner",
        "_parent",
        "_state",
        "_task",
        "_value",
    )

    _owner: CallOwner
    _entry: OutgoingRequest[PendingRequest]
    _parent: RequestContext | None
    # The task waiting for the answer, if one is.
    _task: trio.lowlevel.Task | None
    _state: int
    _value: Any
    _error: BaseException | None
    # The notifications read before the answer (see barrier_of).
    _barrier: int
    _detached: bool
    _callbacks: list[Callable[[], None]] | None

    def __init__(self) -> None:
        raise TypeError("a PendingRequest is made by its connection only")

    @property
    def id(self) -> int:
        """The request's JSON-RPC id, the one this side gave it."""
        return self._entry.id

    @property
    def method(self) -> str:
        """The request's method name."""
        return self._entry.method

    @property
    def done(self) -> bool:
        """Whether the answer (or a failure) has arrived."""
        return self._state != _WAITING

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
        return await self._owner.result(self, False)

    def result_nowait(self) -> Any:
        """The answer, if it is in: return the result, or raise what
        :meth:`result` would raise (a fresh exception each time). Raises
        ``trio.WouldBlock`` while the request is pending. Unlike
        :meth:`result` it does not wait for the notifications read before
        the answer to be handled, and any task may call it, also while
        another waits in :meth:`result`."""
        if self._state == _WAITING:
            raise trio.WouldBlock
        return outcome(self)

    def add_done_callback(self, callback: Callable[[], None]) -> None:
        """Call ``callback()`` once the request is settled: answered, failed,
        abandoned or cut by the connection closing (at once, if it is
        already). Read the answer there with :meth:`result_nowait`. It runs
        wherever the answer is read (the reader task, the connection
        closing), outside any task of yours: keep it quick and synchronous,
        and do not raise (start a task with :meth:`Connection.start_soon`
        for more)."""
        if self._state != _WAITING:
            callback()
        elif self._callbacks is None:
            self._callbacks = [callback]
        else:
            self._callbacks.append(callback)

    async def cancel_and_wait(self) -> Any:
        """Send ``$/cancel_request`` and wait for the peer's final answer.

        Returns the peer's (possibly partial) result, or raises
        :class:`RequestError` (``-32800`` when the peer cut the work short).
        To bound the wait, wrap it in ``trio.move_on_after``/``fail_after``;
        leaving the ``async with`` block then abandons the request.
        """
        self._owner.send_cancel(self._entry)
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
        self._owner.send_cancel(self._entry)

    def _abort(self, _: Any) -> trio.lowlevel.Abort:
        # The task in result() is cancelled: the request goes on.
        self._task = None
        return trio.lowlevel.Abort.SUCCEEDED

    def _abort_call(self, _: Any) -> trio.lowlevel.Abort:
        # The task in call() is cancelled (Trio runs this inside whatever
        # cancelled it). No user code, no I/O: the cancel is recorded as due;
        # the reader sends it after the frame that caused it, or call() as it unwinds.
        self._task = None
        self._owner.cancel_due(self)
        return trio.lowlevel.Abort.SUCCEEDED

    def __repr__(self) -> str:
        state = {_WAITING: "pending", _VALUE: "answered", _ERROR: "failed"}[self._state]
        return f"<PendingRequest {self.method} id={self.id} {state}>"


# What the connection's parts do to the per-request objects: the only code
# outside their classes that touches their fields.


def new_request_context(
    *,
    connection: ConnectionAPI,
    entry: IncomingRequest[RequestContext],
    barrier: int,
    deadline: float,
) -> RequestContext:
    """A request received, as its handler will see it: arrived on
    ``connection``, registered as ``entry``; its handler starts after the
    notifications up to number ``barrier`` were handled (0: none wait), and
    is cancelled at ``deadline`` (``math.inf``: never).

    (The per-request objects have no public constructor, and are made here
    rather than by a keyword-only ``__init__``: CPython 3.11 makes a dict for
    every keyword call of a class, 1,400 instructions more per request.)"""
    ctx = object.__new__(RequestContext)
    ctx._connection_api = connection
    ctx._entry = entry
    ctx._barrier = barrier
    ctx._deadline = deadline
    ctx._cancel_scope = None
    ctx._lent = _OWN
    ctx._event = None
    ctx._cause = None
    ctx._children = None
    ctx.cooperative = False
    return ctx


def new_pending_request(
    *,
    owner: CallOwner,
    entry: OutgoingRequest[PendingRequest],
    parent: RequestContext | None,
) -> PendingRequest:
    """A request sent as ``entry`` by ``owner`` (the connection's outgoing
    part), from the handler of ``parent`` if any (see new_request_context
    for why a function)."""
    pending = object.__new__(PendingRequest)
    pending._owner = owner
    pending._entry = entry
    pending._parent = parent
    pending._task = None
    pending._state = _WAITING
    pending._value = None
    pending._error = None
    pending._barrier = 0
    pending._detached = False
    pending._callbacks = None
    return pending


@overload
def entry_of(request: RequestContext) -> IncomingRequest[RequestContext]: ...
@overload
def entry_of(request: PendingRequest) -> OutgoingRequest[PendingRequest]: ...
def entry_of(
    request: RequestContext | PendingRequest,
) -> IncomingRequest[RequestContext] | OutgoingRequest[PendingRequest]:
    """The request's entry in the peer's table (what the ``Peer`` answers,
    cancels and forgets it by)."""
    return request._entry


def barrier_of(request: RequestContext | PendingRequest) -> int:
    """The number of the last notification read before the request (or
    before a sent request's answer) that must be handled before its
    handler starts (or its caller goes on); 0 for none."""
    return request._barrier


# Incoming: the handler's scope.


def lend_scope(ctx: RequestContext, scope: trio.CancelScope) -> bool:
    """If nothing holds the handler back (not cancelled, no scope of its own:
    ``request_received`` made none, to set a deadline say; no notification
    read before it still to handle; its deadline not passed), lend it
    ``scope`` (the reader's), with the request's deadline, until
    :func:`return_scope`, and return ``True``: the reader runs the handler
    eagerly. Else ``False``, and nothing is lent."""
    deadline = ctx._deadline
    if (
        ctx._cause is not None
        or ctx._cancel_scope is not None
        or ctx._barrier
        or (deadline != math.inf and deadline <= trio.current_time())
    ):
        return False
    ctx._cancel_scope = scope
    ctx._lent = _LENT
    if deadline != math.inf:
        scope.deadline = deadline
    return True


def return_scope(ctx: RequestContext, scope: trio.CancelScope) -> bool:
    """The handler run eagerly is over: its scope is no longer ``scope``
    (a cancellation of it is recorded as the deadline's, unless the request
    was cancelled first). Whether the handler took ``scope``
    (:attr:`RequestContext.cancel_scope`) and may cancel it later."""
    if ctx._cause is None and scope.cancel_called:
        ctx.request_cancel(CancelCause.DEADLINE)  # record it
    taken = ctx._lent == _TAKEN
    ctx._cancel_scope = None
    ctx._lent = _OWN
    return taken


def handler_scope(ctx: RequestContext) -> trio.CancelScope:
    """The scope the handler runs in, in its own task (made now, unless
    ``request_received`` made it), with the request's deadline."""
    scope = ctx.cancel_scope
    if ctx._deadline != math.inf:
        scope.deadline = min(scope.deadline, ctx._deadline)
    return scope


# Outgoing: the answer.


def adopt(pending: PendingRequest) -> None:
    """``pending`` is on its way: the handler that made it (if any) waits
    on it until it is settled."""
    parent = pending._parent
    if parent is not None and pending._state == _WAITING:
        if parent._children is None:
            parent._children = set()
        parent._children.add(pending)


def wait_here(pending: PendingRequest, call: bool) -> Callable[[Any], trio.lowlevel.Abort]:
    """The current task waits for ``pending``'s answer (settling it
    reschedules the task): the abort function for
    ``trio.lowlevel.wait_task_rescheduled``. ``call``: the task's own
    call, whose cancellation makes its ``$/cancel_request`` due."""
    pending._task = trio.lowlevel.current_task()
    return pending._abort_call if call else pending._abort


def settle(pending: PendingRequest, value: Any, error: BaseException | None, barrier: int) -> bool:
    """Settle ``pending`` (once: later calls do nothing) with ``value``, or
    ``error``, after the notifications up to number ``barrier``: the task
    waiting for it is rescheduled, the callbacks called, and the handler
    that made it lets go of it. Whether a waiting task was rescheduled."""
    if pending._state != _WAITING:
        return False
    if error is None:
        pending._state = _VALUE
        pending._value = value
    else:
        pending._state = _ERROR
        pending._error = error
    pending._barrier = barrier
    if (parent := pending._parent) is not None and parent._children is not None:
        parent._children.discard(pending)
    woke = False
    if (task := pending._task) is not None:
        pending._task = None
        trio.lowlevel.reschedule(task)
        woke = True
    if (callbacks := pending._callbacks) is not None:
        pending._callbacks = None
        for callback in callbacks:
            callback()
    return woke


class _NotHandled(enum.Enum):
    NOT_HANDLED = 0


#: What :func:`outcome` returns while notifications read before the answer
#: wait to be handled.
NOT_HANDLED: Final = _NotHandled.NOT_HANDLED


def outcome(pending: PendingRequest, handled: float = math.inf) -> Any:
    """The answer of a settled ``pending``: its result, or raise its error
    (a fresh exception each time: a stored one would collect tracebacks);
    :data:`NOT_HANDLED` if a notification read before it is not among the
    first ``handled`` (nothing is raised then: wait for it, see
    :func:`barrier_of`, and ask again)."""
    if pending._barrier > handled:
        return NOT_HANDLED
    if pending._state == _VALUE:
        return pending._value
    error = pending._error
    assert error is not None
    if isinstance(error, RequestError):
        fresh_error = RequestError.from_error_object(error.to_error_object())
        fresh_error.reply_to = pending._entry.method
        raise fresh_error
    if isinstance(error, ACPError):
        # Not copy.copy(): __init__(*args) breaks some (MessageTooLarge).
        fresh = type(error).__new__(type(error), *error.args)
        fresh.__dict__.update(error.__dict__)
        raise fresh from error.__cause__
    raise error
