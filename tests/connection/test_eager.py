"""Eager handlers: the reader runs each request's handler itself, and hands
reading over to a new reader task at the handler's first checkpoint.

What is checked: which task runs a handler (``trio.lowlevel.current_task()``
and the task tree), that a handler which never waits leaves no trace on the
reader (its cancel scope, deadline, shield, context variables, a kept
:class:`RequestContext`), the fallback to a handler task when frames wait
behind the request or ``eager_handlers=False``, and that cancellation,
deadlines and closing work as they do for a handler task. The tests that are
about results, not tasks, run both ways (``eager``): handlers must see no
difference.
"""

from __future__ import annotations

import math
from typing import Any

import trio
import trio.lowlevel

from acp_trio import RequestError
from acp_trio.lowlevel import CancelCause, RequestContext, current_request

from .conftest import (
    LIMIT,
    FnHandler,
    assert_idle,
    cancel,
    cancelled,
    err,
    notif,
    ok,
    raw_connection,
    req,
    settle,
)
from .eager_tasks import HANDLER, READER, _var, all_tasks, both_ways, task_names, this_task

# ---------------------------------------------------------------------------
# Which task runs a handler


async def test_a_handler_that_never_waits_runs_in_the_reader_task(autojump_clock: Any) -> None:
    tasks: list[trio.lowlevel.Task] = []
    found: list[bool] = []

    async def double(ctx: RequestContext, params: Any) -> Any:
        tasks.append(this_task())
        found.append(current_request() is ctx)
        return {"n": params["n"] * 2}

    with trio.fail_after(LIMIT):
        async with raw_connection(FnHandler({"double": double})) as (conn, peer, wire):
            await settle()
            before = task_names()
            await peer.send(req(1, "double", {"n": 1}))
            assert await peer.receive() == ok(1, {"n": 2})
            await peer.send(req(2, "double", {"n": 5}))
            assert await peer.receive() == ok(2, {"n": 10})
            assert len(tasks) == 2
            assert tasks[0] is tasks[1]
            assert tasks[0].name == READER
            assert found == [True, True]
            assert current_request() is None
            # No task was started: still the one reader, no handler tasks.
            await settle()
            assert task_names() == before
            assert before[READER] == 1
            assert before[HANDLER] == 0
            assert wire.sent() == [ok(1, {"n": 2}), ok(2, {"n": 10})]
            assert_idle(conn)


async def test_a_handler_that_waits_hands_reading_to_a_new_reader(autojump_clock: Any) -> None:
    release = trio.Event()
    started = trio.Event()
    seen: dict[str, Any] = {}

    async def slow(ctx: RequestContext, params: Any) -> Any:
        seen["slow before"] = this_task()
        started.set()
        await release.wait()
        seen["slow after"] = this_task()
        seen["slow found"] = current_request() is ctx
        return "slow"

    async def quick(ctx: RequestContext, params: Any) -> Any:
        seen["quick"] = this_task()
        seen["quick found"] = current_request() is ctx
        return "quick"

    handler = FnHandler({"slow": slow, "quick": quick})
    with trio.fail_after(LIMIT):
        async with raw_connection(handler) as (conn, peer, wire):
            await settle()
            first_reader = [t for t in all_tasks() if t.name == READER]
            assert len(first_reader) == 1
            await peer.send(req(1, "slow"))
            await started.wait()
            await settle()
            # The old reader carries on as the handler of request 1.
            assert seen["slow before"] is first_reader[0]
            assert task_names()[READER] == 2
            assert task_names()[HANDLER] == 0
            await peer.send(req(2, "quick"))
            assert await peer.receive() == ok(2, "quick")
            await peer.send(notif("note", {"n": 1}))
            await settle()
            assert handler.seen == [("note", {"n": 1})]
            assert seen["quick"] is not seen["slow before"]
            assert seen["quick"].name == READER
            assert seen["quick found"] is True
            assert conn.statistics().incoming_in_flight == 1
            release.set()
            assert await peer.receive() == ok(1, "slow")
            assert seen["slow after"] is seen["slow before"]
            assert seen["slow found"] is True
            await settle()
            assert task_names()[READER] == 1
            assert wire.sent() == [ok(2, "quick"), ok(1, "slow")]
            assert_idle(conn)


