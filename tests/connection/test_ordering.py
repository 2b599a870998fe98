"""Ordering on the receiving side: notifications in wire order, one at a
time, while requests run concurrently; a result never overtakes notifications
that arrived before it; reading pauses when the notification queue is full."""

from __future__ import annotations

from typing import Any

import trio
import trio.testing

from acp_trio import RequestContext

from .conftest import (
    LIMIT,
    FnHandler,
    RawPeer,
    assert_idle,
    notif,
    ok,
    raw_connection,
    req,
    settle,
)


async def test_notifications_in_wire_order_while_a_slow_request_runs(
    autojump_clock: Any,
) -> None:
    log: list[Any] = []

    async def slow(ctx: RequestContext, params: Any) -> Any:
        log.append(("request start", trio.current_time()))
        await trio.sleep(100)
        log.append(("request end", trio.current_time()))
        return "slow"

    async def on_note(method: str, params: Any) -> None:
        log.append(("start", params["n"], trio.current_time()))
        await trio.sleep(1 + params["n"] % 3)  # uneven durations
        log.append(("end", params["n"], trio.current_time()))

    handler = FnHandler({"slow": slow}, {"note": on_note})
    with trio.fail_after(LIMIT):
        async with raw_connection(handler) as (conn, peer, _):
            await peer.send(req(1, "slow"), *(notif("note", {"n": n}) for n in range(5)))
            await peer.send(*(notif("note", {"n": n}) for n in range(5, 10)))
            assert await peer.receive(within=200) == ok(1, "slow")
            assert_idle(conn)
    assert [e for e in log if e[0].startswith("request")] == [
        ("request start", 0),
        ("request end", 100),
    ]
    assert log[-1] == ("request end", 100)
    notes = [e for e in log if not e[0].startswith("request")]
    # One at a time, in order, and all done long before the request ended.
    expected: list[Any] = []
    t = 0
    for n in range(10):
        expected.append(("start", n, t))
        t += 1 + n % 3
        expected.append(("end", n, t))
    assert notes == expected
    assert t < 100


async def test_result_does_not_overtake_earlier_notifications(autojump_clock: Any) -> None:
    handled: list[int] = []

    async def on_note(method: str, params: Any) -> None:
        await trio.sleep(0.01)
        handled.append(params)

    handler = FnHandler(notifications={"note": on_note})
    with trio.fail_after(LIMIT):
        async with raw_connection(handler) as (conn, peer, _), trio.open_nursery() as nursery:
            results: list[Any] = []

            async def caller() -> None:
                results.append(await conn.call("get"))
                # When call() returns, all 500 were handled, in order.
                results.append(list(handled))
                results.append(conn.statistics().notifications_handled)
                results.append(trio.current_time())

            nursery.start_soon(caller)
            assert await peer.receive() == req(0, "get")
            await peer.send(*(notif("note", [n]) for n in range(500)), ok(0, "answer"))
            await trio.sleep(10)
            assert results[:3] == ["answer", [[n] for n in range(500)], 500]
            assert abs(results[3] - 5.0) < 1e-6
            assert_idle(conn)


async def test_result_waits_only_for_notifications_ahead_of_it(autojump_clock: Any) -> None:
    done: list[str] = []

    async def on_note(method: str, params: Any) -> None:
        await trio.sleep(params[0])
        done.append(method)

    handler = FnHandler(notifications={"*": on_note})
    with trio.fail_after(LIMIT):
        async with raw_connection(handler) as (conn, peer, _), trio.open_nursery() as nursery:
            seen: list[Any] = []

            async def caller() -> None:
                seen.append(await conn.call("get"))
                seen.append((list(done), trio.current_time()))

            nursery.start_soon(caller)
            assert await peer.receive() == req(0, "get")
            await peer.send(notif("before", [2]), ok(0, 42), notif("after", [50]))
            await trio.sleep(10)
            assert seen == [42, (["before"], 2)]
            await trio.sleep(50)
            assert done == ["before", "after"]
            assert_idle(conn)


