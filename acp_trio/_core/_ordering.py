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
from typing import TYPE_CHECKING, Any, Final, final

import trio

from acp_trio._core._outbox import Inbox

if TYPE_CHECKING:
    from acp_trio._core._handler import Handler

__all__ = ["NotificationOrdering", "Queued", "in_notification_handler"]

_log = logging.getLogger("acp_trio.connection")

#: Set in the task that handles notifications (and the tasks it starts).
in_notification_handler: Final[ContextVar[bool]] = ContextVar(
    "acp_trio_in_notification_handler", default=False
)

#: (number, method, params) of a notification read; (number, None, fn) for
#: work of our own run by the consumer in its place (see :meth:`run_soon`).
Queued = tuple[int, str | None, Any]


@final
class NotificationOrdering:
    """The notification part of a connection: the queue of notifications
    read, the consumer that handles them, and the numbers that order
    replies and requests after them."""

    __slots__ = ("_consumer_calls", "_handler", "_waiters", "handled", "inbox", "received")

    def __init__(self, *, handler: Handler, max_queued: int) -> None:
        self._handler = handler
        #: Read and not yet handled, in wire order.
        self.inbox: Inbox[Queued] = Inbox(max_queued)
        #: How many notifications were read (numbered from 1) ...
        self.received = 0
        #: ... and how many of them were handled.
        self.handled = 0
        self._waiters: list[tuple[int, trio.Event]] = []
        # Outgoing calls waited on by notification handlers (and tasks they
        # started): while there are any, nothing waits for notifications to
        # be handled (see wait_for_barrier).
        self._consumer_calls = 0

    def on_notification(self, method: str, params: Any) -> Queued | None:
        """Act on a notification in the reader; return what to queue for the
        consumer, if anything."""
        try:
            if self._handler.intercept_notification(method, params):
                return None
        except Exception:
            _log.exception("error intercepting notification %s", method)
            return None
        self.received += 1
        return (self.received, method, params)

    async def consume(self) -> None:
        """The consumer task: handle what is queued, in order, until the
        queue is closed and empty."""
        in_notification_handler.set(True)
        try:
            inbox = self.inbox
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
                self.handled = seq
                if self._waiters:
                    self._wake(seq)
        finally:
            self.close()

    def run_soon(self, fn: Callable[[], Awaitable[None]]) -> bool:
        """Queue ``fn`` as one more notification, past the queue's limit;
        ``False`` once notifications are no longer handled."""
        # A number of its own, so that a reply read after now waits for it as
        # for a notification read before it (see wait_for_barrier).
        self.received += 1
        if self.inbox.put_always((self.received, None, fn)):
            return True
        self.received -= 1
        return False

    async def wait_for_notifications(self, barrier: int) -> None:
        """Before a reply is handed over: wait until the notifications that
        arrived before it were handled, except in a notification handler
        itself (it would wait for itself)."""
        if in_notification_handler.get():
            return
        await self.wait_for_barrier(barrier)

    async def wait_for_barrier(self, barrier: int) -> None:
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
        while barrier > self.handled and not self._consumer_calls:
            event = trio.Event()
            self._waiters.append((barrier, event))
            await event.wait()

    def call_started(self) -> None:
        """A notification handler waits for the peer: see wait_for_barrier."""
        self._consumer_calls += 1
        if self._consumer_calls == 1 and self._waiters:
            waiters, self._waiters = self._waiters, []
            for _, event in waiters:
                event.set()

    def call_ended(self) -> None:
        self._consumer_calls -= 1

    def stop(self, drop: bool) -> None:
        """Closing: nothing more is queued; the consumer handles what is
        (unless ``drop``), then stops."""
        if drop:
            dropped = self.inbox.clear()
            if dropped:
                _log.debug("closing: %d queued notifications dropped", dropped)
        self.inbox.close()

    def close(self) -> None:
        """No more notifications will be handled: nobody waits for them."""
        self.handled = max(self.handled, self.received)
        self._wake(math.inf)

    def _wake(self, handled: float) -> None:
        keep: list[tuple[int, trio.Event]] = []
        for barrier, event in self._waiters:
            if barrier <= handled:
                event.set()
            else:
                keep.append((barrier, event))
        self._waiters = keep
