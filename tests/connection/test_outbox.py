"""The outbox's direct-write path keeps wire order, whatever a write takes."""

from __future__ import annotations

from typing import Any

import trio
import trio.testing

from acp_trio._outbox import Outbox


async def test_direct_writes_only_while_the_writer_is_idle_and_keep_order(
    autojump_clock: Any,
) -> None:
    wire = bytearray()
    budget = [5]  # bytes the "pipe" accepts before it is full

    def direct(data: bytes) -> int:
        n = min(budget[0], len(data))
        budget[0] -= n
        wire.extend(data[:n])
        return n

    traced: list[bytes] = []
    outbox = Outbox(16, direct_write=direct, trace=traced.append)
    # No writer parked: nothing may be written directly.
    assert outbox.put_nowait(b"a\n")
    assert wire == b""
    assert await outbox.get_batch() == [b"a\n"]
    wire.extend(b"a\n")

    async with trio.open_nursery() as nursery:
        batches: list[list[bytes]] = []

        async def writer() -> None:
            while (batch := await outbox.get_batch()) is not None:
                batches.append(batch)
                wire.extend(b"".join(batch))

        nursery.start_soon(writer)
        await trio.testing.wait_all_tasks_blocked()
        # The writer is parked on an empty queue: a frame goes straight out,
        # and what the full pipe did not take is queued first.
        assert outbox.put_nowait(b"bbbbbbbb\n")
        assert wire == b"a\nbbbbb"
        assert outbox.put_nowait(b"c\n")  # queued behind the remainder
        await trio.testing.wait_all_tasks_blocked()
        assert batches == [[b"bbb\n", b"c\n"]]
        outbox.close()
    assert bytes(wire) == b"a\nbbbbbbbb\nc\n"
    assert traced == [b"a\n", b"bbbbbbbb\n", b"c\n"]
