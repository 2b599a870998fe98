"""``Connection.notify_nowait``: the synchronous form of ``notify`` for
bursts. At the output limit it raises ``trio.WouldBlock`` and sends nothing;
it is never a checkpoint, so a loop of them is stopped by its own
checkpoints (here the ``notify`` it falls back to when the queue is full)."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from acp_trio import ConnectionClosed, LocalProtocolError
from acp_trio.lowlevel import Connection, RequestContext

from .conftest import LIMIT, FnHandler, cancel, raw_connection, req


async def test_at_the_limit_it_raises_and_sends_nothing(autojump_clock: Any) -> None:
    with trio.fail_after(LIMIT):
        # Lockstep: the writer's first write waits for the peer to read, so
        # the queue fills while we do not read.
        async with raw_connection(
            stream_pair=trio.testing.lockstep_stream_pair, outbox_limit=4
        ) as (conn, peer, wire):
            sent = 0
            with trio.testing.assert_no_checkpoints():
                for n in range(10):
                    try:
                        conn.notify_nowait("note", {"n": n})
                    except trio.WouldBlock:
                        break
                    sent += 1
            assert sent == 4
            # Nothing of the refused one: only the four reach the peer.
            got = [(await peer.receive())["params"]["n"] for _ in range(4)]
            assert got == [0, 1, 2, 3]
            await peer.expect_silence(1)
            assert [m["params"]["n"] for m in wire.sent()] == [0, 1, 2, 3]
            # Room again once the writer got the queue out.
            await trio.testing.wait_all_tasks_blocked()
            conn.notify_nowait("note", {"n": 4})
            assert (await peer.receive())["params"]["n"] == 4


async def test_it_refuses_bad_params_and_a_closed_connection(autojump_clock: Any) -> None:
    with trio.fail_after(LIMIT):
        async with raw_connection() as (conn, _peer, _wire):
            with pytest.raises(LocalProtocolError, match="params must be"):
                conn.notify_nowait("note", "a string")  # type: ignore[arg-type]
        with pytest.raises(ConnectionClosed):
            conn.notify_nowait("note", {})


async def test_a_loop_of_them_stops_at_its_own_checkpoints_when_cancelled(
    autojump_clock: Any,
) -> None:
    counts: list[int] = []
    conns: list[Connection] = []

    async def stream(ctx: RequestContext, params: Any) -> Any:
        (conn,) = conns
        n = 0
        try:
            while True:
                try:
                    conn.notify_nowait("chunk", {"n": n})
                except trio.WouldBlock:
                    await conn.notify("chunk", {"n": n})  # waits for room: a checkpoint
                n += 1
        finally:
            counts.append(n)

    with trio.fail_after(LIMIT):
        async with raw_connection(
            FnHandler({"stream": stream}),
            stream_pair=trio.testing.lockstep_stream_pair,
            outbox_limit=8,
        ) as (conn, peer, _wire):
            conns.append(conn)
            await peer.send(req(7, "stream"))
            chunks = [(await peer.receive())["params"]["n"] for _ in range(20)]
            await peer.send(cancel(7))
            reply = await peer.receive_response(7)
            assert reply["error"]["code"] == -32800
            chunks += [(await peer.receive())["params"]["n"] for _ in peer.queued]
            # The loop ended at the cancel: nothing follows the answer.
            await peer.expect_silence(1)
    # Every chunk it counted as sent arrived, in order, and no other.
    assert chunks == list(range(counts[0]))
    assert len(chunks) >= 20


async def test_notify_and_open_request_are_checkpoints_every_time(autojump_clock: Any) -> None:
    async def echo(ctx: RequestContext, params: Any) -> Any:
        return params

    with trio.fail_after(LIMIT):
        async with raw_connection(FnHandler({"echo": echo})) as (conn, _peer, _wire):
            for n in range(200):  # more than any batch between yields
                with trio.testing.assert_checkpoints():
                    await conn.notify("note", {"n": n})
                with trio.testing.assert_checkpoints():
                    async with conn.open_request("x", {"n": n}) as pending:
                        pending.detach()
