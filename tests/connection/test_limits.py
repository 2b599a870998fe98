"""``max_concurrent_requests``: beyond it requests wait their turn while
reading goes on; reading pauses only when more wait than run."""

from __future__ import annotations

from typing import Any

import trio

from acp_trio import RequestContext

from .conftest import (
    LIMIT,
    FnHandler,
    assert_idle,
    cancel,
    cancelled,
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
            await peer.expect_silence()
            assert_idle(conn)


async def test_reading_pauses_when_more_wait_than_run(autojump_clock: Any) -> None:
    started: list[Any] = []

    async def work(ctx: RequestContext, params: Any) -> Any:
        started.append(ctx.id)
        await trio.sleep(params[0])
        return ctx.id

    with trio.fail_after(LIMIT):
        async with raw_connection(FnHandler({"work": work}), max_concurrent_requests=1) as (
            conn,
            peer,
            _,
        ):
            await peer.send(*(req(i, "work", [5 if i == 1 else 1]) for i in range(1, 5)))
            await trio.sleep(1)
            # 1 runs, 2 and 3 wait, and reading stopped before 4.
            assert started == [1]
            assert conn.statistics().incoming_in_flight == 3
            for i in range(1, 5):
                assert await peer.receive() == ok(i, i)
            assert trio.current_time() == 8
            assert started == [1, 2, 3, 4]
            await peer.expect_silence()
            assert_idle(conn)


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
