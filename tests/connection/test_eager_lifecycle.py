"""Eager handlers, continued: closing, nested calls, many handlers and slots,
what ``request_received`` and deadlines do to a request run eagerly, and a
scope kept by a handler that never waited (see ``test_eager.py``)."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.lowlevel

from acp_trio.lowlevel import CancelCause, RequestContext, current_request

from .conftest import (
    LIMIT,
    FnHandler,
    assert_idle,
    cancel,
    cancelled,
    connection_pair,
    notif,
    ok,
    raw_connection,
    req,
    settle,
)
from .eager_tasks import HANDLER, READER, both_ways, task_names, this_task

# ---------------------------------------------------------------------------
# Closing, nested calls, many handlers, slots, replies


@pytest.mark.parametrize("how", ["leave the block", "aclose"])
async def test_closing_cancels_a_waiting_eager_handler(autojump_clock: Any, how: str) -> None:
    causes: list[CancelCause | None] = []
    names: list[str] = []

    async def work(ctx: RequestContext, params: Any) -> Any:
        names.append(this_task().name)
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            causes.append(ctx.cancel_cause)
            raise

    with trio.fail_after(LIMIT):
        async with raw_connection(FnHandler({"work": work})) as (conn, peer, wire):
            await peer.send(req(1, "work"))
            await settle()
            assert conn.statistics().incoming_in_flight == 1
            if how == "aclose":
                await conn.aclose()
                assert conn.closed
        assert trio.current_time() == 0
        assert await peer.receive() == cancelled(1)
        await peer.expect_eof()
        assert names == [READER]
        assert causes == [CancelCause.SHUTDOWN]
        assert wire.sent() == [cancelled(1)]
        assert_idle(conn)


async def test_cancelling_a_nested_call_from_an_eager_handler(autojump_clock: Any) -> None:
    inner_started = trio.Event()
    a_causes: list[CancelCause | None] = []
    b_causes: list[CancelCause | None] = []
    b_seen: dict[str, Any] = {}

    async def inner(ctx: RequestContext, params: Any) -> Any:
        inner_started.set()
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            a_causes.append(ctx.cancel_cause)
            raise

    async def outer(ctx: RequestContext, params: Any) -> Any:
        b_seen["found"] = current_request() is ctx
        b_seen["task"] = this_task()
        try:
            return await ctx.connection.call("inner", {"from": "b"})
        except trio.Cancelled:
            b_causes.append(ctx.cancel_cause)
            raise

    with trio.fail_after(LIMIT):
        async with connection_pair(FnHandler({"inner": inner}), FnHandler({"outer": outer})) as (
            conn_a,
            conn_b,
            wire_a,
            wire_b,
        ):
            scope = trio.CancelScope()

            async def caller() -> None:
                with scope:
                    await conn_a.call("outer")

            async with trio.open_nursery() as nursery:
                nursery.start_soon(caller)
                await inner_started.wait()
                await settle()
                assert b_seen["found"] is True
                assert b_seen["task"].name == READER
                [node] = conn_b.request_tree()
                assert (node.direction, node.id, node.method) == ("incoming", 0, "outer")
                assert [(c.direction, c.id, c.method) for c in node.children] == [
                    ("outgoing", 0, "inner")
                ]
                scope.cancel()
            await settle()
            assert scope.cancelled_caught
            assert wire_a.sent_cancels() == [0]
            assert wire_b.sent_cancels() == [0]
            assert b_causes == [CancelCause.PEER]
            assert a_causes == [CancelCause.PEER]
            assert wire_b.sent_responses() == [cancelled(0)]
            assert wire_a.sent_responses() == [cancelled(0)]
            assert_idle(conn_a)
            assert_idle(conn_b)


async def test_many_waiting_eager_handlers(autojump_clock: Any) -> None:
    n = 50
    release = trio.Event()
    tasks: list[trio.lowlevel.Task] = []

    async def work(ctx: RequestContext, params: Any) -> Any:
        tasks.append(this_task())
        await release.wait()
        return params["n"]

    with trio.fail_after(LIMIT):
        async with raw_connection(FnHandler({"work": work})) as (conn, peer, _):
            for i in range(n):
                await peer.send(req(i, "work", {"n": i}))
                await settle()
            assert conn.statistics().incoming_in_flight == n
            assert len(set(tasks)) == n
            # The first ran eagerly and waited: the rest of its method got
            # tasks of their own.
            assert [t.name for t in tasks] == [READER] + [HANDLER] * (n - 1)
            names = task_names()
            assert names[READER] == 2
            assert names[HANDLER] == n - 1
            release.set()
            replies = [await peer.receive() for _ in range(n)]
            assert sorted(replies, key=lambda r: r["id"]) == [ok(i, i) for i in range(n)]
            await settle()
            assert task_names()[READER] == 1
            assert_idle(conn)


@both_ways
async def test_a_waiting_eager_handler_holds_its_slot(autojump_clock: Any, eager: bool) -> None:
    release = trio.Event()
    started = trio.Event()
    log: list[str] = []

    async def slow(ctx: RequestContext, params: Any) -> Any:
        log.append("slow")
        started.set()
        await release.wait()
        return "slow"

    async def quick(ctx: RequestContext, params: Any) -> Any:
        log.append("quick")
        return "quick"

    handler = FnHandler({"slow": slow, "quick": quick})
    with trio.fail_after(LIMIT):
        async with raw_connection(handler, eager_handlers=eager, max_concurrent_requests=1) as (
            conn,
            peer,
            _,
        ):
            await peer.send(req(1, "slow"))
            await started.wait()
            await peer.send(req(2, "quick"))
            await peer.expect_silence(5)
            assert log == ["slow"]
            assert conn.statistics().incoming_in_flight == 2
            release.set()
            assert [await peer.receive() for _ in range(2)] == [ok(1, "slow"), ok(2, "quick")]
            assert log == ["slow", "quick"]
            assert_idle(conn)


async def test_a_reply_then_a_waiting_request_in_one_chunk_keeps_reading(
    autojump_clock: Any,
) -> None:
    """The reader wakes a caller with a reply, then runs the request behind
    it eagerly, which waits: the new reader must still read the next reply
    (it once parked for good, waiting for the long-gone caller)."""
    results: list[Any] = []
    both_answered = trio.Event()
    names: list[str] = []

    async def hold(ctx: RequestContext, params: Any) -> Any:
        names.append(this_task().name)
        await trio.sleep_forever()

    with trio.fail_after(LIMIT):
        async with raw_connection(FnHandler({"hold": hold})) as (conn, peer, _):

            async def call(method: str) -> None:
                results.append(await conn.call(method))
                if len(results) == 2:
                    both_answered.set()

            async with trio.open_nursery() as nursery:
                nursery.start_soon(call, "first")
                assert await peer.receive() == req(0, "first")
                nursery.start_soon(call, "second")
                assert await peer.receive() == req(1, "second")
                await settle()
                await peer.send(ok(0, "one"), req("h", "hold"))
                await settle()
                await peer.send(ok(1, "two"))
                with trio.move_on_after(30):
                    await both_answered.wait()
                assert results == ["one", "two"]
            assert names == [READER]
            await peer.send(cancel("h"))
            assert await peer.receive() == cancelled("h")
            assert_idle(conn)


# ---------------------------------------------------------------------------
# What request_received and the deadline do to a request run eagerly


class _Prepare(FnHandler):
    """Acts on ``request_received``: ``refuse`` is cancelled there, ``short``
    gets a one-second deadline on its scope."""

    def request_received(self, ctx: RequestContext, params: Any) -> None:
        if ctx.method == "refuse":
            ctx.request_cancel()
        elif ctx.method == "short":
            ctx.cancel_scope.deadline = trio.current_time() + 1


@both_ways
async def test_a_request_cancelled_in_request_received_never_runs(
    autojump_clock: Any, eager: bool
) -> None:
    calls: list[str] = []

    async def work(ctx: RequestContext, params: Any) -> Any:
        calls.append(ctx.method)
        return "ran"

    with trio.fail_after(LIMIT):
        async with raw_connection(_Prepare({"*": work}), eager_handlers=eager) as (conn, peer, _):
            await peer.send(req(1, "refuse"))
            assert await peer.receive() == cancelled(1)
            assert calls == []
            assert_idle(conn)


@both_ways
async def test_a_deadline_set_in_request_received_applies(autojump_clock: Any, eager: bool) -> None:
    async def work(ctx: RequestContext, params: Any) -> Any:
        await trio.sleep(5)
        return "slept"

    with trio.fail_after(LIMIT):
        async with raw_connection(_Prepare({"*": work}), eager_handlers=eager) as (conn, peer, _):
            await peer.send(req(1, "short"))
            assert await peer.receive() == cancelled(1)
            assert trio.current_time() == 1
            assert_idle(conn)


@both_ways
async def test_cancel_requested_is_set_when_the_deadline_passes(
    autojump_clock: Any, eager: bool
) -> None:
    events: list[trio.Event] = []

    async def slow(ctx: RequestContext, params: Any) -> Any:
        events.append(ctx.cancel_requested)
        await trio.sleep(10)
        return "late"  # pragma: no cover - must not happen

    handler = FnHandler({"slow": slow})
    with trio.fail_after(LIMIT):
        async with raw_connection(handler, eager_handlers=eager, request_timeout=2) as (
            conn,
            peer,
            _,
        ):
            await peer.send(req(1, "slow"))
            assert await peer.receive() == cancelled(1)
            await settle()
            assert events[0].is_set()
            assert_idle(conn)


# ---------------------------------------------------------------------------
# A scope kept by a handler that never waited


@both_ways
async def test_a_kept_scope_cancelled_later_cancels_nothing_else(
    autojump_clock: Any, eager: bool
) -> None:
    """Running eagerly, a handler's scope is the reader's until it waits; one
    it keeps (and cancels after it answered) must not reach a later request."""
    kept: list[trio.CancelScope] = []

    async def start(ctx: RequestContext, params: Any) -> Any:
        kept.append(ctx.cancel_scope)
        return "started"

    async def work(ctx: RequestContext, params: Any) -> Any:
        await trio.sleep(5)
        return "done"

    with trio.fail_after(LIMIT):
        async with raw_connection(
            FnHandler({"start": start, "work": work}), eager_handlers=eager
        ) as (conn, peer, _):
            await peer.send(req(1, "start"))
            assert await peer.receive() == ok(1, "started")
            await peer.send(req(2, "work"))
            await settle()
            kept[0].cancel()
            assert await peer.receive() == ok(2, "done")
            assert_idle(conn)


async def test_a_kept_scope_cancelled_while_the_inbox_is_full_loses_nothing(
    autojump_clock: Any,
) -> None:
    kept: list[trio.CancelScope] = []
    gate = trio.Event()

    async def start(ctx: RequestContext, params: Any) -> Any:
        kept.append(ctx.cancel_scope)
        return "started"

    async def note(method: str, params: Any) -> None:
        await gate.wait()

    handler = FnHandler({"start": start}, {"note": note})
    with trio.fail_after(LIMIT):
        async with raw_connection(handler, max_queued_notifications=2) as (conn, peer, _):
            await peer.send(req(1, "start"))
            assert await peer.receive() == ok(1, "started")
            await peer.send(*[notif("note", {"n": i}) for i in range(5)])
            await settle()  # the reader waits for room in the inbox
            kept[0].cancel()
            await settle()
            gate.set()
            await settle()
            assert [p["n"] for _, p in handler.seen] == list(range(5))
            assert_idle(conn)
