"""Over a stream whose frames are written at once (a pipe), a cancelled
``call()`` has its ``$/cancel_request`` written by whoever runs first after
Trio cancels the waiting task: the reader, right after the frame that caused
the cancel (a peer's ``$/cancel_request``), or the first cancelled call to
run again, for every call cancelled with it (a deadline). A cascade goes down
the request tree without waiting for each level's handler to be scheduled.
Nothing is written, and no trace hook runs, inside Trio's cancellation itself
(the abort function only records what is due). Over other streams (here
trio's memory streams) the frame would only be queued for the writer task,
which runs no sooner than the cancelled task itself, so each task sends its
own when it runs, as ever. Shields and ``PendingRequest.result()`` keep their
meaning: a wait that Trio does not cancel sends nothing."""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio
import trio.testing

from acp_trio import ConnectionConfig
from acp_trio.lowlevel import RequestContext, open_connection

from .conftest import (
    LIMIT,
    FnHandler,
    StreamPair,
    assert_idle,
    cancel,
    cancelled,
    ok,
    pipe_stream_pair,
    raw_connection,
    raw_peer,
    req,
    settle,
)


@pytest.fixture(params=["pipes", "memory"])
def transport(request: pytest.FixtureRequest) -> tuple[StreamPair, bool]:
    """A stream pair, and whether a cancel is written at once over it."""
    if request.param == "pipes":
        return pipe_stream_pair, True
    return trio.testing.memory_stream_pair, False


async def test_nothing_is_written_inside_scope_cancel(
    autojump_clock: Any, transport: tuple[StreamPair, bool]
) -> None:
    pair, _ = transport
    with trio.fail_after(LIMIT):
        async with (
            raw_connection(stream_pair=pair) as (conn, peer, wire),
            trio.open_nursery() as nursery,
        ):
            scope = trio.CancelScope()

            async def caller() -> None:
                with scope:
                    await conn.call("slow")

            nursery.start_soon(caller)
            assert await peer.receive() == req(0, "slow")
            await trio.testing.wait_all_tasks_blocked()
            scope.cancel()
            # No checkpoint since cancel(): the caller has not run again,
            # and nothing was written or queued from inside cancel().
            assert wire.sent_cancels() == []
            assert conn.statistics().outbox_frames == 0
            assert await peer.receive() == cancel(0)
            await settle()
            assert wire.sent_cancels() == [0]
            await peer.send(cancelled(0))
            await peer.expect_silence(5)
            assert_idle(conn)


async def test_a_peer_cancel_cascades_before_the_handler_runs(
    autojump_clock: Any, transport: tuple[StreamPair, bool]
) -> None:
    """The peer cancels request 7, whose handler waits on three nested calls:
    over a pipe, the three cancels are written while the reader handles the
    peer's cancel, before the handler's tasks see ``Cancelled``; otherwise
    each task sends its own as it runs."""
    pair, at_once = transport
    unwound: list[list[Any]] = []

    async def fan(ctx: RequestContext, params: Any) -> Any:
        async def nested(i: int) -> None:
            try:
                await ctx.connection.call("nested", {"i": i})
            except trio.Cancelled:
                unwound.append(sorted(wire.sent_cancels()))
                raise

        async with trio.open_nursery() as nursery:
            for i in range(3):
                nursery.start_soon(nested, i)

    handler = FnHandler({"fan": fan})
    with trio.fail_after(LIMIT):
        async with raw_connection(handler, stream_pair=pair) as (conn, peer, wire):
            await peer.send(req(7, "fan"))
            sent = [await peer.receive() for _ in range(3)]
            assert sorted(m["params"]["i"] for m in sent) == [0, 1, 2]
            ids = sorted(m["id"] for m in sent)
            await trio.testing.wait_all_tasks_blocked()
            (node,) = conn.request_tree()
            assert (node.direction, node.id, len(node.children)) == ("incoming", 7, 3)
            await peer.send(cancel(7))
            got = [await peer.receive() for _ in range(4)]
            assert sorted(m["params"]["requestId"] for m in got[:3]) == ids
            assert all(m["method"] == "$/cancel_request" for m in got[:3])
            assert got[3] == cancelled(7)
            if at_once:
                # Every nested task, when it first ran again, found all
                # three cancels already written.
                assert unwound == [ids, ids, ids]
            else:
                assert [len(seen) for seen in unwound] == [1, 2, 3]
            await peer.send(*(cancelled(i) for i in ids))
            await peer.expect_silence(5)
            assert sorted(wire.sent_cancels()) == ids
            assert_idle(conn)


async def test_request_cancel_sends_nested_cancels_as_the_handler_unwinds(
    autojump_clock: Any, transport: tuple[StreamPair, bool]
) -> None:
    pair, _ = transport
    contexts: list[RequestContext] = []

    async def outer(ctx: RequestContext, params: Any) -> Any:
        contexts.append(ctx)
        return await ctx.connection.call("inner")

    with trio.fail_after(LIMIT):
        async with raw_connection(FnHandler({"outer": outer}), stream_pair=pair) as (
            conn,
            peer,
            wire,
        ):
            await peer.send(req("a", "outer"))
            assert await peer.receive() == req(0, "inner")
            await trio.testing.wait_all_tasks_blocked()
            contexts[0].request_cancel()
            assert wire.sent_cancels() == []
            assert conn.statistics().outbox_frames == 0
            assert [await peer.receive() for _ in range(2)] == [cancel(0), cancelled("a")]
            await peer.send(cancelled(0))
            await peer.expect_silence(5)
            assert_idle(conn)


