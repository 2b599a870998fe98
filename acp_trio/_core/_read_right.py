"""The read right: who reads the stream now. Someone always reads.

The reader task reads, except between the moment it hands a reply to a
waiting caller (with nothing else read and not yet taken) and the moment that
caller is done with it. Then the reader *parks*, the right is free, and the
caller, resumed, either gives it back at once or, if it makes its next call
first (in the same step), *takes* it and reads for that call's reply itself.
The reply then reaches the caller in the caller's own step, without a pass
of the scheduler between the reader and the caller (measured with
``benchmarks/bench_sdks.py read``; the numbers are in the CHANGELOG); the
reader, woken by the give-back, only finds the right taken and parks again.

The invariant, kept by every path through this class: the right is never
free for longer than one step of the task that made it free or was woken by
it. Whoever finds it free and does not read calls :meth:`ReadRight.wake`; a
caller that took it gives it back (:meth:`ReadRight.give_back`, which wakes
the reader) when it stops: its reply came, it was cancelled, the stream
ended, or it read what only the reader may act on (handed back with the
right: see :attr:`ReadRight.handed_back`). A caller that makes its next call
in the same step takes the right again before the woken reader runs: the
reader then finds it taken and parks again.

Callers read only on a stock :class:`FramedStream` reading a pipe, or on a
:class:`BufferedMessageStream` (our WebSocket): both can be interrupted, which
:meth:`ReadRight.close` does (``ConnectionConfig.callers_read_replies``).
"""

from __future__ import annotations

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
                await trio.lowlevel.wait_task_rescheduled(self._unpark)
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
            return True
        return False

    def give_back(self, handed_back: RequestReceived[Any] | None) -> None:
        """A reading caller stops reading, handing back the request it read
        if it stopped for one: the reader reads again (acting on that request
        first)."""
        if handed_back is not None:
            self.handed_back = handed_back  # (none was: take() saw to it)
        self._holder = _FREE
        self.wake()

    def wake(self) -> None:
        """If the right is free, the parked reader takes it back (whoever
        finds it free and does not read calls this)."""
        if self._holder == _FREE and (task := self._parked) is not None:
            self._parked = None
            trio.lowlevel.reschedule(task)

    def close(self) -> None:
        """Closing: a caller waiting to read is woken (it finds its call
        settled), and nobody takes the right again."""
        self._closed = True
        if self._holder == _CALLER and self._pipe is not None:
            self._pipe.interrupt_reading()