async def test_without_eager_handlers_every_request_gets_a_handler_task(
    autojump_clock: Any,
) -> None:
    release = trio.Event()
    tasks: dict[str, trio.lowlevel.Task] = {}

    async def slow(ctx: RequestContext, params: Any) -> Any:
        tasks["slow"] = this_task()
        await release.wait()
        return "slow"

    async def quick(ctx: RequestContext, params: Any) -> Any:
        tasks[f"quick {params['n']}"] = this_task()
        return params["n"]

    handler = FnHandler({"slow": slow, "quick": quick})
    with trio.fail_after(LIMIT):
        async with raw_connection(handler, eager_handlers=False) as (conn, peer, wire):
            await peer.send(req(1, "quick", {"n": 1}))
            assert await peer.receive() == ok(1, 1)
            await peer.send(req(2, "slow"))
            await settle()
            assert task_names()[HANDLER] == 1
            assert task_names()[READER] == 1
            await peer.send(req(3, "quick", {"n": 3}))
            assert await peer.receive() == ok(3, 3)
            release.set()
            assert await peer.receive() == ok(2, "slow")
            assert [t.name for t in tasks.values()] == [HANDLER] * 3
            assert len(set(tasks.values())) == 3
            await settle()
            assert task_names()[HANDLER] == 0
            assert wire.sent() == [ok(1, 1), ok(3, 3), ok(2, "slow")]
            assert_idle(conn)


async def test_a_request_with_frames_behind_it_gets_a_handler_task(autojump_clock: Any) -> None:
    names: dict[int, str] = {}

    async def work(ctx: RequestContext, params: Any) -> Any:
        names[params["n"]] = this_task().name
        return params["n"]

    with trio.fail_after(LIMIT):
        async with raw_connection(FnHandler({"work": work})) as (conn, peer, _):
            # One chunk: only the last request has nothing read behind it.
            await peer.send(
                req(1, "work", {"n": 1}), req(2, "work", {"n": 2}), req(3, "work", {"n": 3})
            )
            replies = [await peer.receive() for _ in range(3)]
            assert sorted(replies, key=lambda r: r["id"]) == [ok(1, 1), ok(2, 2), ok(3, 3)]
            assert names == {1: HANDLER, 2: HANDLER, 3: READER}
            assert_idle(conn)


async def test_cancel_in_the_same_chunk_never_runs_user_code(autojump_clock: Any) -> None:
    calls: list[Any] = []

    async def work(ctx: RequestContext, params: Any) -> Any:
        calls.append(params)
        return "ran"

    with trio.fail_after(LIMIT):
        async with raw_connection(FnHandler({"work": work})) as (conn, peer, _):
            await peer.send(req(1, "work", {"n": 1}), cancel(1))
            assert await peer.receive() == cancelled(1)
            await peer.expect_silence(5)
            assert calls == []
            await peer.send(req(2, "work", {"n": 2}), cancel(2), req(3, "work", {"n": 3}))
            replies = [await peer.receive() for _ in range(2)]
            assert sorted(replies, key=lambda r: r["id"]) == [cancelled(2), ok(3, "ran")]
            assert calls == [{"n": 3}]
            assert_idle(conn)


async def test_a_task_started_by_an_eager_handler_belongs_to_its_request(
    autojump_clock: Any,
) -> None:
    seen: list[tuple[bool, str]] = []

    async def child(ctx: RequestContext) -> None:
        await trio.sleep(1)
        seen.append((current_request() is ctx, _var.get()))

    async def work(ctx: RequestContext, params: Any) -> Any:
        _var.set("work")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(child, ctx)
        return "done"

    with trio.fail_after(LIMIT):
        async with raw_connection(FnHandler({"work": work})) as (conn, peer, _):
            await peer.send(req(1, "work"))
            assert await peer.receive() == ok(1, "done")
            assert seen == [(True, "work")]
            assert_idle(conn)


# ---------------------------------------------------------------------------
# What a handler that never waits leaves behind


