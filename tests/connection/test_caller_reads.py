"""Over a pipe, a caller waiting for its reply reads it itself
(``acp_trio/_core/_read_right.py``): the edges of the hand-over between
the reader task and a reading caller. Each test first makes one call that the
reader answers (the reader then parks), so the next call reads for itself;
``ReaderWire`` shows which task read each frame."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
import trio.testing

from acp_trio import ConnectionClosed, ConnectionConfig
from acp_trio.lowlevel import Connection, RequestContext, open_connection

from .conftest import (
    LIMIT,
    READER,
    FnHandler,
    ReaderWire,
    ScriptedPeer,
    assert_idle,
    notif,
    ok,
    pipe_stream_pair,
    raw_peer,
    req,
    settle,
    this_task,
)


@asynccontextmanager
async def over_a_pipe(
    handler: FnHandler, **config: Any
) -> AsyncIterator[tuple[Connection, ScriptedPeer, ReaderWire, trio.abc.Stream]]:
    wire = ReaderWire()
    ours, theirs = pipe_stream_pair()
    cfg = ConnectionConfig(trace=wire, **config)
    try:
        async with open_connection(ours, handler, config=cfg) as conn:
            yield conn, raw_peer(theirs), wire, theirs
    finally:
        await theirs.aclose()


async def answer_first(peer: ScriptedPeer) -> None:
    """The peer answers the first call: the reader hands that reply over
    and parks, so the caller's next call, made in the same step, reads for
    itself."""
    assert await peer.receive() == req(0, "first")
    await peer.send(ok(0, "one"))


async def echo(ctx: RequestContext, params: Any) -> Any:
    return params


async def test_a_request_read_by_a_caller_is_run_by_the_reader(autojump_clock: Any) -> None:
    handler = FnHandler({"echo": echo})
    with trio.fail_after(LIMIT):
        async with over_a_pipe(handler) as (conn, peer, wire, _):
            results: list[Any] = []

            async def peer_side() -> None:
                assert await peer.receive() == req(0, "first")
                await peer.send(ok(0, "one"))
                assert await peer.receive() == req(1, "second")
                await trio.sleep(1)  # the caller now waits on the pipe
                await peer.send(req("r", "echo", {"x": 1}))
                assert await peer.receive() == ok("r", {"x": 1})
                await peer.send(ok(1, "two"))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(peer_side)
                results.append(await conn.call("first"))
                results.append(await conn.call("second"))
            assert results == ["one", "two"]
            me = this_task()
            # The caller read the request and gave it back (the reader ran
            # its handler and answered it), then waited for the reader.
            assert wire.reader_of(req("r", "echo", {"x": 1})) is me
            assert wire.reader_of(ok(1, "two")).name == READER
            assert wire.reader_of(ok(0, "one")).name == READER
            await settle()
            assert_idle(conn)


@pytest.mark.parametrize("who", ["we", "the peer"])
async def test_closing_while_a_caller_reads_ends_its_call(autojump_clock: Any, who: str) -> None:
    handler = FnHandler()
    with trio.fail_after(LIMIT):
        async with over_a_pipe(handler) as (conn, peer, _wire, theirs):
            outcome: list[BaseException] = []

            async def calls() -> None:
                assert await conn.call("first") == "one"
                try:
                    await conn.call("never answered")
                except ConnectionClosed as exc:
                    outcome.append(exc)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(calls)
                await answer_first(peer)
                assert await peer.receive() == req(1, "never answered")
                await settle()  # the caller waits on the pipe itself
                if who == "we":
                    await conn.aclose()
                else:
                    await theirs.send_stream.aclose()
            assert len(outcome) == 1
            assert ("closed locally" if who == "we" else "peer closed") in str(outcome[0])
            assert conn.closed


@pytest.mark.parametrize("queue", [1, 4, 100])
async def test_notifications_read_by_a_caller_are_handled_in_order(
    autojump_clock: Any, queue: int
) -> None:
    """With a small notification queue, the caller reads until the queue is
    full and gives reading back (the reader waits for room): every
    notification is handled once, in order, and the call gets its reply."""
    seen: list[int] = []

    async def note(method: str, params: Any) -> None:
        await trio.sleep(0.01)  # slower than the peer: the queue fills
        seen.append(params["n"])

    handler = FnHandler(notifications={"note": note})
    n = 50
    with trio.fail_after(LIMIT):
        async with over_a_pipe(handler, max_queued_notifications=queue) as (conn, peer, wire, _):

            async def peer_side() -> None:
                await answer_first(peer)
                assert await peer.receive() == req(1, "second")
                await trio.sleep(1)
                for i in range(n):
                    await peer.send(notif("note", {"n": i}))
                await peer.send(ok(1, "two"))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(peer_side)
                assert await conn.call("first") == "one"
                assert await conn.call("second") == "two"
            # The reply to a call comes after the notifications sent
            # before it were handled (their order is kept).
            assert seen == list(range(n))
            by_me = wire.read_by(this_task())
            assert by_me, "the caller read for itself"
            await settle()
            assert_idle(conn)


async def test_a_reading_caller_cancelled_gives_reading_back(autojump_clock: Any) -> None:
    handler = FnHandler({"echo": echo})
    with trio.fail_after(LIMIT):
        async with over_a_pipe(handler) as (conn, peer, wire, _):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(answer_first, peer)
                assert await conn.call("first") == "one"
                with trio.move_on_after(1) as scope:
                    await conn.call("slow")
            assert scope.cancelled_caught
            assert await peer.receive() == req(1, "slow")
            assert (await peer.receive())["method"] == "$/cancel_request"
            # The reader reads again: a request is served, its late reply
            # dropped.
            await peer.send(ok(1, "late"))
            await peer.send(req("r", "echo", {"y": 2}))
            assert await peer.receive() == ok("r", {"y": 2})
            assert wire.reader_of(req("r", "echo", {"y": 2})).name == READER
            await settle()
            assert_idle(conn)


async def test_a_caller_calling_in_a_loop_reads_each_reply_itself(
    autojump_clock: Any,
) -> None:
    """A caller that got its reply and makes its next call in the same step
    takes the read right again (the reader, woken by the give-back, finds
    it taken and parks again): every reply after the first is read by the
    caller."""
    handler = FnHandler()
    n = 200
    with trio.fail_after(LIMIT):
        async with over_a_pipe(handler) as (conn, peer, wire, _):

            async def peer_side() -> None:
                for i in range(n):
                    assert await peer.receive() == req(i, "call", {"i": i})
                    await peer.send(ok(i, i))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(peer_side)
                assert await conn.call("call", {"i": 0}) == 0  # the reader parks
                for i in range(1, n):
                    assert await conn.call("call", {"i": i}) == i
            assert len(wire.read_by(this_task())) == n - 1
            await settle()
            assert_idle(conn)


async def test_a_caller_that_stops_calling_leaves_reading_to_the_reader(
    autojump_clock: Any,
) -> None:
    """A caller that read its own reply and then waits for something else
    (its step ends without a next call): the reader reads again at once, and
    serves what the peer sends meanwhile."""
    handler = FnHandler({"echo": echo})
    with trio.fail_after(LIMIT):
        async with over_a_pipe(handler) as (conn, peer, wire, _):
            served_at: list[float] = []

            async def peer_side() -> None:
                await answer_first(peer)
                assert await peer.receive() == req(1, "second")
                await peer.send(ok(1, "two"))
                await peer.send(req("r", "echo", {"z": 3}))
                assert await peer.receive() == ok("r", {"z": 3})
                served_at.append(trio.current_time())

            async with trio.open_nursery() as nursery:
                nursery.start_soon(peer_side)
                assert await conn.call("first") == "one"
                start = trio.current_time()
                assert await conn.call("second") == "two"
                await trio.sleep(100)
            assert wire.reader_of(ok(1, "two")) is this_task()
            assert wire.reader_of(req("r", "echo", {"z": 3})).name == READER
            # Served while the caller slept, not when it woke.
            assert served_at
            assert served_at[0] - start < 1
            await settle()
            assert_idle(conn)
