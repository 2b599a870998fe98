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


async def test_frames_put_while_held_go_out_in_one_write(autojump_clock: Any) -> None:
    pipe = FakePipe(1 << 20)
    traced: list[bytes] = []
    outbox = Outbox(16, direct_write=pipe, joins=True, trace=traced.append)
    batches: list[list[bytes]] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(write_batches, outbox, batches, pipe.writes)
        await trio.testing.wait_all_tasks_blocked()
        outbox.hold()
        for frame in (b"a\n", b"b\n", b"c\n"):
            assert outbox.put_nowait(frame)
        assert pipe.writes == []  # nothing yet, and the writer was not woken
        outbox.release()
        assert pipe.writes == [b"a\nb\nc\n"]
        # Released: the next frame goes out at once again, on its own.
        assert outbox.put_nowait(b"d\n")
        assert pipe.writes == [b"a\nb\nc\n", b"d\n"]
        await trio.testing.wait_all_tasks_blocked()
        assert batches == []
        outbox.close()
    assert traced == [b"a\n", b"b\n", b"c\n", b"d\n"]


async def test_held_frames_of_a_message_stream_go_to_the_writer(autojump_clock: Any) -> None:
    # A direct writer that sends each frame as one message cannot take
    # frames joined: the writer sends them, as a batch of messages.
    pipe = FakePipe(1 << 20)
    outbox = Outbox(16, direct_write=pipe, joins=False)
    batches: list[list[bytes]] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(write_batches, outbox, batches)
        await trio.testing.wait_all_tasks_blocked()
        outbox.hold()
        assert outbox.put_nowait(b"a\n")
        assert outbox.put_nowait(b"b\n")
        outbox.release()
        assert pipe.writes == []
        await trio.testing.wait_all_tasks_blocked()
        assert batches == [[b"a\n", b"b\n"]]
        # One frame held alone is still written at once.
        outbox.hold()
        assert outbox.put_nowait(b"c\n")
        outbox.release()
        assert pipe.writes == [b"c\n"]
        outbox.close()


async def test_held_frames_behind_a_busy_writer_are_left_to_it(autojump_clock: Any) -> None:
    pipe = FakePipe(1 << 20)
    outbox = Outbox(16, direct_write=pipe, joins=True)
    outbox.hold()
    assert outbox.put_nowait(b"a\n")
    outbox.release()  # no writer parked: it takes them when it comes
    assert pipe.writes == []
    assert await outbox.get_batch() == [b"a\n"]


async def test_a_burst_of_replies_due_goes_to_the_writer(autojump_clock: Any) -> None:
    pipe = FakePipe(1 << 20)
    outbox = Outbox(16, direct_write=pipe)
    batches: list[list[bytes]] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(write_batches, outbox, batches, pipe.writes)
        await trio.testing.wait_all_tasks_blocked()
        # One reply due: it still goes out at once.
        outbox.reply_due()
        assert outbox.put_nowait(b"a\n")
        assert pipe.writes == [b"a\n"]
        # Two due before anything is written: the frames wait for the writer,
        # which writes them together.
        outbox.reply_due()
        outbox.reply_due()
        assert outbox.put_nowait(b"b\n")
        assert outbox.put_nowait(b"c\n")
        assert pipe.writes == [b"a\n"]
        await trio.testing.wait_all_tasks_blocked()
        assert batches == [[b"b\n", b"c\n"]]
        assert pipe.writes == [b"a\n", b"b\nc\n"]
        # The writer took them: frames go out at once again.
        assert outbox.put_nowait(b"d\n")
        assert pipe.writes == [b"a\n", b"b\nc\n", b"d\n"]
        outbox.close()
