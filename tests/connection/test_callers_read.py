"""Callers read their own replies (``ConnectionConfig.callers_read_replies``).

When the reader task hands a successful reply to a parked caller and has no
other frame buffered, it parks (the baton is FREE). The caller, resumed,
wakes it, unless it makes another call first: then it reads the stream
itself until its reply comes (the baton is CALLER), acting on what it meets
as the reader would, and gives reading back when its reply arrives, when it
meets a request or a full notification queue (the frame is put back), or
when it is cancelled. Callers read only from a pipe (stdio, a spawned
agent), so these tests run over real OS pipes unless they say otherwise.

What is checked: which task read each frame (a ``trace`` hook runs in the
task that read the frame, see :class:`ReaderWire`) and ``Connection._baton``
at chosen moments; and, both ways (``callers_read``: callers must see no
difference), results, wire order and the ordering guarantee (a reply never
overtakes the notifications read before it), incoming requests and
``$/cancel_request`` met by a reading caller, replies to other callers, bad
input, cancellation of a reading caller (no byte read is dropped), end of
stream and local close (a reading caller fails at once), a full
notification queue, many calls over pipes, and two Hypothesis property
tests: a reading caller cancelled at any scheduler pass, and random
concurrent programs.
"""

from __future__ import annotations

import json
import logging
import os
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
import trio.lowlevel
import trio.testing
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from acp_trio import (
    ConnectionClosed,
    ConnectionConfig,
    LocalProtocolError,
    MessageTooLarge,
    RemoteProtocolError,
    RequestError,
)
from acp_trio._connection import _CALLER, _FREE, _READER
from acp_trio.lowlevel import (
    CancelCause,
    Connection,
    Handler,
    RequestContext,
    open_connection,
)

from .conftest import (
    LIMIT,
    FnHandler,
    RawPeer,
    Wire,
    assert_idle,
    cancel,
    cancelled,
    err,
    line,
    notif,
    ok,
    pipe_stream_pair,
    req,
    settle,
)

READER = "acp reader"

both_ways = pytest.mark.parametrize(
    "callers_read", [True, False], ids=["callers-read", "reader-only"]
)


def this_task() -> trio.lowlevel.Task:
    return trio.lowlevel.current_task()


class ReaderWire(Wire):
    """A :class:`Wire` that also records the task that read each frame (the
    ``trace`` hook runs in the reading task)."""

    def __init__(self) -> None:
        super().__init__()
        self.readers: list[tuple[Any, trio.lowlevel.Task]] = []

    def __call__(self, direction: str, frame: bytes) -> None:
        super().__call__(direction, frame)
        if direction == "recv":
            self.readers.append((self.frames[-1][1], this_task()))

    def reader_of(self, msg: Any) -> trio.lowlevel.Task:
        """The task that read ``msg`` (which must have been read once)."""
        found = [task for m, task in self.readers if m == msg]
        assert len(found) == 1, (msg, found)
        return found[0]

    def read_by(self, task: trio.lowlevel.Task) -> list[Any]:
        return [m for m, t in self.readers if t is task]


@asynccontextmanager
async def traced_connection(
    handler: Handler | None = None,
    *,
    stream_pair: Callable[[], tuple[trio.abc.Stream, trio.abc.Stream]] = pipe_stream_pair,
    **config: Any,
) -> AsyncIterator[tuple[Connection, RawPeer, ReaderWire]]:
    """``raw_connection`` with a :class:`ReaderWire`, over real OS pipes by
    default: callers read only from a pipe (``FramedStream.reads_pipe``)."""
    wire = ReaderWire()
    ours, theirs = stream_pair()
    cfg = ConnectionConfig(trace=wire, **config)
    try:
        async with open_connection(ours, handler, config=cfg) as conn:
            yield conn, RawPeer(theirs), wire
    finally:
        await theirs.aclose()


async def first_round(peer: RawPeer, method: str = "first", request_id: int = 0) -> None:
    """Answer the first call: the reader reads this reply, hands it over and
    parks; the caller's next call then reads for itself."""
    assert await peer.receive() == req(request_id, method)
    await peer.send(ok(request_id, "one"))


# ---------------------------------------------------------------------------
# Who reads


async def test_a_caller_reads_the_replies_to_its_next_calls_itself(autojump_clock: Any) -> None:
    n = 6
    batons: list[int] = []
    with trio.fail_after(LIMIT):
        async with traced_connection() as (conn, peer, wire):
            await settle()
            assert conn._baton == _READER

            async def answer() -> None:
                for i in range(n):
                    assert await peer.receive() == req(i, "step", {"i": i})
                    await settle()
                    batons.append(conn._baton)
                    await peer.send(ok(i, {"i": i}))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(answer)
                results = [await conn.call("step", {"i": i}) for i in range(n)]
                # This task read its last reply and gave reading back:
                # nobody reads until the reader task runs again.
                assert conn._baton == _FREE
            assert results == [{"i": i} for i in range(n)]
            # The first call waits for the reader; each later one is made
            # right after the previous reply and reads its own reply.
            assert batons == [_READER] + [_CALLER] * (n - 1)
            me = this_task()
            assert wire.readers[0][1].name == READER
            assert wire.read_by(me) == [ok(i, {"i": i}) for i in range(1, n)]
            assert wire.received() == [ok(i, {"i": i}) for i in range(n)]
            await settle()
            assert conn._baton == _READER
            assert conn._idle_reader is None
            assert_idle(conn)
            # Reading is the reader's again: a request is served as usual.
            await peer.send(req("r", "unknown"))
            assert (await peer.receive())["error"]["code"] == -32601
            assert wire.reader_of(req("r", "unknown")).name == READER


async def test_without_callers_read_replies_only_the_reader_reads(autojump_clock: Any) -> None:
    n = 6
    batons: list[int] = []
    with trio.fail_after(LIMIT):
        async with traced_connection(callers_read_replies=False) as (conn, peer, wire):

            async def answer() -> None:
                for i in range(n):
                    assert await peer.receive() == req(i, "step", {"i": i})
                    await settle()
                    batons.append(conn._baton)
                    await peer.send(ok(i, {"i": i}))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(answer)
                results = [await conn.call("step", {"i": i}) for i in range(n)]
                assert conn._baton == _READER
            assert results == [{"i": i} for i in range(n)]
            assert batons == [_READER] * n
            assert {t.name for _, t in wire.readers} == {READER}
            assert wire.read_by(this_task()) == []
            assert wire.received() == [ok(i, {"i": i}) for i in range(n)]
            await settle()
            assert conn._baton == _READER
            assert_idle(conn)