@both_ways
async def test_context_variables_stay_with_the_handler(autojump_clock: Any, eager: bool) -> None:
    release = trio.Event()
    started = trio.Event()

    async def set_and_return(ctx: RequestContext, params: Any) -> Any:
        before = _var.get()
        _var.set(params["v"])
        return before

    async def set_and_wait(ctx: RequestContext, params: Any) -> Any:
        before = _var.get()
        _var.set(params["v"])
        started.set()
        await release.wait()
        return [before, _var.get()]

    async def read(ctx: RequestContext, params: Any) -> Any:
        return _var.get()

    handler = FnHandler({"set": set_and_return, "wait": set_and_wait, "read": read})
    token = _var.set("outer")
    try:
        with trio.fail_after(LIMIT):
            async with raw_connection(handler, eager_handlers=eager) as (conn, peer, _):
                await peer.send(req(1, "set", {"v": "one"}))
                assert await peer.receive() == ok(1, "outer")
                await peer.send(req(2, "read"))
                assert await peer.receive() == ok(2, "outer")
                await peer.send(req(3, "wait", {"v": "three"}))
                await started.wait()
                await peer.send(req(4, "read"))
                assert await peer.receive() == ok(4, "outer")
                release.set()
                assert await peer.receive() == ok(3, ["outer", "three"])
                await peer.send(req(5, "read"))
                assert await peer.receive() == ok(5, "outer")
                assert _var.get() == "outer"
                assert_idle(conn)
    finally:
        _var.reset(token)


@both_ways
async def test_a_handler_that_cancels_its_scope_and_returns_is_answered(
    autojump_clock: Any, eager: bool
) -> None:
    tasks: list[trio.lowlevel.Task] = []

    async def cancel_scope(ctx: RequestContext, params: Any) -> Any:
        tasks.append(this_task())
        ctx.cancel_scope.cancel()
        return "scope cancelled"

    async def cancel_request(ctx: RequestContext, params: Any) -> Any:
        tasks.append(this_task())
        ctx.request_cancel()
        return "request cancelled"

    async def sleepy(ctx: RequestContext, params: Any) -> Any:
        tasks.append(this_task())
        await trio.sleep(1)
        return "slept"

    handler = FnHandler({"scope": cancel_scope, "request": cancel_request, "sleepy": sleepy})
    with trio.fail_after(LIMIT):
        async with raw_connection(handler, eager_handlers=eager) as (conn, peer, _):
            await peer.send(req(1, "scope"))
            assert await peer.receive() == ok(1, "scope cancelled")
            start = trio.current_time()
            await peer.send(req(2, "sleepy"))
            assert await peer.receive() == ok(2, "slept")
            assert trio.current_time() == start + 1
            await peer.send(notif("note", {"n": 1}))
            await peer.send(req(3, "request"))
            assert await peer.receive() == ok(3, "request cancelled")
            await peer.send(req(4, "sleepy"))
            await peer.send(notif("note", {"n": 2}))
            assert await peer.receive() == ok(4, "slept")
            await peer.send(req(5, "scope"))
            assert await peer.receive() == ok(5, "scope cancelled")
            await settle()
            assert handler.seen == [("note", {"n": 1}), ("note", {"n": 2})]
            if eager:
                # The reader read on in the same task (in a fresh scope) until
                # a handler waited; the next "sleepy" (its method waited) got a
                # task of its own.
                assert tasks[0] is tasks[1]
                assert tasks[2] is tasks[4]
                assert tasks[1] is not tasks[2]
                assert [t.name for t in tasks] == [READER, READER, READER, "acp handler", READER]
            assert_idle(conn)


async def test_a_method_whose_handler_waited_starts_in_tasks_for_a_while(
    autojump_clock: Any,
) -> None:
    """After a handler run eagerly waits, the next requests of its method
    start in tasks of their own (a waiting eager handler holds the reader's
    frames); other methods stay eager; later the method is tried eagerly
    again."""
    names: list[tuple[str, str]] = []

    async def maybe_wait(ctx: RequestContext, params: Any) -> Any:
        names.append((ctx.method, this_task().name))
        if params["wait"]:
            await trio.sleep(1)
        return "ok"

    handler = FnHandler({"a": maybe_wait, "b": maybe_wait})
    with trio.fail_after(LIMIT):
        async with raw_connection(handler) as (conn, peer, _):
            await peer.send(req(0, "a", {"wait": True}))
            assert await peer.receive() == ok(0, "ok")
            # Requests of "a" (each followed by one of "b") until one of "a"
            # runs in the reader again.
            for i in range(1, 1000):
                await peer.send(req(i, "a", {"wait": False}))
                assert await peer.receive() == ok(i, "ok")
                if names[-1] == ("a", READER):
                    break
                await peer.send(req(f"b{i}", "b", {"wait": False}))
                assert await peer.receive() == ok(f"b{i}", "ok")
            a_names = [name for method, name in names if method == "a"]
            b_names = [name for method, name in names if method == "b"]
            skip = len(a_names) - 2
            assert skip > 1  # "for a while": more than the next request
            assert a_names == [READER] + ["acp handler"] * skip + [READER]
            assert b_names == [READER] * skip
            assert_idle(conn)


