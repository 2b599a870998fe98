"""A cancelled ``call()`` queues its ``$/cancel_request`` at the moment Trio
cancels the waiting task, from inside whatever cancelled it, not when that
task next runs: a cascade goes down the request tree without waiting for each
level's handler to be scheduled. Shields and ``PendingRequest.result()``
keep their meaning: a wait that Trio does not cancel sends nothing."""

from __future__ import annotations

from typing import Any

import trio
import trio.testing

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
    settle,
)


async def test_cancel_is_queued_inside_scope_cancel(autojump_clock: Any) -> None:
    with trio.fail_after(LIMIT):
        async with raw_connection() as (conn, peer, wire), trio.open_nursery() as nursery:
            scope = trio.CancelScope()

            async def caller() -> None:
                with scope:
                    await conn.call("slow")

            nursery.start_soon(caller)
            assert await peer.receive() == req(0, "slow")
            await trio.testing.wait_all_tasks_blocked()
            scope.cancel()
            # No checkpoint since cancel(): the caller has not run again.
            assert wire.sent_cancels() == [0]
            assert await peer.receive() == cancel(0)
            await settle()
            assert wire.sent_cancels() == [0]
            await peer.send(cancelled(0))
            await peer.expect_silence()
            assert_idle(conn)


async def test_a_peer_cancel_cascades_before_the_handler_runs(autojump_clock: Any) -> None:
    """The peer cancels request 7, whose handler waits on three nested calls:
    the three cancels are queued while the reader handles the peer's cancel,
    before the handler's tasks see ``Cancelled``."""
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
        async with raw_connection(handler) as (conn, peer, wire):
            await peer.send(req(7, "fan"))
            sent = await peer.receive_n(3)
            assert sorted(m["params"]["i"] for m in sent) == [0, 1, 2]
            ids = sorted(m["id"] for m in sent)
            await trio.testing.wait_all_tasks_blocked()
            (node,) = conn.request_tree()
            assert (node.direction, node.id, len(node.children)) == ("incoming", 7, 3)
            await peer.send(cancel(7))
            got = await peer.receive_n(4)
            assert sorted(m["params"]["requestId"] for m in got[:3]) == ids
            assert all(m["method"] == "$/cancel_request" for m in got[:3])
            assert got[3] == cancelled(7)
            # Every nested task, when it first ran again, found all three
            # cancels already queued.
            assert unwound == [ids, ids, ids]
            await peer.send(*(cancelled(i) for i in ids))
            await peer.expect_silence()
            assert sorted(wire.sent_cancels()) == ids
            assert_idle(conn)


async def test_request_cancel_queues_nested_cancels_at_once(autojump_clock: Any) -> None:
    contexts: list[RequestContext] = []

    async def outer(ctx: RequestContext, params: Any) -> Any:
        contexts.append(ctx)
        return await ctx.connection.call("inner")

    with trio.fail_after(LIMIT):
        async with raw_connection(FnHandler({"outer": outer})) as (conn, peer, wire):
            await peer.send(req("a", "outer"))
            assert await peer.receive() == req(0, "inner")
            await trio.testing.wait_all_tasks_blocked()
            contexts[0].request_cancel()
            assert wire.sent_cancels() == [0]
            assert await peer.receive_n(2) == [cancel(0), cancelled("a")]
            await peer.send(cancelled(0))
            await peer.expect_silence()
            assert_idle(conn)


async def test_a_shielded_nested_call_is_not_cancelled(autojump_clock: Any) -> None:
    async def outer(ctx: RequestContext, params: Any) -> Any:
        with trio.CancelScope(shield=True):
            value = await ctx.connection.call("inner")
        return {"inner": value}  # no checkpoint after the shield: a result

    with trio.fail_after(LIMIT):
        async with raw_connection(FnHandler({"outer": outer})) as (conn, peer, wire):
            await peer.send(req(1, "outer"))
            assert await peer.receive() == req(0, "inner")
            await peer.send(cancel(1))
            await peer.expect_silence()
            assert wire.sent_cancels() == []
            await peer.send(ok(0, 42))
            assert await peer.receive() == ok(1, {"inner": 42})
            await peer.expect_silence()
            assert_idle(conn)


async def test_a_cancelled_wait_on_result_does_not_cancel(autojump_clock: Any) -> None:
    with trio.fail_after(LIMIT):
        async with raw_connection() as (conn, peer, wire):
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
            await peer.expect_silence()
            assert wire.sent_cancels() == []
            assert_idle(conn)


async def test_a_deadline_cancels_every_wait_under_it_at_once(autojump_clock: Any) -> None:
    """Two calls under one deadline: the first caller to run again finds both
    cancels queued (by the deadline, not by the callers)."""
    seen: list[tuple[float, list[Any]]] = []
    with trio.fail_after(LIMIT):
        async with raw_connection() as (conn, peer, wire), trio.open_nursery() as nursery:

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
            await peer.receive_n(2)
            got = await peer.receive_n(2)
            assert sorted(m["params"]["requestId"] for m in got) == [0, 1]
            await settle()
            assert seen == [(3, [0, 1]), (3, [0, 1])]
            await peer.send(cancelled(0), cancelled(1))
            await peer.expect_silence()
            assert_idle(conn)
