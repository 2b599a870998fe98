"""The peer cancels a request we are serving: ``$/cancel_request`` in every
position, malformed cancels, cooperative handlers and shielded sections."""

from __future__ import annotations

import logging
from typing import Any

import pytest
import trio
import trio.lowlevel

from acp_trio.lowlevel import CancelCause, RequestContext

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
)


async def test_cancel_before_start_never_runs_user_code(autojump_clock: Any) -> None:
    calls: list[Any] = []

    async def work(ctx: RequestContext, params: Any) -> Any:
        calls.append(params)
        return "ran"

    with trio.fail_after(LIMIT):
        async with raw_connection(FnHandler({"work": work})) as (conn, peer, wire):
            # One chunk: the cancel is read before the handler task can start.
            await peer.send(req(1, "work", {"n": 1}), cancel(1))
            assert await peer.receive() == cancelled(1)
            await peer.expect_silence(5)
            assert calls == []
            assert wire.sent() == [cancelled(1)]
            assert_idle(conn)
            # The id is free again and the connection works.
            await peer.send(req(1, "work", {"n": 2}))
            assert await peer.receive() == ok(1, "ran")
            assert calls == [{"n": 2}]


async def test_cancel_while_running_cuts_the_handler_off(autojump_clock: Any) -> None:
    started = trio.Event()
    log: list[Any] = []

    async def work(ctx: RequestContext, params: Any) -> Any:
        started.set()
        try:
            await trio.sleep(100)
        except trio.Cancelled:
            log.append(("cancelled", ctx.cancel_cause, trio.current_time()))
            raise
        log.append("finished")  # pragma: no cover - must not happen
        return "late"

    with trio.fail_after(LIMIT):
        async with raw_connection(FnHandler({"work": work})) as (conn, peer, wire):
            await peer.send(req("a", "work"))
            await started.wait()
            await trio.sleep(3)
            await peer.send(cancel("a"))
            assert await peer.receive() == cancelled("a")
            assert log == [("cancelled", CancelCause.PEER, 3)]
            # Exactly one reply, even long after the handler's sleep would end.
            await peer.expect_silence(200)
            assert wire.sent_responses() == [cancelled("a")]
            assert_idle(conn)


async def test_cancel_after_the_reply_does_nothing(autojump_clock: Any) -> None:
    async def work(ctx: RequestContext, params: Any) -> Any:
        await trio.sleep(1)
        return {"done": True}

    with trio.fail_after(LIMIT):
        async with raw_connection(FnHandler({"work": work})) as (conn, peer, wire):
            await peer.send(req(7, "work"))
            assert await peer.receive() == ok(7, {"done": True})
            await peer.send(cancel(7), cancel(7))
            await peer.expect_silence(5)
            assert wire.sent() == [ok(7, {"done": True})]
            assert_idle(conn)


async def test_duplicate_unknown_and_malformed_cancels_are_never_answered(
    autojump_clock: Any, caplog: pytest.LogCaptureFixture
) -> None:
    release = trio.Event()
    causes: list[CancelCause | None] = []

    async def work(ctx: RequestContext, params: Any) -> Any:
        try:
            await release.wait()
        finally:
            causes.append(ctx.cancel_cause)
        return params

    malformed: list[Any] = [
        notif("$/cancel_request", {"requestId": {"id": 1}}),
        notif("$/cancel_request", {"requestId": [1]}),
        notif("$/cancel_request", {"requestId": True}),  # True == 1 as a dict key
        notif("$/cancel_request", {"requestId": 1.0}),  # 1.0 == 1 as a dict key
        notif("$/cancel_request", {"id": 1}),
        notif("$/cancel_request", {}),
        notif("$/cancel_request", [1]),
        notif("$/cancel_request"),
        cancel("1"),  # a string id is a different id
        cancel(99),  # unknown
        cancel(None),  # unknown
    ]
    caplog.set_level(logging.DEBUG, logger="acp_trio")
    with trio.fail_after(LIMIT):
        async with raw_connection(FnHandler({"work": work})) as (conn, peer, wire):
            await peer.send(req(1, "work", ["one"]), req(2, "work", ["two"]))
            await peer.send(*malformed)
            await peer.expect_silence(5)
            assert causes == []
            assert conn.statistics().incoming_in_flight == 2
            # A duplicate cancel: one reply for request 2, request 1 untouched.
            await peer.send(cancel(2), cancel(2), cancel(2))
            assert await peer.receive() == cancelled(2)
            await peer.expect_silence(5)
            assert causes == [CancelCause.PEER]
            release.set()
            assert await peer.receive() == ok(1, ["one"])
            await peer.send(cancel(2), cancel(1))  # both finished now
            await peer.expect_silence(5)
            assert causes == [CancelCause.PEER, None]
            assert wire.sent() == [cancelled(2), ok(1, ["one"])]
            assert_idle(conn)
    # Ignoring a bad cancel is not worth a warning.
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []


