"""Who reads: over a pipe, a caller waiting for its reply reads it itself.

The reader task reads, except between the moment it hands a reply to a
waiting caller (with nothing else read and not yet taken) and the moment that
caller is done with it. Then the reader parks, reading is *free*, and the
caller, resumed, either wakes the reader at once or, if it makes its next
call first (in the same step), reads for that call's reply itself. A round
trip then costs one task step instead of two: the reply wakes the caller
directly, without waiting for the scheduler's next pass (measured with
``benchmarks/bench_sdks.py read``: about 16 % more sequential round trips
per second; the numbers are in the CHANGELOG).

The invariant, kept by every path below: reading is never free for longer
than one step of the task that made it free or was woken by it. Whoever
finds it free and does not read wakes the parked reader (``call``,
``_await_reply`` and their error paths); a caller that reads gives it back
and wakes the reader when it stops (its reply came, it was cancelled, the
stream ended, or it met what only the reader may handle).

A caller reading handles every frame as the reader would, except two things
it gives back to the reader: an incoming request (the reader may run its
handler eagerly, which a caller must not) and a notification when the
consumer's queue is full (the reader waits for room; a caller could be
cancelled while it waits). Only on a stock :class:`FramedStream` reading a
pipe, or on a :class:`BufferedMessageStream` (our WebSocket), which can both
be interrupted (``ConnectionConfig.callers_read_replies``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import trio

from acp_trio._core._framed import FramedStream, FrameTransport
from acp_trio._core._handler import TraceHook
from acp_trio._core._message_stream import MessageTransport
from acp_trio._core._ordering import _Queued
from acp_trio._core._outbox import Inbox
from acp_trio._core._requests import _WAITING, PendingRequest, RequestContext
from acp_trio._jsonrpc import (
    CancelReceived,
    IncomingRequest,
    NotificationReceived,
    Peer,
    ReplyReceived,
    RequestId,
    SendFrame,
)
from acp_trio._jsonrpc._peer import Event

__all__ = ["CALLER", "FREE", "READER", "CallerReads"]

# Who reads (CallerReads._baton).
READER: Final = 0  # the reader task
CALLER: Final = 1  # a caller, for its own reply
FREE: Final = 2  # nobody: the reader is parked, and whoever it woke wakes it


class CallerReads:
    """The connection's "who reads" part (a part of ``Connection``)."""

    if TYPE_CHECKING:
        _stream: FrameTransport
        _peer: Peer[RequestContext, PendingRequest]
        _inbox: Inbox[_Queued]
        _trace: TraceHook | None
        _closed: bool
        _notifications_received: int

        def _on_notification(self, method: str, params: Any) -> _Queued | None: ...
        def _on_cancel_request(self, entry: IncomingRequest[RequestContext]) -> None: ...
        def _put_reply(self, request_id: RequestId, frame: bytes) -> None: ...
        def _request_shutdown(self, reason: str, cause: BaseException | None) -> None: ...

    def _init_caller_reads(self, pipe: FramedStream | MessageTransport | None) -> None:
        """``pipe``: the connection's stream if callers may read it (a stock
        FramedStream reading a pipe, or a MessageTransport over a
        BufferedMessageStream), else ``None``."""
        self._pipe = pipe
        self._give_up = pipe is not None
        self._baton = READER
        self._idle_reader: trio.lowlevel.Task | None = None
        #: An event a caller read and gives back to the reader, which acts
        #: on it before reading anything else (an incoming request).
        self._handed_back: Event[RequestContext, PendingRequest] | None = None

    # The reader's side

    async def _give_up_reading(self) -> bool:
        """The reader parks until reading is its own again; ``False`` once
        the connection is closing."""
        self._baton = FREE
        try:
            while True:
                self._idle_reader = trio.lowlevel.current_task()
                await trio.lowlevel.wait_task_rescheduled(self._abort_idle_reader)
                if self._closed:
                    return False
                if self._baton == FREE:
                    self._baton = READER
                    return True
                # A caller is reading: it wakes us when it is done.
        except BaseException:
            if self._baton == FREE:
                self._baton = READER  # (cancelled: we are closing)
            raise

    def _abort_idle_reader(self, _: Any) -> trio.lowlevel.Abort:
        self._idle_reader = None
        return trio.lowlevel.Abort.SUCCEEDED

    def _wake_idle_reader(self) -> None:
        task = self._idle_reader
        if task is not None:
            self._idle_reader = None
            trio.lowlevel.reschedule(task)

    def _interrupt_caller_reading(self) -> None:
        """Closing: a caller waiting to read is woken (it finds its call
        settled). Nothing is read after this."""
        if self._baton == CALLER and self._pipe is not None:
            self._pipe.interrupt_reading()

    # The caller's side

    def _may_read_for(self) -> bool:
        """Whether a caller about to wait may read for its reply."""
        return (
            self._give_up
            and self._baton == FREE
            and self._handed_back is None
            and not self._stream.frames_pending
        )

    async def _read_for(self, pending: PendingRequest) -> None:
        """Read (as the reader would) until ``pending`` is settled, the
        stream ends, this task is cancelled, or a frame needs the reader;
        then give reading back and wake the reader."""
        self._baton = CALLER
        try:
            await self._read_until(pending)
        finally:
            self._baton = FREE
            self._wake_idle_reader()

    async def _read_until(self, pending: PendingRequest) -> None:
        stream = self._stream
        receive = self._peer.receive
        inbox = self._inbox
        trace = self._trace
        try:
            while pending._state == _WAITING:
                if inbox.full:
                    return  # the reader waits for room, not a caller
                frame = stream.receive_frame_nowait()
                if frame is None and (frame := await stream.receive_frame()) is None:
                    self._request_shutdown("the peer closed the connection", None)
                    return
                if self._closed:
                    return
                if trace is not None and type(frame) is bytes:
                    trace("recv", frame)
                event = receive(frame)
                del frame
                if event is None:
                    continue
                if type(event) is ReplyReceived:
                    handle = event.entry.handle
                    if handle is not None:
                        handle._settle(event.result, event.error, self._notifications_received)
                elif type(event) is NotificationReceived:
                    item = self._on_notification(event.method, event.params)
                    if item is not None:
                        put = inbox.put_nowait(item)
                        assert put, "checked above: the inbox had room"
                elif type(event) is CancelReceived:
                    self._on_cancel_request(event.entry)
                elif type(event) is SendFrame:
                    self._put_reply(event.request_id, event.data)
                else:
                    # An incoming request: the reader acts on it first thing.
                    self._handed_back = event
                    return
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            self._request_shutdown(f"connection lost while reading: {exc!r}", exc)
