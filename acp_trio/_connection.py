"""The Trio connection: a symmetric JSON-RPC peer over a byte stream.

The request tree is the nursery tree
====================================

A :class:`Connection` owns one nursery. Its tasks:

- one **reader**, which decodes frames and acts on each one at once:
  registers an incoming request in the sans-IO :class:`RequestTable` *before*
  starting its handler task, handles ``$/cancel_request`` inline (never
  queued behind handlers), hands replies to the waiting callers, and queues
  notifications;
- one **writer**, which takes whole frames from the :class:`Outbox` in FIFO
  order and writes them; it is shielded, so no write is ever cut halfway
  through a frame (only a close deadline stops a peer that stopped reading);
- one **notification consumer**, which handles notifications one at a time in
  wire order while requests run concurrently;
- one **handler task per incoming request**, each in its own cancel scope.
  The reader starts each handler itself, in its own task and scope (see
  :mod:`acp_trio._eager`): a handler that answers without waiting costs no
  task at all, and at a handler's first wait the reader hands reading over to
  a new reader task, so the handler's task (with its scope) is then simply
  the old reader's. Either way each request has a task and a scope of its
  own whenever it can wait, and reading never waits on a handler.

An outgoing request made by a handler runs in that handler's task, inside its
scope: cancelling the scope (``$/cancel_request``, ``session/cancel``, a
deadline, shutdown) cancels every nested wait, and each cancelled wait sends
its own ``$/cancel_request``. A registry of handler tasks (see
:func:`current_request`) records which incoming request made which outgoing
one, for :meth:`Connection.request_tree`.

Every incoming request gets exactly one reply: the handler's result, its
:class:`RequestError`, ``-32603`` for any other exception (no traceback
leaves the process), or ``-32800`` when it was cancelled before producing a
result. Replies and ``$/cancel_request`` frames never wait for queue space, so
a cancelled task can always send them.
"""

from __future__ import annotations

import contextvars
import logging
import math
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress
from contextvars import ContextVar
from typing import Any, Final, Literal, final

import attrs
import trio

from acp_trio._eager import run_eagerly
from acp_trio._exceptions import (
    ConnectionClosed,
    LocalProtocolError,
    ProtocolError,
    RequestError,
)
from acp_trio._framed import FramedStream
from acp_trio._groups import plain_exceptions, single_leaf
from acp_trio._jsonrpc import (
    CANCEL_REQUEST_METHOD,
    DEFAULT_MAX_MESSAGE_SIZE,
    CancelReceived,
    IncomingRequest,
    NotificationReceived,
    Peer,
    ReplyReceived,
    RequestId,
    RequestReceived,
    SendFrame,
    error_response,
    response,
)
from acp_trio._message_stream import MessageFramedStream, MessageStream
from acp_trio._outbox import Inbox, Outbox
from acp_trio._requests import (
    _WAITING,
    CancelCause,
    PendingRequest,
    RequestContext,
    _handler_tasks,
    current_request,
)

__all__ = [
    "CANCEL_REQUEST_METHOD",
    "Connection",
    "ConnectionConfig",
    "ConnectionStatistics",
    "Handler",
    "HandlerArg",
    "RequestNode",
    "connect_connection",
    "open_connection",
    "serve_connection",
]

_log = logging.getLogger("acp_trio.connection")

# What an abandoned request's result raises (a fresh copy each time: see
# PendingRequest._outcome).
_ABANDONED: Final = LocalProtocolError("the request was abandoned")

_in_notification_handler: Final[ContextVar[bool]] = ContextVar(
    "acp_trio_in_notification_handler", default=False
)

# The reader yields after queueing this many notifications in a row.
_HANDOVER: Final = 128

TraceHook = Callable[[Literal["send", "recv"], bytes], None]


class Handler:
    """What a connection calls for the messages it receives. Subclass it.

    The defaults answer every request ``-32601`` (method not found) and ignore
    every notification, as JSON-RPC and ACP ask.
    """

    async def handle_request(self, ctx: RequestContext, method: str, params: Any) -> Any:
        """Serve one request; return its JSON result or raise
        :class:`RequestError` (answered as the error reply).

        Runs in the request's own cancel scope, inside the connection's nursery:
        the peer's ``$/cancel_request``, the handler's own deadline or the
        connection closing cancels it, and every outgoing request it is waiting
        on is cancelled on the wire. Let ``trio.Cancelled`` propagate: the
        request is answered ``-32800``.
        """
        raise RequestError.method_not_found(method)

    async def handle_notification(self, method: str, params: Any) -> None:
        """Handle one notification, in wire order. Never answered.

        Runs in the single notification consumer: while it runs, later
        notifications wait (and when their queue is full, so does reading),
        and so do the handlers of requests read after it, which start only
        once it is done. Waiting here for a reply of the peer holds all of
        that up; it cannot deadlock (while it waits, requests do not wait
        for it), but a task of its own is usually better. An exception is
        logged, not sent; only the connection closing cancels it.
        """
        _log.debug("ignoring notification %s", method)

    def request_received(self, ctx: RequestContext, params: Any) -> None:
        """Called in the reader when a request is registered, before its
        handler task starts; must not block. For work that a notification
        read right after the request must already find (the typed agent ties
        a prompt to its session here, for ``session/cancel``)."""

    def request_finished(self, ctx: RequestContext) -> None:
        """Called once per request :meth:`request_received` saw, when its reply
        has been decided (whether or not its handler ever ran); must not
        block. Release here what ``request_received`` set up."""

    def intercept_notification(self, method: str, params: Any) -> bool:
        """Called in the reader for each notification before it is queued;
        return ``True`` to consume it there (it must not block). For the few
        notifications that must act at once, like ``session/cancel``."""
        return False


