"""Opening, closing and dying: EOF with calls pending, the peer closing while
handlers run, errors out of ``open_connection``, ``aclose()``, calls after
close, the other entry points, and ``statistics()``."""

from __future__ import annotations

import logging
from typing import Any

import pytest
import trio
import trio.testing

from acp_trio import (
    ConnectionClosed,
    ConnectionConfig,
)
from acp_trio.lowlevel import (
    CancelCause,
    Connection,
    ConnectionStatistics,
    RequestContext,
    connect_connection,
    serve_connection,
)

from .conftest import (
    LIMIT,
    FnHandler,
    ScriptedPeer,
    Wire,
    assert_idle,
    cancel,
    cancelled,
    echo_handler,
    line,
    notif,
    ok,
    raw_connection,
    req,
    settle,
    sleep_forever_handler,
)


async def test_eof_fails_100_pending_calls_at_once(autojump_clock: Any) -> None:
    errors: list[BaseException] = []
    with trio.fail_after(LIMIT):
        async with raw_connection() as (conn, peer, _):
            async with trio.open_nursery() as nursery:

                async def caller(i: int) -> None:
                    try:
                        await conn.call("work", [i])
                    except BaseException as exc:
                        errors.append(exc)

                for i in range(100):
                    nursery.start_soon(caller, i)
                requests = [await peer.receive() for _ in range(100)]
                assert sorted(r["id"] for r in requests) == list(range(100))
                assert conn.statistics().outgoing_pending == 100
                await peer.close_send()
            assert trio.current_time() == 0  # at once: no timeout involved
            assert conn.closed
            await conn.wait_closed()
            assert_idle(conn)
            with pytest.raises(ConnectionClosed):
                await conn.call("again")
    assert len(errors) == 100
    assert all(type(e) is ConnectionClosed for e in errors), {type(e) for e in errors}
    assert "peer closed" in str(errors[0])


async def test_peer_closing_while_handlers_run_cancels_them(autojump_clock: Any) -> None:
    contexts: list[RequestContext] = []
    running = trio.Event()

    async def work(ctx: RequestContext, params: Any) -> Any:
        contexts.append(ctx)
        if len(contexts) == 2:
            running.set()
        await trio.sleep_forever()

    with trio.fail_after(LIMIT):
        async with raw_connection(FnHandler({"work": work})) as (conn, peer, _):
            await peer.send(req(1, "work"), req(2, "work"))
            await running.wait()
            await peer.close_send()
            # Half-closed: we can still read the replies, then EOF.
            replies = [await peer.receive() for _ in range(2)]
            assert sorted(replies, key=lambda r: r["id"]) == [cancelled(1), cancelled(2)]
            await peer.expect_eof()
            assert [c.cancel_cause for c in contexts] == [CancelCause.SHUTDOWN] * 2
            assert conn.closed
            assert_idle(conn)


