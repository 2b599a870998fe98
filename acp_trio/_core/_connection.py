"""The Trio connection: a symmetric JSON-RPC peer over a frame transport.

The protocol itself (what a frame is, which ones are answered, the request
table) is the sans-IO :class:`~acp_trio._jsonrpc.Peer`; this class runs it
with Trio. The parts live beside it: :mod:`acp_trio._core._incoming` (running
incoming requests), :mod:`acp_trio._core._ordering` (notifications and their
ordering), :mod:`acp_trio._core._outgoing` (calls and cancels). See
``docs/architecture.md`` for the picture and the invariants.

The request tree is the nursery tree
====================================

A :class:`Connection` owns one nursery. Its tasks:

- one **reader**, a loop over the peer's events: it hands each frame to
  ``Peer.receive`` (which registers an incoming request *before* its
  handler starts), acts on ``$/cancel_request`` at once (never queued
  behind handlers), hands replies to the waiting callers, and queues
  notifications;
- one **writer**, which takes whole frames from the :class:`Outbox` in FIFO
  order and writes them; it is shielded, so no write is ever cut halfway
  through a frame (only a close deadline stops a peer that stopped reading);
- one **notification consumer**, which handles notifications one at a time in
  wire order while requests run concurrently;
- one **handler task per incoming request**, each in its own cancel scope.
  The reader starts each handler itself, in its own task and scope (see
  :mod:`acp_trio._core._eager`): a handler that answers without waiting costs no
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

import logging
import math
from collections.abc import Awaitable, Callable
from contextlib import suppress
from typing import Any, Final, final

import trio

from acp_trio._core._caller_reads import CallerReads
from acp_trio._core._framed import FramedStream, FrameTransport
from acp_trio._core._groups import plain_exceptions
from acp_trio._core._handler import (
    DEFAULTS,
    ConnectionConfig,
    ConnectionStatistics,
    Handler,
    RequestNode,
)
from acp_trio._core._incoming import IncomingRequests, _Role
from acp_trio._core._message_stream import MessageStream, MessageTransport
from acp_trio._core._ordering import NotificationOrdering, _Queued
from acp_trio._core._outbox import Inbox, Outbox
from acp_trio._core._outgoing import OutgoingCalls
from acp_trio._core._requests import (
    CancelCause,
    PendingRequest,
    RequestContext,
)
from acp_trio._exceptions import ConnectionClosed
from acp_trio._jsonrpc import (
    CANCEL_REQUEST_METHOD,
    CancelReceived,
    NotificationReceived,
    Peer,
    ReplyReceived,
    RequestId,
    RequestReceived,
    SendFrame,
)

__all__ = [
    "CANCEL_REQUEST_METHOD",
    "Connection",
    "ConnectionConfig",
    "ConnectionStatistics",
    "Handler",
    "HandlerArg",
    "RequestNode",
]

_log = logging.getLogger("acp_trio.connection")

# The reader yields after queueing this many notifications in a row.
_HANDOVER: Final = 128


#: A handler, or a function that makes one for the new connection (for
#: handlers that need the connection itself, like the typed APIs).
HandlerArg = Handler | Callable[["Connection"], Handler] | None


@final
class Connection(OutgoingCalls, IncomingRequests, NotificationOrdering, CallerReads):
    """A JSON-RPC 2.0 peer connection. Make one with :func:`open_connection`,
    :func:`connect_connection` or :func:`serve_connection`."""

    def __init__(
        self,
        stream: trio.abc.Stream | FramedStream | MessageStream,
        handler: HandlerArg = None,
        config: ConnectionConfig | None = None,
    ) -> None:
        self.config = config = config or ConnectionConfig()
        self._stream: FrameTransport
        if isinstance(stream, FramedStream | MessageTransport):
            self._stream = stream
        elif isinstance(stream, MessageStream):
            self._stream = MessageTransport(stream)
        else:
            self._stream = FramedStream(stream, stream, max_message_size=config.max_message_size)
        if handler is None:
            handler = Handler()
        elif not isinstance(handler, Handler):
            handler = handler(self)
        # Tracing, if any: it watches through a handler of its own.
        self._instrument = None
        instrument = config.instrument if config.instrument is not None else DEFAULTS.instrument
        if instrument is not None:
            self._instrument = instrument.instrument(handler)
            handler = self._instrument.handler
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
        # handlers need that too (they trust frames_pending).
        transport = self._stream
        self._stock_stream = type(transport) is MessageTransport or (
            type(transport).receive_frame is FramedStream.receive_frame
            and type(transport).receive_frame_nowait is FramedStream.receive_frame_nowait
        )
        self._eager = config.eager_handlers and self._stock_stream
        # Over a pipe (or a message stream that reads in bursts, such as
        # our WebSocket), a caller waiting for its reply may read it itself
        # (see _caller_reads).
        readable_by_callers = (
            isinstance(transport, FramedStream) and self._stock_stream and transport.reads_pipe
        ) or (type(transport) is MessageTransport and transport.callers_may_read)
        self._init_caller_reads(
            transport
            if config.callers_read_replies
            and readable_by_callers
            and isinstance(transport, FramedStream | MessageTransport)
            else None
        )
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

    @property
    def handler(self) -> Handler:
        """The handler the connection hands requests and notifications to:
        the one it was made with (made by the factory, if it was given one),
        or, with tracing on, the instrument's handler wrapped around it."""
        return self._handler

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

    async def serve(
        self, *, task_status: trio.TaskStatus[Connection] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Run this connection until it closes; report it started through
        ``task_status`` (as :func:`serve_connection` does, for a connection
        made beforehand: one whose object is needed before it runs, to close
        it from a signal handler say). A connection runs once: a second
        call raises ``RuntimeError``. Errors come out as one plain
        exception, never an ``ExceptionGroup``.

        Cancelling the call closes the connection: running handlers are
        cancelled and answered ``-32800``, pending calls fail with
        :class:`ConnectionClosed`, queued output is flushed (bounded by
        ``close_timeout``), then ``trio.Cancelled`` propagates.
        """
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

    def start_soon(
        self, async_fn: Callable[..., Awaitable[object]], *args: object, name: object = None
    ) -> None:
        """Start ``async_fn(*args)`` as a task of the connection's own, as
        ``trio.Nursery.start_soon`` does: for work a callback must start
        that may outlive its caller but not the connection (releasing what
        a late answer brings, say). The task is cancelled when the
        connection closes, with its handlers (bounded by ``close_timeout``);
        an exception it raises ends the connection, so catch what you
        expect.

        Raises :class:`ConnectionClosed` once the connection is closing and
        ``RuntimeError`` before it runs.
        """
        if self._closed:
            raise self.closed_error()
        if self._nursery is None:
            raise RuntimeError("the connection is not running yet")
        self._nursery.start_soon(async_fn, *args, name=name)

    def closed_error(self) -> ConnectionClosed:
        """The :class:`ConnectionClosed` that calls raise once the connection
        is closing: a new one each time, with the reason, its cause and (for
        a spawned process) its exit code and the tail of its stderr. For
        code of one's own that fails the way the connection's calls do
        (ending what waited for an answer that can no longer come)."""
        exit_code: int | None = None
        stderr_tail: bytes | None = None
        if self.config.exit_details is not None:
            exit_code, stderr_tail = self.config.exit_details()
        exc = ConnectionClosed(self._close_reason, exit_code=exit_code, stderr_tail=stderr_tail)
        exc.__cause__ = self._close_cause
        return exc

    def _check_open(self) -> None:
        if self._closed:
            raise self.closed_error()

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
        if not self._outbox.closed:
            for out in nested:
                if (frame := self._peer.cancel(out)) is not None:
                    self._outbox.put_nowait(frame)
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
                out.handle._settle(None, self.closed_error(), 0)
        self._reader_scope.cancel()
        self._interrupt_caller_reading()
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
        stream = self._stream
        # A stock FramedStream's send_batch joins and calls send_frames: do
        # that here (one coroutine less per write, on the hot path).
        send_joined = (
            stream.send_frames
            if isinstance(stream, FramedStream)
            and type(stream).send_batch is FramedStream.send_batch
            else None
        )
        with self._writer_scope:
            while (batch := await self._outbox.get_batch()) is not None:
                try:
                    if send_joined is not None:
                        await send_joined(b"".join(batch))
                    else:
                        await stream.send_batch(batch)
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
        # Locals, for the checks made on every frame.
        notification_received = NotificationReceived
        reply_received = ReplyReceived
        queued = 0
        item: _Queued | None = None
        give_up = self._give_up
        try:
            while True:
                if (event := self._handed_back) is not None:
                    # Read by a caller, for us to act on (a request).
                    self._handed_back = None
                else:
                    frame = nowait()
                    if frame is None and (frame := await stream.receive_frame()) is None:
                        break
                    if self._closed:
                        break
                    if trace is not None and type(frame) is bytes:
                        trace("recv", frame)
                    event = receive(frame)
                    # A handler run eagerly that waits keeps this frame
                    # alive: let go of it.
                    del frame
                    if event is None:
                        continue
                if type(event) is notification_received:
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
                if type(event) is reply_received:
                    pending = event.entry.handle
                    if pending is not None:
                        woke = pending._task is not None
                        pending._settle(event.result, event.error, self._notifications_received)
                        # We woke a caller and have nothing else to do: it
                        # may read its next reply itself (_caller_reads).
                        # Decided in this very step, before it can run.
                        if (
                            woke
                            and give_up
                            and not stream.frames_pending
                            and not await self._give_up_reading()
                        ):
                            break
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

    def _put_reply(self, request_id: RequestId, frame: bytes) -> None:
        if not self._outbox.put_nowait(frame):
            _log.debug("connection closed; reply to %r not sent", request_id)


@final
class _Owner:
    """The connection as its per-request objects see it: the
    :class:`~acp_trio._core._requests.RequestOwner` protocol, and nothing more."""

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


def _no_frame() -> None:
    return None