@attrs.frozen(kw_only=True)
class ConnectionConfig:
    """Tunables of a connection. All sizes are counts unless named bytes."""

    #: Largest message accepted, in bytes (a larger one is refused, the
    #: connection carries on).
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE
    #: Deadline for every incoming request, in seconds (``None``: none). At
    #: the deadline the handler is cancelled, its nested requests are
    #: cancelled on the wire, and the reply is ``-32800``.
    request_timeout: float | None = None
    #: Notifications read but not yet handled; when full, reading pauses.
    max_queued_notifications: int = 1024
    #: Frames queued for writing before senders of requests and
    #: notifications wait (replies and cancels never wait).
    outbox_limit: int = 1024
    #: Incoming requests running at once. Beyond it requests wait their turn,
    #: registered (a cancel for one is answered at once), and reading goes on:
    #: the replies, cancels and end of stream that running handlers wait for
    #: are never held up by requests that wait.
    max_concurrent_requests: int = 16384
    #: Requests waiting for a free slot. A request read while this many wait
    #: is answered ``-32603`` ("Too many requests", with the limits in
    #: ``data``) at once, without running; reading never stops for requests.
    max_queued_requests: int = 16384
    #: Seconds that closing may take to cancel handlers and flush output.
    close_timeout: float = 5.0
    #: Called with ("send" | "recv", frame) for every frame, without its line
    #: end (tracing, tests). It runs wherever a frame is read or sent, which
    #: includes Trio's cancellation of a waiting call (outside any task when
    #: a deadline expires): keep it quick, do not call Trio, and do not raise.
    trace: TraceHook | None = None
    #: For a peer that is a process we spawned: returns (exit code, stderr
    #: tail), either ``None`` when unknown; added to ConnectionClosed.
    exit_details: Callable[[], tuple[int | None, bytes | None]] | None = None
    #: Start a request's handler in the reader task, which hands reading to a
    #: new task as soon as the handler first waits (a handler that answers
    #: without waiting then costs no task). ``False``: a new task for every
    #: request, from the start. Handlers see no difference either way.
    eager_handlers: bool = True
    #: No effect (kept so that existing configurations still work): callers
    #: waiting for a reply used to read the stream themselves over pipes;
    #: measured again it did not pay (see the CHANGELOG), so only the
    #: reader task reads.
    callers_read_replies: bool = True


@attrs.frozen
class ConnectionStatistics:
    """What :meth:`Connection.statistics` reports: requests in flight each
    way, frames waiting in the output queue, notifications received, handled
    and still queued, bytes of an unfinished input frame, and whether the
    connection is closed.
    """

    incoming_in_flight: int
    outgoing_pending: int
    outbox_frames: int
    notifications_queued: int
    notifications_received: int
    notifications_handled: int
    read_buffer_bytes: int
    closed: bool


@attrs.frozen
class RequestNode:
    """One node of :meth:`Connection.request_tree`."""

    direction: Literal["incoming", "outgoing"]
    id: RequestId
    method: str
    state: str
    children: tuple[RequestNode, ...] = ()


# (number, method, params) of a notification read; (number, None, fn) for
# work of our own run by the consumer in its place (see _call_in_consumer).
_Queued = tuple[int, str | None, Any]

#: A handler, or a function that makes one for the new connection (for
#: handlers that need the connection itself, like the typed APIs).
HandlerArg = Handler | Callable[["Connection"], Handler] | None


