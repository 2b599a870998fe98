"""The outbox's direct-write path keeps wire order, whatever a write takes."""

from __future__ import annotations

from typing import Any

import trio
import trio.testing

from acp_trio._core._outbox import Outbox


class FakePipe:
    """The outbox's direct writer: a pipe that takes ``budget`` more bytes
    before it is full, recording each write (the writer task's too)."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.writes: list[bytes] = []

    def __call__(self, data: bytes) -> int:
        n = min(self.budget, len(data))
        self.budget -= n
        self.writes.append(data[:n])
        return n

    @property
    def wire(self) -> bytes:
        return b"".join(self.writes)


async def write_batches(
    outbox: Outbox, batches: list[list[bytes]], wire: list[bytes] | None = None
) -> None:
    """The writer task: records each batch (and, with ``wire``, its one
    write) until the outbox is closed and drained."""
    while (batch := await outbox.get_batch()) is not None:
        batches.append(batch)
        if wire is not None:
            wire.append(b"".join(batch))


async def test_direct_writes_only_while_the_writer_is_idle_and_keep_order(
    autojump_clock: Any,
) -> None:
    pipe = FakePipe(5)
    traced: list[bytes] = []
    outbox = Outbox(16, direct_write=pipe, trace=traced.append)
    # No writer parked: nothing may be written directly.
    assert outbox.put_nowait(b"a\n")
    assert pipe.wire == b""
    assert await outbox.get_batch() == [b"a\n"]
    pipe.writes.append(b"a\n")

    batches: list[list[bytes]] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(write_batches, outbox, batches, pipe.writes)
        await trio.testing.wait_all_tasks_blocked()
        # The writer is parked on an empty queue: a frame goes straight out,
        # and what the full pipe did not take is queued first.
        assert outbox.put_nowait(b"bbbbbbbb\n")
        assert pipe.wire == b"a\nbbbbb"
        assert outbox.put_nowait(b"c\n")  # queued behind the remainder
        await trio.testing.wait_all_tasks_blocked()
        assert batches == [[b"bbb\n", b"c\n"]]
        outbox.close()
    assert pipe.wire == b"a\nbbbbbbbb\nc\n"
    assert traced == [b"a\n", b"bbbbbbbb\n", b"c\n"]
