"""The read right: who reads the stream now. Someone always reads.

The reader task reads, except between the moment it hands a reply to a
waiting caller (with nothing else read and not yet taken) and the moment that
caller is done with it. Then the reader *parks*, the right is free, and the
caller, resumed, either lets it go or, if it makes its next call first (in
the same step), *takes* it and reads for that call's reply itself. The reply
then reaches the caller in the caller's own step, without a pass of the
scheduler between the reader and the caller (measured with
``benchmarks/bench_sdks.py read``; the numbers are in the CHANGELOG), and the
reader sleeps on (see below).

The invariant, kept by every path through this class: the right is never
free past the end of the batch of task steps in which it was made free (or
in which the task it was made free for ran). Whoever finds it free and
waits without reading calls :meth:`ReadRight.wake` (the reader is
rescheduled); a caller that took it gives it back
(:meth:`ReadRight.give_back`) when it stops: its reply came, it was
cancelled, the stream ended, or it read what only the reader may act on
(handed back with the right: see :attr:`ReadRight.handed_back`, and the
reader is rescheduled).

A caller whose reply came runs on, and usually makes its next call in the
same step, taking the right again. So a give-back with nothing handed back
does not reschedule the reader; it *arms* the reader's wait
(:meth:`ReadRight.wake_soon`): the wait's cancel scope gets a deadline
already past, which the run loop acts on right after this batch of steps,
waking the reader; a caller that takes the right first lifts the deadline
again, and the reader sleeps on. A calling agent's round trip is then one
task step and one I/O wait, as a bare Trio program's, with no instrument on
Trio's scheduling: only the public cancel-scope deadline.

Callers read only on a stock :class:`FramedStream` reading a pipe, or on a
:class:`BufferedMessageStream` (our WebSocket): both can be interrupted, which
:meth:`ReadRight.close` does (``ConnectionConfig.callers_read_replies``).
"""

from __future__ import annotations

import math
from typing import Any, Final, Protocol, final

import trio

from acp_trio._jsonrpc import RequestReceived

__all__ = ["Interruptible", "ReadRight"]

_READER: Final = 0  # the reader task reads
_CALLER: Final = 1  # a caller reads, for its own reply
_FREE: Final = 2  # nobody: the reader is parked, and whoever it woke wakes it


class Interruptible(Protocol):
    """A stream a caller may read: one whose pending read can be cut short."""

    @property
    def frames_pending(self) -> bool: ...

    def interrupt_reading(self) -> None: ...


@final
class ReadRight:
    """Who reads: the reader task, or a caller waiting for its own reply.

    The one place that keeps the rule "someone always reads"."""

    __slots__ = (
        "_alarm",
        "_armed",
        "_closed",
        "_holder",
        "_parked",
        "_pipe",
        "enabled",
        "handed_back",
    )

    def __init__(self, *, pipe: Interruptible | None) -> None:
        # pipe: the stream, if callers may read it; else callers never do.
        self._pipe = pipe
        #: Whether the reader may ever give the right away.
        self.enabled = pipe is not None
        self._holder = _READER
        self._parked: trio.lowlevel.Task | None = None
        # The parked reader's wait's own scope, and whether its deadline is
        # set (past: the run loop wakes the reader after this batch).
        self._alarm: trio.CancelScope | None = None
        self._armed = False
        self._closed = False
        #: A request a reading caller read and handed back to the reader
        #: (which may run it eagerly, and a caller must not): the reader
        #: takes it (:meth:`take_handed_back`) before reading anything else.
        self.handed_back: RequestReceived[Any] | None = None

    # The reader's side

    async def park(self) -> bool:
        """The reader lets the right go and waits until it is its own again;
        ``False`` once the right is closed (stop reading)."""
        self._holder = _FREE
        try:
            while True:
                self._parked = trio.lowlevel.current_task()
                alarm = self._alarm = trio.CancelScope()
                with alarm:
                    await trio.lowlevel.wait_task_rescheduled(self._unpark)
                # (Rescheduled by wake(), or its deadline passed: wake_soon().)
                self._alarm = None
                self._armed = False
                if self._closed:
                    return False
                if self._holder == _FREE:
                    self._holder = _READER
                    return True
                # A caller took it: it wakes us when it gives it back.
        except BaseException:
            if self._holder == _FREE:
                self._holder = _READER  # (cancelled: we are closing)
            raise

    def _unpark(self, _: Any) -> trio.lowlevel.Abort:
        self._parked = None
        return trio.lowlevel.Abort.SUCCEEDED

    def take_handed_back(self) -> RequestReceived[Any]:
        """The request a reading caller handed back (the reader, when
        :attr:`handed_back` is set)."""
        event = self.handed_back
        assert event is not None
        self.handed_back = None
        return event

    # The caller's side

    def take(self) -> bool:
        """A caller about to wait for its reply takes the right, if it is
        free and nothing read waits to be acted on; ``True`` if it did (it
        reads, then calls :meth:`give_back`)."""
        if (
            self._holder == _FREE
            and self.handed_back is None
            and self._pipe is not None
            and not self._pipe.frames_pending
        ):
            self._holder = _CALLER
            if self._armed:
                # (The reader sleeps on: we read.)
                self._armed = False
                assert self._alarm is not None
                self._alarm.deadline = math.inf
            return True
        return False

    def give_back(self, handed_back: RequestReceived[Any] | None) -> None:
        """A reading caller stops reading, handing back the request it read
        if it stopped for one: the reader reads again (acting on that request
        first, woken at once), or, with nothing handed back, after this
        batch of steps unless the caller takes the right again first."""
        self._holder = _FREE
        if handed_back is not None:
            self.handed_back = handed_back  # (none was: take() saw to it)
            self.wake()
        else:
            self.wake_soon()

    def wake(self) -> None:
        """If the right is free, the parked reader takes it back (whoever
        finds it free and waits without reading calls this)."""
        if self._holder == _FREE and (task := self._parked) is not None:
            self._parked = None
            if self._armed:
                self._armed = False
                assert self._alarm is not None
                self._alarm.deadline = math.inf
            trio.lowlevel.reschedule(task)

    def wake_soon(self) -> None:
        """If the right is free, the parked reader takes it back after the
        current batch of task steps, unless a caller takes it first (whoever
        makes it free or finds it free and runs on calls this)."""
        if (
            self._holder == _FREE
            and not self._armed
            and self._parked is not None
            and (alarm := self._alarm) is not None
        ):
            self._armed = True
            alarm.deadline = -math.inf

    def close(self) -> None:
        """Closing: a caller waiting to read is woken (it finds its call
        settled), and nobody takes the right again."""
        self._closed = True
        if self._holder == _CALLER and self._pipe is not None:
            self._pipe.interrupt_reading()