@final
class Connection:
    """A JSON-RPC 2.0 peer connection. Make one with :func:`open_connection`,
    :func:`connect_connection` or :func:`serve_connection`."""

    def __init__(
        self,
        stream: trio.abc.Stream | FramedStream | MessageStream,
        handler: HandlerArg = None,
        config: ConnectionConfig | None = None,
    ) -> None:
        self.config = config = config or ConnectionConfig()
        if isinstance(stream, FramedStream):
            self._stream = stream
        elif isinstance(stream, MessageStream):
            self._stream = MessageFramedStream(stream)
        else:
            self._stream = FramedStream(stream, stream, max_message_size=config.max_message_size)
        if handler is None:
            handler = Handler()
        elif not isinstance(handler, Handler):
            handler = handler(self)
        self._handler: Handler = handler
        # The per-request hooks, unless they are Handler's own no-ops.
        cls = type(handler)
        self._on_received = (
            None if cls.request_received is Handler.request_received else handler.request_received
        )
        self._on_finished = (
            None if cls.request_finished is Handler.request_finished else handler.request_finished
        )
        self._trace = config.trace
        # The sans-IO peer: every protocol rule and the request table.
        self._peer: Peer[RequestContext, PendingRequest] = Peer()
        self._table = self._peer.table
        # What the per-request objects may ask of us (see RequestOwner).
        self._owner = _Owner(self)
        trace = config.trace
        self._outbox = Outbox(
            config.outbox_limit,
            direct_write=self._stream.direct_writer(),
            trace=None if trace is None else lambda frame: trace("send", frame[:-1]),
        )
        self._inbox: Inbox[_Queued] = Inbox(config.max_queued_notifications)
        self._notifications_received = 0
        self._notifications_handled = 0
        self._barrier_waiters: list[tuple[int, trio.Event]] = []
        self._running_handlers = 0
        # Registered requests waiting for a free handler slot, in order.
        self._queued: dict[RequestContext, Any] = {}
        # Requests refused because too many waited (logged the first time).
        self._refused = 0
        # Outgoing calls waited on by notification handlers (and tasks they
        # started): while there are any, nothing waits for notifications to be
        # handled (see _wait_for_barrier).
        self._consumer_calls = 0
        self._nursery: trio.Nursery | None = None
        self._reader_scope = trio.CancelScope()
        # Set when a handler running eagerly asks for its scope (which is the
        # reader's until the handler first waits): see _read.
        self._reader_scope_exposed = False
        # Frames already decoded are taken without a coroutine per frame,
        # unless a subclass of FramedStream reads its own way; eager
        # handlers need that too.
        stream = self._stream
        self._stock_stream = (
            type(stream).receive_frame is FramedStream.receive_frame
            and type(stream).receive_frame_nowait is FramedStream.receive_frame_nowait
        )
        self._eager = config.eager_handlers and self._stock_stream
        # Methods whose handlers recently waited -> requests left to start
        # in tasks before the next eager try (see _hand_over_reading).
        self._eager_skips: dict[str, int] = {}
        self._writer_scope = trio.CancelScope(shield=True)
        self._shutdown = trio.Event()
        self._finished = trio.Event()
        self._started = False
        self._closed = False
        self._local_close = False
        self._close_reason = "connection closed"
        self._close_cause: BaseException | None = None

    # ------------------------------------------------------------------
    # Public API

    @property
    def closed(self) -> bool:
        """True once the connection started closing: calls now fail."""
        return self._closed

    async def call(self, method: str, params: Any = None) -> Any:
        """Send a request and wait for its result.

        Raises :class:`RequestError` for the peer's error reply,
        :class:`ConnectionClosed` if the connection ends first, and
        :class:`RemoteProtocolError` for a malformed reply. If the calling
        task is cancelled (its scope, a deadline, an enclosing handler being
        cancelled), one ``$/cancel_request`` is sent for the request, the
        cancellation goes on at once, and the peer's late answer is dropped.
        """
        pending = await self._send_request(method, params)
        consumer = _in_notification_handler.get()
        if consumer:
            self._consumer_call_started()
        try:
            # Wait for the reply here rather than in a helper: one coroutine
            # less per call, and one frame less for a cancellation to unwind.
            if pending._state != _WAITING:
                await trio.lowlevel.checkpoint()
            else:
                pending._task = trio.lowlevel.current_task()
                await trio.lowlevel.wait_task_rescheduled(pending._abort_call)
            if pending._barrier > self._notifications_handled:
                await self._wait_for_notifications(pending._barrier)
            return pending._outcome()
        except BaseException:
            if pending._state == _WAITING:
                if not pending._entry.cancel_sent:
                    self._send_cancel(pending)
                self._abandon(pending)
            raise
        finally:
            if consumer:
                self._consumer_call_ended()

    @asynccontextmanager
    async def open_request(self, method: str, params: Any = None) -> AsyncIterator[PendingRequest]:
        """Send a request and hand back its :class:`PendingRequest`, for the
        graceful forms of cancellation (``cancel_and_wait()`` for a partial
        result, ``detach()`` to let it run). Leaving the block while the
        request is unanswered cancels it on the wire, unless detached."""
        pending = await self._send_request(method, params)
        try:
            yield pending
        finally:
            if not pending.done:
                if not pending._detached:
                    self._send_cancel(pending)
                self._abandon(pending)

    async def notify(self, method: str, params: Any = None) -> None:
        """Send a notification. Waits while the output queue is full; a
        checkpoint either way, as every async function of Trio's is.

        Raises :class:`ConnectionClosed` once the connection is closing and
        :class:`LocalProtocolError` for ``params`` that are not an object, an
        array or ``None``. Cancelled while waiting for room, nothing is sent.
        """
        _check_params(params)
        frame = self._peer.notify(method, params)
        self._check_open()
        await self._outbox.put(frame, checkpoint=True)

    def _notify_now(self, method: str, params: Any = None) -> bool:
        """Queue a notification at once, past the output limit, as the
        ``$/cancel_request`` frames are: for a cancel that must go out from
        a task being cancelled, without waiting; also while the connection
        closes, as long as its output is still being written (so it goes
        out before the ``-32800`` replies of the handlers closing cancels).
        ``False`` once nothing more is written (nothing is sent)."""
        if self._outbox.closed:
            return False
        return self._outbox.put_nowait(self._peer.notify(method, params))

    async def aclose(self) -> None:
        """Close the connection and wait until it is closed (idempotent).

        Incoming handlers are cancelled and answered ``-32800``, pending
        outgoing calls fail with :class:`ConnectionClosed`, queued output is
        flushed (bounded by ``close_timeout``), then the stream is closed.
        """
        self.close_soon()
        if self._started:
            await self._finished.wait()
        else:
            await trio.lowlevel.checkpoint()

    def close_soon(self) -> None:
        """Start closing without waiting (safe from sync code)."""
        self._local_close = True
        self._request_shutdown("connection closed locally", None)

    async def wait_closed(self) -> None:
        """Wait until the connection has fully closed (its handlers finished,
        its output flushed, its stream closed). Cancelling the wait leaves the
        connection as it is.
        """
        await self._finished.wait()

    def statistics(self) -> ConnectionStatistics:
        """A snapshot of the connection's counters (requests in flight, queued
        output and notifications, buffered input); cheap, never blocks.
        """
        return ConnectionStatistics(
            incoming_in_flight=len(self._table.incoming),
            outgoing_pending=len(self._table.outgoing),
            outbox_frames=len(self._outbox),
            notifications_queued=self._notifications_received - self._notifications_handled,
            notifications_received=self._notifications_received,
            notifications_handled=self._notifications_handled,
            read_buffer_bytes=self._stream.buffered,
            closed=self._closed,
        )

    def request_tree(self) -> list[RequestNode]:
        """The live requests: each incoming request with the outgoing requests
        its handler is waiting on, then the outgoing requests made outside any
        handler."""
        nodes: list[RequestNode] = []
        for entry in list(self._table.incoming.values()):
            ctx = entry.handle
            state = entry.phase.value
            children: tuple[RequestNode, ...] = ()
            if ctx is not None:
                if ctx.cancel_cause is not None:
                    state += f", cancelled ({ctx.cancel_cause.value})"
                children = tuple(
                    self._outgoing_node(p) for p in sorted(ctx.children, key=lambda p: p.id)
                )
            nodes.append(RequestNode("incoming", entry.id, entry.method, state, children))
        for out in list(self._table.outgoing.values()):
            if out.handle is not None and out.handle.parent is None:
                nodes.append(self._outgoing_node(out.handle))
        return nodes

    def dump_request_tree(self) -> str:
        """:meth:`request_tree` as indented text, for debuggers and logs."""
        lines: list[str] = []

        def walk(node: RequestNode, depth: int) -> None:
            arrow = "<-" if node.direction == "incoming" else "->"
            lines.append(f"{'  ' * depth}{arrow} {node.method} id={node.id!r} [{node.state}]")
            for child in node.children:
                walk(child, depth + 1)

        for node in self.request_tree():
            walk(node, 0)
        return "\n".join(lines) if lines else "(no requests in flight)"

    # ------------------------------------------------------------------
    # Running

    async def _run(
        self, task_status: trio.TaskStatus[Connection] = trio.TASK_STATUS_IGNORED
    ) -> None:
        if self._started:
            raise RuntimeError("a Connection can only be run once")
        self._started = True
        # One plain error out of the connection's own nurseries, whoever runs
        # it (connect_connection hands it to the caller's nursery).
        with plain_exceptions():
            await self._run_tasks(task_status)

    async def _run_tasks(self, task_status: trio.TaskStatus[Connection]) -> None:
        try:
            async with trio.open_nursery() as outer:
                outer.start_soon(self._writer, name="acp writer")
                try:
                    async with trio.open_nursery() as inner:
                        self._nursery = inner
                        inner.start_soon(self._reader, name="acp reader")
                        inner.start_soon(self._consumer, name="acp notifications")
                        task_status.started(self)
                        try:
                            await self._shutdown.wait()
                        finally:
                            self._teardown()
                            inner.cancel_scope.deadline = min(
                                inner.cancel_scope.deadline,
                                trio.current_time() + self.config.close_timeout,
                            )
                finally:
                    self._outbox.close()
                    self._writer_scope.deadline = trio.current_time() + self.config.close_timeout
        finally:
            self._wake_barrier_waiters(math.inf)
            with trio.CancelScope(shield=True) as scope:
                scope.deadline = trio.current_time() + self.config.close_timeout
                with suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                    await self._stream.aclose()
            self._finished.set()

    def _request_shutdown(self, reason: str, cause: BaseException | None) -> None:
        if self._closed:
            return
        self._closed = True
        self._close_reason = reason
        self._close_cause = cause
        self._shutdown.set()

    def _closed_error(self) -> ConnectionClosed:
        exit_code: int | None = None
        stderr_tail: bytes | None = None
        if self.config.exit_details is not None:
            exit_code, stderr_tail = self.config.exit_details()
        exc = ConnectionClosed(self._close_reason, exit_code=exit_code, stderr_tail=stderr_tail)
        exc.__cause__ = self._close_cause
        return exc

    def _check_open(self) -> None:
        if self._closed:
            raise self._closed_error()

    def _teardown(self) -> None:
        # Runs once, in the connection's task, when closing starts.
        self._closed = True
        # The handlers are answered -32800 below: their calls are cancelled
        # on the wire first, while we can still write (after the peer's end
        # of stream it may still read), so that a request reported cancelled
        # has cascaded. When writing failed, the outbox is closed and neither
        # goes out.
        nested = [
            out
            for out in self._table.outgoing.values()
            if out.handle is not None and out.handle.parent is not None
        ]
        if nested and not self._outbox.closed:
            self._outbox.hold()
            try:
                for out in nested:
                    if (frame := self._peer.cancel(out)) is not None:
                        self._outbox.put_nowait(frame)
            finally:
                self._outbox.release()
        incoming, outgoing = self._peer.close()
        # Cancel the handlers first: a handler waiting on an outgoing call
        # then sees Cancelled (and answers -32800), not the ConnectionClosed
        # that settling its call would hand it (answered -32603).
        for entry in incoming:
            if entry.handle is not None:
                entry.handle.request_cancel(CancelCause.SHUTDOWN)
        for ctx in list(self._queued):
            self._answer_unstarted(ctx)
        for out in outgoing:
            if out.handle is not None:
                out.handle._settle(None, self._closed_error(), 0)
        self._reader_scope.cancel()
        if self._local_close or not self._shutdown.is_set():
            # We are leaving (aclose, or our nursery was cancelled): nobody
            # wants the notifications still queued.
            dropped = self._inbox.clear()
            if dropped:
                _log.debug("closing: %d queued notifications dropped", dropped)
        # The consumer handles what is still queued (after the peer closed:
        # nothing is lost), then stops.
        self._inbox.close()

    # ------------------------------------------------------------------
    # Writer

    async def _writer(self) -> None:
        with self._writer_scope:
            while (batch := await self._outbox.get_batch()) is not None:
                try:
                    await self._stream.send_frames(b"".join(batch))
                except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
                    self._request_shutdown(f"connection lost while writing: {exc!r}", exc)
                    self._outbox.close()
                    dropped = self._outbox.discard()
                    if dropped:
                        _log.debug("dropped %d queued frames after a write failure", dropped)
                    return
        if self._writer_scope.cancelled_caught:
            dropped = self._outbox.discard()
            _log.warning("output not flushed within close_timeout; %d frames dropped", dropped)

    # ------------------------------------------------------------------
    # Reader

    async def _reader(self) -> None:
        """The reader task. It reads until the stream ends, or until a
        handler it started eagerly waits: then a new reader task has taken
        over, and this task goes on as that request's handler task."""
        scope = self._reader_scope
        role = _Role(self)
        while True:
            with scope:
                await self._read(role)
            if not role.reading or self._closed:
                return
            # A handler run eagerly cancelled its scope (ours) or took it, and
            # answered at once: read on in a fresh scope.
            scope = self._reader_scope = trio.CancelScope()

    async def _read(self, role: _Role) -> None:
        """Read and act on frames; return at the end of the stream, when this
        task stops being the reader, or when its scope must be replaced."""
        reason = "the peer closed the connection"
        cause: BaseException | None = None
        stream = self._stream
        nowait = stream.receive_frame_nowait if self._stock_stream else _no_frame
        receive = self._peer.receive
        trace = self._trace
        eager = self._eager
        inbox = self._inbox
        queued = 0
        item: _Queued | None = None
        try:
            while True:
                frame = nowait()
                if frame is None and (frame := await stream.receive_frame()) is None:
                    break
                if self._closed:
                    break
                if trace is not None and type(frame) is bytes:
                    trace("recv", frame)
                event = receive(frame)
                # A handler run eagerly that waits keeps this frame alive:
                # let go of it.
                del frame
                if event is None:
                    continue
                if type(event) is NotificationReceived:
                    item = self._on_notification(event.method, event.params)
                    if item is not None:
                        if not inbox.put_nowait(item):
                            await inbox.put(item)
                            queued = 0
                        elif (queued := queued + 1) >= _HANDOVER:
                            # Let the consumer handle them while they are
                            # still in the CPU cache.
                            queued = 0
                            await trio.lowlevel.cancel_shielded_checkpoint()
                    continue
                if type(event) is ReplyReceived:
                    pending = event.entry.handle
                    if pending is not None:
                        pending._settle(event.result, event.error, self._notifications_received)
                    continue
                if type(event) is CancelReceived:
                    self._on_cancel_request(event.entry)
                    continue
                if type(event) is SendFrame:
                    self._put_reply(event.request_id, event.data)
                    continue
                assert type(event) is RequestReceived
                params = event.params
                ctx = self._on_request(event.entry, params)
                del event
                item = None
                if ctx is not None:
                    # Eagerly only when no frame read after this one
                    # waits: a cancel right behind a request finds it
                    # not yet started, as it would with a task.
                    if (
                        eager
                        and not stream.frames_pending
                        # Not if request_received cancelled it or made
                        # its scope (to set a deadline), nor when its
                        # deadline has already passed: then a task
                        # answers it without running the handler.
                        and ctx._cause is None
                        and ctx._scope is None
                        # Nor when notifications read before it wait to be
                        # handled: its task waits for them first.
                        and ctx._barrier == 0
                        and (ctx._deadline == math.inf or ctx._deadline > trio.current_time())
                        and self._eager_allowed(ctx._entry.method)
                    ):
                        if not await self._run_eagerly(ctx, params, role):
                            return  # a new reader has taken over
                        scope = self._reader_scope
                        if scope.cancel_called or self._reader_scope_exposed:
                            # The handler cancelled our scope, or took it
                            # (ctx.cancel_scope) and may cancel it later:
                            # read on in a fresh one.
                            self._reader_scope_exposed = False
                            return
                        if scope.deadline != math.inf or scope.shield:
                            scope.deadline, scope.shield = math.inf, False
                    else:
                        self._start_handler(ctx, params)
                del params
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            reason = f"connection lost while reading: {exc!r}"
            cause = exc
        self._request_shutdown(reason, cause)

    def _on_request(
        self, entry: IncomingRequest[RequestContext], params: Any
    ) -> RequestContext | None:
        """A request the peer registered; the context if its handler may
        start now, ``None`` if it was refused or waits for a slot."""
        request_id, method = entry.id, entry.method
        config = self.config
        if (
            self._running_handlers >= config.max_concurrent_requests
            and len(self._queued) >= config.max_queued_requests
        ):
            # Full: refused at once, so that reading never stops (a reader
            # that waited for a slot could not read the replies and cancels
            # the running handlers wait for).
            self._refused += 1
            if self._refused == 1:
                _log.warning(
                    "refusing request %r (%s): %d requests running and %d waiting",
                    request_id,
                    method,
                    self._running_handlers,
                    len(self._queued),
                )
            refusal = RequestError(
                -32603,
                "Too many requests",
                {
                    "maxConcurrentRequests": config.max_concurrent_requests,
                    "maxQueuedRequests": config.max_queued_requests,
                },
            )
            frame = self._peer.respond_error(entry, refusal)
            self._peer.done(entry)
            if frame is not None:
                self._put_reply(request_id, frame)
            return None
        ctx = RequestContext(self._owner, entry)
        if self._notifications_received > self._notifications_handled:
            # Its handler starts only after the notifications read before it
            # were handled (see _wait_for_barrier).
            ctx._barrier = self._notifications_received
        entry.handle = ctx
        if self._on_received is not None:
            try:
                self._on_received(ctx, params)
            except Exception:
                _log.exception("error in request_received for %s", method)
        if self.config.request_timeout is not None:
            ctx._deadline = trio.current_time() + self.config.request_timeout
        if self._running_handlers < config.max_concurrent_requests:
            return ctx
        # At the limit the request waits its turn, registered (a cancel finds
        # it and answers it at once), and reading goes on, so that the replies
        # the running handlers wait for still arrive.
        self._queued[ctx] = params
        return None

    async def _run_eagerly(self, ctx: RequestContext, params: Any, role: _Role) -> bool:
        """Run a request's handler in the reader task (see :meth:`_reader`);
        ``True`` if this task is still the reader after it."""
        entry = ctx._entry
        scope = self._reader_scope
        ctx._scope = scope
        if ctx._deadline != math.inf:
            scope.deadline = ctx._deadline
        self._running_handlers += 1
        task = trio.lowlevel.current_task()
        _handler_tasks[task] = ctx
        role.method = entry.method
        reply: dict[str, Any] | None = None
        try:
            try:
                result = await run_eagerly(
                    self._handler.handle_request(ctx, entry.method, params),
                    role.hand_over,
                    contextvars.copy_context(),
                )
                reply = response(entry.id, result)
            except RequestError as exc:
                reply = self._error_reply(ctx, exc)
            except Exception as exc:
                reply = self._internal_error_reply(ctx, exc)
            except BaseExceptionGroup as group:
                # As in _run_handler: errors raised with a cancellation (of
                # the reader's scope, which is this handler's) are logged,
                # the Cancelled goes on, the reply is -32800.
                self._drop_handler_errors(ctx, group)
        finally:
            # The reply first (the peer is waiting for it), then the
            # bookkeeping: nothing runs in between, so only time tells.
            try:
                self._send_reply(ctx, reply)
            finally:
                del _handler_tasks[task]
                if ctx._cause is None and scope.cancel_called:
                    ctx.request_cancel(CancelCause.DEADLINE)  # record it
                ctx._scope = None
                self._handler_finished(ctx)
        return role.reading

    def _hand_over_reading(self, role: _Role) -> None:
        """An eagerly run handler waits: a new reader task takes over, and
        the next requests of that method start in tasks of their own for a
        while (a waiting handler keeps the reader's frames alive, which costs
        memory; a task is smaller)."""
        role.reading = False
        skips = self._eager_skips
        if len(skips) >= _EAGER_SKIP_METHODS:
            skips.clear()
        skips[role.method] = _EAGER_SKIP
        self._reader_scope = trio.CancelScope()
        if self._closed:
            self._reader_scope.cancel()
            return
        assert self._nursery is not None
        self._nursery.start_soon(self._reader, name="acp reader")

    def _eager_allowed(self, method: str) -> bool:
        skips = self._eager_skips
        left = skips.get(method)
        if left is None:
            return True
        if left <= 1:
            del skips[method]
        else:
            skips[method] = left - 1
        return False

    def _start_handler(self, ctx: RequestContext, params: Any) -> None:
        self._running_handlers += 1
        assert self._nursery is not None
        self._nursery.start_soon(self._run_handler, ctx, params, name="acp handler")

    def _start_queued(self) -> None:
        limit = self.config.max_concurrent_requests
        while self._queued and self._running_handlers < limit and not self._closed:
            ctx = next(iter(self._queued))
            self._start_handler(ctx, self._queued.pop(ctx))

    def _answer_unstarted(self, ctx: RequestContext) -> None:
        # A queued request that will never run: cancelled, or closing.
        self._queued.pop(ctx, None)
        entry = ctx._entry
        frame = self._peer.reply(entry, None)
        if frame is not None:
            self._put_reply(entry.id, frame)
        self._peer.done(entry)
        self._request_finished(ctx)

    def _request_finished(self, ctx: RequestContext) -> None:
        if self._on_finished is None:
            return
        try:
            self._on_finished(ctx)
        except Exception:
            _log.exception("error in request_finished for %s", ctx.method)

    def _on_notification(self, method: str, params: Any) -> _Queued | None:
        """Act on a notification in the reader; return what to queue for the
        consumer, if anything."""
        try:
            if self._handler.intercept_notification(method, params):
                return None
        except Exception:
            _log.exception("error intercepting notification %s", method)
            return None
        self._notifications_received += 1
        return (self._notifications_received, method, params)

    def _on_cancel_request(self, entry: IncomingRequest[RequestContext]) -> None:
        if entry.handle is None:
            _log.debug("ignoring %s for %r: not running", CANCEL_REQUEST_METHOD, entry.id)
            return
        children = entry.handle._children
        if children is None or len(children) < 2:
            entry.handle.request_cancel(CancelCause.PEER)
        else:
            # The cancels of the handler's calls go out from inside this
            # cancel() (see PendingRequest._abort_call): as one write.
            self._outbox.hold()
            try:
                entry.handle.request_cancel(CancelCause.PEER)
            finally:
                self._outbox.release()
        if entry.handle in self._queued:
            self._answer_unstarted(entry.handle)

    async def _await_reply(self, pending: PendingRequest) -> None:
        """Wait until ``pending`` is settled (a checkpoint either way), for
        :meth:`PendingRequest.result`."""
        if pending._state != _WAITING:
            await trio.lowlevel.checkpoint()
            return
        pending._task = trio.lowlevel.current_task()
        consumer = _in_notification_handler.get()
        if consumer:
            self._consumer_call_started()
        try:
            await trio.lowlevel.wait_task_rescheduled(pending._abort)
        finally:
            if consumer:
                self._consumer_call_ended()

    def _put_reply(self, request_id: RequestId, frame: bytes) -> None:
        if not self._outbox.put_nowait(frame):
            _log.debug("connection closed; reply to %r not sent", request_id)

    # ------------------------------------------------------------------
    # Incoming requests

    async def _run_handler(self, ctx: RequestContext, params: Any) -> None:
        # Kept lean: this frame lives as long as the request is in flight,
        # so it has few locals (the scope is read from ctx each time) and
        # holds no bound ``__exit__`` (the scope is entered and left by hand,
        # exactly as ``with`` would).
        reply: dict[str, Any] | None = None
        _handler_tasks[trio.lowlevel.current_task()] = ctx
        if ctx._deadline != math.inf:
            ctx.cancel_scope.deadline = min(ctx.cancel_scope.deadline, ctx._deadline)
        try:
            ctx.cancel_scope.__enter__()
            try:
                if ctx._barrier and ctx.cancel_cause is None:
                    await self._wait_for_barrier(ctx._barrier)
                # (Not once closing has begun: the handler would only find
                # the connection closed. It is answered -32800.)
                if ctx.cancel_cause is None and not self._closed:
                    try:
                        result = await self._handler.handle_request(ctx, ctx._entry.method, params)
                        reply = response(ctx._entry.id, result)
                    except RequestError as exc:
                        reply = self._error_reply(ctx, exc)
                    except Exception as exc:
                        reply = self._internal_error_reply(ctx, exc)
            except BaseException as exc:
                self._leave_handler_scope(ctx, exc)
            else:
                ctx.cancel_scope.__exit__(None, None, None)
            if ctx.cancel_scope.cancelled_caught and ctx._cause is None:
                ctx.request_cancel(CancelCause.DEADLINE)  # record it
        finally:
            del _handler_tasks[trio.lowlevel.current_task()]
            self._handler_done(ctx, reply)

    def _leave_handler_scope(self, ctx: RequestContext, exc: BaseException) -> None:
        # The handler's scope, left with what escaped the handler (a
        # Cancelled, or a group of them with errors): re-raises what the
        # scope does not catch. (Not inline in _run_handler: see there.)
        try:
            if not ctx.cancel_scope.__exit__(type(exc), exc, exc.__traceback__):
                raise exc
        except BaseExceptionGroup as group:
            # Errors raised together with the cancellation (a child task
            # failing as it is cancelled): logged; the request is answered
            # -32800 and the connection goes on.
            self._drop_handler_errors(ctx, group)

    def _handler_done(self, ctx: RequestContext, reply: dict[str, Any] | None) -> None:
        # (Not inline in _run_handler: a nested try there makes the frame of
        # every request in flight bigger.)
        try:
            self._send_reply(ctx, reply)
        finally:
            self._handler_finished(ctx)

    def _send_reply(self, ctx: RequestContext, reply: dict[str, Any] | None) -> None:
        """The one reply of a finished handler (``-32800`` if it produced none)."""
        entry = ctx._entry
        frame = self._peer.reply(entry, reply)
        if frame is not None:
            self._put_reply(entry.id, frame)

    def _handler_finished(self, ctx: RequestContext) -> None:
        """The bookkeeping of a finished handler, once its reply is sent."""
        self._peer.done(ctx._entry)
        self._request_finished(ctx)
        self._running_handlers -= 1
        if self._queued:
            self._start_queued()

    def _internal_error_reply(self, ctx: RequestContext, exc: Exception) -> dict[str, Any] | None:
        """The reply to a handler's exception (``None``: ``-32800``)."""
        leaf = single_leaf(exc)
        if isinstance(leaf, RequestError):
            return self._error_reply(ctx, leaf)
        if isinstance(leaf, ConnectionClosed) and self._closed:
            # Its call failed because the connection is closing, before the
            # handler was cancelled for the same reason: cut off, like the
            # other handlers.
            return None
        _log.error("handler for %s (id %r) failed", ctx.method, ctx.id, exc_info=exc)
        if isinstance(leaf, ProtocolError):
            # The SDK's own error (a call refused for a missing capability,
            # say): the peer learns what it was.
            return error_response(ctx.id, RequestError.internal_error(leaf._error_data()))
        return error_response(ctx.id, RequestError.internal_error())

    def _error_reply(self, ctx: RequestContext, exc: RequestError) -> dict[str, Any]:
        """A handler's :class:`RequestError` as its reply. One that is the
        peer's answer to a nested call, left uncaught, is not passed on with
        its own code (a ``-32601`` from ``fs/read_text_file`` would tell the
        peer that *this* method does not exist): it becomes ``-32603``
        naming the nested method and its error."""
        nested = exc.reply_to
        if nested is None:
            return error_response(ctx.id, exc)
        _log.warning(
            "handler for %s (id %r) let the error of its %s call through: %s",
            ctx.method,
            ctx.id,
            nested,
            exc,
        )
        error = RequestError(
            -32603,
            f"Internal error: {nested} failed: {exc.message}",
            {"method": nested, "error": exc.to_error_object()},
        )
        return error_response(ctx.id, error)

    def _drop_handler_errors(
        self, ctx: RequestContext, group: BaseExceptionGroup[BaseException]
    ) -> None:
        """Log the errors in ``group`` and re-raise the rest of it (the
        ``Cancelled`` of an enclosing scope, ``KeyboardInterrupt``), if any."""
        errors, rest = group.split(Exception)
        if errors is not None:
            _log.error(
                "handler for %s (id %r) failed while being cancelled",
                ctx.method,
                ctx.id,
                exc_info=errors,
            )
        if rest is not None:
            raise rest

    # ------------------------------------------------------------------
    # Outgoing requests

    async def _send_request(self, method: str, params: Any) -> PendingRequest:
        _check_params(params)
        self._check_open()
        entry, frame = self._peer.send_request(method, params)
        parent = current_request()
        pending = PendingRequest(self._owner, entry, parent)
        entry.handle = pending
        try:
            await trio.lowlevel.checkpoint_if_cancelled()
            if not self._outbox.try_put(frame):
                await self._outbox.put(frame)
        except BaseException:
            # Not sent (cancelled while the queue was full).
            self._peer.forget(entry)
            raise
        if parent is not None and pending._state == _WAITING:
            parent._adopt(pending)
        return pending

    def _send_cancel(self, pending: PendingRequest) -> None:
        frame = self._peer.cancel(pending._entry)
        if frame is not None:
            self._outbox.put_nowait(frame)

    def _abandon(self, pending: PendingRequest) -> None:
        self._peer.abandon(pending._entry)
        # Anyone still asking for its result gets an answer, not a hang (and
        # the handler that made it lets go of it: _settle releases it).
        pending._settle(None, _ABANDONED, 0)

    def _outgoing_node(self, pending: PendingRequest) -> RequestNode:
        state = "cancel sent" if pending.cancel_sent else "pending"
        return RequestNode("outgoing", pending.id, pending.method, state)

    # ------------------------------------------------------------------
    # Notifications

    async def _consumer(self) -> None:
        _in_notification_handler.set(True)
        try:
            inbox = self._inbox
            handler = self._handler
            while (item := inbox.get_nowait()) is not None or (
                item := await inbox.get()
            ) is not None:
                seq, method, params = item
                try:
                    if method is None:
                        await params()
                    else:
                        await handler.handle_notification(method, params)
                except Exception:
                    _log.exception("error handling notification %s", method or params)
                self._notifications_handled = seq
                if self._barrier_waiters:
                    self._wake_barrier_waiters(seq)
        finally:
            self._wake_barrier_waiters(math.inf)

    def _call_in_consumer(self, fn: Callable[[], Awaitable[None]]) -> bool:
        """Have the notification consumer run ``await fn()`` after the
        notifications queued so far, as if it were one of them (in order,
        in the consumer's task; past the queue's limit). ``False`` if the
        connection no longer handles notifications."""
        # A number of its own, so that a reply read after now waits for it as
        # for a notification read before it (see _wait_for_barrier).
        self._notifications_received += 1
        if self._inbox.put_always((self._notifications_received, None, fn)):
            return True
        self._notifications_received -= 1
        return False

    async def _wait_for_notifications(self, barrier: int) -> None:
        # A reply is handed over only after the notifications that arrived
        # before it were handled, except to a notification handler itself
        # (it would wait for itself).
        if _in_notification_handler.get():
            return
        await self._wait_for_barrier(barrier)

    async def _wait_for_barrier(self, barrier: int) -> None:
        """Wait until the notifications up to number ``barrier`` are handled:
        before a reply is handed to its caller, and before the handler of a
        request read after them starts.

        Not while a notification handler waits for a reply of the peer (its
        own call, or one of a task it started): the peer may need an answer
        from us, to a request read after that notification, before it can
        reply, and waiting here would deadlock both sides. Ordering then
        gives way, for as long as that call lasts.
        """
        # A checkpoint first: once the test below passes, nothing may wait
        # before the caller goes on (the notification handler's call may be
        # over by then, and ordering back in force).
        await trio.lowlevel.checkpoint()
        while barrier > self._notifications_handled and not self._consumer_calls:
            event = trio.Event()
            self._barrier_waiters.append((barrier, event))
            await event.wait()

    def _consumer_call_started(self) -> None:
        # A notification handler waits for the peer: see _wait_for_barrier.
        self._consumer_calls += 1
        if self._consumer_calls == 1 and self._barrier_waiters:
            waiters, self._barrier_waiters = self._barrier_waiters, []
            for _, event in waiters:
                event.set()

    def _consumer_call_ended(self) -> None:
        self._consumer_calls -= 1

    def _wake_barrier_waiters(self, handled: float) -> None:
        if handled == math.inf:
            self._notifications_handled = max(
                self._notifications_handled, self._notifications_received
            )
        keep: list[tuple[int, trio.Event]] = []
        for barrier, event in self._barrier_waiters:
            if barrier <= handled:
                event.set()
            else:
                keep.append((barrier, event))
        self._barrier_waiters = keep


