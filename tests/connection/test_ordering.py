"""Ordering on the receiving side: notifications in wire order, one at a
time, while requests run concurrently; a result never overtakes notifications
that arrived before it; reading pauses when the notification queue is full."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from acp_trio.lowlevel import RequestContext

from .conftest import (
    LIMIT,
    FnHandler,
    ScriptedPeer,
    StreamPair,
    assert_idle,
    both_streams,
    cancel,
    cancelled,
    connection_pair,
    echo_handler,
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


def asking_handler(
    log: list[Any], conn_box: list[Any], requests: dict[str, Any] | None = None
) -> FnHandler:
    """Notifications ``ask`` (its handler calls the peer's ``question`` and
    logs the answer) and ``later``, logged as they are handled."""

    async def on_ask(method: str, params: Any) -> None:
        log.append("ask")
        log.append(("answer", await conn_box[0].call("question")))

    async def on_later(method: str, params: Any) -> None:
        log.append("later")

    return FnHandler(requests, {"ask": on_ask, "later": on_later})


async def test_notification_handler_calling_the_peer_does_not_deadlock(
    autojump_clock: Any,
) -> None:
    log: list[Any] = []
    conn_box: list[Any] = []
    handler = asking_handler(log, conn_box)
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

            async def writer(peer: ScriptedPeer) -> None:
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


# An incoming request's handler starts only after the notifications read
# before it were handled: a permission request never reaches the UI before
# the tool call it is about.


@both_streams
@pytest.mark.parametrize("eager", [True, False], ids=["eager", "tasks"])
async def test_request_handler_waits_for_notifications_ahead_of_it(
    autojump_clock: Any, stream_pair: StreamPair, eager: bool
) -> None:
    log: list[Any] = []

    async def permission(ctx: RequestContext, params: Any) -> Any:
        log.append(("permission", trio.current_time()))
        return "allow"

    async def on_update(method: str, params: Any) -> None:
        await trio.sleep(params["t"])  # a UI that takes its time
        log.append(("update", params["n"]))

    handler = FnHandler({"permission": permission}, {"update": on_update})
    with trio.fail_after(LIMIT):
        async with raw_connection(
            handler,
            stream_pair=stream_pair,
            eager_handlers=eager,
            callers_read_replies=eager,
        ) as (conn, peer, _):
            for turn in range(3):
                await peer.send(
                    notif("update", {"n": 2 * turn, "t": 2}),
                    notif("update", {"n": 2 * turn + 1, "t": 0}),
                    req(turn, "permission"),
                )
                assert await peer.receive() == ok(turn, "allow")
            assert log == [
                ("update", 0),
                ("update", 1),
                ("permission", 2),
                ("update", 2),
                ("update", 3),
                ("permission", 4),
                ("update", 4),
                ("update", 5),
                ("permission", 6),
            ]
            # A request read after the notifications were handled starts at
            # once, and one with none ahead of it too.
            await peer.send(req("again", "permission"))
            assert await peer.receive() == ok("again", "allow")
            assert log[-1] == ("permission", 6)
            assert_idle(conn)


async def test_a_request_waiting_for_notifications_can_be_cancelled(
    autojump_clock: Any,
) -> None:
    ran: list[Any] = []

    async def permission(ctx: RequestContext, params: Any) -> Any:
        ran.append(ctx.id)
        return "allow"

    async def on_update(method: str, params: Any) -> None:
        await trio.sleep(10)

    handler = FnHandler({"permission": permission}, {"update": on_update})
    with trio.fail_after(LIMIT):
        async with raw_connection(handler) as (conn, peer, _):
            await peer.send(notif("update"), req(1, "permission"))
            await trio.sleep(1)
            await peer.send(cancel(1))
            assert await peer.receive() == cancelled(1)
            assert trio.current_time() == 1
            await trio.sleep(20)
            assert ran == []
            assert_idle(conn)


async def test_a_notification_handler_waiting_on_the_peer_does_not_hold_up_requests(
    autojump_clock: Any,
) -> None:
    """The peer answers the notification handler's call only once we have
    answered its request, read after that notification: waiting for the
    notification would deadlock both sides, so ordering gives way while the
    notification handler waits for the peer."""
    log: list[Any] = []
    conn_box: list[Any] = []

    async def echo(ctx: RequestContext, params: Any) -> Any:
        log.append(("echo", params))
        return params

    handler = asking_handler(log, conn_box, {"echo": echo})
    with trio.fail_after(LIMIT):
        async with raw_connection(handler) as (conn, peer, _):
            conn_box.append(conn)
            await peer.send(notif("ask"))
            assert await peer.receive() == req(0, "question")
            await peer.send(notif("later"), req("first", "echo", [1]))
            assert await peer.receive() == ok("first", [1])
            await peer.send(ok(0, 42))
            await settle()
            assert log == ["ask", ("echo", [1]), ("answer", 42), "later"]
            # Ordering is back once the call is over.
            await peer.send(notif("later"), req("second", "echo", [2]))
            assert await peer.receive() == ok("second", [2])
            assert log[-2:] == ["later", ("echo", [2])]
            assert_idle(conn)


async def test_two_connections_one_calling_back_from_a_notification_handler(
    autojump_clock: Any,
) -> None:
    """The same, with acp_trio on both sides: a's notification handler calls
    b, whose handler calls a back before answering."""
    done: list[Any] = []
    box: dict[str, Any] = {}

    async def on_note(method: str, params: Any) -> None:
        done.append(await box["a"].call("relay"))

    async def relay(ctx: RequestContext, params: Any) -> Any:
        return await ctx.connection.call("echo", ["via b"])

    with trio.fail_after(LIMIT):
        async with connection_pair(
            FnHandler({"echo": echo_handler}, {"note": on_note}), FnHandler({"relay": relay})
        ) as (a, b, _, _):
            box["a"] = a
            await b.notify("note")
            await settle()
            assert done == [["via b"]]
