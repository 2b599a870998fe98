"""Calls over real OS pipes (stdio, a spawned agent), where the stream reads
the pipe's descriptor directly: sequential and concurrent callers, a caller
cancelled while data sits in the pipe (no byte read is dropped), an abandoned
request, and a Hypothesis property test: a caller cancelled at any
scheduler pass (the random concurrent programs are in
``test_pipe_programs.py``).

Over a pipe, a caller waiting for its reply may read it itself
(``ConnectionConfig.callers_read_replies``, ``acp_trio/_core/_read_right.py``);
each test runs both ways and shows they behave the same. The edges of the
hand-over between reader and callers are in ``test_caller_reads.py``.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
import trio.lowlevel
import trio.testing
from budget import examples
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from acp_trio import (
    ConnectionConfig,
    LocalProtocolError,
)
from acp_trio.lowlevel import (
    Connection,
    FramedStream,
    Handler,
    RequestContext,
    open_connection,
)

from .conftest import (
    LIMIT,
    READER,
    FnHandler,
    ReaderWire,
    ScriptedPeer,
    Wire,
    assert_idle,
    cancel,
    line,
    notif,
    ok,
    pipe_stream_pair,
    raw_peer,
    req,
    settle,
    this_task,
)

both_ways = pytest.mark.parametrize(
    "callers_read", [True, False], ids=["callers-read", "reader-only"]
)


@asynccontextmanager
async def traced_connection(
    handler: Handler | None = None,
    *,
    stream_pair: Callable[[], tuple[trio.abc.Stream, trio.abc.Stream]] = pipe_stream_pair,
    **config: Any,
) -> AsyncIterator[tuple[Connection, ScriptedPeer, ReaderWire]]:
    """``raw_connection`` with a :class:`ReaderWire`, over real OS pipes by
    default: callers read only from a pipe (``FramedStream.reads_pipe``)."""
    wire = ReaderWire()
    ours, theirs = stream_pair()
    cfg = ConnectionConfig(trace=wire, **config)
    try:
        async with open_connection(ours, handler, config=cfg) as conn:
            yield conn, raw_peer(theirs), wire
    finally:
        await theirs.aclose()


async def first_round(peer: ScriptedPeer, method: str = "first", request_id: int = 0) -> None:
    """Answer the first call: the reader reads this reply, hands it over and
    parks; the caller's next call then reads for itself."""
    assert await peer.receive() == req(request_id, method)
    await peer.send(ok(request_id, "one"))


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
        framed = FramedStream(ours, ours)
        assert framed.reads_pipe  # read straight from the pipe
        async with (
            open_connection(framed, None, config=cfg) as conn,
            open_connection(
                theirs,
                FnHandler({"echo": echo}),
                config=ConnectionConfig(callers_read_replies=callers_read),
            ) as other,
        ):
            for i in range(n):
                assert await conn.call("echo", {"i": i}) == {"i": i}
            if wait:
                assert trio.current_time() == pytest.approx(n * 0.01)
            else:
                assert trio.current_time() == 0
            assert wire.received() == [ok(i, {"i": i}) for i in range(n)]
            if callers_read:
                # The reader read the first reply and parked; the caller
                # read (nearly) every later reply itself.
                assert len(wire.read_by(this_task())) >= n // 2
            else:
                assert wire.read_by(this_task()) == []  # the reader task reads
            await settle()
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

    def trace(direction: str, frame: bytes) -> None:
        wire(direction, frame)
        if direction == "recv" and json.loads(frame) == notif("note", {"n": 1}):
            # (In the reading task, between two reads of the pipe.)
            os.write(peer_write, line(notif("note", {"n": 2})))
            scope.deadline = trio.current_time()

    # The peer reads with a ScriptedPeer and writes straight to its pipe
    # (the trace hook above must write without waiting).
    receive = raw_peer(peer_in).receive

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


@settings(max_examples=examples(500), deadline=None, suppress_health_check=[HealthCheck.too_slow])
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
        peer = raw_peer(theirs)
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