async def test_over_a_memory_stream_only_the_reader_reads(autojump_clock: Any) -> None:
    """Callers read only from a pipe: over any other stream the setting has
    no effect (the reader never parks)."""
    n = 4
    batons: list[int] = []
    with trio.fail_after(LIMIT):
        async with traced_connection(stream_pair=trio.testing.memory_stream_pair) as (
            conn,
            peer,
            wire,
        ):
            assert conn.config.callers_read_replies

            async def answer() -> None:
                for i in range(n):
                    assert await peer.receive() == req(i, "step")
                    await settle()
                    batons.append(conn._baton)
                    await peer.send(ok(i, i))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(answer)
                assert [await conn.call("step") for _ in range(n)] == list(range(n))
            assert batons == [_READER] * n
            assert {t.name for _, t in wire.readers} == {READER}
            assert_idle(conn)


async def test_a_caller_that_waits_elsewhere_first_wakes_the_reader(autojump_clock: Any) -> None:
    """A woken caller that does not call again at once gives reading back:
    frames arriving meanwhile (a notification) are read by the reader."""
    seen_batons: list[int] = []
    with trio.fail_after(LIMIT):
        async with traced_connection(FnHandler()) as (conn, peer, wire):

            async def script() -> None:
                await first_round(peer)
                await settle()
                seen_batons.append(conn._baton)
                await peer.send(notif("note", {"n": 1}))
                assert await peer.receive() == req(1, "second")
                await peer.send(ok(1, "two"))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(script)
                assert await conn.call("first") == "one"
                await trio.sleep(1)
                assert await conn.call("second") == "two"
            assert seen_batons == [_READER]
            assert wire.reader_of(notif("note", {"n": 1})).name == READER
            # The reply after a sleep is the reader's to read as well.
            assert wire.reader_of(ok(1, "two")).name == READER
            await settle()
            assert conn._baton == _READER
            assert_idle(conn)


# ---------------------------------------------------------------------------
# What a reading caller meets


@both_ways
async def test_notifications_read_by_a_caller_are_handled_before_its_result(
    autojump_clock: Any, callers_read: bool
) -> None:
    log: list[tuple[str, Any]] = []

    async def on_note(method: str, params: Any) -> None:
        await trio.sleep(1)  # a slow consumer: the result must wait for it
        log.append(("note", params["n"]))

    handler = FnHandler(notifications={"note": on_note})
    with trio.fail_after(LIMIT):
        async with traced_connection(handler, callers_read_replies=callers_read) as (
            conn,
            peer,
            wire,
        ):

            async def script() -> None:
                await first_round(peer)
                assert await peer.receive() == req(1, "second")
                await peer.send(notif("note", {"n": 1}), notif("note", {"n": 2}))
                await settle()
                assert log == [("result", "one")]
                await peer.send(notif("note", {"n": 3}), ok(1, "two"))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(script)
                log.append(("result", await conn.call("first")))
                log.append(("result", await conn.call("second")))
            assert log == [
                ("result", "one"),
                ("note", 1),
                ("note", 2),
                ("note", 3),
                ("result", "two"),
            ]
            assert trio.current_time() == 3
            later = [notif("note", {"n": n}) for n in (1, 2, 3)] + [ok(1, "two")]
            assert wire.received() == [ok(0, "one"), *later]
            me = this_task()
            assert wire.read_by(me) == (later if callers_read else [])
            assert_idle(conn)


@both_ways
async def test_a_long_burst_of_notifications_before_a_caller_reply(
    autojump_clock: Any, callers_read: bool
) -> None:
    """More notifications than the reader queues before yielding (128), in
    one chunk, then the reply: all handled in order, before the result."""
    n = 300
    handled: list[int] = []
    results: list[tuple[Any, int]] = []

    async def on_note(method: str, params: Any) -> None:
        handled.append(params["n"])

    handler = FnHandler(notifications={"note": on_note})
    with trio.fail_after(LIMIT):
        async with traced_connection(handler, callers_read_replies=callers_read) as (
            conn,
            peer,
            wire,
        ):

            async def script() -> None:
                await first_round(peer)
                assert await peer.receive() == req(1, "second")
                await peer.send(*[notif("note", {"n": i}) for i in range(n)], ok(1, "two"))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(script)
                await conn.call("first")
                results.append((await conn.call("second"), len(handled)))
            assert results == [("two", n)]
            assert handled == list(range(n))
            assert len(wire.read_by(this_task())) == (n + 1 if callers_read else 0)
            assert_idle(conn)


@both_ways
async def test_a_request_met_by_a_reading_caller_goes_to_the_reader(
    autojump_clock: Any, callers_read: bool
) -> None:
    handled_in: list[trio.lowlevel.Task] = []
    batons: list[int] = []

    async def double(ctx: RequestContext, params: Any) -> Any:
        handled_in.append(this_task())
        return params["n"] * 2

    with trio.fail_after(LIMIT):
        async with traced_connection(
            FnHandler({"double": double}), callers_read_replies=callers_read
        ) as (conn, peer, wire):

            async def script() -> None:
                await first_round(peer)
                assert await peer.receive() == req(1, "second")
                await settle()
                batons.append(conn._baton)
                await peer.send(req("p", "double", {"n": 21}))
                assert await peer.receive() == ok("p", 42)
                await settle()
                batons.append(conn._baton)
                await peer.send(ok(1, "two"))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(script)
                assert await conn.call("first") == "one"
                assert await conn.call("second") == "two"
            me = this_task()
            assert batons == ([_CALLER, _READER] if callers_read else [_READER, _READER])
            # The handler ran eagerly in the reader task, not in the caller.
            assert len(handled_in) == 1
            assert handled_in[0].name == READER
            assert handled_in[0] is not me
            assert wire.reader_of(req("p", "double", {"n": 21})) is handled_in[0]
            # Put back and read again, but traced once.
            assert wire.received() == [ok(0, "one"), req("p", "double", {"n": 21}), ok(1, "two")]
            assert wire.read_by(me) == []
            assert wire.sent_responses() == [ok("p", 42)]
            await settle()
            assert conn._baton == _READER
            assert_idle(conn)