# After a handler run eagerly waits, this many requests of its method start
# in tasks of their own before the next eager try; methods remembered at most.
_EAGER_SKIP: Final = 64
_EAGER_SKIP_METHODS: Final = 256


@final
class _Owner:
    """The connection as its per-request objects see it: the
    :class:`~acp_trio._requests.RequestOwner` protocol, and nothing more."""

    __slots__ = ("connection",)

    def __init__(self, conn: Connection) -> None:
        self.connection = conn

    @property
    def notifications_handled(self) -> int:
        return self.connection._notifications_handled

    @property
    def writes_directly(self) -> bool:
        return self.connection._outbox.writes_directly

    def scope_exposed(self, scope: trio.CancelScope) -> None:
        conn = self.connection
        if scope is conn._reader_scope:
            conn._reader_scope_exposed = True

    async def await_reply(self, pending: PendingRequest) -> None:
        await self.connection._await_reply(pending)

    async def wait_for_notifications(self, barrier: int) -> None:
        await self.connection._wait_for_notifications(barrier)

    def send_cancel(self, pending: PendingRequest) -> None:
        self.connection._send_cancel(pending)

    def cancel_not_sent(self, pending: PendingRequest) -> None:
        self.connection._peer.cancel_not_sent(pending._entry)


@final
class _Role:
    """A reader task's role: whether it is still the reader, and the method
    of the request it runs eagerly."""

    __slots__ = ("conn", "method", "reading")

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.reading = True
        self.method = ""

    def hand_over(self) -> None:
        self.conn._hand_over_reading(self)


