"""The two queues of a connection: frames to write, notifications to handle.

:class:`Outbox` sits between senders and the single writer task.

Two lanes share one FIFO, so the wire order is the order of enqueueing:

- :meth:`Outbox.put` (notifications, requests) waits while the queue is at
  its limit, in frames or in bytes: a peer that stops reading slows the
  senders down instead of growing memory. Waiting is cancellable and
  nothing is enqueued then.
- :meth:`Outbox.put_nowait` (replies and ``$/cancel_request``) never waits:
  each reply answers a request the peer is waiting on, so their number is
  bounded by the requests in flight, and a cancelled task must be able to
  send its reply without reaching a checkpoint.

The writer takes everything queued at once and writes it with one
``send_all``, which coalesces bursts of small frames. When the writer is idle
and nothing is queued, a frame is written at once by the sender itself with
a non-blocking ``os.write`` (for streams over a file descriptor): that saves
two task switches per message on request/reply traffic. What such a write
leaves over (a full pipe) is queued first, so the order never changes.
Bursts are not written frame by frame: the cancels that one cancelled scope
makes are put between :meth:`Outbox.hold` and :meth:`Outbox.release` (one
write), and the ``-32800`` replies of many handlers cancelled at once go to
the writer, which writes them together (:meth:`Outbox.reply_due`).

:class:`Inbox` sits between the reader and the notification consumer: the
reader waits (reading pauses) only while it is full.

Both are cheaper than memory channels on the hot path: putting into a queue
that has room does not switch tasks on every item, so a burst is handed over
and written (or handled) in batches. Every async sender of the connection
still yields (``notify`` through ``put(checkpoint=True)``, a request while
it waits for its reply or, for ``open_request``, once it is sent), so a
sender in a tight loop lets the writer run; ``put`` is always cancellable.
What never yields is ``put_nowait`` / ``try_put``, for the synchronous
forms (``notify_nowait``) and the frames that must go out from a task being
cancelled.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from typing import Final, Generic, TypeVar

import trio

from acp_trio._exceptions import ConnectionClosed

__all__ = ["Inbox", "Outbox"]

T = TypeVar("T")

_HOLD: Final = 1
_TO_WRITER: Final = 2


class _Queue(Generic[T]):
    """What the two queues share: items in order, a limit, and one parking
    lot for the task that takes them (the consumer, parked only while the
    queue is empty) and one for the tasks that put them (producers, parked
    only while it is full)."""

    __slots__ = ("_closed", "_consumer", "_items", "_limit", "_producer")

    def __init__(self, limit: int, what: str) -> None:
        if limit < 1:
            raise ValueError(f"{what} limit must be positive")
        self._items: deque[T] = deque()
        self._limit = limit
        self._closed = False
        self._consumer = trio.lowlevel.ParkingLot()
        self._producer = trio.lowlevel.ParkingLot()

    def __len__(self) -> int:
        return len(self._items)

    @property
    def full(self) -> bool:
        """Whether the queue is at its limit (a ``put`` would wait)."""
        return len(self._items) >= self._limit

    @property
    def closed(self) -> bool:
        return self._closed

    def clear(self) -> int:
        """Drop everything queued; return how many."""
        dropped = len(self._items)
        self._items.clear()
        self._producer.unpark_all()
        return dropped

    def close(self) -> None:
        """No more items; the consumer drains what is queued, then stops."""
        self._closed = True
        self._consumer.unpark_all()
        self._producer.unpark_all()


class Outbox(_Queue[bytes]):
    """Frames to write: its consumer is the writer task, its producers the
    senders waiting for room."""

    __slots__ = ("_bytes", "_direct", "_due", "_held", "_joins", "_max_bytes", "_trace")

    def __init__(
        self,
        limit: int,
        *,
        max_bytes: int | None = None,
        direct_write: Callable[[bytes], int] | None = None,
        joins: bool = False,
        trace: Callable[[bytes], None] | None = None,
    ) -> None:
        """``direct_write(data)`` writes what it can without blocking and
        returns how many bytes; with ``joins``, ``data`` may be several
        frames joined (a byte stream; not a message stream, where each frame
        is one message); ``trace(frame)`` sees every frame accepted, in wire
        order."""
        super().__init__(limit, "outbox")
        # The bytes queued, and how many make it full as ``limit`` frames do.
        self._bytes = 0
        self._max_bytes: float = math.inf if max_bytes is None else max_bytes
        self._direct = direct_write
        self._joins = joins
        self._trace = trace
        # 0: a frame put while the writer is idle is written at once;
        # with _HOLD: frames wait for release() (one write for all of them);
        # with _TO_WRITER: frames go to the writer until it takes a batch.
        self._held = 0
        # Replies due (reply_due) since the last write.
        self._due = 0

    @property
    def full(self) -> bool:
        """Whether the queue is at its limit, in frames or in bytes."""
        return len(self._items) >= self._limit or self._bytes >= self._max_bytes

    def clear(self) -> int:
        self._bytes = 0
        return super().clear()

    @property
    def writes_directly(self) -> bool:
        """Whether a frame put while the writer is idle is written at once,
        by the sender (a stream over a file descriptor)."""
        return self._direct is not None

    def put_nowait(self, frame: bytes) -> bool:
        """Enqueue regardless of the limit; ``False`` if the outbox is closed."""
        if self._closed:
            return False
        if self._trace is not None:
            self._trace(frame)
        direct = self._direct
        if direct is not None and self._consumer and not self._items and not self._held:
            # The writer is parked on an empty queue: nobody else is writing.
            # (_write_directly's lines: one call less for each frame.)
            self._due = 0
            try:
                written = direct(frame)
            except OSError:
                written = 0  # the writer's send_all meets the error and reports it
            if written < len(frame):
                self._items.append(frame[written:])
                self._consumer.unpark()
            return True
        self._items.append(frame)
        self._bytes += len(frame)
        if self._consumer and not self._held & _HOLD:
            self._consumer.unpark()
        return True

    def hold(self) -> None:
        """Until :meth:`release`, frames put are only queued (the caller puts
        a burst of them, synchronously: the cancels of one cancelled scope)."""
        self._held |= _HOLD

    def release(self) -> None:
        """End :meth:`hold`: what was put meanwhile goes out in one write
        (at once, if the writer is idle and writing directly is possible)."""
        self._held &= ~_HOLD
        frames = self._items
        if not frames or not self._consumer:
            return  # (the writer was busy: it takes them)
        if self._direct is not None and not self._held and (self._joins or len(frames) == 1):
            data = b"".join(frames) if len(frames) > 1 else frames[0]
            frames.clear()
            self._bytes = 0
            self._write_directly(data)
        else:
            self._consumer.unpark()

    def reply_due(self) -> None:
        """A reply is due from a task about to run (a handler just
        cancelled). From the second one due before anything is written, the
        frames put go to the writer until it next takes a batch: a burst of
        replies from many tasks (a cancelled fan-out) is then written at
        once, instead of once per frame, and a lone one still goes out at
        once."""
        self._due += 1
        if self._due > 1 and self._direct is not None:
            self._held |= _TO_WRITER

    def _write_directly(self, data: bytes) -> None:
        assert self._direct is not None
        self._due = 0
        try:
            written = self._direct(data)
        except OSError:
            written = 0  # the writer's send_all meets the error and reports it
        if written < len(data):
            self._items.append(data[written:])
            self._bytes += len(data) - written
            self._consumer.unpark()

    def try_put(self, frame: bytes) -> bool:
        """Enqueue if there is room, without waiting or yielding; ``False``
        means: nothing was queued (full or closed)."""
        if len(self._items) >= self._limit or self._bytes >= self._max_bytes or self._closed:
            return False
        return self.put_nowait(frame)

    async def put(self, frame: bytes, *, checkpoint: bool = False) -> None:
        """Enqueue, waiting while the queue is full; with ``checkpoint``,
        always yield to the scheduler (waiting for room yields too).

        Raises :class:`ConnectionClosed` if the outbox is (or gets) closed.
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        parked = False
        while (
            len(self._items) >= self._limit or self._bytes >= self._max_bytes
        ) and not self._closed:
            await self._producer.park()
            parked = True
        if not self.put_nowait(frame):
            raise ConnectionClosed("connection closed")
        if checkpoint and not parked:
            await trio.lowlevel.cancel_shielded_checkpoint()

    async def get_batch(self) -> list[bytes] | None:
        """Everything queued, in order; waits while empty. ``None`` once the
        outbox is closed and drained."""
        while not self._items:
            if self._closed:
                return None
            await self._consumer.park()
        batch = list(self._items)
        self._items.clear()
        self._bytes = 0
        self._due = 0
        self._held &= ~_TO_WRITER
        if self._producer:
            self._producer.unpark_all()
        return batch