@both_ways
async def test_a_request_between_notifications_in_one_chunk_loses_nothing(
    autojump_clock: Any, callers_read: bool
) -> None:
    log: list[Any] = []

    async def on_note(method: str, params: Any) -> None:
        log.append(("note", params["n"]))

    async def work(ctx: RequestContext, params: Any) -> Any:
        log.append(("request", params["n"]))
        await trio.sleep(1)
        return params["n"]

    chunk = [
        notif("note", {"n": 1}),
        req("p", "work", {"n": 2}),
        notif("note", {"n": 3}),
        req("q", "work", {"n": 4}),
        ok(1, "two"),
    ]
    handler = FnHandler({"work": work}, {"note": on_note})
    with trio.fail_after(LIMIT):
        async with traced_connection(handler, callers_read_replies=callers_read) as (
            conn,
            peer,
            wire,
        ):

            async def script() -> None:
                await first_round(peer)
                assert await peer.receive() == req(1, "second")
                await settle()
                await peer.send(*chunk)
                replies = await peer.receive_n(2)
                assert sorted(replies, key=lambda m: m["id"]) == [ok("p", 2), ok("q", 4)]

            async with trio.open_nursery() as nursery:
                nursery.start_soon(script)
                await conn.call("first")
                log.append(("result", await conn.call("second")))
            assert wire.received() == [ok(0, "one"), *chunk]
            assert [m for m in log if m[0] == "note"] == [("note", 1), ("note", 3)]
            assert log.index(("result", "two")) > log.index(("note", 3))
            me = this_task()
            # The caller read up to the first request, nothing after it.
            assert wire.read_by(me) == (chunk[:1] if callers_read else [])
            assert all(t.name == READER for m, t in wire.readers if m in chunk[1:])
            assert_idle(conn)


@both_ways
async def test_a_cancel_met_by_a_reading_caller_acts_at_once(
    autojump_clock: Any, callers_read: bool
) -> None:
    started = trio.Event()
    causes: list[CancelCause | None] = []

    async def hold(ctx: RequestContext, params: Any) -> Any:
        started.set()
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            causes.append(ctx.cancel_cause)
            raise

    with trio.fail_after(LIMIT):
        async with traced_connection(
            FnHandler({"hold": hold}), callers_read_replies=callers_read
        ) as (conn, peer, wire):
            await peer.send(req("h", "hold"))
            await started.wait()

            async def script() -> None:
                await first_round(peer)
                assert await peer.receive() == req(1, "second")
                await settle()
                assert conn._baton == (_CALLER if callers_read else _READER)
                await peer.send(cancel("h"))
                # Answered while the call still waits for its reply.
                assert await peer.receive() == cancelled("h")
                assert causes == [CancelCause.PEER]
                assert trio.current_time() == 0
                await settle()
                assert conn._baton == (_CALLER if callers_read else _READER)
                await peer.send(ok(1, "two"))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(script)
                assert await conn.call("first") == "one"
                assert await conn.call("second") == "two"
            reader_of_cancel = wire.reader_of(cancel("h"))
            if callers_read:
                assert reader_of_cancel is this_task()
            else:
                assert reader_of_cancel.name == READER
            assert wire.sent_responses() == [cancelled("h")]
            assert_idle(conn)


@both_ways
async def test_a_caller_reading_meets_the_replies_to_other_callers(
    autojump_clock: Any, callers_read: bool
) -> None:
    """Three callers, replies out of order: the reading caller hands the
    others theirs (a result, an error) and goes on reading for its own."""
    order: list[str] = []
    errors: list[RequestError] = []
    sent = trio.Event()
    batons: list[int] = []

    with trio.fail_after(LIMIT):
        async with traced_connection(callers_read_replies=callers_read) as (conn, peer, wire):

            async def call_b() -> None:
                assert await conn.call("b") == "bee"
                order.append("b")

            async def call_c() -> None:
                try:
                    await conn.call("c")
                except RequestError as exc:
                    errors.append(exc)
                    order.append("c")

            async def script() -> None:
                assert await peer.receive_n(2) == [req(0, "b"), req(1, "c")]
                sent.set()
                assert await peer.receive() == req(2, "a1")
                await peer.send(ok(2, "one"))
                assert await peer.receive() == req(3, "a2")
                await settle()
                batons.append(conn._baton)
                await peer.send(ok(0, "bee"))
                await settle()
                assert order == ["b"]
                batons.append(conn._baton)
                await peer.send(err(1, -32001, "no"))
                await settle()
                assert order == ["b", "c"]
                batons.append(conn._baton)
                await peer.send(ok(3, "two"))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(script)
                nursery.start_soon(call_b)
                await settle()
                nursery.start_soon(call_c)
                await sent.wait()
                assert await conn.call("a1") == "one"
                assert await conn.call("a2") == "two"
                order.append("a")
            assert order == ["b", "c", "a"]
            assert [(e.code, e.message) for e in errors] == [(-32001, "no")]
            me = this_task()
            if callers_read:
                assert batons == [_CALLER] * 3
                assert wire.read_by(me) == [ok(0, "bee"), err(1, -32001, "no"), ok(3, "two")]
            else:
                assert batons == [_READER] * 3
                assert wire.read_by(me) == []
            assert len(wire.received()) == 4
            await settle()
            assert conn._baton == _READER
            assert_idle(conn)


