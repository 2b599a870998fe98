"""The incoming-request runner: each request the peer sends runs in its own
task and cancel scope, or eagerly in the reader (see :mod:`acp_trio._core._eager`),
and gets exactly one reply.

Invariants kept here:

- one reply per request: every path ends in :meth:`_send_reply` or
  :meth:`_answer_unstarted`, and the sans-IO peer gives a reply's bytes
  only the first time (``Peer.reply``);
- a request refused for lack of room is answered at once, so reading never
  waits for a handler slot;
- a handler started eagerly runs in the reader's task and scope until its
  first wait; then a new reader takes over (:meth:`_hand_over_reading`).
"""

from __future__ import annotations

import contextvars
import logging
import math
from typing import TYPE_CHECKING, Any, Final, final

import trio

from acp_trio._core._eager import run_eagerly
from acp_trio._core._groups import single_leaf
from acp_trio._core._requests import CancelCause, PendingRequest, RequestContext, _handler_tasks
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
    from collections.abc import Callable

    from acp_trio._core._handler import ConnectionConfig, Handler
    from acp_trio._core._outbox import Outbox
    from acp_trio._core._requests import RequestOwner

__all__ = ["IncomingRequests"]

_log = logging.getLogger("acp_trio.connection")

# After a handler run eagerly waits, this many requests of its method start
# in tasks of their own before the next eager try; methods remembered at most.
_EAGER_SKIP: Final = 64
_EAGER_SKIP_METHODS: Final = 256


class IncomingRequests:
    """The connection's incoming-request side (a part of :class:`Connection`)."""

    if TYPE_CHECKING:
        config: ConnectionConfig
        _handler: Handler
        _peer: Peer[RequestContext, PendingRequest]
        _owner: RequestOwner
        _outbox: Outbox
        _nursery: trio.Nursery | None
        _closed: bool
        _reader_scope: trio.CancelScope
        _running_handlers: int
        _queued: dict[RequestContext, Any]
        _refused: int
        _eager_skips: dict[str, int]
        _on_received: Callable[[RequestContext, Any], None] | None
        _on_finished: Callable[[RequestContext], None] | None
        _notifications_received: int
        _notifications_handled: int

        def _put_reply(self, request_id: RequestId, frame: bytes) -> None: ...
        async def _wait_for_barrier(self, barrier: int) -> None: ...
        async def _reader(self) -> None: ...

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

    def _on_cancel_request(self, entry: IncomingRequest[RequestContext]) -> None:
        if entry.handle is None:
            _log.debug("ignoring %s for %r: not running", CANCEL_REQUEST_METHOD, entry.id)
            return
        entry.handle.request_cancel(CancelCause.PEER)
        if entry.handle in self._queued:
            self._answer_unstarted(entry.handle)

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


@final
class _Role:
    """A reader task's role: whether it is still the reader, and the method
    of the request it runs eagerly."""

    __slots__ = ("conn", "method", "reading")

    def __init__(self, conn: IncomingRequests) -> None:
        self.conn = conn
        self.reading = True
        self.method = ""

    def hand_over(self) -> None:
        self.conn._hand_over_reading(self)
