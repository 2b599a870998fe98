"""We cancel a request we sent: scopes, deadlines, ``open_request`` with
``cancel_and_wait()`` and ``detach()``, cascades through nested handlers, the
per-request timeout, and the request tree while all that is in flight."""

from __future__ import annotations

import logging
from typing import Any

import pytest
import trio

from acp_trio import RequestError
from acp_trio.lowlevel import CancelCause, RequestContext, RequestNode

from .conftest import (
    LIMIT,
    FnHandler,
    assert_idle,
    cancel,
    cancelled,
    connection_pair,
    ok,
    raw_connection,
    req,
    settle,
    sleep_forever_handler,
)


def warnings_in(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


@pytest.mark.parametrize("how", ["move_on_after", "fail_after"])
async def test_cancelled_call_sends_one_cancel_and_drops_the_late_reply(
    autojump_clock: Any, caplog: pytest.LogCaptureFixture, how: str
) -> None:
    outcome: list[Any] = []
    with trio.fail_after(LIMIT):
        async with raw_connection() as (conn, peer, wire), trio.open_nursery() as nursery:

            async def caller() -> None:
                if how == "move_on_after":
                    with trio.move_on_after(5) as scope:
                        await conn.call("slow", {"x": 1})
                    outcome.append(("cancelled", scope.cancelled_caught, trio.current_time()))
                else:
                    try:
                        with trio.fail_after(5):
                            await conn.call("slow", {"x": 1})
                    except trio.TooSlowError:
                        outcome.append(("cancelled", True, trio.current_time()))

            nursery.start_soon(caller)
            assert await peer.receive() == req(0, "slow", {"x": 1})
            assert await peer.receive() == cancel(0)
            assert trio.current_time() == 5
            await settle()
            # The caller did not wait for the peer's answer.
            assert outcome == [("cancelled", True, 5)]
            assert conn.statistics().outgoing_pending == 0
            assert conn.request_tree() == []
            # The peer answers anyway (a buggy one even twice): dropped quietly.
            await peer.send(ok(0, "late"), cancelled(0))
            await peer.expect_silence(5)
            assert outcome == [("cancelled", True, 5)]
            assert wire.sent_cancels() == [0]
            assert wire.sent() == [req(0, "slow", {"x": 1}), cancel(0)]
            # The connection carries on.
            nursery.start_soon(conn.call, "next")
            assert await peer.receive() == req(1, "next")
            await peer.send(ok(1, None))
            await settle()
            assert_idle(conn)
    assert warnings_in(caplog) == []


async def test_cancel_and_wait_collects_a_partial_result(autojump_clock: Any) -> None:
    async def work(ctx: RequestContext, params: Any) -> Any:
        ctx.cooperative = True
        await ctx.cancel_requested.wait()
        return {"partial": params}

    with trio.fail_after(LIMIT):
        async with connection_pair(None, FnHandler({"work": work})) as (a, b, wire_a, wire_b):
            async with a.open_request("work", [1, 2]) as pending:
                assert pending.id == 0
                assert pending.method == "work"
                assert not pending.done
                await trio.sleep(1)
                assert not pending.cancel_sent
                assert await pending.cancel_and_wait() == {"partial": [1, 2]}
                assert pending.done
                assert pending.cancel_sent
                # Reading the answer again gives the same answer.
                assert await pending.result() == {"partial": [1, 2]}
            await settle()
            assert wire_a.sent() == [req(0, "work", [1, 2]), cancel(0)]
            assert wire_b.sent() == [ok(0, {"partial": [1, 2]})]
            assert_idle(a)
            assert_idle(b)


async def test_cancel_and_wait_raises_request_cancelled(autojump_clock: Any) -> None:
    with trio.fail_after(LIMIT):
        async with raw_connection() as (conn, peer, wire), trio.open_nursery() as nursery:
            errors: list[RequestError] = []

            async def waiter() -> None:
                async with conn.open_request("work") as pending:
                    try:
                        await pending.cancel_and_wait()
                    except RequestError as exc:
                        errors.append(exc)

            nursery.start_soon(waiter)
            assert await peer.receive() == req(0, "work")
            assert await peer.receive() == cancel(0)
            await trio.sleep(3)
            assert errors == []  # it waits for the peer's answer
            await peer.send(cancelled(0))
            await settle()
            assert len(errors) == 1
            assert errors[0].code == -32800
            assert errors[0].is_cancelled
            assert errors[0].to_error_object() == cancelled(0)["error"]
            await peer.expect_silence(5)
            assert wire.sent_cancels() == [0]
            assert_idle(conn)


async def test_cancel_and_wait_bounded_by_a_timeout_abandons(
    autojump_clock: Any, caplog: pytest.LogCaptureFixture
) -> None:
    with trio.fail_after(LIMIT):
        async with raw_connection() as (conn, peer, wire), trio.open_nursery() as nursery:

            async def waiter() -> None:
                async with conn.open_request("work") as pending:
                    with trio.move_on_after(2):
                        await pending.cancel_and_wait()
                    assert not pending.done

            nursery.start_soon(waiter)
            assert await peer.receive() == req(0, "work")
            assert await peer.receive() == cancel(0)
            await peer.expect_silence(5)  # no second cancel when the block is left
            assert_idle(conn)
            await peer.send(cancelled(0))
            await peer.expect_silence(5)
            assert wire.sent_cancels() == [0]
    assert warnings_in(caplog) == []


async def test_detach_lets_the_peer_finish(
    autojump_clock: Any, caplog: pytest.LogCaptureFixture
) -> None:
    finished: list[Any] = []

    async def work(ctx: RequestContext, params: Any) -> Any:
        await trio.sleep(3)
        finished.append((ctx.cancel_cause, trio.current_time()))
        return "finished"

    with trio.fail_after(LIMIT):
        async with connection_pair(None, FnHandler({"work": work})) as (a, b, wire_a, wire_b):
            async with a.open_request("work") as pending:
                pending.detach()
            assert a.statistics().outgoing_pending == 0
            assert finished == []
            await trio.sleep(10)
            assert finished == [(None, 3)]
            assert wire_a.sent() == [req(0, "work")]
            assert wire_b.sent() == [ok(0, "finished")]
            assert wire_a.received() == [ok(0, "finished")]
            assert_idle(a)
            assert_idle(b)
    assert warnings_in(caplog) == []


async def test_leaving_open_request_cancels_once(autojump_clock: Any) -> None:
    with trio.fail_after(LIMIT):
        async with connection_pair(None, FnHandler({"*": sleep_forever_handler})) as (
            a,
            b,
            wire_a,
            wire_b,
        ):
            async with a.open_request("work") as pending:
                await trio.sleep(1)
            assert pending.cancel_sent
            await settle()
            assert wire_a.sent() == [req(0, "work"), cancel(0)]
            assert wire_b.sent() == [cancelled(0)]
            assert_idle(a)
            assert_idle(b)


async def test_three_level_cascade_cancelled_from_the_top(
    autojump_clock: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """A calls B (level1) -> B's handler calls A (level2) -> A's handler calls
    B (level3), which waits forever. A's caller gives up: every level is
    cancelled on the wire with its own ``$/cancel_request``, every request is
    answered, and the tree is visible from both sides while in flight."""
    causes: dict[str, CancelCause | None] = {}
    level3_running = trio.Event()

    async def level1(ctx: RequestContext, params: Any) -> Any:
        try:
            return await ctx.connection.call("level2")
        finally:
            causes["level1"] = ctx.cancel_cause

    async def level2(ctx: RequestContext, params: Any) -> Any:
        try:
            return await ctx.connection.call("level3")
        finally:
            causes["level2"] = ctx.cancel_cause

    async def level3(ctx: RequestContext, params: Any) -> Any:
        level3_running.set()
        try:
            await trio.sleep_forever()
        finally:
            causes["level3"] = ctx.cancel_cause

    handler_a = FnHandler({"level2": level2})
    handler_b = FnHandler({"level1": level1, "level3": level3})
    with trio.fail_after(LIMIT):
        async with connection_pair(handler_a, handler_b) as (a, b, wire_a, wire_b):
            async with trio.open_nursery() as nursery:

                async def top() -> None:
                    with trio.move_on_after(10) as scope:
                        await a.call("level1")
                    assert scope.cancelled_caught

                nursery.start_soon(top)
                await level3_running.wait()
                await settle()
                assert trio.current_time() < 10
                assert a.dump_request_tree() == (
                    "<- level2 id=0 [running]\n  -> level3 id=1 [pending]\n-> level1 id=0 [pending]"
                )
                assert b.dump_request_tree() == (
                    "<- level1 id=0 [running]\n  -> level2 id=0 [pending]\n<- level3 id=1 [running]"
                )
                tree = a.request_tree()
                assert tree == [
                    RequestNode(
                        "incoming",
                        0,
                        "level2",
                        "running",
                        (RequestNode("outgoing", 1, "level3", "pending"),),
                    ),
                    RequestNode("outgoing", 0, "level1", "pending"),
                ]
            assert trio.current_time() == 10
            await settle()
            assert wire_a.sent() == [
                req(0, "level1"),
                req(1, "level3"),
                cancel(0),  # A's caller gave up on level1
                cancel(1),  # A's level2 handler was cancelled: it cancels level3
                cancelled(0),  # ...and answers level2
            ]
            assert wire_b.sent() == [
                req(0, "level2"),
                cancel(0),  # B's level1 handler was cancelled: it cancels level2
                cancelled(0),  # ...and answers level1
                cancelled(1),  # level3 answered
            ]
            assert wire_a.received() == wire_b.sent()
            assert wire_b.received() == wire_a.sent()
            assert causes == {
                "level1": CancelCause.PEER,
                "level2": CancelCause.PEER,
                "level3": CancelCause.PEER,
            }
            assert a.dump_request_tree() == "(no requests in flight)"
            assert_idle(a)
            assert_idle(b)
    assert warnings_in(caplog) == []


async def test_request_timeout_answers_32800_and_cascades(
    autojump_clock: Any, caplog: pytest.LogCaptureFixture
) -> None:
    contexts: dict[str, RequestContext] = {}
    inner_running = trio.Event()

    async def outer(ctx: RequestContext, params: Any) -> Any:
        contexts["outer"] = ctx
        return await ctx.connection.call("inner")

    async def inner(ctx: RequestContext, params: Any) -> Any:
        contexts["inner"] = ctx
        inner_running.set()
        await trio.sleep_forever()

    async def quick(ctx: RequestContext, params: Any) -> Any:
        await trio.sleep(4)
        return "in time"

    handler_a = FnHandler({"inner": inner})
    handler_b = FnHandler({"outer": outer, "quick": quick})
    with trio.fail_after(LIMIT):
        async with connection_pair(handler_a, handler_b, config_b={"request_timeout": 5}) as (
            a,
            b,
            wire_a,
            wire_b,
        ):
            assert await a.call("quick") == "in time"
            start = trio.current_time()
            async with trio.open_nursery() as nursery:

                async def watch() -> None:
                    await inner_running.wait()
                    await settle()
                    assert b.dump_request_tree() == (
                        "<- outer id=1 [running]\n  -> inner id=0 [pending]"
                    )

                nursery.start_soon(watch)
                with pytest.raises(RequestError) as info:
                    await a.call("outer")
            assert info.value.code == -32800
            assert trio.current_time() - start == 5
            await settle()
            assert contexts["outer"].cancel_cause is CancelCause.DEADLINE
            assert contexts["inner"].cancel_cause is CancelCause.PEER
            assert wire_b.sent() == [
                ok(0, "in time"),
                req(0, "inner"),
                cancel(0),
                cancelled(1),
            ]
            assert wire_a.sent() == [req(0, "quick"), req(1, "outer"), cancelled(0)]
            assert_idle(a)
            assert_idle(b)
    assert warnings_in(caplog) == []


async def test_request_tree_outgoing_outside_handlers(autojump_clock: Any) -> None:
    with trio.fail_after(LIMIT):
        async with raw_connection() as (conn, peer, _), trio.open_nursery() as nursery:
            assert conn.request_tree() == []
            assert conn.dump_request_tree() == "(no requests in flight)"
            nursery.start_soon(conn.call, "first")
            assert await peer.receive() == req(0, "first")
            async with conn.open_request("second") as pending:
                assert await peer.receive() == req(1, "second")
                assert conn.dump_request_tree() == (
                    "-> first id=0 [pending]\n-> second id=1 [pending]"
                )
                results: list[Any] = []

                async def cancel_and_wait() -> None:
                    results.append(await pending.cancel_and_wait())

                nursery.start_soon(cancel_and_wait)
                assert await peer.receive() == cancel(1)
                assert conn.dump_request_tree() == (
                    "-> first id=0 [pending]\n-> second id=1 [cancel sent]"
                )
                await peer.send(ok(1, 2), ok(0, 1))
                await settle()
                assert results == [2]
            assert_idle(conn)
