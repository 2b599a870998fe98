"""Random concurrent programs over real OS pipes (a Hypothesis property
test): local callers with and without deadlines against a scripted peer
that replies, notifies, sends requests and cancels, writes frames whole or
split anywhere, and ends the stream or not; every call has exactly one
outcome and the peer sees exactly one reply per request."""

from __future__ import annotations

from collections import Counter
from typing import Any

import trio
import trio.lowlevel
import trio.testing
from budget import examples
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from acp_trio import (
    ConnectionClosed,
    ConnectionConfig,
    RequestError,
)
from acp_trio.lowlevel import (
    Connection,
    RequestContext,
    open_connection,
)

from .conftest import (
    READER,
    FnHandler,
    ProgramPeer,
    ReaderWire,
    assert_idle,
    cancel,
    err,
    notif,
    ok,
    pipe_stream_pair,
    req,
    settle,
)

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


async def run_program(
    callers: list[list[float | None]],
    program: list[tuple[Any, ...]],
    callers_read: bool,
    eager: bool,
    inbox: int,
) -> None:
    ours, theirs = pipe_stream_pair()
    peer = ProgramPeer(theirs)
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
            assert handler.running == 0  # every handler call returned
            stats = conn.statistics()
            assert (stats.incoming_in_flight, stats.outgoing_pending) == (0, 0)
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


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
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