async def test_notification_handler_calling_the_peer_does_not_deadlock(
    autojump_clock: Any,
) -> None:
    log: list[Any] = []
    conn_box: list[Any] = []

    async def on_ask(method: str, params: Any) -> None:
        log.append("ask")
        log.append(("answer", await conn_box[0].call("question")))

    async def on_later(method: str, params: Any) -> None:
        log.append("later")

    handler = FnHandler(notifications={"ask": on_ask, "later": on_later})
    with trio.fail_after(LIMIT):
        async with raw_connection(handler) as (conn, peer, _):
            conn_box.append(conn)
            await peer.send(notif("ask"))
            assert await peer.receive() == req(0, "question")
            # A notification queued behind the waiting handler arrives before
            # the answer: the answer must not wait for it.
            await peer.send(notif("later"), ok(0, 42))
            await settle()
            assert log == ["ask", ("answer", 42), "later"]
            assert trio.current_time() == 0
            assert_idle(conn)


async def test_request_handler_result_waits_for_notifications(autojump_clock: Any) -> None:
    """The barrier holds for calls made from request handlers too."""
    log: list[Any] = []

    async def relay(ctx: RequestContext, params: Any) -> Any:
        answer = await ctx.connection.call("question")
        log.append(("answer", answer, trio.current_time()))
        return answer

    async def on_note(method: str, params: Any) -> None:
        await trio.sleep(3)
        log.append("note")

    handler = FnHandler({"relay": relay}, {"note": on_note})
    with trio.fail_after(LIMIT):
        async with raw_connection(handler) as (conn, peer, _):
            await peer.send(req("r", "relay"))
            assert await peer.receive() == req(0, "question")
            await peer.send(notif("note"), ok(0, "yes"))
            assert await peer.receive() == ok("r", "yes")
            assert log == ["note", ("answer", "yes", 3)]
            assert_idle(conn)


async def test_backpressure_pauses_reading_and_loses_nothing(autojump_clock: Any) -> None:
    """With a full notification queue the reader stops reading: on a lockstep
    stream the peer's writes block. Released, everything is handled in order."""
    release = trio.Event()
    handled: list[int] = []

    async def on_note(method: str, params: Any) -> None:
        await release.wait()
        handled.append(params["n"])

    handler = FnHandler(notifications={"note": on_note})
    total = 50
    with trio.fail_after(LIMIT):
        async with (
            raw_connection(
                handler,
                stream_pair=trio.testing.lockstep_stream_pair,
                max_queued_notifications=2,
            ) as (conn, peer, _),
            trio.open_nursery() as nursery,
        ):
            sent: list[int] = []

            async def writer(peer: RawPeer) -> None:
                for n in range(total):
                    await peer.send(notif("note", {"n": n}))  # one write each
                    sent.append(n)

            nursery.start_soon(writer, peer)
            await trio.sleep(10)
            stats = conn.statistics()
            # One being handled, two queued, one the reader holds; the peer's
            # next write is blocked because nobody reads.
            assert len(sent) == 4, sent
            assert stats.notifications_received == 4
            assert stats.notifications_handled == 0
            assert stats.notifications_queued == 4
            assert handled == []
            release.set()
            await settle()
            assert handled == list(range(total))
            assert len(sent) == total
            stats = conn.statistics()
            assert stats.notifications_received == stats.notifications_handled == total
            assert_idle(conn)


async def test_backpressure_bounds_the_queue_on_a_buffered_stream(autojump_clock: Any) -> None:
    """On a stream that buffers everything, the queue still stays bounded."""
    peaks: list[int] = []
    conn_box: list[Any] = []

    async def on_note(method: str, params: Any) -> None:
        await trio.sleep(0.1)
        peaks.append(conn_box[0].statistics().notifications_queued)

    handler = FnHandler(notifications={"note": on_note})
    with trio.fail_after(LIMIT):
        async with raw_connection(handler, max_queued_notifications=3) as (conn, peer, _):
            conn_box.append(conn)
            await peer.send(*(notif("note", [n]) for n in range(200)))
            await trio.sleep(30)
            assert [p for _, p in handler.seen] == [[n] for n in range(200)]
            assert max(peaks) <= 3 + 2
            assert_idle(conn)
