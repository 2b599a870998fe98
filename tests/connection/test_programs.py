"""Random programs against one connection (a Hypothesis property test).

A raw peer runs a random *program*: requests (whose handlers sleep, call the
peer back, raise, refuse, cooperate, shield, never end, or have a child task
that fails as it is cancelled), notifications (one kind calls the peer from
the notification handler), in any interleaving, cancels of known, finished,
unknown and malformed ids, replies to the connection's own outgoing calls,
local calls with and without deadlines, writes split or coalesced at random,
virtual sleeps, and possibly an early EOF; the connection has a random
concurrency limit and waiting-room size.

Invariant: every request gets exactly one response, nothing is answered that
was not a request, at most one ``$/cancel_request`` per outgoing id, no
request's handler starts before the notifications read ahead of it were
handled (except while a notification handler waits for the peer), the
connection stays open unless the peer closed it, nothing is left in the
registries, and when the connection is closed its tasks are gone.

The test is sync and calls ``trio.run`` itself (Hypothesis drives it).
"""

from __future__ import annotations

import contextlib
import json
from collections import Counter
from typing import Any

import trio
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
    RequestContext,
    open_connection,
)

from .conftest import FnHandler, ProgramPeer, assert_idle, cancel, err, notif, ok, req

DURATIONS = st.sampled_from([0, 0, 0.5, 1, 2, 5])
METHODS = [
    "sleep",
    "coop",
    "callback",
    "raise",
    "refuse",
    "forever",
    "shield",
    "fragile",
    "unknown",
]

request_op = st.tuples(st.just("request"), st.sampled_from(METHODS), DURATIONS, st.booleans())
op = st.one_of(
    request_op,
    request_op,
    request_op,
    st.tuples(st.just("notify"), st.sampled_from(["note", "ask"]), DURATIONS),
    st.tuples(
        st.just("cancel"), st.sampled_from(["known", "unknown", "malformed"]), st.integers(0, 99)
    ),
    st.tuples(st.just("reply"), st.integers(0, 99), st.booleans()),
    st.tuples(st.just("call"), st.one_of(st.none(), DURATIONS)),
    st.tuples(st.just("flush"), st.one_of(st.none(), st.integers(1, 40))),
    st.tuples(st.just("sleep"), DURATIONS),
)

MALFORMED_CANCELS = [
    notif("$/cancel_request", {"requestId": True}),
    notif("$/cancel_request", {"requestId": {"x": 1}}),
    notif("$/cancel_request", {}),
    notif("$/cancel_request"),
]

# Codes each method may be answered with (a result is "ok"). Any request can
# be cancelled before or while it runs, or at shutdown: -32800.
ALLOWED: dict[str, set[Any]] = {
    "sleep": {"ok", -32800},
    "coop": {"ok", -32800},
    # The peer's -32050, let through by the handler: -32603 naming "cb".
    "callback": {"ok", -32800, -32603},
    "raise": {-32603, -32800},
    "refuse": {-32001, -32800},
    "forever": {-32800},
    "shield": {"ok", -32800},
    # -32603: cancelled after its work, it failed in its clean-up.
    "fragile": {"ok", -32800, -32603},
    "unknown": {-32601, -32800},
}

LIMITS = st.tuples(st.sampled_from([1, 2, 16384]), st.sampled_from([0, 1, 3, 16384]))


async def _sleep(ctx: RequestContext, p: Any) -> Any:
    await trio.sleep(p["t"])
    return {"slept": p["t"]}


async def _coop(ctx: RequestContext, p: Any) -> Any:
    ctx.cooperative = True
    with trio.move_on_after(p["t"]):
        await ctx.cancel_requested.wait()
    return {"partial": ctx.cancel_requested.is_set()}


async def _callback(ctx: RequestContext, p: Any) -> Any:
    return await ctx.connection.call("cb", {"for": ctx.id})


async def _raise(ctx: RequestContext, p: Any) -> Any:
    await trio.sleep(p["t"])
    raise ValueError("handler bug")


async def _refuse(ctx: RequestContext, p: Any) -> Any:
    await trio.sleep(p["t"])
    raise RequestError(-32001, "refused")


async def _forever(ctx: RequestContext, p: Any) -> Any:
    await trio.sleep_forever()


async def _shield(ctx: RequestContext, p: Any) -> Any:
    with trio.CancelScope(shield=True):
        await trio.sleep(p["t"])
    return "shielded"