@both_ways
async def test_bad_input_met_by_a_reading_caller(
    autojump_clock: Any, callers_read: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """A reading caller answers garbage as the reader would, drops a reply to
    nobody, and fails its call on a malformed, unparsable or oversized reply."""
    outcomes: list[tuple[str, str]] = []
    big = "x" * 500

    async def outcome(method: str) -> None:
        try:
            outcomes.append(("ok", await conn.call(method)))
        except (RemoteProtocolError, MessageTooLarge) as exc:
            outcomes.append((type(exc).__name__, method))

    with trio.fail_after(LIMIT):
        async with traced_connection(
            FnHandler(), callers_read_replies=callers_read, max_message_size=200
        ) as (conn, peer, wire):

            async def script() -> None:
                await first_round(peer)
                assert await peer.receive() == req(1, "malformed")
                await settle()
                await peer.send_raw(b"{not json\n")
                reply = await peer.receive()
                assert (reply["id"], reply["error"]["code"]) == (None, -32700)
                await peer.send(ok(99, "nobody"))
                await peer.expect_silence()
                await settle()
                assert outcomes == [("ok", "one")]
                await peer.send(
                    {"jsonrpc": "2.0", "id": 1, "result": 1, "error": {"code": 1, "message": "x"}}
                )
                assert await peer.receive() == req(2, "unparsable")
                await settle()
                # Unparsable, but its head shows a reply: it fails its call
                # and is not answered (no reply to a reply).
                await peer.send_raw(b'{"jsonrpc":"2.0","id":2,"result":NaN}\n')
                assert await peer.receive() == req(3, "oversized")
                await settle()
                await peer.send(ok(3, big))
                assert await peer.receive() == req(4, "last")
                await peer.send(ok(4, "four"))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(script)
                for method in ["first", "malformed", "unparsable", "oversized", "last"]:
                    await outcome(method)
            assert outcomes == [
                ("ok", "one"),
                ("RemoteProtocolError", "malformed"),
                ("RemoteProtocolError", "unparsable"),
                ("MessageTooLarge", "oversized"),
                ("ok", "four"),
            ]
            me = this_task()
            read_by_me = wire.read_by(me)
            if callers_read:
                assert b"{not json" in read_by_me
                assert ok(99, "nobody") in read_by_me
                assert ok(4, "four") in read_by_me
            else:
                assert read_by_me == []
            warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
            assert any("unknown request id 99" in w for w in warnings), warnings
            await settle()
            assert conn._baton == _READER
            assert_idle(conn)


# ---------------------------------------------------------------------------
# Cancelling a reading caller


@pytest.mark.parametrize("how", ["deadline", "cancel"])
@both_ways
async def test_a_reading_caller_cancelled_gives_reading_back(
    autojump_clock: Any, callers_read: bool, how: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="acp_trio.connection")
    batons: list[int] = []
    scope = trio.CancelScope()
    later: list[Any] = []
    handler = FnHandler()

    with trio.fail_after(LIMIT):
        async with traced_connection(handler, callers_read_replies=callers_read) as (
            conn,
            peer,
            wire,
        ):

            async def script() -> None:
                await first_round(peer)
                assert await peer.receive() == req(1, "second")
                await settle()
                batons.append(conn._baton)
                if how == "cancel":
                    await trio.sleep(5)
                    scope.cancel()
                # One $/cancel_request, when the scope ends.
                assert await peer.receive() == cancel(1)
                assert trio.current_time() == 5
                await settle()
                batons.append(conn._baton)
                await peer.send(ok(1, "late"))
                await peer.expect_silence()

            async with trio.open_nursery() as nursery:
                nursery.start_soon(script)
                assert await conn.call("first") == "one"
                with scope:
                    if how == "deadline":
                        scope.deadline = trio.current_time() + 5
                    await conn.call("second")
                assert scope.cancelled_caught

            # Reading is the reader's again: another task's call, and a
            # notification before its reply, work.
            async def third() -> None:
                later.append(await conn.call("third"))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(third)
                assert await peer.receive() == req(2, "third")
                await peer.send(notif("note", {"n": 1}), ok(2, "three"))
            assert later == ["three"]
            assert handler.seen == [("note", {"n": 1})]
            assert batons == ([_CALLER, _READER] if callers_read else [_READER, _READER])
            assert wire.sent_cancels() == [1]
            assert wire.received() == [
                ok(0, "one"),
                ok(1, "late"),
                notif("note", {"n": 1}),
                ok(2, "three"),
            ]
            # The late reply (read by the reader) was dropped quietly.
            assert wire.reader_of(ok(1, "late")).name == READER
            assert wire.read_by(this_task()) == []
            records = [(r.levelno, r.getMessage()) for r in caplog.records]
            assert (logging.DEBUG, "dropping late or repeated reply to request 1") in records
            assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
            await settle()
            assert conn._baton == _READER
            assert conn._idle_reader is None
            assert_idle(conn)


@both_ways
async def test_a_handler_reading_its_nested_reply_meets_the_cancel_for_itself(
    autojump_clock: Any, callers_read: bool
) -> None:
    """A handler's second nested call reads for its reply and meets the
    ``$/cancel_request`` for the handler's own request: its scope is cancelled
    at once, the nested call is cancelled on the wire, the request answered
    ``-32800``, and reading goes back to the reader."""
    tasks: list[trio.lowlevel.Task] = []
    causes: list[CancelCause | None] = []

    async def nested(ctx: RequestContext, params: Any) -> Any:
        tasks.append(this_task())
        first = await ctx.connection.call("one")
        try:
            return [first, await ctx.connection.call("two")]
        except trio.Cancelled:
            causes.append(ctx.cancel_cause)
            raise

    with trio.fail_after(LIMIT):
        async with traced_connection(
            FnHandler({"nested": nested}), callers_read_replies=callers_read
        ) as (conn, peer, wire):
            await peer.send(req("h", "nested"))
            assert await peer.receive() == req(0, "one")
            await peer.send(ok(0, 1))
            assert await peer.receive() == req(1, "two")
            await settle()
            assert conn._baton == (_CALLER if callers_read else _READER)
            await peer.send(cancel("h"))
            assert await peer.receive_n(2) == [cancel(1), cancelled("h")]
            assert causes == [CancelCause.PEER]
            if callers_read:
                assert wire.reader_of(cancel("h")) is tasks[0]
            await peer.send(ok(1, "late"))
            await peer.expect_silence()
            await settle()
            assert conn._baton == _READER
            await peer.send(req("x", "unknown"))
            assert (await peer.receive())["error"]["code"] == -32601
            assert_idle(conn)


# ---------------------------------------------------------------------------
# The end of the connection


@both_ways
@pytest.mark.parametrize("end", ["peer eof", "local close"])
async def test_the_end_met_by_a_reading_caller_fails_every_call(
    autojump_clock: Any, callers_read: bool, end: str
) -> None:
    """End of stream, or ``aclose()`` from another task: the reading caller
    (not a handler) and a caller waiting normally both get ConnectionClosed,
    at once (virtual time 0)."""
    failures: dict[str, tuple[str, float]] = {}

    async def failing_call(name: str, *methods: str) -> None:
        try:
            for method in methods:
                await conn.call(method)
        except ConnectionClosed as exc:
            failures[name] = (str(exc), trio.current_time())

    with trio.fail_after(LIMIT):
        async with traced_connection(callers_read_replies=callers_read) as (conn, peer, wire):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(failing_call, "b", "b")
                assert await peer.receive() == req(0, "b")
                nursery.start_soon(failing_call, "a", "a1", "a2")
                assert await peer.receive() == req(1, "a1")
                await peer.send(ok(1, "one"))
                assert await peer.receive() == req(2, "a2")
                await settle()
                assert conn._baton == (_CALLER if callers_read else _READER)
                if end == "peer eof":
                    await peer.send_eof()
                else:
                    await conn.aclose()
                    assert trio.current_time() == 0
            reason = (
                "the peer closed the connection"
                if end == "peer eof"
                else "connection closed locally"
            )
            assert failures == {"a": (reason, 0), "b": (reason, 0)}
            assert wire.received() == [ok(1, "one")]
            assert wire.sent_cancels() == []
            if end == "peer eof":
                await conn.wait_closed()
                assert conn.closed
            else:
                await peer.expect_eof()
            assert_idle(conn)


@both_ways
async def test_a_reading_caller_fails_at_close_as_promptly_as_a_waiting_one(
    autojump_clock: Any, callers_read: bool
) -> None:
    """At close, a caller reading its reply is woken at once (its call failed
    by the teardown), not when the stream is finally closed: that waits for
    every handler's cleanup (here a shielded 30 s, past ``close_timeout``).
    (Regression: at 814d7b9 the reading caller failed at t=30.)"""
    started = trio.Event()
    failures: dict[str, float] = {}

    async def slow_to_stop(ctx: RequestContext, params: Any) -> Any:
        started.set()
        try:
            await trio.sleep_forever()
        finally:
            with trio.CancelScope(shield=True):
                await trio.sleep(30)  # cleanup that takes its time

    async def failing_call(name: str, *methods: str) -> None:
        try:
            for method in methods:
                await conn.call(method)
        except ConnectionClosed:
            failures[name] = trio.current_time()

    with trio.fail_after(LIMIT):
        async with traced_connection(
            FnHandler({"slow": slow_to_stop}), callers_read_replies=callers_read, close_timeout=5
        ) as (conn, peer, _):
            await peer.send(req("s", "slow"))
            await started.wait()
            async with trio.open_nursery() as nursery:
                nursery.start_soon(failing_call, "b", "b")
                assert await peer.receive() == req(0, "b")
                nursery.start_soon(failing_call, "a", "a1", "a2")
                assert await peer.receive() == req(1, "a1")
                await peer.send(ok(1, "one"))
                assert await peer.receive() == req(2, "a2")
                await settle()
                conn.close_soon()
            assert failures == {"a": 0, "b": 0}


# ---------------------------------------------------------------------------
# A full notification queue


@both_ways
async def test_a_full_inbox_hands_reading_back_to_the_reader(
    autojump_clock: Any, callers_read: bool
) -> None:
    gate = trio.Event()
    handled: list[int] = []
    results: list[tuple[Any, list[int]]] = []
    notes = [notif("note", {"n": i}) for i in range(1, 7)]

    async def on_note(method: str, params: Any) -> None:
        await gate.wait()
        handled.append(params["n"])

    with trio.fail_after(LIMIT):
        async with traced_connection(
            FnHandler(notifications={"note": on_note}),
            callers_read_replies=callers_read,
            max_queued_notifications=2,
        ) as (conn, peer, wire):

            async def script() -> None:
                await first_round(peer)
                assert await peer.receive() == req(1, "second")
                await settle()
                await peer.send(*notes, ok(1, "two"))
                await settle()
                # The consumer holds note 1, two are queued, the reader waits
                # to queue note 4; the reply is not read yet.
                assert results == []
                assert handled == []
                assert conn._baton == _READER
                assert wire.received() == [ok(0, "one"), *notes[:4]]
                stats = conn.statistics()
                assert (stats.notifications_received, stats.notifications_queued) == (4, 4)
                gate.set()

            async with trio.open_nursery() as nursery:
                nursery.start_soon(script)
                await conn.call("first")
                reply = await conn.call("second")
                results.append((reply, list(handled)))
            assert results == [("two", [1, 2, 3, 4, 5, 6])]
            assert wire.received() == [ok(0, "one"), *notes, ok(1, "two")]
            me = this_task()
            # The caller queued what fit, then put the next frame back.
            assert wire.read_by(me) == (notes[:2] if callers_read else [])
            assert all(t.name == READER for m, t in wire.readers if m not in notes[:2])
            await settle()
            assert conn._baton == _READER
            assert_idle(conn)


# ---------------------------------------------------------------------------
# Real OS pipes


@pytest.mark.parametrize("wait", [False, True], ids=["quick", "waits"])
@both_ways
async def test_sequential_calls_over_os_pipes(
    autojump_clock: Any, callers_read: bool, wait: bool
) -> None:
    n = 200
    wire = ReaderWire()

    async def echo(ctx: RequestContext, params: Any) -> Any:
        if wait:
            await trio.sleep(0.01)
        return params

    ours, theirs = pipe_stream_pair()
    cfg = ConnectionConfig(trace=wire, callers_read_replies=callers_read)
    with trio.fail_after(LIMIT):
        async with (
            open_connection(ours, None, config=cfg) as conn,
            open_connection(
                theirs,
                FnHandler({"echo": echo}),
                config=ConnectionConfig(callers_read_replies=callers_read),
            ) as other,
        ):
            assert conn._stream._receive_fd is not None  # read straight from the pipe
            for i in range(n):
                assert await conn.call("echo", {"i": i}) == {"i": i}
            if wait:
                assert trio.current_time() == pytest.approx(n * 0.01)
            else:
                assert trio.current_time() == 0
            assert wire.received() == [ok(i, {"i": i}) for i in range(n)]
            by_me = len(wire.read_by(this_task()))
            if callers_read:
                # All but the first, except when a send yields (the outbox
                # yields once every 64 requests): the reader, woken, then
                # takes reading back before the call waits.
                assert n - 1 - n // 32 <= by_me <= n - 1
            else:
                assert by_me == 0
            await settle()
            assert conn._baton == _READER
            assert other._baton == _READER
            assert_idle(conn)
            assert_idle(other)


@both_ways
async def test_concurrent_callers_over_os_pipes(autojump_clock: Any, callers_read: bool) -> None:
    tasks, per_task = 4, 50
    wire = ReaderWire()
    results: dict[int, list[Any]] = {k: [] for k in range(tasks)}

    async def echo(ctx: RequestContext, params: Any) -> Any:
        # Replies come back out of order.
        await trio.sleep((params["k"] * 7 + params["i"]) % 3 * 0.01)
        return params

    async def caller(conn: Connection, k: int) -> None:
        for i in range(per_task):
            results[k].append(await conn.call("echo", {"k": k, "i": i}))

    ours, theirs = pipe_stream_pair()
    with trio.fail_after(LIMIT):
        async with (
            open_connection(
                ours, None, config=ConnectionConfig(trace=wire, callers_read_replies=callers_read)
            ) as conn,
            open_connection(
                theirs,
                FnHandler({"echo": echo}),
                config=ConnectionConfig(callers_read_replies=callers_read),
            ) as other,
        ):
            async with trio.open_nursery() as nursery:
                for k in range(tasks):
                    nursery.start_soon(caller, conn, k)
            for k in range(tasks):
                assert results[k] == [{"k": k, "i": i} for i in range(per_task)]
            received = wire.received()
            assert len(received) == tasks * per_task
            assert Counter(m["id"] for m in received) == Counter(range(tasks * per_task))
            readers = Counter(t.name for _, t in wire.readers)
            if callers_read:
                assert readers[READER] < tasks * per_task
            else:
                assert set(readers) == {READER}
            await settle()
            assert conn._baton == _READER
            assert_idle(conn)
            assert_idle(other)


@both_ways
async def test_a_reading_caller_cancelled_over_a_pipe_loses_no_data(
    autojump_clock: Any, callers_read: bool
) -> None:
    """Over a pipe, the caller reads notification 1 alone; right then the
    peer writes notification 2 and the caller's deadline passes. Whoever
    reads next must still see notification 2. (Regression: at 814d7b9
    ``FramedStream._read_fd`` read the pipe before its checkpoint, so the
    cancelled caller dropped the bytes it had just read.)"""
    peer_read, our_write = os.pipe()
    our_read, peer_write = os.pipe()
    ours = trio.StapledStream(trio.lowlevel.FdStream(our_write), trio.lowlevel.FdStream(our_read))
    peer_in = trio.lowlevel.FdStream(peer_read)
    scope = trio.CancelScope()
    wire = Wire()
    buffer = bytearray()

    def trace(direction: str, frame: bytes) -> None:
        wire(direction, frame)
        if direction == "recv" and json.loads(frame) == notif("note", {"n": 1}):
            # (In the reading task, between two reads of the pipe.)
            os.write(peer_write, line(notif("note", {"n": 2})))
            scope.deadline = trio.current_time()

    async def receive() -> Any:
        while b"\n" not in buffer:
            buffer.extend(await peer_in.receive_some(65536))
        index = buffer.index(b"\n")
        frame = bytes(buffer[:index])
        del buffer[: index + 1]
        return json.loads(frame)

    handler = FnHandler()
    cfg = ConnectionConfig(trace=trace, callers_read_replies=callers_read)
    try:
        with trio.fail_after(LIMIT):
            async with open_connection(ours, handler, config=cfg) as conn:

                async def script() -> None:
                    assert await receive() == req(0, "first")
                    os.write(peer_write, line(ok(0, "one")))
                    assert await receive() == req(1, "second")
                    await settle()
                    os.write(peer_write, line(notif("note", {"n": 1})))
                    assert await receive() == cancel(1)
                    os.write(peer_write, line(notif("note", {"n": 3})))

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(script)
                    assert await conn.call("first") == "one"
                    with scope:
                        await conn.call("second")
                    assert scope.cancelled_caught
                await trio.sleep(1)
                assert handler.seen == [("note", {"n": i}) for i in (1, 2, 3)]
                assert [m for m in wire.received() if "method" in m] == [
                    notif("note", {"n": i}) for i in (1, 2, 3)
                ]
    finally:
        os.close(peer_write)
        await peer_in.aclose()


# ---------------------------------------------------------------------------
# Random programs (Hypothesis)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    plan=st.lists(
        st.tuples(st.integers(0, 3), st.integers(0, 5), st.booleans()), min_size=1, max_size=12
    ),
    callers_read=st.booleans(),
)
def test_cancelling_a_reading_caller_at_any_moment_loses_no_frame(
    plan: list[tuple[int, int, bool]], callers_read: bool
) -> None:
    """Over pipes, one task makes sequential calls; the peer answers each,
    writes a notification some scheduler passes later (so that it may sit
    in the pipe when the next call starts reading), and may cancel the call
    in flight some passes after that, from its own task. Every frame is
    read once, every notification handled in order, every call ends."""

    async def main() -> None:
        ours, theirs = pipe_stream_pair()
        peer = RawPeer(theirs)
        wire = ReaderWire()
        handler = FnHandler()
        current: list[trio.CancelScope] = []
        outcomes: list[Any] = []
        written: list[Any] = []
        cfg = ConnectionConfig(trace=wire, callers_read_replies=callers_read)
        with trio.fail_after(LIMIT):
            async with open_connection(ours, handler, config=cfg) as conn:

                async def caller() -> None:
                    for i in range(len(plan)):
                        with trio.CancelScope() as scope:
                            current[:] = [scope]
                            outcomes.append(await conn.call("work", {"i": i}))
                        if scope.cancelled_caught:
                            outcomes.append("cancelled")

                async def send(msg: dict[str, Any]) -> None:
                    written.append(msg)
                    await peer.send(msg)

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(caller)
                    for i, (gap, cancel_after, do_cancel) in enumerate(plan):
                        while (msg := await peer.receive()).get("id") != i:
                            assert msg == cancel(msg["params"]["requestId"])
                        await send(ok(i, i))
                        for _ in range(gap):
                            await trio.lowlevel.checkpoint()
                        await send(notif("note", {"i": i}))
                        if do_cancel:
                            for _ in range(cancel_after):
                                await trio.lowlevel.checkpoint()
                            current[0].cancel()
                await trio.sleep(1)
                assert len(outcomes) == len(plan)
                assert all(o in (i, "cancelled") for i, o in enumerate(outcomes))
                assert wire.received() == written
                assert handler.seen == [("note", {"i": i}) for i in range(len(plan))]
                assert_idle(conn)
        await theirs.aclose()
        event(f"cancelled calls: {outcomes.count('cancelled')}")

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


