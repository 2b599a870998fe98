"""The outgoing part of a connection: each request we send waits in the
calling task, inside the scope of the handler that made it (if any), so
cancelling that scope cancels it on the wire.

Invariants kept here:

- at most one ``$/cancel_request`` per request (``Peer.cancel`` gives its
  bytes once), sent when the waiting task is cancelled, and none once the
  reply is in;
- a request whose frame was never queued is forgotten (no reply expected);
- replies and cancels never wait for queue space (``Outbox.put_nowait``),
  so a cancelled task can always send them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, final

import trio

from acp_trio._core._ordering import in_notification_handler
from acp_trio._core._requests import (
    NOT_HANDLED,
    PendingRequest,
    RequestContext,
    adopt,
    barrier_of,
    current_request,
    entry_of,
    new_pending_request,
    outcome,
    settle,
    wait_here,
)
from acp_trio._exceptions import ACPError, ConnectionClosed, LocalProtocolError
from acp_trio._jsonrpc import OutgoingRequest, Peer, RequestId, RequestReceived

if TYPE_CHECKING:
    from acp_trio._core._handler import ConnectionInstrument
    from acp_trio._core._ordering import NotificationOrdering
    from acp_trio._core._outbox import Outbox
    from acp_trio._core._read_right import ReadRight
    from acp_trio._core._reader import Reader
    from acp_trio._core._status import Status

__all__ = ["OutgoingCalls", "check_params"]

# What an abandoned request's result raises (a fresh copy each time: see
# outcome() in _requests.py).
_ABANDONED: Final = LocalProtocolError("the request was abandoned")


@final
class OutgoingCalls:
    """The outgoing part of a connection: sending requests, waiting for
    their replies (the pending-request wait), cancelling them. The
    :class:`~acp_trio._core._requests.CallOwner` of every
    :class:`PendingRequest` it makes."""

    __slots__ = (
        "_closed_error",
        "_instrument",
        "_ordering",
        "_outbox",
        "_peer",
        "_reader",
        "_right",
        "_status",
        "_writes_directly",
    )

    def __init__(
        self,
        *,
        peer: Peer[RequestContext, PendingRequest],
        outbox: Outbox,
        ordering: NotificationOrdering,
        reader: Reader,
        right: ReadRight,
        status: Status,
        instrument: ConnectionInstrument | None,
        closed_error: Callable[[], ConnectionClosed],
    ) -> None:
        self._peer, self._outbox = peer, outbox
        self._writes_directly = outbox.writes_directly  # (fixed when made)
        self._ordering = ordering
        # Who reads: a caller may read for its own reply.
        self._reader, self._right = reader, right
        self._status = status
        self._closed_error = closed_error
        self._instrument = instrument

    async def send_request(
        self, method: str, params: Any, schedule: bool = False
    ) -> PendingRequest:
        """Queue a request (waiting only while the output queue is full) and
        return its :class:`PendingRequest`. A cancel point; with
        ``schedule``, a schedule point too (for a caller that does not wait
        for the reply next): the wait for room when there was one, else one
        that cannot be cancelled once the request is queued."""
        if type(params) is not dict:
            check_params(params)
        if self._status.closed:
            raise self._closed_error()
        sent = None
        if self._instrument is not None:
            params, sent = self._instrument.request_sending(method, params)
        entry, frame = self._peer.send_request(method, params)
        parent = current_request()
        pending = new_pending_request(owner=self, entry=entry, parent=parent)
        entry.handle = pending
        waited = False
        try:
            await trio.lowlevel.checkpoint_if_cancelled()
            if not self._outbox.try_put(frame):
                await self._outbox.put(frame, checkpoint=schedule)
                waited = True
        except BaseException:
            # Not sent (cancelled while the queue was full).
            self._peer.forget(entry)
            if sent is not None:
                sent(None)
            raise
        if sent is not None:
            sent(pending)
        if parent is not None:
            adopt(pending)
        if schedule and not waited:
            # (The request is queued: no cancel point here.)
            try:
                await trio.lowlevel.cancel_shielded_checkpoint()
            except BaseException:
                # (A KeyboardInterrupt: the caller never gets the request.)
                if not pending.done:
                    self.send_cancel(entry)
                    self.abandon(pending)
                raise
        return pending

    async def result(self, pending: PendingRequest, call: bool) -> Any:
        """The pending-request wait: until ``pending`` is settled (a
        checkpoint either way), then until the notifications read before
        its answer were handled; its result, or raise its error.

        ``call``: the caller's own call. Over a pipe, with the read right
        free, it reads for its reply itself; cancelled, it cancels the
        request on the wire and abandons it. Otherwise
        (:meth:`PendingRequest.result`) it never reads (an open_request()
        may be abandoned from another task, which could not wake a task that
        is reading) and leaves the request as it is."""
        if pending.done:
            await trio.lowlevel.checkpoint()
        else:
            right = self._right
            consumer = in_notification_handler.get()
            if consumer:
                self._ordering.call_started()
            # (Without callers reading, the reader never parks.)
            parks = right.enabled
            # What a caller reading stopped at: its answer (True), or a
            # request it hands back to the reader.
            stop: RequestReceived[RequestContext] | bool = False
            try:
                if parks and call and right.take():
                    try:
                        stop = await self._reader.read_for(pending)
                    finally:
                        right.give_back(None if type(stop) is bool else stop)
                if stop is not True and not pending.done:
                    # Whoever finds the read right free and does not read
                    # wakes the parked reader: before waiting, and after.
                    if parks:
                        right.wake()
                    await trio.lowlevel.wait_task_rescheduled(wait_here(pending, call))
                    if parks:
                        right.wake()
            except BaseException:
                right.wake()
                if call and not pending.done:
                    # (Its cancel is usually sent by now: the reader sent
                    # the due cancels right after the frame that caused it.)
                    self._reader.flush_cancels()
                    entry = entry_of(pending)
                    if not entry.cancel_sent:
                        self.send_cancel(entry)
                    # (abandon()'s lines, with the entry at hand.)
                    self._peer.abandon(entry)
                    settle(pending, None, _ABANDONED, 0)
                raise
            finally:
                if consumer:
                    self._ordering.call_ended()
        answer = outcome(pending, self._ordering.handled)
        if answer is NOT_HANDLED:
            await self._ordering.wait_for_notifications(barrier_of(pending))
            answer = outcome(pending)
        return answer

    def send_cancel(self, entry: OutgoingRequest[PendingRequest]) -> None:
        """Queue ``$/cancel_request`` for the request of ``entry`` (at most once)."""
        frame = self._peer.cancel(entry)
        if frame is not None:
            self._outbox.put_nowait(frame)

    def cancel_due(self, pending: PendingRequest) -> None:
        """``pending``'s call was cancelled (from its abort function): the
        reader sends its ``$/cancel_request`` right after the frame that
        caused the cancellation, where a frame queued now is written now (a
        pipe, the writer idle); elsewhere the cancelled call sends it as it
        unwinds, and no write is split in two."""
        if self._writes_directly:
            self._reader.cancel_due(pending)

    def leave(self, pending: PendingRequest) -> None:
        """The caller leaves ``pending`` (an ``open_request`` block): if it
        is still unanswered, it is cancelled on the wire (unless detached)
        and forgotten."""
        if not pending.done:
            if not pending.detached:
                pending.cancel()
            self.abandon(pending)

    def abandon(self, pending: PendingRequest) -> None:
        """Forget ``pending``: its late answer is dropped."""
        self._peer.abandon(entry_of(pending))
        # Anyone still asking for its result gets an answer, not a hang (and
        # the handler that made it lets go of it).
        settle(pending, None, _ABANDONED, 0)

    def cancel_nested(self) -> None:
        """Closing, before the handlers are cancelled and answered ``-32800``:
        their calls are cancelled on the wire first, while we can still write
        (after the peer's end of stream it may still read), so that a
        request reported cancelled has cascaded. When writing failed, the
        outbox is closed and neither goes out."""
        if self._outbox.closed:
            return
        for out in list(self._peer.table.outgoing.values()):
            if out.handle is not None and out.handle.parent is not None:
                self.send_cancel(out)

    def close(self, entries: list[OutgoingRequest[PendingRequest]]) -> None:
        """Closing: the calls of ``entries`` fail with ConnectionClosed."""
        for out in entries:
            if out.handle is not None:
                settle(out.handle, None, self._closed_error(), 0)

    def fail(self, request_id: RequestId, error: ACPError) -> bool:
        """Settle our pending request ``request_id`` with ``error``."""
        event = self._peer.fail(request_id, error)
        if event is None:
            return False
        if event.entry.handle is not None:
            settle(event.entry.handle, None, error, self._ordering.received)
        return True

    def notification(self, method: str, params: Any) -> bytes:
        """A notification's frame (through the instrument, if any)."""
        if self._instrument is not None:
            params = self._instrument.notification_sending(method, params)
        return self._peer.notify(method, params)


def check_params(params: Any) -> None:
    if params is not None and not isinstance(params, dict | list):
        raise LocalProtocolError(
            f"params must be a JSON object, an array or None, not {type(params).__name__}"
        )
