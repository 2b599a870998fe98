"""Calls over real OS pipes (stdio, a spawned agent), where the stream reads
the pipe's descriptor directly: sequential and concurrent callers, a caller
cancelled while data sits in the pipe (no byte read is dropped), an abandoned
request, and two Hypothesis property tests: a caller cancelled at any
scheduler pass, and random concurrent programs against a scripted peer.

(``ConnectionConfig.callers_read_replies`` no longer has an effect: the
reader task reads every frame. The ``callers_read`` parameter is kept so the
tests show both configurations behave the same.)
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
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from acp_trio import (
    ConnectionClosed,
    ConnectionConfig,
    LocalProtocolError,
    RequestError,
)
from acp_trio.lowlevel import (
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
    assert by_callers == 0
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