@both_ways
async def test_a_handler_that_cancels_its_scope_and_waits_is_answered_cancelled(
    autojump_clock: Any, eager: bool
) -> None:
    caught: list[bool] = []

    async def cancel_then_wait(ctx: RequestContext, params: Any) -> Any:
        ctx.cancel_scope.cancel()
        try:
            await trio.sleep(1)
        except trio.Cancelled:
            caught.append(True)
            raise
        return "late"  # pragma: no cover - must not happen

    async def sleepy(ctx: RequestContext, params: Any) -> Any:
        await trio.sleep(1)
        return "slept"

    handler = FnHandler({"cancel": cancel_then_wait, "sleepy": sleepy})
    with trio.fail_after(LIMIT):
        async with raw_connection(handler, eager_handlers=eager) as (conn, peer, wire):
            await peer.send(req(1, "cancel"))
            assert await peer.receive() == cancelled(1)
            assert caught == [True]
            assert trio.current_time() == 0
            await peer.send(req(2, "sleepy"))
            assert await peer.receive() == ok(2, "slept")
            await peer.expect_silence(5)
            assert wire.sent() == [cancelled(1), ok(2, "slept")]
            assert_idle(conn)


@both_ways
async def test_a_deadline_or_shield_set_by_a_quick_handler_does_not_stay(
    autojump_clock: Any, eager: bool
) -> None:
    scopes: list[tuple[float, bool, float]] = []
    started = trio.Event()

    async def set_deadline(ctx: RequestContext, params: Any) -> Any:
        ctx.cancel_scope.deadline = trio.current_time() + 1
        return "deadline"

    async def set_shield(ctx: RequestContext, params: Any) -> Any:
        ctx.cancel_scope.shield = True
        return "shield"

    async def sleepy(ctx: RequestContext, params: Any) -> Any:
        scope = ctx.cancel_scope
        scopes.append((scope.deadline, scope.shield, trio.current_effective_deadline()))
        started.set()
        await trio.sleep(params["t"])
        return "slept"

    handler = FnHandler({"deadline": set_deadline, "shield": set_shield, "sleepy": sleepy})
    with trio.fail_after(LIMIT):
        # The connection's tasks do not inherit the deadline around the
        # block (leaving the block ends them): a handler sees none but its own.
        outer = math.inf
        async with raw_connection(handler, eager_handlers=eager) as (conn, peer, _):
            await peer.send(req(1, "deadline"))
            assert await peer.receive() == ok(1, "deadline")
            start = trio.current_time()
            await peer.send(req(2, "sleepy", {"t": 5}))
            assert await peer.receive() == ok(2, "slept")
            assert trio.current_time() == start + 5

            await peer.send(req(3, "shield"))
            assert await peer.receive() == ok(3, "shield")
            started = trio.Event()
            await peer.send(req(4, "sleepy", {"t": 100}))
            await started.wait()
            await trio.sleep(3)
            start = trio.current_time()
            await peer.send(cancel(4))
            assert await peer.receive() == cancelled(4)
            assert trio.current_time() == start
            assert scopes == [(math.inf, False, outer)] * 2
            assert_idle(conn)


