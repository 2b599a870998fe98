"""The reading part of a connection: the reader task, and the one function
that acts on each frame read, whoever read it (the reader, or a caller that
holds the read right: see :mod:`acp_trio._core._read_right`).

The reader hands each frame to ``Peer.receive`` (which registers an incoming
request *before* its handler starts), acts on ``$/cancel_request`` at once
(never queued behind handlers), hands replies to the waiting callers, and
queues notifications. It starts each request's handler itself: in a task of
its own, or eagerly, in the reader's own task and scope (see
:mod:`acp_trio._core._eager`): a handler that answers without waiting costs
no task at all, and at a handler's first wait the reader hands reading over
to a new reader task, so the handler's task (with its scope) is then simply
the old reader's. Either way each request has a task and a scope of its own
whenever it can wait, and reading never waits on a handler.
"""

from __future__ import annotations

import enum
import logging
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Final, final

import trio

from acp_trio._core._ordering import Queued
from acp_trio._core._requests import PendingRequest, RequestContext, lend_scope, settle
from acp_trio._core._writer import stock_stream
from acp_trio._jsonrpc import (
    CancelReceived,
    NotificationReceived,
    OversizedFrame,
    Peer,
    ReplyReceived,
    RequestReceived,
    SendFrame,
)

if TYPE_CHECKING:
    from acp_trio._core._framed import FrameTransport
    from acp_trio._core._handler import TraceHook
    from acp_trio._core._incoming import IncomingRequests
    from acp_trio._core._ordering import NotificationOrdering
    from acp_trio._core._outbox import Outbox
    from acp_trio._core._read_right import ReadRight
    from acp_trio._core._status import Status

__all__ = ["Reader"]

_log = logging.getLogger("acp_trio.connection")

# The reader yields after queueing this many notifications in a row.
_HANDOVER: Final = 128

# After a handler run eagerly waits, this many requests of its method start
# in tasks of their own before the next eager try; methods remembered at most.
_EAGER_SKIP: Final = 64
_EAGER_SKIP_METHODS: Final = 256


class _Done(enum.Enum):
    """What :meth:`Reader.on_frame` did, when the reader has something
    left to do."""

    QUEUED = 1  # queued a notification
    WOKE = 2  # woke a caller with its reply


_QUEUED: Final = _Done.QUEUED
_WOKE: Final = _Done.WOKE

#: What :meth:`Reader.on_frame` leaves to its caller: nothing (``None``),
#: what it did (:class:`_Done`), a call it settled that no task waited for
#: (a caller reading for it knows it by that), a notification to queue when
#: the queue had no room, or an incoming request (only the reader starts
#: handlers).
Left = _Done | PendingRequest | Queued | RequestReceived[RequestContext] | None


