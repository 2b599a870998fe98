"""The incoming-request part of a connection: each request the peer sends
runs in its own task and cancel scope, or eagerly in the reader's (see
:mod:`acp_trio._core._eager`), and gets exactly one reply.

Invariants kept here:

- one reply per request: every path ends in :meth:`IncomingRequests.send_reply`
  or :meth:`IncomingRequests.answer_unstarted`, and the sans-IO peer gives a
  reply's bytes only the first time (``Peer.reply``);
- a request refused for lack of room is answered at once, so reading never
  waits for a handler slot;
- a handler started eagerly runs in the reader's task and scope until its
  first wait; then ``on_block`` hands reading to a new reader task.
"""

from __future__ import annotations

import contextvars
import logging
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, final

import trio

from acp_trio._core._eager import run_eagerly
from acp_trio._core._groups import single_leaf
from acp_trio._core._handler import Handler
from acp_trio._core._requests import (
    CancelCause,
    RequestContext,
    barrier_of,
    entry_of,
    handler_scope,
    handler_tasks,
    new_request_context,
    return_scope,
)
from acp_trio._exceptions import ConnectionClosed, ProtocolError, RequestError
from acp_trio._jsonrpc import (
    CANCEL_REQUEST_METHOD,
    IncomingRequest,
    Peer,
    RequestId,
    error_response,
    response,
)

if TYPE_CHECKING:
    from acp_trio._core._handler import ConnectionConfig
    from acp_trio._core._ordering import NotificationOrdering
    from acp_trio._core._outbox import Outbox
    from acp_trio._core._requests import ConnectionAPI, PendingRequest
    from acp_trio._core._status import Status

__all__ = ["IncomingRequests"]

_log = logging.getLogger("acp_trio.connection")


