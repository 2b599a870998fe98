"""Notifications, in wire order, and their ordering against replies and
requests (the connection's notification consumer).

Invariant: a reply is handed to its caller, and a request's handler starts,
only after every notification read before it was handled (its *barrier*),
except while a notification handler itself waits for the peer (it would
wait for itself: ordering then gives way for as long as that call lasts).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Final

import trio

from acp_trio._core._outbox import Inbox

if TYPE_CHECKING:
    from acp_trio._core._handler import Handler

__all__ = ["NotificationOrdering"]

_log = logging.getLogger("acp_trio.connection")

_in_notification_handler: Final[ContextVar[bool]] = ContextVar(
    "acp_trio_in_notification_handler", default=False
)

# (number, method, params) of a notification read; (number, None, fn) for
# work of our own run by the consumer in its place (see run_in_notification_order_soon).
_Queued = tuple[int, str | None, Any]


class NotificationOrdering:
    """The connection's notification side (a part of :class:`Connection`)."""

    if TYPE_CHECKING:
        _handler: Handler
        _inbox: Inbox[_Queued]
        _notifications_received: int
        _notifications_handled: int
        _barrier_waiters: list[tuple[int, trio.Event]]
        _consumer_calls: int

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
