"""The Trio connection: a symmetric JSON-RPC peer over a frame transport.

The protocol itself (what a frame is, which ones are answered, the request
table) is the sans-IO :class:`~acp_trio._jsonrpc.Peer`; :class:`Connection`
runs it with Trio, as a facade over parts that each own their state and get
what they need when they are made: ``NotificationOrdering`` (notifications
in wire order, and the barriers that order replies and requests after
them), ``ReadRight`` (who reads now: someone always does), ``Reader`` (the
reader task, and the one function that acts on each frame read),
``IncomingRequests`` (running incoming requests, one reply each) and
``OutgoingCalls`` (sending requests, waiting for their replies, cancelling
them), in ``_ordering.py``, ``_read_right.py``, ``_reader.py``,
``_incoming.py`` and ``_outgoing.py``. The connection itself owns its life
(running, closing) and the writer task (``Writer``). ``docs/architecture.md``
has the picture and the invariants.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress
from typing import Any, final

import trio

from acp_trio._core._framed import FramedStream
from acp_trio._core._groups import plain_exceptions
from acp_trio._core._handler import (
    ConnectionConfig,
    ConnectionStatistics,
    Handler,
    RequestNode,
    dump_nodes,
    effective_instrument,
    request_nodes,
)
from acp_trio._core._incoming import IncomingRequests
from acp_trio._core._message_stream import MessageStream
from acp_trio._core._ordering import NotificationOrdering
from acp_trio._core._outbox import Outbox
from acp_trio._core._outgoing import OutgoingCalls, check_params
from acp_trio._core._read_right import ReadRight
from acp_trio._core._reader import Reader
from acp_trio._core._requests import PendingRequest, RequestContext
from acp_trio._core._status import Status
from acp_trio._core._writer import Writer, frame_transport, readable_by_callers
from acp_trio._exceptions import ACPError, ConnectionClosed
from acp_trio._jsonrpc import CANCEL_REQUEST_METHOD, Peer, RequestId

__all__ = [
    "CANCEL_REQUEST_METHOD",
    "Connection",
    "ConnectionConfig",
    "ConnectionStatistics",
    "Handler",
    "HandlerArg",
    "RequestNode",
]

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
        self._stream = transport = frame_transport(stream, config.max_message_size)
        if handler is None:
            handler = Handler()
        elif not isinstance(handler, Handler):
            handler = handler(self)
        # Tracing, if any: it watches through a handler of its own.
        instrument = effective_instrument(config)
        tracer = None if instrument is None else instrument.instrument(handler)
        if tracer is not None:
            handler = tracer.handler
        self._handler: Handler = handler
        # The sans-IO peer: every protocol rule and the request table.
        self._peer: Peer[RequestContext, PendingRequest] = Peer(config.held_request_limit())
        self._table = self._peer.table
        trace = config.trace
        self._outbox = Outbox(
            config.outbox_limit,
            max_bytes=config.outbox_byte_limit(),
            direct_write=transport.direct_writer(),
            joins=isinstance(transport, FramedStream),
            trace=None if trace is None else lambda frame: trace("send", frame[:-1]),
        )
        self._status = status = Status()
        self._ordering = ordering = NotificationOrdering(
            handler=handler, max_queued=config.max_queued_notifications
        )
        self._incoming = IncomingRequests(
            config=config,
            handler=handler,
            peer=self._peer,
            connection=self,
            outbox=self._outbox,
            ordering=ordering,
            status=status,
        )
        # Over a pipe (or a message stream that reads in bursts, such as
        # our WebSocket), a caller waiting for its reply may read it itself.
        right = ReadRight(
            pipe=readable_by_callers(transport) if config.callers_read_replies else None
        )
        self._reader = Reader(
            stream=transport,
            peer=self._peer,
            trace=trace,
            eager=config.eager_handlers,
            ordering=ordering,
            incoming=self._incoming,
            outbox=self._outbox,
            right=right,
            status=status,
            shutdown=self._request_shutdown,
        )
        self._calls = OutgoingCalls(
            peer=self._peer,
            outbox=self._outbox,
            ordering=ordering,
            reader=self._reader,
            right=right,
            status=status,
            instrument=tracer,
            closed_error=self.closed_error,
        )
        self._writer = Writer(stream=transport, outbox=self._outbox, lost=self._request_shutdown)
        self._shutdown = trio.Event()
        self._finished = trio.Event()
        self._started = False
        self._local_close = False
        self._close_reason = "connection closed"
        self._close_cause: BaseException | None = None

    @property
    def closed(self) -> bool:
        """True once the connection started closing: calls now fail."""
        return self._status.closed

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
        ordering = self._ordering
        return ConnectionStatistics(
            incoming_in_flight=len(self._table.incoming),
            outgoing_pending=len(self._table.outgoing),
            outbox_frames=len(self._outbox),
            notifications_queued=ordering.received - ordering.handled,
            notifications_received=ordering.received,
            notifications_handled=ordering.handled,
            read_buffer_bytes=self._stream.buffered,
            closed=self._status.closed,
        )

    def output_settled(self) -> bool:
        """Whether nothing waits to go out: no frame in the output queue and
        every notification read was handled (:meth:`statistics`'s
        ``outbox_frames`` and ``notifications_queued`` both 0, without
        making the snapshot: a proxy asks it for every message it passes on)."""
        ordering = self._ordering
        return not self._outbox and ordering.received == ordering.handled

    def request_tree(self) -> list[RequestNode]:
        """The live requests: each incoming request with the outgoing requests
        its handler is waiting on, then the outgoing requests made outside any
        handler."""
        return request_nodes(self._table.incoming.values(), self._table.outgoing.values())

    def dump_request_tree(self) -> str:
        """:meth:`request_tree` as indented text, for debuggers and logs."""
        return dump_nodes(self.request_tree())

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
        if self._status.closed:
            raise self.closed_error()
        if self._status.nursery is None:
            raise RuntimeError("the connection is not running yet")
        self._status.nursery.start_soon(async_fn, *args, name=name)

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

    # Calls and notifications

    async def call(self, method: str, params: Any = None) -> Any:
        """Send a request and wait for its result.

        Raises :class:`RequestError` for the peer's error reply,
        :class:`ConnectionClosed` if the connection ends first, and
        :class:`RemoteProtocolError` for a malformed reply. If the calling
        task is cancelled (its scope, a deadline, an enclosing handler being
        cancelled), one ``$/cancel_request`` is sent for the request, the
        cancellation goes on at once, and the peer's late answer is dropped.
        """
        calls = self._calls
        return await calls.result(await calls.send_request(method, params), True)

    async def send_request(self, method: str, params: Any = None) -> PendingRequest:
        """Send a request and return its :class:`PendingRequest` without
        waiting for the answer: for a caller that keeps the request beyond
        one block (a proxy forwarding it, a handle that cancels it later).
        Waits only while the output queue is full; a checkpoint either
        way, as every async function of Trio's is.

        Cancelled while waiting for room, nothing is sent and the
        cancellation goes on. Once this returns the request is on its way
        and nothing cancels it by itself: the caller owns it, and ends it
        with :meth:`PendingRequest.result` (which, cancelled, leaves the
        request running), :meth:`PendingRequest.cancel` (sends
        ``$/cancel_request``) or :meth:`PendingRequest.cancel_and_wait`. Use
        :meth:`call` or :meth:`open_request` where a cancelled caller should
        cancel the request on the wire by itself.

        Raises :class:`ConnectionClosed` once the connection is closing and
        :class:`LocalProtocolError` for ``params`` that are not an object,
        an array or ``None``.
        """
        return await self._calls.send_request(method, params, schedule=True)

    @asynccontextmanager
    async def open_request(self, method: str, params: Any = None) -> AsyncIterator[PendingRequest]:
        """Send a request and hand back its :class:`PendingRequest`, for the
        graceful forms of cancellation (``cancel_and_wait()`` for a partial
        result, ``detach()`` to let it run). Leaving the block while the
        request is unanswered cancels it on the wire, unless detached.
        Entering is a checkpoint, as every async function of Trio's is."""
        pending = await self._calls.send_request(method, params, schedule=True)
        try:
            yield pending
        finally:
            self._calls.leave(pending)

    def fail_request(self, request_id: RequestId, error: ACPError) -> bool:
        """Settle our pending request ``request_id`` with ``error``, as if its
        reply had come: for a transport that knows the reply is lost (a
        reconnecting one). ``False`` if no such request is pending."""
        return self._calls.fail(request_id, error)

    async def notify(self, method: str, params: Any = None) -> None:
        """Send a notification. Waits while the output queue is full; a
        checkpoint either way, as every async function of Trio's is.

        Raises :class:`ConnectionClosed` once the connection is closing and
        :class:`LocalProtocolError` for ``params`` that are not an object, an
        array or ``None``. Cancelled while waiting for room, nothing is sent.
        """
        # check_params, inline: notifications are the bulk of the traffic.
        if params is not None and type(params) is not dict and type(params) is not list:
            check_params(params)
        frame = self._calls.notification(method, params)
        if self._status.closed:
            raise self.closed_error()
        await self._outbox.put(frame, checkpoint=True)

    def notify_nowait(self, method: str, params: Any = None) -> None:
        """Send a notification without waiting and without a checkpoint:
        the synchronous form of :meth:`notify`, for bursts (as
        ``MemorySendChannel.send_nowait`` is to ``send``).

        Raises ``trio.WouldBlock`` when the output queue is at its limit
        (nothing is sent: wait with :meth:`notify`, or drop),
        :class:`ConnectionClosed` once the connection is closing and
        :class:`LocalProtocolError` for ``params`` that are not an object, an
        array or ``None``. Not being a checkpoint, it is never cancelled: a
        loop of these stops at its own checkpoints, and if the output never
        fills (a peer that keeps up) it has none: add one (``await
        trio.lowlevel.checkpoint()``) every so many messages. Call it from
        the connection's Trio thread, as every method of the connection.
        """
        if params is not None and type(params) is not dict and type(params) is not list:
            check_params(params)
        if self._status.closed:
            raise self.closed_error()
        outbox = self._outbox
        if outbox.full and not outbox.closed:
            raise trio.WouldBlock  # before encoding: the caller will send it again
        if not outbox.try_put(self._calls.notification(method, params)):
            if outbox.closed:
                raise ConnectionClosed("connection closed")
            raise trio.WouldBlock

    def notify_past_limit_nowait(self, method: str, params: Any = None) -> bool:
        """Queue a notification at once, past the output limit, as the SDK
        queues its own ``$/cancel_request`` frames: for a notification that
        must go out from a task being cancelled, without waiting and without
        a checkpoint (a ``session/cancel``, a tool call's final update).
        Unlike :meth:`notify_nowait` it never raises ``trio.WouldBlock``: a
        full output queue grows by one. It still goes out while the
        connection closes, as long as its output is being written (before
        the ``-32800`` replies of the handlers that closing cancels).

        Returns ``False`` once nothing more is written (nothing is sent);
        raises :class:`LocalProtocolError` for ``params`` that are not an
        object, an array or ``None``. Use it for the few messages that must
        not be lost to a cancellation; everything else should wait for room
        (:meth:`notify`), which is what bounds the output queue.
        """
        if params is not None and type(params) is not dict and type(params) is not list:
            check_params(params)
        if self._outbox.closed:
            return False
        return self._outbox.put_nowait(self._calls.notification(method, params))

    def run_in_notification_order_soon(self, fn: Callable[[], Awaitable[None]]) -> bool:
        """Have the task that handles notifications run ``await fn()`` after
        the notifications read so far, as if it were one more of them: in
        wire order, in that task (so a notification read later is handled
        after it, and a reply or request read later waits for it as for a
        notification read before it). Synchronous, never waits: it is queued
        past the notification queue's limit.

        For work that must be ordered with the peer's notifications, such as
        updates a client buffered before it knew their session. An exception
        ``fn`` raises is logged, as a notification handler's is. Returns
        ``False`` (and does nothing) once the connection no longer handles
        notifications."""
        return self._ordering.run_soon(fn)

    # Running and closing

    async def _run_tasks(self, task_status: trio.TaskStatus[Connection]) -> None:
        close_timeout = self.config.close_timeout
        try:
            async with trio.open_nursery() as outer:
                outer.start_soon(self._writer.run, name="acp writer")
                try:
                    async with trio.open_nursery() as inner:
                        self._status.running_in(inner)
                        inner.start_soon(self._reader.run, name="acp reader")
                        inner.start_soon(self._ordering.consume, name="acp notifications")
                        task_status.started(self)
                        try:
                            await self._shutdown.wait()
                        finally:
                            self._teardown()
                            inner.cancel_scope.deadline = min(
                                inner.cancel_scope.deadline, trio.current_time() + close_timeout
                            )
                finally:
                    self._outbox.close()
                    self._writer.give_up_at(trio.current_time() + close_timeout)
        finally:
            self._ordering.close()
            with trio.CancelScope(shield=True) as scope:
                scope.deadline = trio.current_time() + close_timeout
                with suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                    await self._stream.aclose()
            self._finished.set()

    def _request_shutdown(self, reason: str, cause: BaseException | None) -> None:
        if self._status.closed:
            return
        self._status.close()
        self._close_reason = reason
        self._close_cause = cause
        self._shutdown.set()

    def _teardown(self) -> None:
        # Runs once, in the connection's task, when closing starts.
        self._status.close()
        self._calls.cancel_nested()
        incoming, outgoing = self._peer.close()
        # Cancel the handlers first: a handler waiting on an outgoing call
        # then sees Cancelled (and answers -32800), not the ConnectionClosed
        # that settling its call would hand it (answered -32603).
        self._incoming.close(incoming)
        self._calls.close(outgoing)
        self._reader.close()
        # Leaving (aclose, or our nursery was cancelled), nobody wants the
        # notifications still queued; after the peer closed, nothing is lost.
        self._ordering.stop(drop=self._local_close or not self._shutdown.is_set())