DURATIONS = st.sampled_from([0, 0, 0.5, 1, 3])
call_spec = st.one_of(st.none(), st.none(), DURATIONS)  # a call's timeout, None: none
peer_op = st.one_of(
    st.tuples(st.just("reply"), st.integers(0, 99), st.booleans()),
    st.tuples(st.just("reply"), st.integers(0, 99), st.just(False)),
    st.tuples(st.just("notify"), DURATIONS),
    st.tuples(st.just("request"), st.sampled_from(["quick", "sleep", "hold"]), DURATIONS),
    st.tuples(st.just("cancel in"), st.integers(0, 99)),
    st.tuples(st.just("cancel call"), st.integers(0, 9)),
    st.tuples(st.just("cancel call"), st.integers(0, 9)),
    st.tuples(st.just("flush"), st.one_of(st.none(), st.integers(1, 40))),
    st.tuples(st.just("sleep"), DURATIONS),
    st.tuples(st.just("sleep"), st.just(0)),  # one pass of the scheduler
    st.tuples(st.just("settle")),
)


async def _quick(ctx: RequestContext, p: Any) -> Any:
    return {"quick": p["n"]}


async def _sleep(ctx: RequestContext, p: Any) -> Any:
    await trio.sleep(p["t"])
    return {"slept": p["n"]}