class Inbox(_Queue[T]):
    """Items read but not yet handled, for one consumer, in order: its
    producer is the reader."""

    __slots__ = ("_drained",)

    def __init__(self, limit: int) -> None:
        super().__init__(limit, "inbox")
        # The consumer was told the end (get() returned None).
        self._drained = False

    # The consumer parks only on an empty inbox and the producer only on a
    # full one, so only the item that ends either state may have to wake it.

    def put_nowait(self, item: T) -> bool:
        """Queue ``item`` if there is room; ``False`` (nothing queued) when
        the inbox is full or closed."""
        items = self._items
        if self._closed or len(items) >= self._limit:
            return False
        items.append(item)
        if len(items) == 1 and self._consumer:
            self._consumer.unpark()
        return True

    def put_always(self, item: T) -> bool:
        """Queue ``item`` even past the limit (an item of our own, not read
        from the peer), also after :meth:`close` while the consumer has not
        seen the end; ``False`` once it has."""
        if self._drained:
            return False
        self._items.append(item)
        if len(self._items) == 1 and self._consumer:
            self._consumer.unpark()
        return True

    def get_nowait(self) -> T | None:
        """The next item if one is queued, else ``None``."""
        items = self._items
        if not items:
            return None
        item = items.popleft()
        if len(items) == self._limit - 1 and self._producer:
            self._producer.unpark()
        return item

    async def put(self, item: T) -> bool:
        """Queue ``item``, waiting while full; ``False`` once closed.

        Not a schedule point when there is room (the caller, the reader,
        reaches one at its next read; it calls this only once
        :meth:`put_nowait` found the inbox full)."""
        while len(self._items) >= self._limit and not self._closed:
            await self._producer.park()
        # Not closed, so not drained: put_always queues it.
        return not self._closed and self.put_always(item)

    async def get(self) -> T | None:
        """The next item, waiting while empty; ``None`` once closed and
        drained."""
        while not self._items:
            if self._closed:
                self._drained = True
                return None
            await self._consumer.park()
        item = self._items.popleft()
        if len(self._items) == self._limit - 1 and self._producer:
            self._producer.unpark()
        return item
