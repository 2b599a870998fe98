"""``send_request()`` and ``open_request()`` with the output queue full: the
wait for room is their checkpoint (no second yield after it), and the request
goes out, after what was queued before it, once the peer reads."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from acp_trio.lowlevel import PendingRequest

from .conftest import LIMIT, raw_connection


@pytest.mark.parametrize("how", ["send_request", "open_request"])
async def test_a_send_that_waits_for_room_is_a_checkpoint_and_goes_out(how: str) -> None:
    # (No autojump clock: it would pass the write timeout while the peer does
    # not read.)
    with trio.fail_after(LIMIT):
        async with raw_connection(
            stream_pair=trio.testing.lockstep_stream_pair, outbox_limit=2
        ) as (conn, peer, _wire):
            # The writer takes a first note and waits for the peer to read it;
            # then the queue fills.
            conn.notify_nowait("note", {"n": 0})
            await trio.testing.wait_all_tasks_blocked()
            queued = 1
            while True:
                try:
                    conn.notify_nowait("note", {"n": queued})
                except trio.WouldBlock:
                    break
                queued += 1
            sent: list[PendingRequest] = []

            async def send() -> None:
                with trio.testing.assert_checkpoints():
                    if how == "send_request":
                        pending = await conn.send_request("m", {"x": 1})
                    else:
                        async with conn.open_request("m", {"x": 1}) as pending:
                            pending.detach()
                sent.append(pending)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(send)
                await trio.testing.wait_all_tasks_blocked()
                assert sent == []  # waiting for room
                notes = [(await peer.receive())["params"]["n"] for _ in range(queued)]
                request = await peer.receive()
            assert notes == list(range(queued))
            assert request["method"] == "m"
            assert request["params"] == {"x": 1}
            assert [p.id for p in sent] == [request["id"]]