@final
class Reader:
    """The reading part of a connection: the reader task and its cancel
    scope, which methods run eagerly, and the cancels due to be sent."""

    __slots__ = (
        "_cancels_due",
        "_eager",
        "_eager_skips",
        "_inbox",
        "_incoming",
        "_ordering",
        "_outbox",
        "_receive",
        "_right",
        "_scope",
        "_shutdown",
        "_status",
        "_stock",
        "_stream",
        "_trace",
    )

    def __init__(
        self,
        *,
        stream: FrameTransport,
        peer: Peer[RequestContext, PendingRequest],
        trace: TraceHook | None,
        eager: bool,
        ordering: NotificationOrdering,
        incoming: IncomingRequests,
        outbox: Outbox,
        right: ReadRight,
        status: Status,
        shutdown: Callable[[str, BaseException | None], None],
    ) -> None:
        self._stream = stream
        self._receive = peer.receive
        self._trace = trace
        self._stock = stock_stream(stream)
        self._eager = eager and self._stock
        self._ordering = ordering
        self._inbox = ordering.inbox
        self._incoming = incoming
        self._outbox = outbox
        self._right = right
        self._status = status
        self._shutdown = shutdown
        # The reader's scope (a handler run eagerly runs in it).
        self._scope = trio.CancelScope()
        # Methods whose handlers recently waited -> requests left to start
        # in tasks before the next eager try (see _hand_over).
        self._eager_skips: dict[str, int] = {}
        # Calls cancelled whose ``$/cancel_request`` is due (recorded by
        # their abort functions; see flush_cancels).
        self._cancels_due: list[PendingRequest] = []

    def on_frame(self, frame: bytes | OversizedFrame) -> Left:
        """Act on one frame read: the one event dispatch, for the reader and
        for a reading caller. Returns what is left to do (see :data:`Left`)."""
        if self._trace is not None and type(frame) is bytes:
            self._trace("recv", frame)
        event = self._receive(frame)
        if event is None:
            return None
        if type(event) is NotificationReceived:
            item = self._ordering.on_notification(event.method, event.params)
            if item is None:
                # Taken in the reader (a session/cancel, say): the calls it
                # cancelled are cancelled on the wire at once.
                if self._cancels_due:
                    self.flush_cancels()
                return None
            return _QUEUED if self._inbox.put_nowait(item) else item
        if type(event) is ReplyReceived:
            pending = event.entry.handle
            if pending is None:
                return None
            if settle(pending, event.result, event.error, self._ordering.received):
                return _WOKE
            return pending
        if type(event) is CancelReceived:
            cancelled = self._incoming.on_cancel_request(event.entry)
            if self._cancels_due:
                self.flush_cancels()
            if cancelled:
                # Its -32800 comes from its task, about to run: a burst of
                # cancels is answered in one write (see Outbox.reply_due).
                self._outbox.reply_due()
            return None
        if type(event) is SendFrame:
            self._incoming.put_reply(event.request_id, event.data)
            return None
        assert type(event) is RequestReceived
        return event

    def cancel_due(self, pending: PendingRequest) -> None:
        """``pending``'s call was cancelled: its ``$/cancel_request`` is sent
        right after the frame that caused the cancellation (called from an
        abort function: it only records it)."""
        self._cancels_due.append(pending)

    def flush_cancels(self) -> None:
        """Send the cancels that abort functions recorded as due (outside
        any abort function: sending runs the trace hook and may write), in
        one write (a cancelled fan-out makes a thousand at once)."""
        due = self._cancels_due
        if not due:
            return
        if len(due) == 1:
            # One (a chain): nothing to join, written as it is put.
            pending = due.pop()
            try:
                pending.cancel()
            except Exception:
                _log.debug("cancel of request %d not sent", pending.id, exc_info=True)
            if not due:
                return
        outbox = self._outbox
        outbox.hold()
        try:
            for pending in due:  # (sending may make more due: they come last)
                try:
                    pending.cancel()
                except Exception:
                    # (A trace hook that raised: the call tries again as it unwinds.)
                    _log.debug("cancel of request %d not sent", pending.id, exc_info=True)
            due.clear()
        finally:
            outbox.release()

    # The reader task

    async def run(self) -> None:
        """The reader task. It reads until the stream ends, or until a
        handler it started eagerly waits: then a new reader task has taken
        over, and this task goes on as that request's handler task."""
        scope = self._scope
        role = _Role(self)
        while True:
            with scope:
                await self._read(role)
            if not role.reading or self._status.closed:
                return
            # A handler run eagerly cancelled its scope (ours) or took it, and
            # answered at once: read on in a fresh scope.
            scope = self._scope = trio.CancelScope()

    async def _read(self, role: _Role) -> None:
        """Read and act on frames; return at the end of the stream, when this
        task stops being the reader, or when its scope must be replaced."""
        reason = "the peer closed the connection"
        cause: BaseException | None = None
        stream = self._stream
        nowait = stream.receive_frame_nowait if self._stock else _no_frame
        on_frame = self.on_frame
        status = self._status
        right = self._right
        may_park = right.enabled
        incoming = self._incoming
        eager = self._eager
        skips = self._eager_skips
        queued = 0
        try:
            while True:
                event: Left
                if right.handed_back is not None:
                    # Read by a caller, for us to act on (a request).
                    event = right.take_handed_back()
                else:
                    frame = nowait()
                    if frame is None and (frame := await stream.receive_frame()) is None:
                        break
                    if status.closed:
                        break
                    event = on_frame(frame)
                    # A handler run eagerly that waits keeps this frame
                    # alive: let go of it.
                    del frame
                    if event is None:
                        continue
                    if event is _QUEUED:
                        if (queued := queued + 1) >= _HANDOVER:
                            # Let the consumer handle them while they are
                            # still in the CPU cache.
                            queued = 0
                            await trio.lowlevel.cancel_shielded_checkpoint()
                        continue
                    if event is _WOKE:
                        # We woke a caller and have nothing else to do: it
                        # may read its next reply itself (see ReadRight).
                        # Decided in this very step, before it can run.
                        if (
                            may_park
                            and not stream.frames_pending
                            and (not await right.park() or status.closed)
                        ):
                            break
                        continue
                    if type(event) is tuple:
                        # A notification, and the consumer's queue is full.
                        await self._inbox.put(event)
                        queued = 0
                        continue
                    if type(event) is PendingRequest:
                        continue  # a reply nobody waited for in a task
                assert type(event) is RequestReceived
                params = event.params
                entry = event.entry
                ctx = incoming.on_request(entry, params)
                del event
                if ctx is not None:
                    # Eagerly only when no frame read after this one
                    # waits: a cancel right behind a request finds it
                    # not yet started, as it would with a task. Not for a
                    # method whose handlers recently waited, nor (see
                    # lend_scope) if request_received cancelled it or made
                    # its scope (to set a deadline), nor when its deadline
                    # has already passed (then a task answers it without
                    # running the handler), nor when notifications read
                    # before it wait to be handled (its task waits for
                    # them first).
                    scope = self._scope
                    if (
                        eager
                        and not stream.frames_pending
                        and (not skips or self._eager_allowed(entry.method))
                        and lend_scope(ctx, scope)
                    ):
                        role.method = entry.method
                        taken = await incoming.run_eagerly(
                            ctx, entry, params, scope=scope, on_block=role.hand_over
                        )
                        if not role.reading:
                            return  # a new reader has taken over
                        if scope.cancel_called or taken:
                            # The handler cancelled our scope, or took it
                            # (ctx.cancel_scope) and may cancel it later:
                            # read on in a fresh one.
                            return
                        if scope.deadline != math.inf or scope.shield:
                            scope.deadline, scope.shield = math.inf, False
                    else:
                        incoming.start(ctx, params)
                del params, entry
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            reason = f"connection lost while reading: {exc!r}"
            cause = exc
        self._shutdown(reason, cause)

    def _hand_over(self, role: _Role) -> None:
        """An eagerly run handler waits: a new reader task takes over, and
        the next requests of that method start in tasks of their own for a
        while (a waiting handler keeps the reader's frames alive, which costs
        memory; a task is smaller)."""
        role.reading = False
        skips = self._eager_skips
        if len(skips) >= _EAGER_SKIP_METHODS:
            skips.clear()
        skips[role.method] = _EAGER_SKIP
        self._scope = trio.CancelScope()
        if self._status.closed:
            self._scope.cancel()
            return
        assert self._status.nursery is not None
        self._status.nursery.start_soon(self.run, name="acp reader")

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

    # A caller reading

    async def read_for(self, pending: PendingRequest) -> RequestReceived[RequestContext] | bool:
        """Read (as the reader would, holding the read right) for the reply
        to ``pending``, a call not yet settled. Returns ``True`` once it is
        settled; a request read, which needs the reader (for the caller to
        hand back: ``ReadRight.give_back``); ``False`` when the stream ended,
        the connection is closing, or the notification queue is full (the
        reader waits for room, not a caller). Cancelled, it raises."""
        stream = self._stream
        on_frame = self.on_frame
        inbox = self._inbox
        status = self._status
        try:
            while not inbox.full:
                frame = stream.receive_frame_nowait()
                if frame is None and (frame := await stream.receive_frame()) is None:
                    self._shutdown("the peer closed the connection", None)
                    return False
                if status.closed:
                    return False
                event = on_frame(frame)
                del frame
                if event is pending:
                    return True  # its reply
                if type(event) is RequestReceived:
                    # An incoming request: the reader acts on it first thing.
                    return event
                # (Not a notification left to queue: the inbox had room.)
                assert type(event) is not tuple
                if pending.done:
                    return True  # settled meanwhile (fail_request, say)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            self._shutdown(f"connection lost while reading: {exc!r}", exc)
        return False

    def close(self) -> None:
        """Closing: the reader stops, and so does a reading caller."""
        self._cancels_due.clear()
        self._scope.cancel()
        self._right.close()


@final
class _Role:
    """A reader task's role: whether it is still the reader, and the method
    of the request it runs eagerly."""

    __slots__ = ("method", "reader", "reading")

    def __init__(self, reader: Reader) -> None:
        self.reader = reader
        self.reading = True
        self.method = ""

    def hand_over(self) -> None:
        self.reader._hand_over(self)


def _no_frame() -> None:
    return None