async def _hold(ctx: RequestContext, p: Any) -> Any:
    try:
        await trio.sleep_forever()
    finally:
        with trio.CancelScope(shield=True):
            await trio.sleep(p["t"])  # slow to stop


class _ProgramPeer:
    """The raw side: writes queued frames (whole or split anywhere), keeps
    every frame it wrote and everything it reads."""

    def __init__(self, stream: trio.abc.Stream) -> None:
        self.stream = stream
        self.written: list[Any] = []
        self.received: list[dict[str, Any]] = []
        self.pending: list[bytes] = []
        self.eof = trio.Event()

    async def reader(self) -> None:
        buf = b""
        while data := await self.stream.receive_some(65536):
            buf += data
            *frames, buf = buf.split(b"\n")
            self.received.extend(json.loads(f) for f in frames)
        assert buf == b""
        self.eof.set()

    def queue(self, msg: dict[str, Any]) -> None:
        self.written.append(msg)
        self.pending.append(line(msg))

    async def flush(self, piece: int | None = None) -> None:
        if self.pending:
            data, self.pending = b"".join(self.pending), []
            step = piece or len(data)
            for i in range(0, len(data), step):
                await self.stream.send_all(data[i : i + step])


async def run_program(
    callers: list[list[float | None]],
    program: list[tuple[Any, ...]],
    callers_read: bool,
    eager: bool,
    inbox: int,
) -> None:
    ours, theirs = pipe_stream_pair()
    peer = _ProgramPeer(theirs)
    wire = ReaderWire()
    noted: list[int] = []
    sent_notes: list[int] = []
    incoming: dict[Any, str] = {}  # id -> method, of the requests the peer sent
    answered: set[int] = set()  # our outgoing ids the peer answered
    errored: set[int] = set()
    outcomes: dict[tuple[int, int], tuple[str, Any]] = {}
    may_cancel: set[tuple[int, int]] = set()
    scopes: dict[int, tuple[tuple[int, int], trio.CancelScope]] = {}
    # How the program ends: the peer's EOF, a local close, or neither.
    ending = program[-1][0] if program and program[-1][0] in ("eof", "close") else None
    ended_at: list[float] = []

    async def on_note(method: str, params: Any) -> None:
        if params["t"]:
            await trio.sleep(params["t"])
        noted.append(params["n"])

    handler = FnHandler({"quick": _quick, "sleep": _sleep, "hold": _hold}, {"note": on_note})
    cfg = ConnectionConfig(
        trace=wire,
        callers_read_replies=callers_read,
        eager_handlers=eager,
        max_queued_notifications=inbox,
    )

    async def caller(conn: Connection, k: int, timeouts: list[float | None]) -> None:
        for i, timeout in enumerate(timeouts):
            key = (k, i)
            if timeout is not None:
                may_cancel.add(key)
            scope = trio.CancelScope()
            if timeout is not None:
                scope.deadline = trio.current_time() + timeout
            scopes[k] = (key, scope)
            started = trio.current_time()
            try:
                with scope:
                    outcomes[key] = ("ok", await conn.call("work", {"k": k, "i": i}))
                if scope.cancelled_caught:
                    outcomes[key] = ("cancelled", None)
            except RequestError as exc:
                outcomes[key] = ("error", exc.code)
            except ConnectionClosed:
                outcomes[key] = ("closed", (started, trio.current_time()))
            finally:
                del scopes[k]

    def our_requests() -> dict[int, dict[str, Any]]:
        return {m["id"]: m for m in peer.received if "method" in m and "id" in m}

    def unanswered() -> list[int]:
        return [i for i in our_requests() if i not in answered]

    def answer(request_id: int, as_error: bool) -> None:
        answered.add(request_id)
        if as_error:
            errored.add(request_id)
            peer.queue(err(request_id, -32050, "refused"))
        else:
            peer.queue(ok(request_id, {"echo": our_requests()[request_id]["params"]}))

    async with trio.open_nursery() as outer:
        outer.start_soon(peer.reader)
        async with open_connection(ours, handler, config=cfg) as conn:
            async with trio.open_nursery() as nursery:
                for k, timeouts in enumerate(callers):
                    nursery.start_soon(caller, conn, k, timeouts)
                n = 0
                for step in program:
                    kind = step[0]
                    if kind == "reply":
                        waiting = unanswered()
                        if waiting:
                            answer(waiting[step[1] % len(waiting)], step[2])
                    elif kind == "notify":
                        sent_notes.append(n)
                        peer.queue(notif("note", {"n": n, "t": step[1]}))
                        n += 1
                    elif kind == "request":
                        incoming[n] = step[1]
                        peer.queue(req(n, step[1], {"n": n, "t": step[2]}))
                        n += 1
                    elif kind == "cancel in":
                        if incoming:
                            ids = list(incoming)
                            peer.queue(cancel(ids[step[1] % len(ids)]))
                    elif kind == "cancel call":
                        if scopes:
                            ks = sorted(scopes)
                            key, scope = scopes[ks[step[1] % len(ks)]]
                            may_cancel.add(key)
                            scope.cancel()
                    elif kind == "flush":
                        await peer.flush(step[1])
                    elif kind == "sleep":
                        await peer.flush()
                        await trio.sleep(step[1])
                    elif kind == "settle":
                        await peer.flush()
                        await settle()
                    elif kind == "eof":
                        await peer.flush()
                        ended_at.append(trio.current_time())
                        await theirs.send_eof()
                    else:
                        assert kind == "close"
                        await peer.flush()
                        ended_at.append(trio.current_time())
                        conn.close_soon()
                await peer.flush()
                if ending is None:
                    # Answer every call until every caller is done.
                    for _ in range(200):
                        if not scopes and len(outcomes) == sum(map(len, callers)):
                            break
                        for request_id in unanswered():
                            answer(request_id, False)
                        await peer.flush()
                        await trio.sleep(1)
            # Every call ended, in one of the allowed ways.
            assert len(outcomes) == sum(map(len, callers))
            for (k, i), (what, value) in outcomes.items():
                if what == "ok":
                    assert value == {"echo": {"k": k, "i": i}}
                elif what == "cancelled":
                    assert (k, i) in may_cancel
                elif what == "closed":
                    assert ending is not None
                    if ending == "close":
                        # At once (or when made, if later), whether the call
                        # was waiting or reading.
                        started, failed = value
                        assert failed == max(started, ended_at[0]), (value, ended_at)
                else:
                    assert (what, value) == ("error", -32050)
            if ending is None:
                for request_id in incoming:
                    peer.queue(cancel(request_id))
                await peer.flush()
                await trio.sleep(300)  # slow notification handlers finish
                assert not conn.closed
                assert_idle(conn)
                assert conn._baton == _READER
                assert conn._idle_reader is None
            else:
                await conn.wait_closed()
            assert conn._running_handlers == 0
            assert conn._barrier_waiters == []
            assert len(conn._table) == 0
        await peer.eof.wait()
    await theirs.aclose()

    # Every frame the peer wrote was read (after a local close: up to some
    # point), traced exactly once, in order.
    received = wire.received()
    if ending == "close":
        assert received == peer.written[: len(received)]
    else:
        assert received == peer.written
    # Every request read got exactly one reply.
    read_ids = [m["id"] for m in received if "method" in m and "id" in m]
    replies = Counter(m["id"] for m in peer.received if "method" not in m)
    assert replies == Counter(read_ids), (replies, read_ids)
    if ending != "close":
        assert read_ids == list(incoming)
    # At most one $/cancel_request per call, only for calls that ended cancelled.
    cancels = [
        m["params"]["requestId"] for m in peer.received if m.get("method") == "$/cancel_request"
    ]
    assert len(cancels) == len(set(cancels))
    cancelled_ids = {
        request_id
        for request_id, m in our_requests().items()
        if outcomes[(m["params"]["k"], m["params"]["i"])][0] == "cancelled"
    }
    assert set(cancels) <= cancelled_ids
    # Notifications were handled in wire order: all of them, unless the peer
    # closed first (then those still queued have close_timeout to finish).
    if ending is not None:
        assert noted == sent_notes[: len(noted)]
    else:
        assert noted == sent_notes
    by_callers = sum(1 for _, t in wire.readers if t.name != READER)
    if not callers_read:
        assert by_callers == 0
    event(f"callers_read={callers_read}: frames read by callers: {min(by_callers, 5)}+")
    event(f"ending: {ending}")
    for what, _ in outcomes.values():
        event(f"call: {what}")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    callers=st.lists(st.lists(call_spec, min_size=1, max_size=6), min_size=1, max_size=4),
    program=st.lists(peer_op, min_size=5, max_size=60),
    end=st.tuples(st.integers(0, 80), st.sampled_from(["eof", "close"])),
    callers_read=st.booleans(),
    eager=st.booleans(),
    inbox=st.sampled_from([1, 2, 1024]),
)
def test_random_concurrent_callers_and_peer_programs(
    callers: list[list[float | None]],
    program: list[tuple[Any, ...]],
    end: tuple[int, str],
    callers_read: bool,
    eager: bool,
    inbox: int,
) -> None:
    end_at, ending = end
    if end_at < len(program):
        program = [*program[:end_at], (ending,)]
    clock = trio.testing.MockClock(autojump_threshold=0)

    async def main() -> None:
        with trio.fail_after(10_000):
            await run_program(callers, program, callers_read, eager, inbox)

    trio.run(main, clock=clock)