async def _fragile(ctx: RequestContext, p: Any) -> Any:
    # A child task that fails when the request is cancelled: the handler
    # ends with a group of Cancelled and that error.
    async def child() -> None:
        try:
            await trio.sleep_forever()
        finally:
            if ctx.cancel_cause is not None:
                raise ValueError("clean-up failed")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(child)
        await trio.sleep(p["t"])
        nursery.cancel_scope.cancel()
    return "fragile"


def count_tasks() -> int:
    def walk(task: trio.lowlevel.Task) -> int:
        return 1 + sum(walk(t) for n in task.child_nurseries for t in n.child_tasks)

    root = trio.lowlevel.current_root_task()
    assert root is not None
    return walk(root)


async def run_program(program: list[tuple[Any, ...]], limits: tuple[int, int]) -> None:
    tasks_before = count_tasks()
    ours, theirs = trio.testing.memory_stream_pair()
    peer = ProgramPeer(theirs)
    sent_requests: dict[Any, str] = {}  # id -> method
    sent_notes: list[Any] = []
    replied: set[int] = set()
    local_outcomes: list[str] = []
    noted: list[Any] = []
    handled: set[Any] = set()  # notifications whose handler has finished
    asking: list[bool] = [False]  # an "ask" handler waits for the peer
    overtaken: list[Any] = []
    conn_box: list[Any] = []

    async def on_note(method: str, params: Any) -> None:
        await trio.sleep(params["t"])
        noted.append(params["n"])
        handled.add(params["n"])

    async def on_ask(method: str, params: Any) -> None:
        noted.append(params["n"])
        asking[0] = True
        try:
            with contextlib.suppress(RequestError, ConnectionClosed):
                await conn_box[0].call("asked", {"n": params["n"]})
        finally:
            asking[0] = False
            handled.add(params["n"])

    def in_order(fn: Any) -> Any:
        # Each handler checks, as it starts, that every notification read
        # before its request was handled (ordering gives way only while a
        # notification handler waits for the peer).
        async def wrapped(ctx: RequestContext, p: Any) -> Any:
            if not asking[0] and not set(p["before"]) <= handled:
                overtaken.append((ctx.id, sorted(set(p["before"]) - handled)))
            return await fn(ctx, p)

        return wrapped

    handler = FnHandler(
        {
            "sleep": in_order(_sleep),
            "coop": in_order(_coop),
            "callback": in_order(_callback),
            "raise": in_order(_raise),
            "refuse": in_order(_refuse),
            "forever": in_order(_forever),
            "shield": in_order(_shield),
            "fragile": in_order(_fragile),
        },
        {"note": on_note, "ask": on_ask},
    )
    max_running, max_queued = limits
    config = ConnectionConfig(max_concurrent_requests=max_running, max_queued_requests=max_queued)
    early_eof = False
    async with trio.open_nursery() as outer:
        outer.start_soon(peer.reader)
        async with open_connection(ours, handler, config=config) as conn:
            conn_box.append(conn)
            async with trio.open_nursery() as local:

                async def local_call(deadline: float | None) -> None:
                    try:
                        with trio.move_on_after(deadline if deadline is not None else 1e9):
                            await conn.call("top")
                            local_outcomes.append("ok")
                            return
                        local_outcomes.append("timeout")
                    except RequestError:
                        local_outcomes.append("error")
                    except ConnectionClosed:
                        local_outcomes.append("closed")

                def unanswered_outgoing() -> list[int]:
                    return [m["id"] for m in peer.outgoing_requests() if m["id"] not in replied]

                def reply_to(request_id: int, as_error: bool) -> None:
                    replied.add(request_id)
                    if as_error:
                        peer.queue(err(request_id, -32050, "cb failed"))
                    else:
                        peer.queue(ok(request_id, {"answer": request_id}))

                n = 0
                calls = 0
                for step in program:
                    kind = step[0]
                    if kind == "request":
                        _, method, t, string_id = step
                        request_id: Any = f"r{n}" if string_id else n
                        n += 1
                        sent_requests[request_id] = method
                        peer.queue(req(request_id, method, {"t": t, "before": list(sent_notes)}))
                    elif kind == "notify":
                        _, method, t = step
                        sent_notes.append(n)
                        peer.queue(notif(method, {"n": n, "t": t}))
                        n += 1
                    elif kind == "cancel":
                        _, target, index = step
                        if target == "known" and sent_requests:
                            ids = list(sent_requests)
                            peer.queue(cancel(ids[index % len(ids)]))
                        elif target == "malformed":
                            peer.queue(MALFORMED_CANCELS[index % len(MALFORMED_CANCELS)])
                        else:
                            peer.queue(cancel(10_000 + index))
                    elif kind == "reply":
                        _, index, as_error = step
                        waiting = unanswered_outgoing()
                        if waiting:
                            reply_to(waiting[index % len(waiting)], as_error)
                    elif kind == "call":
                        calls += 1
                        local.start_soon(local_call, step[1])
                    elif kind == "flush":
                        await peer.flush(step[1])
                    elif kind == "sleep":
                        await peer.flush()
                        await trio.sleep(step[1])
                    else:
                        assert kind == "eof"
                        early_eof = True
                        break
                await peer.flush()

                if early_eof:
                    await theirs.send_eof()
                    await peer.eof.wait()
                    await conn.wait_closed()
                else:
                    # Drain: answer every outgoing call and cancel every
                    # request still running, until everything is answered.
                    # (For as long as the notifications take: requests wait
                    # for them, and an "ask" calls out only when its turn
                    # comes; bounded, in virtual seconds.)
                    for _ in range(1000):
                        await trio.sleep(1)
                        answered = {m["id"] for m in peer.responses()}
                        for request_id in sent_requests:
                            if request_id not in answered:
                                peer.queue(cancel(request_id))
                        for request_id in unanswered_outgoing():
                            reply_to(request_id, False)
                        await peer.flush()
                        stats = conn.statistics()
                        if (
                            len(noted) == len(sent_notes)
                            and answered >= set(sent_requests)
                            and len(local_outcomes) == calls
                            and stats.outgoing_pending == 0
                        ):
                            break
                    await trio.sleep(10)
                    assert not conn.closed
                    assert_idle(conn)
                    assert handler.running == 0  # every handler call returned
                    assert noted == sent_notes
                    assert len(local_outcomes) == calls
            # Leaving the block closes the connection.
        assert conn.closed
        await peer.eof.wait()
        assert len(local_outcomes) == calls
    assert count_tasks() == tasks_before

    # Exactly one response per request, and only to requests.
    counts = Counter(json.dumps(m["id"]) for m in peer.responses())
    assert counts == Counter(json.dumps(i) for i in sent_requests), (counts, sent_requests)
    for m in peer.responses():
        code = "ok" if "result" in m else m["error"]["code"]
        method = sent_requests[m["id"]]
        if code == -32603 and m["error"]["message"] == "Too many requests":
            assert len(sent_requests) > max_running + max_queued, m
            event("refused: too many requests")
            continue
        assert code in ALLOWED[method], m
        if method == "callback" and code == -32603:
            assert m["error"]["data"]["method"] == "cb", m
            assert m["error"]["data"]["error"]["code"] == -32050, m
    # No handler started before the notifications read ahead of it.
    assert overtaken == []
    # At most one cancel per outgoing id, and only for ids that were sent.
    outgoing_ids = {m["id"] for m in peer.outgoing_requests()}
    cancels = [
        m["params"]["requestId"] for m in peer.received if m.get("method") == "$/cancel_request"
    ]
    assert len(cancels) == len(set(cancels))
    assert set(cancels) <= outgoing_ids
    # Nothing is left behind in the connection.
    assert handler.running == 0  # every handler call returned
    stats = conn.statistics()
    assert (stats.incoming_in_flight, stats.outgoing_pending, stats.outbox_frames) == (0, 0, 0)
    assert stats.closed
    # Notifications were handled in wire order (all of them, unless the
    # connection was closed under them).
    assert noted == sent_notes[: len(noted)]
    event(f"early EOF: {early_eof}")
    event(f"requests: {min(len(sent_requests), 20) // 5 * 5}+")
    event(f"program: {min(len(program), 40) // 10 * 10}+")
    for m in peer.responses():
        event(f"answer: {'ok' if 'result' in m else m['error']['code']}")
    if cancels:
        event("cancel sent")


@settings(
    max_examples=examples(150),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(st.lists(op, min_size=10, max_size=60), st.integers(0, 60), LIMITS)
def test_random_programs_answer_every_request_exactly_once(
    program: list[Any], eof_at: int, limits: tuple[int, int]
) -> None:
    if eof_at < len(program):
        program = [*program[:eof_at], ("eof",)]
    clock = trio.testing.MockClock(autojump_threshold=0)

    async def main() -> None:
        with trio.fail_after(10_000):
            await run_program(program, limits)

    trio.run(main, clock=clock)