async def test_eof_while_a_handler_waits_on_the_peer_answers_32800(
    autojump_clock: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """The handler's own call fails with ConnectionClosed at the same moment
    it is cancelled: the cancel wins, the reply is -32800, nothing is logged
    as a handler failure. The peer may still read after its end of stream:
    the nested call is cancelled on the wire before the -32800 goes out."""
    outcome: list[BaseException] = []

    async def ask(ctx: RequestContext, params: Any) -> Any:
        try:
            return await ctx.connection.call("question")
        except BaseException as exc:
            outcome.append(exc)
            raise

    with trio.fail_after(LIMIT):
        async with raw_connection(FnHandler({"ask": ask})) as (conn, peer, wire):
            await peer.send(req(1, "ask"))
            assert await peer.receive() == req(0, "question")
            await peer.close_send()
            assert await peer.receive() == cancel(0)
            assert await peer.receive() == cancelled(1)
            await peer.expect_eof()
            assert wire.sent() == [req(0, "question"), cancel(0), cancelled(1)]
            assert [type(e) for e in outcome] == [trio.Cancelled]
            assert_idle(conn)
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []


async def test_peer_dying_while_handlers_run(
    autojump_clock: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """The peer closes both directions: the replies cannot be written, and
    nothing escapes the connection."""
    contexts: list[RequestContext] = []

    async def work(ctx: RequestContext, params: Any) -> Any:
        contexts.append(ctx)
        await trio.sleep_forever()

    with trio.fail_after(LIMIT):
        async with raw_connection(FnHandler({"work": work})) as (conn, peer, _):
            await peer.send(req(1, "work"), req(2, "work"))
            await settle()
            assert len(contexts) == 2
            await peer.stream.aclose()
            await conn.wait_closed()
            assert trio.current_time() == 0
            assert [c.cancel_cause for c in contexts] == [CancelCause.SHUTDOWN] * 2
            assert_idle(conn)
    assert [r for r in caplog.records if r.levelno >= logging.ERROR] == []


async def test_open_connection_raises_the_body_error_plainly(autojump_clock: Any) -> None:
    peers: list[ScriptedPeer] = []

    async def body() -> None:
        async with raw_connection(FnHandler({"work": sleep_forever_handler})) as (conn, peer, _):
            peers.append(peer)
            await peer.send(req(1, "work"))
            await settle()
            assert conn.statistics().incoming_in_flight == 1
            raise ValueError("boom")

    with trio.fail_after(LIMIT):
        with pytest.raises(ValueError, match="boom") as info:
            await body()
        assert type(info.value) is ValueError
        # Leaving the block closed the connection: the handler was answered.
        assert await peers[0].receive() == cancelled(1)
        await peers[0].expect_eof()


async def test_open_connection_lets_cancellation_through(autojump_clock: Any) -> None:
    with trio.fail_after(LIMIT):
        with trio.move_on_after(3) as scope:
            async with raw_connection() as (conn, _, _):
                await trio.sleep_forever()
        assert scope.cancelled_caught
        assert trio.current_time() == 3
        assert conn.closed


async def test_aclose_is_idempotent_and_answers_running_handlers(
    autojump_clock: Any,
) -> None:
    contexts: list[RequestContext] = []

    async def work(ctx: RequestContext, params: Any) -> Any:
        contexts.append(ctx)
        await trio.sleep_forever()

    with trio.fail_after(LIMIT):
        async with raw_connection(FnHandler({"work": work})) as (conn, peer, wire):
            await peer.send(req(1, "work"), req("two", "work"))
            await settle()
            assert conn.statistics().incoming_in_flight == 2
            assert not conn.closed
            async with trio.open_nursery() as nursery:
                nursery.start_soon(conn.aclose)
                nursery.start_soon(conn.aclose)
            await conn.aclose()
            assert conn.closed
            assert trio.current_time() == 0
            replies = [await peer.receive() for _ in range(2)]
            assert sorted(replies, key=lambda r: str(r["id"])) == [
                cancelled(1),
                cancelled("two"),
            ]
            await peer.expect_eof()
            assert wire.sent_responses() == replies
            assert [c.cancel_cause for c in contexts] == [CancelCause.SHUTDOWN] * 2
            assert conn.statistics().closed
            assert_idle(conn)


async def test_calls_after_close_raise_connection_closed(autojump_clock: Any) -> None:
    with trio.fail_after(LIMIT):
        async with raw_connection() as (conn, peer, wire), trio.open_nursery() as nursery:
            pending_errors: list[BaseException] = []

            async def caller() -> None:
                try:
                    await conn.call("pending")
                except ConnectionClosed as exc:
                    pending_errors.append(exc)

            nursery.start_soon(caller)
            assert await peer.receive() == req(0, "pending")
            await conn.aclose()
            await settle()
            assert len(pending_errors) == 1
            assert "closed locally" in str(pending_errors[0])
            with pytest.raises(ConnectionClosed):
                await conn.call("x")
            with pytest.raises(ConnectionClosed):
                await conn.notify("x")
            with pytest.raises(ConnectionClosed):
                async with conn.open_request("x"):
                    pass  # pragma: no cover
            await peer.expect_eof()
            assert wire.sent() == [req(0, "pending")]


async def test_connect_and_serve_connection(autojump_clock: Any) -> None:
    wire = Wire()
    sa, sb = trio.testing.memory_stream_pair()
    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            a = await connect_connection(
                nursery, sa, FnHandler({"echo": echo_handler}), config=ConnectionConfig(trace=wire)
            )
            b: Connection = await nursery.start(serve_connection, sb)
            assert await b.call("echo", {"x": [1]}) == {"x": [1]}
            await b.aclose()
            await a.wait_closed()  # the peer's EOF closes it
            assert a.closed
        assert wire.received() == [
            {"jsonrpc": "2.0", "id": 0, "method": "echo", "params": {"x": [1]}}
        ]
        assert wire.sent() == [ok(0, {"x": [1]})]


async def test_aclose_before_running(autojump_clock: Any) -> None:
    sa, _ = trio.testing.memory_stream_pair()
    conn = Connection(sa)
    with trio.fail_after(LIMIT):
        await conn.aclose()
        assert conn.closed
        with pytest.raises(ConnectionClosed):
            await conn.call("x")


async def test_statistics(autojump_clock: Any) -> None:
    release = trio.Event()

    async def on_note(method: str, params: Any) -> None:
        await release.wait()

    handler = FnHandler({"work": sleep_forever_handler}, {"note": on_note})
    with trio.fail_after(LIMIT):
        async with raw_connection(handler) as (conn, peer, _), trio.open_nursery() as nursery:
            assert conn.statistics() == ConnectionStatistics(
                incoming_in_flight=0,
                outgoing_pending=0,
                outbox_frames=0,
                notifications_queued=0,
                notifications_received=0,
                notifications_handled=0,
                read_buffer_bytes=0,
                closed=False,
            )
            assert conn.output_settled()
            nursery.start_soon(conn.call, "out")
            await peer.receive()
            await peer.send(req(1, "work"), req(2, "work"))
            await peer.send(notif("note"), notif("note"), notif("note"), cancel(99))
            await peer.send_bytes(b'{"jsonrpc":')  # half a frame
            await settle()
            assert conn.statistics() == ConnectionStatistics(
                incoming_in_flight=2,
                outgoing_pending=1,
                outbox_frames=0,
                notifications_queued=3,
                notifications_received=3,
                notifications_handled=0,
                read_buffer_bytes=11,
                closed=False,
            )
            assert not conn.output_settled()  # notifications read, not handled
            release.set()
            await peer.send_bytes(b'"2.0","id":0,"result":null}\n')
            await settle()
            stats = conn.statistics()
            assert (stats.notifications_handled, stats.notifications_queued) == (3, 0)
            assert (stats.outgoing_pending, stats.read_buffer_bytes) == (0, 0)
            assert conn.output_settled()
            await conn.aclose()
            assert conn.statistics() == ConnectionStatistics(
                incoming_in_flight=0,
                outgoing_pending=0,
                outbox_frames=0,
                notifications_queued=0,
                notifications_received=3,
                notifications_handled=3,
                read_buffer_bytes=0,
                closed=True,
            )


async def test_outbox_backpressure_on_a_peer_that_does_not_read(autojump_clock: Any) -> None:
    """``notify`` waits when the outbox is full (the peer stopped reading);
    the close deadline stops a writer stuck on such a peer."""
    sent: list[int] = []
    with trio.fail_after(LIMIT):
        async with raw_connection(
            stream_pair=trio.testing.lockstep_stream_pair, outbox_limit=2, close_timeout=4
        ) as (conn, peer, _):
            async with trio.open_nursery() as nursery:

                async def notifier() -> None:
                    for n in range(10):
                        await conn.notify("n", [n])
                        sent.append(n)

                nursery.start_soon(notifier)
                await trio.sleep(5)
                # The writer holds one batch (blocked in send_all, at most a
                # full queue), two more frames are queued, the notifier waits.
                assert conn.statistics().outbox_frames == 2
                assert not conn.output_settled()  # frames wait in the outbox
                assert 3 <= len(sent) <= 4
                got = [await peer.receive() for _ in range(10)]
                assert got == [notif("n", [n]) for n in range(10)]
                assert sent == list(range(10))
            start = trio.current_time()
            await conn.notify("stuck", [1])
            await conn.aclose()  # the peer never reads it: bounded by close_timeout
            assert trio.current_time() - start == 4


async def test_non_ascii_and_line_separators_round_trip(autojump_clock: Any) -> None:
    """U+2028/U+2029 and non-ASCII text travel raw in UTF-8 and do not split
    frames (only b"\\n" ends a frame)."""
    text = "é\u2028x\u2029y\r"
    with trio.fail_after(LIMIT):
        async with raw_connection(FnHandler({"echo": echo_handler})) as (conn, peer, _):
            await peer.send(
                line(req(0, "echo", {"a": text})).replace(b"\\u2028", "\u2028".encode())
            )
            assert await peer.receive() == ok(0, {"a": text})
            assert_idle(conn)