@final
class IncomingRequests:
    """The incoming-request part of a connection: the requests running, those
    waiting for a handler slot, and the one reply of each."""

    __slots__ = (
        "_config",
        "_connection",
        "_handler",
        "_on_finished",
        "_on_received",
        "_ordering",
        "_outbox",
        "_peer",
        "_queued",
        "_refused",
        "_status",
        "running",
    )

    def __init__(
        self,
        *,
        config: ConnectionConfig,
        handler: Handler,
        peer: Peer[RequestContext, PendingRequest],
        connection: ConnectionAPI,
        outbox: Outbox,
        ordering: NotificationOrdering,
        status: Status,
    ) -> None:
        self._config = config
        self._handler = handler
        # The per-request hooks, unless they are Handler's own no-ops.
        cls = type(handler)
        self._on_received: Callable[[RequestContext, Any], None] | None = (
            None if cls.request_received is Handler.request_received else handler.request_received
        )
        self._on_finished: Callable[[RequestContext], None] | None = (
            None if cls.request_finished is Handler.request_finished else handler.request_finished
        )
        # What requests are answered with, and through.
        self._peer, self._outbox = peer, outbox
        # What their handlers see as the connection.
        self._connection = connection
        self._ordering = ordering
        self._status = status
        #: Handlers running (in tasks, or eagerly).
        self.running = 0
        # Registered requests waiting for a free handler slot, in order.
        self._queued: dict[RequestContext, Any] = {}
        # Requests refused because too many waited (logged the first time).
        self._refused = 0

    def on_request(
        self, entry: IncomingRequest[RequestContext], params: Any
    ) -> RequestContext | None:
        """A request the peer registered; the context if its handler may
        start now, ``None`` if it was refused or waits for a slot."""
        request_id, method = entry.id, entry.method
        config = self._config
        if (
            self.running >= config.max_concurrent_requests
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
                    self.running,
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
                self.put_reply(request_id, frame)
            return None
        ordering = self._ordering
        ctx = new_request_context(
            connection=self._connection,
            entry=entry,
            # Its handler starts only after the notifications read before it
            # were handled (see NotificationOrdering.wait_for_barrier).
            barrier=ordering.received if ordering.received > ordering.handled else 0,
            deadline=math.inf
            if config.request_timeout is None
            else trio.current_time() + config.request_timeout,
        )
        entry.handle = ctx
        if self._on_received is not None:
            try:
                self._on_received(ctx, params)
            except Exception:
                _log.exception("error in request_received for %s", method)
        if self.running < config.max_concurrent_requests:
            return ctx
        # At the limit the request waits its turn, registered (a cancel finds
        # it and answers it at once), and reading goes on, so that the replies
        # the running handlers wait for still arrive.
        self._queued[ctx] = params
        return None

    async def run_eagerly(
        self,
        ctx: RequestContext,
        entry: IncomingRequest[RequestContext],
        params: Any,
        *,
        scope: trio.CancelScope,
        on_block: Callable[[], None],
    ) -> bool:
        """Run the handler of ``ctx`` (the request of ``entry``) in the
        calling task (the reader), in ``scope`` (the reader's, lent:
        ``lend_scope``); ``on_block()`` runs at its first wait. Whether the
        handler took ``scope`` (``ctx.cancel_scope``), and may cancel it
        later."""
        self.running += 1
        task = trio.lowlevel.current_task()
        handler_tasks[task] = ctx
        reply: dict[str, Any] | None = None
        try:
            try:
                result = await run_eagerly(
                    self._handler.handle_request(ctx, entry.method, params),
                    on_block,
                    contextvars.copy_context(),
                )
                reply = response(entry.id, result)
            except Exception as exc:
                reply = self._failure_reply(ctx, exc)
            except BaseExceptionGroup as group:
                # As in _run_handler: errors raised with a cancellation (of
                # the reader's scope, which is this handler's) are logged,
                # the Cancelled goes on, the reply is -32800.
                self._drop_handler_errors(ctx, group)
        finally:
            # The reply first (the peer is waiting for it), then the
            # bookkeeping: nothing runs in between, so only time tells.
            try:
                self.send_reply(entry, reply)
            finally:
                del handler_tasks[task]
                taken = return_scope(ctx, scope)
                self._handler_finished(ctx, entry)
        return taken

    def start(self, ctx: RequestContext, params: Any) -> None:
        """Run a request's handler in a task of its own."""
        self.running += 1
        assert self._status.nursery is not None
        self._status.nursery.start_soon(self._run_handler, ctx, params, name="acp handler")

    def _start_queued(self) -> None:
        limit = self._config.max_concurrent_requests
        while self._queued and self.running < limit and not self._status.closed:
            ctx = next(iter(self._queued))
            self.start(ctx, self._queued.pop(ctx))

    def close(self, entries: list[IncomingRequest[RequestContext]]) -> None:
        """Closing: the handlers of ``entries`` (every request in flight) are
        cancelled, and the requests waiting for a slot answered ``-32800``."""
        for entry in entries:
            if entry.handle is not None:
                entry.handle.request_cancel(CancelCause.SHUTDOWN)
        for ctx in list(self._queued):
            self.answer_unstarted(ctx)

    def answer_unstarted(self, ctx: RequestContext) -> None:
        # A queued request that will never run: cancelled, or closing.
        self._queued.pop(ctx, None)
        entry = entry_of(ctx)
        frame = self._peer.reply(entry, None)
        if frame is not None:
            self.put_reply(entry.id, frame)
        self._peer.done(entry)
        if self._on_finished is not None:
            self._request_finished(ctx)

    def _request_finished(self, ctx: RequestContext) -> None:
        assert self._on_finished is not None
        try:
            self._on_finished(ctx)
        except Exception:
            _log.exception("error in request_finished for %s", ctx.method)

    def on_cancel_request(self, entry: IncomingRequest[RequestContext]) -> bool:
        """The peer's ``$/cancel_request`` for ``entry``: whether its handler
        (or its task, not yet started) answers it, when it next runs."""
        ctx = entry.handle
        if ctx is None:
            _log.debug("ignoring %s for %r: not running", CANCEL_REQUEST_METHOD, entry.id)
            return False
        ctx.request_cancel(CancelCause.PEER)
        if ctx in self._queued:
            self.answer_unstarted(ctx)
            return False
        return True

    async def _run_handler(self, ctx: RequestContext, params: Any) -> None:
        # Kept lean: this frame lives as long as the request is in flight,
        # so it has few locals (the scope is read from ctx each time) and
        # holds no bound ``__exit__`` (the scope is entered and left by hand,
        # exactly as ``with`` would).
        reply: dict[str, Any] | None = None
        handler_tasks[trio.lowlevel.current_task()] = ctx
        try:
            handler_scope(ctx).__enter__()
            try:
                if barrier_of(ctx) and ctx.cancel_cause is None:
                    await self._ordering.wait_for_barrier(barrier_of(ctx))
                # (Not once closing has begun: the handler would only find
                # the connection closed. It is answered -32800.)
                if ctx.cancel_cause is None and not self._status.closed:
                    try:
                        result = await self._handler.handle_request(ctx, ctx.method, params)
                        reply = response(ctx.id, result)
                    except Exception as exc:
                        reply = self._failure_reply(ctx, exc)
            except BaseException as exc:
                self._leave_handler_scope(ctx, exc)
            else:
                ctx.cancel_scope.__exit__(None, None, None)
            if ctx.cancel_scope.cancelled_caught:
                # Its deadline's, unless it was cancelled first (the first
                # cause is kept).
                ctx.request_cancel(CancelCause.DEADLINE)
        finally:
            del handler_tasks[trio.lowlevel.current_task()]
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
        entry = entry_of(ctx)
        try:
            self.send_reply(entry, reply)
        finally:
            self._handler_finished(ctx, entry)

    def put_reply(self, request_id: RequestId, frame: bytes) -> None:
        """Queue a reply's frame (never waits: see ``Outbox.put_nowait``)."""
        if not self._outbox.put_nowait(frame):
            _log.debug("connection closed; reply to %r not sent", request_id)

    def send_reply(
        self, entry: IncomingRequest[RequestContext], reply: dict[str, Any] | None
    ) -> None:
        """The one reply of a finished handler (``-32800`` if it produced none)."""
        frame = self._peer.reply(entry, reply)
        if frame is not None and not self._outbox.put_nowait(frame):
            _log.debug("connection closed; reply to %r not sent", entry.id)

    def _handler_finished(
        self, ctx: RequestContext, entry: IncomingRequest[RequestContext]
    ) -> None:
        """The bookkeeping of a finished handler, once its reply is sent."""
        self._peer.done(entry)
        if self._on_finished is not None:
            self._request_finished(ctx)
        self.running -= 1
        if self._queued:
            self._start_queued()

    def _failure_reply(self, ctx: RequestContext, exc: Exception) -> dict[str, Any] | None:
        """The reply to a handler's exception (``None``: ``-32800``): its
        :class:`RequestError`, or ``-32603``."""
        leaf = single_leaf(exc)
        if isinstance(leaf, RequestError):
            return self._error_reply(ctx, leaf)
        if isinstance(leaf, ConnectionClosed) and self._status.closed:
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