# ---------------------------------------------------------------------------
# Found in review


@pytest.mark.parametrize("callers_read", [True, False], ids=["callers-read", "reader-only"])
async def test_a_request_abandoned_by_its_owner_answers_another_waiter(
    autojump_clock: Any, callers_read: bool
) -> None:
    """``open_request()``'s pending request may be abandoned by the task that
    owns it while another task waits on ``result()``: that waiter gets an
    answer at once (so it must never be the one reading the pipe)."""
    outcome: list[str] = []
    with trio.fail_after(LIMIT):
        async with traced_connection(callers_read_replies=callers_read) as (conn, peer, _):
            leave = trio.Event()

            async def owner(task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED) -> None:
                async with conn.open_request("slow") as pending:
                    task_status.started(pending)
                    await leave.wait()
                    pending.detach()

            async def waiter(pending: Any) -> None:
                assert await conn.call("first") == "one"  # the reader gives up reading
                try:
                    with trio.fail_after(10):
                        await pending.result()
                except (LocalProtocolError, trio.TooSlowError) as exc:
                    outcome.append(type(exc).__name__)

            async with trio.open_nursery() as nursery:
                pending = await nursery.start(owner)
                assert await peer.receive() == req(0, "slow")
                nursery.start_soon(waiter, pending)
                assert await peer.receive() == req(1, "first")
                await peer.send(ok(1, "one"))
                await settle()
                leave.set()
    assert outcome == ["LocalProtocolError"]


async def test_a_kept_scope_cancelled_while_the_reader_is_parked(autojump_clock: Any) -> None:
    """A scope kept by a handler that ran eagerly is not the reader's: cancelling
    it while the reader has given reading to a caller changes nothing."""
    kept: list[trio.CancelScope] = []

    async def start(ctx: RequestContext, params: Any) -> Any:
        kept.append(ctx.cancel_scope)
        return "started"

    with trio.fail_after(LIMIT):
        async with traced_connection(FnHandler({"start": start})) as (conn, peer, _):
            await peer.send(req(1, "start"))
            assert await peer.receive() == ok(1, "started")

            async def script() -> None:
                assert await peer.receive() == req(0, "first")
                await peer.send(ok(0, "one"))
                assert await peer.receive() == req(1, "second")
                await peer.send(ok(1, "two"))

            async def cancel_when_parked() -> None:
                while conn._idle_reader is None:
                    await trio.lowlevel.checkpoint()
                kept[0].cancel()

            async with trio.open_nursery() as nursery:
                nursery.start_soon(script)
                nursery.start_soon(cancel_when_parked)
                assert await conn.call("first") == "one"
                assert await conn.call("second") == "two"
            await settle()
            assert conn._baton == _READER
            assert_idle(conn)