def _no_frame() -> None:
    return None


# How much of an offending frame a log line quotes.
_QUOTE_SIZE: Final = 200


def _shorten(frame: bytes) -> str:
    text = frame[:_QUOTE_SIZE].decode("utf-8", "replace")
    if len(frame) > _QUOTE_SIZE:
        text += f"... ({len(frame)} bytes)"
    return text


def _check_params(params: Any) -> None:
    if params is not None and not isinstance(params, dict | list):
        raise LocalProtocolError(
            f"params must be a JSON object, an array or None, not {type(params).__name__}"
        )


async def serve_connection(
    stream: trio.abc.Stream | FramedStream | MessageStream,
    handler: HandlerArg = None,
    *,
    config: ConnectionConfig | None = None,
    task_status: trio.TaskStatus[Connection] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run a connection until it closes; report it through ``task_status``.
    Errors come out as one plain exception, never an ``ExceptionGroup``.

    Cancelling the call closes the connection: running handlers are
    cancelled and answered ``-32800``, pending calls fail with
    :class:`ConnectionClosed`, queued output is flushed (bounded by
    ``close_timeout``), then ``trio.Cancelled`` propagates.
    """
    with plain_exceptions():
        await Connection(stream, handler, config)._run(task_status)


async def connect_connection(
    nursery: trio.Nursery,
    stream: trio.abc.Stream | FramedStream | MessageStream,
    handler: HandlerArg = None,
    *,
    config: ConnectionConfig | None = None,
) -> Connection:
    """Start a connection in the caller's ``nursery`` and return it, once
    it runs. It lives until it closes or ``nursery`` is cancelled, which
    closes it as :meth:`Connection.aclose` does; cancelling this call while
    it starts the connection stops it again.
    """
    conn: Connection = await nursery.start(Connection(stream, handler, config)._run)
    return conn


@asynccontextmanager
async def open_connection(
    stream: trio.abc.Stream | FramedStream | MessageStream,
    handler: HandlerArg = None,
    *,
    config: ConnectionConfig | None = None,
) -> AsyncIterator[Connection]:
    """A connection that lives as long as the ``async with`` block.

    Leaving the block, also by an exception or a cancellation, closes it
    (see :meth:`Connection.aclose`: handlers cancelled and answered
    ``-32800``, pending calls failed, output flushed, bounded). Errors come
    out as one plain exception, never an ``ExceptionGroup`` of one.
    """
    with plain_exceptions():
        async with trio.open_nursery() as nursery:
            conn = await connect_connection(nursery, stream, handler, config=config)
            try:
                yield conn
            finally:
                conn.close_soon()
