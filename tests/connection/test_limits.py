"""``max_concurrent_requests``: beyond it requests wait their turn while
reading goes on; past ``max_queued_requests`` waiting, new requests are
refused at once. Reading never stops for requests."""

from __future__ import annotations

from typing import Any

import trio

from acp_trio.lowlevel import RequestContext

from .conftest import (
    LIMIT,
    FnHandler,
    assert_idle,
    cancel,
    cancelled,
    err,
    ok,
    raw_connection,
    req,
)


async def test_requests_beyond_the_limit_wait_and_can_still_be_cancelled(
    autojump_clock: Any,
) -> None:
    started: list[Any] = []

    async def work(ctx: RequestContext, params: Any) -> Any:
        started.append((ctx.id, trio.current_time()))
        await trio.sleep(params[0])
        return ctx.id

    with trio.fail_after(LIMIT):
        async with raw_connection(FnHandler({"work": work}), max_concurrent_requests=2) as (
            conn,
            peer,
            _,
        ):
            await peer.send(
                req(1, "work", [5]),
                req(2, "work", [10]),
                req(3, "work", [1]),
                cancel(3),
                req(4, "work", [1]),
            )
            # 3 waited for a slot; its cancel was read at once and answered
            # without running any user code.
            assert await peer.receive() == cancelled(3)
            assert trio.current_time() == 0
            assert sorted(started) == [(1, 0), (2, 0)]
            assert conn.statistics().incoming_in_flight == 3
            assert await peer.receive() == ok(1, 1)
            assert trio.current_time() == 5
            # A slot freed: 4 runs.
            assert await peer.receive() == ok(4, 4)
            assert trio.current_time() == 6
            assert await peer.receive() == ok(2, 2)
            assert sorted(i for i, _ in started) == [1, 2, 4]
            await peer.expect_silence(5)
            assert_idle(conn)


async def test_reading_goes_on_when_more_wait_than_run(autojump_clock: Any) -> None:
    """More requests waiting than running: the reply the running handler
    waits for is still read (once, this deadlocked both peers)."""
    started: list[Any] = []

    async def ask(ctx: RequestContext, params: Any) -> Any:
        started.append(ctx.id)
        return await ctx.connection.call("question", {"for": ctx.id})

    with trio.fail_after(LIMIT):
        async with raw_connection(FnHandler({"ask": ask}), max_concurrent_requests=1) as (
            conn,
            peer,
            _,
        ):
            await peer.send(req(1, "ask"), req(2, "ask"), req(3, "ask"))
            assert await peer.receive() == req(0, "question", {"for": 1})
            assert started == [1]
            assert conn.statistics().incoming_in_flight == 3
            for call_id, request_id in [(0, 1), (1, 2), (2, 3)]:
                await peer.send(ok(call_id, f"yes {request_id}"))
                assert await peer.receive() == ok(request_id, f"yes {request_id}")
                if request_id < 3:
                    assert await peer.receive() == req(
                        call_id + 1, "question", {"for": request_id + 1}
                    )
            assert started == [1, 2, 3]
            await peer.expect_silence(5)
            assert_idle(conn)


async def test_a_full_waiting_room_refuses_and_reading_goes_on(autojump_clock: Any) -> None:
    """Past ``max_queued_requests`` a request is refused at once; cancels and
    the end of the stream are still read."""

    async def work(ctx: RequestContext, params: Any) -> Any:
        await trio.sleep(params[0])
        return ctx.id

    refusal = err(
        4, -32603, "Too many requests", {"maxConcurrentRequests": 1, "maxQueuedRequests": 2}
    )
    with trio.fail_after(LIMIT):
        async with raw_connection(
            FnHandler({"work": work}), max_concurrent_requests=1, max_queued_requests=2
        ) as (conn, peer, _):
            await peer.send(*(req(i, "work", [100]) for i in range(1, 5)))
            # 1 runs, 2 and 3 wait, 4 is refused without running.
            assert await peer.receive() == refusal
            assert trio.current_time() == 0
            # A cancel of a waiting request is read and answered at once.
            await peer.send(cancel(3))
            assert await peer.receive() == cancelled(3)
            # Room again: 5 waits its turn.
            await peer.send(req(5, "work", [1]))
            await peer.send(cancel(1))
            assert await peer.receive() == cancelled(1)
            assert await peer.receive(within=200) == ok(2, 2)
            assert trio.current_time() == 100
            assert await peer.receive() == ok(5, 5)
            await peer.expect_silence(5)
            assert_idle(conn)
            # The end of the stream is read while requests wait, too.
            await peer.send(*(req(i, "work", [1000]) for i in range(6, 9)))
            await peer.close_send()
            assert sorted(m["id"] for m in [await peer.receive() for _ in range(3)]) == [6, 7, 8]
            await peer.expect_eof()
        assert conn.closed


async def test_handlers_at_the_limit_can_still_get_replies(autojump_clock: Any) -> None:
    async def ask(ctx: RequestContext, params: Any) -> Any:
        return await ctx.connection.call("question")

    with trio.fail_after(LIMIT):
        async with raw_connection(FnHandler({"ask": ask}), max_concurrent_requests=1) as (
            _,
            peer,
            _,
        ):
            await peer.send(req(1, "ask"), req(2, "ask"))
            assert await peer.receive() == req(0, "question")
            await peer.send({"jsonrpc": "2.0", "id": 0, "result": "yes"})
            assert await peer.receive() == ok(1, "yes")