async def test_a_shielded_nested_call_is_not_cancelled(
    autojump_clock: Any, transport: tuple[StreamPair, bool]
) -> None:
    pair, _ = transport

    async def outer(ctx: RequestContext, params: Any) -> Any:
        with trio.CancelScope(shield=True):
            value = await ctx.connection.call("inner")
        return {"inner": value}  # no checkpoint after the shield: a result

    with trio.fail_after(LIMIT):
        async with raw_connection(FnHandler({"outer": outer}), stream_pair=pair) as (
            conn,
            peer,
            wire,
        ):
            await peer.send(req(1, "outer"))
            assert await peer.receive() == req(0, "inner")
            await peer.send(cancel(1))
            await peer.expect_silence(5)
            assert wire.sent_cancels() == []
            await peer.send(ok(0, 42))
            assert await peer.receive() == ok(1, {"inner": 42})
            await peer.expect_silence(5)
            assert_idle(conn)


async def test_a_cancelled_wait_on_result_does_not_cancel(
    autojump_clock: Any, transport: tuple[StreamPair, bool]
) -> None:
    pair, _ = transport
    with trio.fail_after(LIMIT):
        async with raw_connection(stream_pair=pair) as (conn, peer, wire):
            async with conn.open_request("slow") as pending:
                assert await peer.receive() == req(0, "slow")
                with trio.move_on_after(5) as scope:
                    await pending.result()
                assert scope.cancelled_caught
                await settle()
                assert wire.sent_cancels() == []
                assert not pending.done
                await peer.send(ok(0, "done"))
                assert await pending.result() == "done"
            await peer.expect_silence(5)
            assert wire.sent_cancels() == []
            assert_idle(conn)


async def test_a_deadline_cancels_every_wait_under_it_at_once(
    autojump_clock: Any, transport: tuple[StreamPair, bool]
) -> None:
    """Two calls under one deadline: over a pipe, the first caller to run
    again finds both cancels written (by the deadline, not by the callers)."""
    pair, at_once = transport
    seen: list[tuple[float, list[Any]]] = []
    with trio.fail_after(LIMIT):
        async with (
            raw_connection(stream_pair=pair) as (conn, peer, wire),
            trio.open_nursery() as nursery,
        ):

            async def caller(i: int) -> None:
                try:
                    await conn.call("slow", {"i": i})
                except trio.Cancelled:
                    seen.append((trio.current_time(), sorted(wire.sent_cancels())))
                    raise

            async def both() -> None:
                with trio.move_on_after(3):
                    async with trio.open_nursery() as inner:
                        inner.start_soon(caller, 0)
                        inner.start_soon(caller, 1)

            nursery.start_soon(both)
            [await peer.receive() for _ in range(2)]
            got = [await peer.receive() for _ in range(2)]
            assert sorted(m["params"]["requestId"] for m in got) == [0, 1]
            await settle()
            if at_once:
                assert seen == [(3, [0, 1]), (3, [0, 1])]
            else:
                assert [(t, len(ids)) for t, ids in seen] == [(3, 1), (3, 2)]
            await peer.send(cancelled(0), cancelled(1))
            await peer.expect_silence(5)
            assert_idle(conn)


async def test_the_trace_hook_never_runs_inside_an_abort(autojump_clock: Any) -> None:
    """A trace hook that calls Trio would fail if it ran when a deadline
    cancels a call (Trio runs the abort outside any task). It never runs
    there: the call's task sends the cancel as it unwinds, once."""
    sent: list[Any] = []
    failed: list[str] = []

    def trace(direction: str, frame: bytes) -> None:
        if direction == "send":
            try:
                trio.lowlevel.current_task()
            except RuntimeError:
                failed.append(frame.decode())
                raise
            sent.append(json.loads(frame))

    ours, theirs = pipe_stream_pair()
    with trio.fail_after(LIMIT):
        async with open_connection(ours, config=ConnectionConfig(trace=trace)) as conn:
            peer = raw_peer(theirs)
            with trio.move_on_after(3) as scope:
                await conn.call("slow")
            assert scope.cancelled_caught
            assert failed == []
            assert [await peer.receive() for _ in range(2)] == [req(0, "slow"), cancel(0)]
            assert sent == [req(0, "slow"), cancel(0)]
            await peer.send(cancelled(0))
            await peer.expect_silence(5)
            assert_idle(conn)


@pytest.mark.parametrize("nested", [1, 2, 5])
async def test_a_peer_cancelled_handler_cancels_each_nested_call_over_a_pipe(
    autojump_clock: Any, nested: int
) -> None:
    """Over a pipe, a peer ``$/cancel_request`` for a handler with nested
    calls sends one ``$/cancel_request`` per nested call, before the
    handler's ``-32800``."""

    async def fan(ctx: RequestContext, params: Any) -> Any:
        async with trio.open_nursery() as nursery:
            for i in range(nested):
                nursery.start_soon(ctx.connection.call, "nested", {"i": i})

    with trio.fail_after(LIMIT):
        async with raw_connection(FnHandler({"fan": fan}), stream_pair=pipe_stream_pair) as (
            conn,
            peer,
            _,
        ):
            await peer.send(req(7, "fan"))
            sent = [await peer.receive() for _ in range(nested)]
            ids = sorted(m["id"] for m in sent)
            await trio.testing.wait_all_tasks_blocked()
            await peer.send(cancel(7))
            got = [await peer.receive() for _ in range(nested + 1)]
            assert sorted(m["params"]["requestId"] for m in got[:nested]) == ids
            assert got[nested] == cancelled(7)
            await peer.send(*(cancelled(i) for i in ids))
            await peer.expect_silence(5)
            assert_idle(conn)