async def test_cooperative_handler_answers_with_a_partial_result(autojump_clock: Any) -> None:
    waiting = trio.Event()
    trees: list[str] = []

    async def work(ctx: RequestContext, params: Any) -> Any:
        ctx.cooperative = True
        done = []
        for step in range(100):
            if ctx.cancel_requested.is_set():
                break
            await trio.sleep(1)
            done.append(step)
            if step == 2:
                waiting.set()
        assert ctx.cancel_cause is CancelCause.PEER
        trees.append(ctx.connection.dump_request_tree())
        # Checkpoints after the cancel are fine: the scope is not cancelled.
        await trio.sleep(5)
        return {"partial": True, "steps": done}

    with trio.fail_after(LIMIT):
        async with raw_connection(FnHandler({"work": work})) as (conn, peer, wire):
            await peer.send(req(1, "work"))
            await waiting.wait()
            await peer.send(cancel(1))
            assert await peer.receive() == ok(1, {"partial": True, "steps": [0, 1, 2, 3]})
            assert trio.current_time() == 4 + 5
            await peer.expect_silence(5)
            assert trees == ["<- work id=1 [running, cancelled (peer)]"]
            assert wire.sent_responses() == [ok(1, {"partial": True, "steps": [0, 1, 2, 3]})]
            assert_idle(conn)


@pytest.mark.parametrize("checkpoint_after", [True, False])
async def test_shielded_critical_section_completes(
    autojump_clock: Any, checkpoint_after: bool
) -> None:
    started = trio.Event()
    log: list[str] = []

    async def work(ctx: RequestContext, params: Any) -> Any:
        with trio.CancelScope(shield=True):
            started.set()
            await trio.sleep(10)
            log.append("committed")
        if checkpoint_after:
            await trio.lowlevel.checkpoint()  # the pending cancel is delivered here
            log.append("not reached")
        return "result"

    with trio.fail_after(LIMIT):
        async with raw_connection(FnHandler({"work": work})) as (conn, peer, _):
            await peer.send(req(1, "work"))
            await started.wait()
            await peer.send(cancel(1))
            reply = await peer.receive()
            assert trio.current_time() == 10
            assert log == ["committed"]
            # A handler that returns before its next checkpoint returned first.
            assert reply == (cancelled(1) if checkpoint_after else ok(1, "result"))
            await peer.expect_silence(5)
            assert_idle(conn)


async def test_cancel_request_sent_as_a_request_is_method_not_found(
    autojump_clock: Any,
) -> None:
    release = trio.Event()

    async def work(ctx: RequestContext, params: Any) -> Any:
        await release.wait()
        return ctx.cancel_cause is None

    with trio.fail_after(LIMIT):
        async with raw_connection(FnHandler({"work": work})) as (conn, peer, _):
            await peer.send(req(1, "work"))
            await peer.send(req(2, "$/cancel_request", {"requestId": 1}))
            assert await peer.receive() == err(
                2, -32601, "Method not found", {"method": "$/cancel_request"}
            )
            # It did not cancel request 1.
            release.set()
            assert await peer.receive() == ok(1, True)
            await peer.expect_silence(5)
            assert_idle(conn)


async def test_local_request_cancel_and_cancel_scope_deadline(autojump_clock: Any) -> None:
    """``RequestContext.request_cancel()`` and the handler's own scope deadline
    both end in -32800, with the right cause."""
    contexts: list[RequestContext] = []

    async def self_cancel(ctx: RequestContext, params: Any) -> Any:
        contexts.append(ctx)
        ctx.request_cancel()
        ctx.request_cancel(CancelCause.SESSION)  # idempotent: the first cause wins
        assert ctx.cancel_requested.is_set()
        await trio.sleep(1)

    async def own_deadline(ctx: RequestContext, params: Any) -> Any:
        contexts.append(ctx)
        ctx.cancel_scope.deadline = trio.current_time() + 2
        await trio.sleep(10)

    handler = FnHandler({"self": self_cancel, "deadline": own_deadline})
    with trio.fail_after(LIMIT):
        async with raw_connection(handler) as (conn, peer, _):
            await peer.send(req(1, "self"))
            assert await peer.receive() == cancelled(1)
            assert trio.current_time() == 0
            await peer.send(req(2, "deadline"))
            assert await peer.receive() == cancelled(2)
            assert trio.current_time() == 2
            await peer.expect_silence(5)
            assert [c.cancel_cause for c in contexts] == [CancelCause.LOCAL, CancelCause.DEADLINE]
            assert contexts[1].cancel_requested.is_set()
            assert_idle(conn)
