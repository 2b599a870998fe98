"""Outgoing calls and notifications: each request we send waits in the
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

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Final

import trio

from acp_trio._core._caller_reads import FREE
from acp_trio._core._handler import RequestNode
from acp_trio._core._ordering import _in_notification_handler
from acp_trio._core._requests import _WAITING, PendingRequest, RequestContext, current_request
from acp_trio._exceptions import ACPError, ConnectionClosed, LocalProtocolError
from acp_trio._jsonrpc import Peer, RequestId

if TYPE_CHECKING:
    from acp_trio._core._handler import ConnectionInstrument
    from acp_trio._core._outbox import Outbox
    from acp_trio._core._requests import RequestOwner

__all__ = ["OutgoingCalls"]

# What an abandoned request's result raises (a fresh copy each time: see
# PendingRequest._outcome).
_ABANDONED: Final = LocalProtocolError("the request was abandoned")


class OutgoingCalls:
    """The connection's calling side (a part of :class:`Connection`)."""

    if TYPE_CHECKING:
        _peer: Peer[RequestContext, PendingRequest]
        _owner: RequestOwner
        _outbox: Outbox
        _notifications_handled: int
        _notifications_received: int
        _closed: bool
        _instrument: ConnectionInstrument | None

        _baton: int

        def _check_open(self) -> None: ...
        def _may_read_for(self) -> bool: ...
        async def _read_for(self, pending: PendingRequest) -> None: ...
        def _wake_idle_reader(self) -> None: ...
        def _consumer_call_started(self) -> None: ...
        def _consumer_call_ended(self) -> None: ...
        async def _wait_for_notifications(self, barrier: int) -> None: ...

    async def call(self, method: str, params: Any = None) -> Any:
        """Send a request and wait for its result.

        Raises :class:`RequestError` for the peer's error reply,
        :class:`ConnectionClosed` if the connection ends first, and
        :class:`RemoteProtocolError` for a malformed reply. If the calling
        task is cancelled (its scope, a deadline, an enclosing handler being
        cancelled), one ``$/cancel_request`` is sent for the request, the
        cancellation goes on at once, and the peer's late answer is dropped.
        """
        pending = await self.send_request(method, params)
        consumer = _in_notification_handler.get()
        if consumer:
            self._consumer_call_started()
        try:
            # Wait for the reply here rather than in a helper: one coroutine
            # less per call, and one frame less for a cancellation to unwind.
            # Over a pipe, with reading free, read for the reply ourselves
            # (see _caller_reads); else make sure the reader reads.
            if pending._state != _WAITING:
                await trio.lowlevel.checkpoint()
            else:
                if self._baton == FREE:
                    if self._may_read_for():
                        await self._read_for(pending)
                    if pending._state == _WAITING:
                        self._wake_idle_reader()
                if pending._state == _WAITING:
                    pending._task = trio.lowlevel.current_task()
                    await trio.lowlevel.wait_task_rescheduled(pending._abort_call)
                    if self._baton == FREE:
                        self._wake_idle_reader()
            if pending._barrier > self._notifications_handled:
                await self._wait_for_notifications(pending._barrier)
            return pending._outcome()
        except BaseException:
            if self._baton == FREE:
                self._wake_idle_reader()
            if pending._state == _WAITING:
                if not pending._entry.cancel_sent:
                    self._send_cancel(pending)
                self._abandon(pending)
            raise
        finally:
            if consumer:
                self._consumer_call_ended()

    def fail_request(self, request_id: RequestId, error: ACPError) -> bool:
        """Settle our pending request ``request_id`` with ``error``, as if its
        reply had come: for a transport that knows the reply is lost (a
        reconnecting one). ``False`` if no such request is pending."""
        event = self._peer._fail(request_id, error)
        if event is None:
            return False
        if event.entry.handle is not None:
            event.entry.handle._settle(None, error, self._notifications_received)
        return True

    @asynccontextmanager
    async def open_request(self, method: str, params: Any = None) -> AsyncIterator[PendingRequest]:
        """Send a request and hand back its :class:`PendingRequest`, for the
        graceful forms of cancellation (``cancel_and_wait()`` for a partial
        result, ``detach()`` to let it run). Leaving the block while the
        request is unanswered cancels it on the wire, unless detached.
        Entering is a checkpoint, as every async function of Trio's is."""
        pending = await self.send_request(method, params)
        try:
            # A schedule point (the request is sent: no cancel point here).
            await trio.lowlevel.cancel_shielded_checkpoint()
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
        # _check_params and _check_open, inline: notifications are the bulk
        # of the traffic.
        if params is not None and type(params) is not dict and type(params) is not list:
            _check_params(params)
        if self._instrument is not None:
            params = self._instrument.notification_sending(method, params)
        frame = self._peer.notify(method, params)
        if self._closed:
            self._check_open()
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
            _check_params(params)
        if self._closed:
            self._check_open()
        if self._outbox.full and not self._outbox.closed:
            raise trio.WouldBlock  # before encoding: the caller will send it again
        if self._instrument is not None:
            params = self._instrument.notification_sending(method, params)
        if not self._outbox.try_put(self._peer.notify(method, params)):
            if self._outbox.closed:
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
            _check_params(params)
        if self._outbox.closed:
            return False
        if self._instrument is not None:
            params = self._instrument.notification_sending(method, params)
        return self._outbox.put_nowait(self._peer.notify(method, params))

    async def send_request(self, method: str, params: Any = None) -> PendingRequest:
        """Send a request and return its :class:`PendingRequest` without
        waiting for the answer: for a caller that keeps the request beyond
        one block (a proxy forwarding it, a handle that cancels it later).
        Waits only while the output queue is full.

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
        _check_params(params)
        self._check_open()
        sent = None
        if self._instrument is not None:
            params, sent = self._instrument.request_sending(method, params)
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
            if sent is not None:
                sent(None)
            raise
        if sent is not None:
            sent(pending)
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

    async def _await_reply(self, pending: PendingRequest) -> None:
        """Wait until ``pending`` is settled (a checkpoint either way), for
        :meth:`PendingRequest.result`."""
        if pending._state != _WAITING:
            await trio.lowlevel.checkpoint()
            return
        # Never reads for itself: an open_request() may be abandoned from
        # another task, which could not wake a task that is reading.
        if self._baton == FREE:
            self._wake_idle_reader()
        pending._task = trio.lowlevel.current_task()
        consumer = _in_notification_handler.get()
        if consumer:
            self._consumer_call_started()
        try:
            await trio.lowlevel.wait_task_rescheduled(pending._abort)
        finally:
            if consumer:
                self._consumer_call_ended()
            if self._baton == FREE:
                self._wake_idle_reader()


def _check_params(params: Any) -> None:
    if params is not None and not isinstance(params, dict | list):
        raise LocalProtocolError(
            f"params must be a JSON object, an array or None, not {type(params).__name__}"
        )