@both_ways
async def test_request_timeout_applies_to_eager_handlers(autojump_clock: Any, eager: bool) -> None:
    causes: list[tuple[CancelCause | None, float]] = []
    deadlines: list[float] = []
    kept: list[RequestContext] = []

    async def slow(ctx: RequestContext, params: Any) -> Any:
        kept.append(ctx)
        try:
            await trio.sleep(10)
        except trio.Cancelled:
            causes.append((ctx.cancel_cause, trio.current_time()))
            raise
        return "late"  # pragma: no cover - must not happen

    async def quick(ctx: RequestContext, params: Any) -> Any:
        kept.append(ctx)
        deadlines.append(trio.current_effective_deadline())
        return "quick"

    async def sleepy(ctx: RequestContext, params: Any) -> Any:
        await trio.sleep(1)
        return "slept"

    handler = FnHandler({"slow": slow, "quick": quick, "sleepy": sleepy})
    with trio.fail_after(LIMIT):
        async with raw_connection(handler, eager_handlers=eager, request_timeout=2) as (
            conn,
            peer,
            wire,
        ):
            await peer.send(req(1, "slow"))
            assert await peer.receive() == cancelled(1)
            assert trio.current_time() == 2
            assert causes == [(CancelCause.DEADLINE, 2)]

            await peer.send(req(2, "quick"))
            assert await peer.receive() == ok(2, "quick")
            assert deadlines == [2 + 2]
            await peer.expect_silence(5)
            await peer.send(req(3, "sleepy"))
            await peer.send(notif("note"))
            assert await peer.receive() == ok(3, "slept")
            await peer.send(req(4, "quick"))
            assert await peer.receive() == ok(4, "quick")
            assert deadlines == [4, trio.current_time() + 2]
            # The cause outlives the request; a quick one has none.
            assert [c.cancel_cause for c in kept] == [CancelCause.DEADLINE, None, None]
            await settle()
            assert handler.seen == [("note", None)]
            assert wire.sent() == [cancelled(1), ok(2, "quick"), ok(3, "slept"), ok(4, "quick")]
            assert_idle(conn)


@both_ways
async def test_a_kept_context_cancelled_late_disturbs_nothing(
    autojump_clock: Any, eager: bool
) -> None:
    kept: list[RequestContext] = []
    started = trio.Event()
    release = trio.Event()

    async def keep(ctx: RequestContext, params: Any) -> Any:
        kept.append(ctx)
        return "kept"

    async def cancel_kept(ctx: RequestContext, params: Any) -> Any:
        kept[-1].request_cancel()
        await trio.sleep(1)
        return "fine"

    async def wait(ctx: RequestContext, params: Any) -> Any:
        started.set()
        await release.wait()
        return "waited"

    handler = FnHandler({"keep": keep, "cancel kept": cancel_kept, "wait": wait})
    with trio.fail_after(LIMIT):
        async with raw_connection(handler, eager_handlers=eager) as (conn, peer, wire):
            # A later handler cancels the kept one (from inside the reader).
            await peer.send(req(1, "keep"))
            assert await peer.receive() == ok(1, "kept")
            await peer.send(req(2, "cancel kept"))
            assert await peer.receive() == ok(2, "fine")
            await peer.send(req(3, "keep"))
            assert await peer.receive() == ok(3, "kept")

            # Outside code cancels the kept one while a later handler waits.
            await peer.send(req(4, "wait"))
            await started.wait()
            kept[-1].request_cancel()
            await peer.expect_silence(5)
            assert conn.statistics().incoming_in_flight == 1
            release.set()
            assert await peer.receive() == ok(4, "waited")
            await peer.send(req(5, "keep"))
            assert await peer.receive() == ok(5, "kept")
            assert wire.sent() == [
                ok(1, "kept"),
                ok(2, "fine"),
                ok(3, "kept"),
                ok(4, "waited"),
                ok(5, "kept"),
            ]
            assert_idle(conn)


@both_ways
async def test_a_handler_that_raises_at_once_is_answered_and_reading_goes_on(
    autojump_clock: Any, eager: bool
) -> None:
    async def boom(ctx: RequestContext, params: Any) -> Any:
        raise ValueError("boom")

    async def refuse(ctx: RequestContext, params: Any) -> Any:
        raise RequestError(-32001, "refused", {"why": "test"})

    async def echo(ctx: RequestContext, params: Any) -> Any:
        return params

    handler = FnHandler({"boom": boom, "refuse": refuse, "echo": echo})
    with trio.fail_after(LIMIT):
        async with raw_connection(handler, eager_handlers=eager) as (conn, peer, _):
            await peer.send(req(1, "boom"))
            assert await peer.receive() == err(1, -32603, "Internal error")
            await peer.send(req(2, "echo", [2]))
            assert await peer.receive() == ok(2, [2])
            await peer.send(req(3, "refuse"))
            assert await peer.receive() == err(3, -32001, "refused", {"why": "test"})
            await peer.send(req(4, "echo", [4]))
            assert await peer.receive() == ok(4, [4])
            assert_idle(conn)
