"""Benchmarks of the Trio connection layer (JSON level, no schema types).

Prints, for a memory stream pair and for OS pipes:

- round trips per second (sequential ``call``s),
- notifications per second (one side streams, the other handles in order),

and the time to cancel a request tree of 1,000 in-flight requests over both
(the target is for pipes, what ACP runs on), both as a fan-out (one handler
waiting on 1,000 requests) and as a chain (each request's handler calls the
other side again, 1,000 deep); and, over a memory pair:

- memory per in-flight request with 10,000 in flight (both sides counted);
- memory growth after 100,000 requests with random cancellation.

Run: ``make bench-connection`` or ``python benchmarks/bench_connection.py``
(``--quick`` for a smoke run). Numbers vary with the machine; the targets
(cascade < 100 ms, < 3 KB per in-flight request, flat memory after churn)
are printed next to the results.
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import statistics
import subprocess
import sys
import time
import tracemalloc
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import proc_cpu
import trio
import trio.testing

import acp_trio
from acp_trio import ConnectionConfig
from acp_trio.lowlevel import Connection, Handler, RequestContext

Pair = Callable[[Handler, Handler], AbstractAsyncContextManager[tuple[Connection, Connection]]]


class Server(Handler):
    """Answers ``echo``, holds ``hold`` forever, forwards ``chain``."""

    def __init__(self) -> None:
        self.notifications = 0
        self.done = trio.Event()
        self.expected = 0

    async def handle_request(self, ctx: RequestContext, method: str, params: Any) -> Any:
        if method == "echo":
            return params
        if method == "hold":
            await trio.sleep_forever()
        if method == "chain":
            depth = params["depth"]
            if depth == 0:
                await trio.sleep_forever()
            return await ctx.connection.call("chain", {"depth": depth - 1})
        if method == "fan":
            async with trio.open_nursery() as nursery:
                for _ in range(params["n"]):
                    nursery.start_soon(ctx.connection.call, "hold", None)
        if method == "maybe":
            await trio.sleep(params["delay"])
            return params
        return await super().handle_request(ctx, method, params)

    async def handle_notification(self, method: str, params: Any) -> None:
        self.notifications += 1
        if self.notifications == self.expected:
            self.done.set()


class Hold(Handler):
    """Holds every request forever: the least a handler can keep in flight,
    so that memory per request measures the SDK, not a handler's frames."""

    async def handle_request(self, ctx: RequestContext, method: str, params: Any) -> Any:
        await trio.sleep_forever()


def _config() -> ConnectionConfig:
    return ConnectionConfig(max_concurrent_requests=100_000, outbox_limit=4096)


@asynccontextmanager
async def memory_pair(a: Handler, b: Handler) -> AsyncIterator[tuple[Connection, Connection]]:
    left, right = trio.testing.memory_stream_pair()
    async with (
        acp_trio.lowlevel.open_connection(left, a, config=_config()) as ca,
        acp_trio.lowlevel.open_connection(right, b, config=_config()) as cb,
    ):
        yield ca, cb


@asynccontextmanager
async def pipe_pair(a: Handler, b: Handler) -> AsyncIterator[tuple[Connection, Connection]]:
    r1, w1 = os.pipe()
    r2, w2 = os.pipe()
    fd = trio.lowlevel.FdStream
    left = trio.StapledStream(fd(w1), fd(r2))
    right = trio.StapledStream(fd(w2), fd(r1))
    async with (
        acp_trio.lowlevel.open_connection(left, a, config=_config()) as ca,
        acp_trio.lowlevel.open_connection(right, b, config=_config()) as cb,
    ):
        yield ca, cb


async def round_trips(pair: Any, n: int) -> float:
    async with pair(Handler(), Server()) as (client, _):
        params = {"sessionId": "s", "path": "/tmp/x"}
        start = time.perf_counter()
        for _ in range(n):
            await client.call("echo", params)
        return n / (time.perf_counter() - start)


async def notifications(pair: Any, n: int) -> float:
    server = Server()
    server.expected = n
    async with pair(Handler(), server) as (client, _):
        params = {
            "sessionId": "s",
            "update": {
                "sessionUpdate": "agent_message_chunk",
                "content": {"type": "text", "text": "0..............."},
            },
        }
        start = time.perf_counter()
        for _ in range(n):
            await client.notify("session/update", params)
        await server.done.wait()
        return n / (time.perf_counter() - start)


def full_collections() -> int:
    """How many full (generation 2) garbage collections this process has run."""
    return int(gc.get_stats()[2]["collections"])


#: For each run of :func:`cascade`, how many full garbage collections fell
#: inside its timed window. A full collection traverses every tracked object
#: of the process (tens of milliseconds here, with 2,000 requests set up):
#: time that belongs to the process and the moment, not to the code timed.
FULL_COLLECTIONS_IN_WINDOW: list[int] = []
#: For each run of a cascade (one process or two), the CPU milliseconds
#: every process of it spent inside the timed window (``proc_cpu``): what a
#: busy machine inflates far less than the wall time.
CPU_MS_IN_WINDOW: list[float] = []


async def _wait_until(predicate: Callable[[], bool]) -> None:
    # Polling statistics() keeps the code under test free of benchmark hooks.
    while not predicate():  # noqa: ASYNC110
        await trio.sleep(0.001)


async def cascade(kind: str, n: int, pair: Pair) -> float:
    """Seconds from cancelling the top request until every level is answered
    and nothing is left in flight on either side."""
    async with pair(Server(), Server()) as (a, b):
        method, params = ("fan", {"n": n}) if kind == "fan" else ("chain", {"depth": n - 1})
        start = 0.0
        collections_at_start = 0
        cpu_at_start = proc_cpu.Snapshot({})
        with trio.CancelScope() as scope:

            async def cancel_when_ready() -> None:
                nonlocal start, collections_at_start, cpu_at_start

                def ready() -> bool:
                    sa, sb = a.statistics(), b.statistics()
                    total = sa.incoming_in_flight + sb.incoming_in_flight
                    return total >= (n + 1 if kind == "fan" else n)

                await _wait_until(ready)
                # Registered is not yet running: let every handler reach the
                # point where it waits (as the floor and the two-process
                # cascade do), so that no handler start is timed.
                await trio.testing.wait_all_tasks_blocked()
                collections_at_start = full_collections()
                cpu_at_start = proc_cpu.snapshot()
                start = time.perf_counter()
                scope.cancel()

            async with trio.open_nursery() as nursery:
                nursery.start_soon(cancel_when_ready)
                await a.call(method, params)

        def settled() -> bool:
            sa, sb = a.statistics(), b.statistics()
            in_flight = sa.incoming_in_flight + sb.incoming_in_flight
            return in_flight + sa.outgoing_pending + sb.outgoing_pending == 0

        await _wait_until(settled)
        elapsed = time.perf_counter() - start
        CPU_MS_IN_WINDOW.append(proc_cpu.cpu_ms(cpu_at_start))
        FULL_COLLECTIONS_IN_WINDOW.append(full_collections() - collections_at_start)
        return elapsed


_HERE = str(Path(__file__).resolve())


class _PeerServer(Server):
    """The agent side of :func:`cascade_two_processes`: also says how much
    it still has in flight (``pending``, not counting that request)."""

    conn: Connection | None = None

    async def handle_request(self, ctx: RequestContext, method: str, params: Any) -> Any:
        if method == "pending":
            assert self.conn is not None
            stats = self.conn.statistics()
            return stats.incoming_in_flight - 1 + stats.outgoing_pending
        return await super().handle_request(ctx, method, params)


class _ClientServer(Server):
    """The client side: notes when the chain has reached its bottom."""

    def __init__(self) -> None:
        super().__init__()
        self.bottom = trio.Event()

    async def handle_request(self, ctx: RequestContext, method: str, params: Any) -> Any:
        if method == "chain" and params["depth"] == 0:
            self.bottom.set()
        return await super().handle_request(ctx, method, params)


async def serve_cascade_peer() -> None:
    """``--cascade-peer``: the agent process of :func:`cascade_two_processes`."""
    async with acp_trio.lowlevel.open_stdio_stream() as stream:
        handler = _PeerServer()
        async with acp_trio.lowlevel.open_connection(stream, handler, config=_config()) as conn:
            handler.conn = conn
            await conn.wait_closed()


@asynccontextmanager
async def cascade_peer() -> AsyncIterator[Callable[[str, int], Awaitable[float]]]:
    """A client connection to an agent process of its own (``--cascade-peer``,
    over its stdin and stdout, as ACP runs), yielding ``run(kind, n)``: one
    :func:`cascade` between the two processes, in milliseconds from the
    cancel until neither process has anything in flight (the client asks
    the agent every millisecond once it is done)."""
    command = [sys.executable, _HERE, "--cascade-peer"]
    process = await trio.lowlevel.open_process(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert process.stdin is not None
    assert process.stdout is not None
    handler = _ClientServer()
    try:
        stream = trio.StapledStream(process.stdin, process.stdout)
        async with acp_trio.lowlevel.open_connection(stream, handler, config=_config()) as client:

            async def run(kind: str, n: int) -> float:
                assert kind == "fan" or n % 2 == 0  # (the chain's bottom is on the client's side)
                handler.bottom = trio.Event()
                start = 0.0
                cpu_at_start = proc_cpu.Snapshot({})
                with trio.CancelScope() as scope:

                    async def cancel_when_ready() -> None:
                        nonlocal start, cpu_at_start
                        if kind == "chain":
                            await handler.bottom.wait()
                        else:
                            await _wait_until(lambda: client.statistics().incoming_in_flight >= n)
                        await trio.testing.wait_all_tasks_blocked()
                        cpu_at_start = proc_cpu.snapshot()
                        start = time.perf_counter()
                        scope.cancel()

                    async with trio.open_nursery() as nursery:
                        nursery.start_soon(cancel_when_ready)
                        if kind == "chain":
                            await client.call("chain", {"depth": n - 1})
                        else:
                            await client.call("fan", {"n": n})
                while True:
                    stats = client.statistics()
                    if (
                        stats.incoming_in_flight + stats.outgoing_pending == 0
                        and await client.call("pending") == 0
                    ):
                        break
                    await trio.sleep(0.001)
                elapsed_ms = (time.perf_counter() - start) * 1000
                CPU_MS_IN_WINDOW.append(proc_cpu.cpu_ms(cpu_at_start))
                return elapsed_ms

            yield run
            client.close_soon()
    finally:
        process.kill()
        await process.wait()


async def cascade_two_processes(kind: str, n: int, runs: int) -> list[float]:
    """:func:`cascade` with the two sides in two processes (see
    :func:`cascade_peer`), ``runs`` times on one agent process: milliseconds."""
    async with cascade_peer() as run:
        return [await run(kind, n) for _ in range(runs)]


async def _collect_ms_with_fan_in_flight(n: int) -> float:
    """Milliseconds of one full garbage collection (median of 3) while a
    fan-out of ``n`` requests is in flight over pipes."""
    async with pipe_pair(Server(), Server()) as (a, b), trio.open_nursery() as nursery:
        nursery.start_soon(a.call, "fan", {"n": n})
        await _wait_until(
            lambda: a.statistics().incoming_in_flight + b.statistics().incoming_in_flight >= n + 1
        )
        await trio.testing.wait_all_tasks_blocked()
        times = []
        for _ in range(3):
            start = time.perf_counter()
            gc.collect()
            times.append((time.perf_counter() - start) * 1000)
        nursery.cancel_scope.cancel()
    return statistics.median(times)


async def full_collection_ms(n: int) -> tuple[float, float]:
    """What a full garbage collection costs with ``n`` requests in flight: as
    Python runs it, and with everything made before the requests (the
    imports: Python's, Trio's, acp_trio's schema) frozen out of it first
    with ``gc.freeze()``, which a process may do once it has started."""
    plain = await _collect_ms_with_fan_in_flight(n)
    gc.collect()
    gc.freeze()
    try:
        frozen = await _collect_ms_with_fan_in_flight(n)
    finally:
        gc.unfreeze()
    return plain, frozen


async def _serving_side(
    n: int, snapshots: bool = False
) -> tuple[float, tuple[tracemalloc.Snapshot, tracemalloc.Snapshot] | None]:
    """Bytes per request with ``n`` requests in flight on the serving side,
    fed by raw frames, every handler parked; with ``snapshots``, the
    tracemalloc snapshots before and after (for a breakdown by line)."""
    frame = b'{"jsonrpc":"2.0","id":%d,"method":"hold"}\n'
    raw, server_stream = trio.testing.memory_stream_pair()
    async with acp_trio.lowlevel.open_connection(server_stream, Hold(), config=_config()) as server:
        gc.collect()
        tracemalloc.start()
        before = tracemalloc.take_snapshot() if snapshots else None
        base = tracemalloc.get_traced_memory()[0]
        for start in range(0, n, 1000):
            await raw.send_all(b"".join(frame % i for i in range(start, min(n, start + 1000))))
        await _wait_until(lambda: server.statistics().incoming_in_flight == n)
        # Every handler started and parked (registered is not yet started).
        await trio.testing.wait_all_tasks_blocked()
        gc.collect()
        per_request = (tracemalloc.get_traced_memory()[0] - base) / n
        pair = None if before is None else (before, tracemalloc.take_snapshot())
        tracemalloc.stop()
        await raw.aclose()
    return per_request, pair


async def memory_in_flight(n: int) -> tuple[float, float, float]:
    """Bytes per in-flight request: (serving side, calling side, both sides
    with one caller task per request, as ``nursery.start_soon(conn.call)``).

    Serving side: the handler task, its scope and context, the registry entry.
    Calling side: the pending entry and its bookkeeping (no caller task).
    """
    serving, _ = await _serving_side(n)

    # Calling side, facing a peer that reads and never answers.
    client_stream, sink = trio.testing.memory_stream_pair()
    async with trio.open_nursery() as nursery:

        async def drain() -> None:
            while await sink.receive_some(1 << 20):
                pass

        nursery.start_soon(drain)
        async with (
            acp_trio.lowlevel.open_connection(client_stream, config=_config()) as client,
            AsyncExitStack() as stack,
        ):
            gc.collect()
            tracemalloc.start()
            base = tracemalloc.get_traced_memory()[0]
            for _ in range(n):
                await stack.enter_async_context(client.open_request("hold"))
            await trio.sleep(0.05)
            gc.collect()
            calling = (tracemalloc.get_traced_memory()[0] - base) / n
            tracemalloc.stop()
            for pending in list(client._table.outgoing.values()):
                if pending.handle is not None:
                    pending.handle.detach()
        nursery.cancel_scope.cancel()

    # Both sides, one caller task per request.
    async with memory_pair(Handler(), Hold()) as (client, server):
        gc.collect()
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        async with trio.open_nursery() as nursery:
            for _ in range(n):
                nursery.start_soon(client.call, "hold", None)
            await _wait_until(lambda: server.statistics().incoming_in_flight == n)
            await trio.testing.wait_all_tasks_blocked()
            gc.collect()
            both = (tracemalloc.get_traced_memory()[0] - base) / n
            nursery.cancel_scope.cancel()
        tracemalloc.stop()
    return serving, calling, both


class _FloorRequest:
    """The least a request could keep in bare Trio besides its task and scope:
    its id and method (as the registry entry does)."""

    __slots__ = ("id", "method")

    def __init__(self, request_id: int, method: str) -> None:
        self.id, self.method = request_id, method


async def _floor_task(handler: Handler, request: _FloorRequest, params: Any) -> None:
    with trio.CancelScope():
        await handler.handle_request(request, request.method, params)  # type: ignore[arg-type]


async def memory_floor(n: int) -> float:
    """Bytes per in-flight request in bare Trio: what :func:`memory_in_flight`'s
    serving side would cost with nothing of the SDK but a task per request
    (the least root coroutine), its own ``CancelScope``, the same ``Hold``
    handler, and a dict of the requests in flight by id (ids decoded from
    bytes, as a reader would)."""
    handler = Hold()
    requests: dict[int, _FloorRequest] = {}
    async with trio.open_nursery() as nursery:
        gc.collect()
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        for i in range(n):
            request = requests[int(b"%d" % i)] = _FloorRequest(int(b"%d" % i), "hold")
            nursery.start_soon(_floor_task, handler, request, None)
        await trio.testing.wait_all_tasks_blocked()
        gc.collect()
        floor = (tracemalloc.get_traced_memory()[0] - base) / n
        tracemalloc.stop()
        nursery.cancel_scope.cancel()
    return floor


async def memory_breakdown(n: int, lines: int = 25) -> None:
    """``--memory-breakdown``: what one more request in flight allocates on
    the serving side (as :func:`memory_in_flight`), by the line that
    allocated it (tracemalloc, exact), beside the bare-Trio floor."""
    total, pair = await _serving_side(n, snapshots=True)
    assert pair is not None
    before, after = pair
    print(f"serving side, {n:,} requests in flight: {total:,.1f} B per request")
    for stat in after.compare_to(before, "lineno")[:lines]:
        where = stat.traceback[0]
        print(
            f"  {stat.size_diff / n:7.1f} B  {stat.count_diff / n:5.2f} blocks  "
            f"{Path(where.filename).name}:{where.lineno}"
        )
    print(f"bare Trio (task, CancelScope, the same handler): {await memory_floor(n):,.1f} B")


async def churn(n: int, seed: int = 1) -> list[int]:
    """Traced memory (bytes) at the start and after every tenth of n
    requests, sent in concurrent batches of which a random part is
    cancelled (11 samples, each taken with nothing in flight)."""
    rng = random.Random(seed)
    async with memory_pair(Handler(), Server()) as (client, server):
        gc.collect()
        tracemalloc.start()
        marks: list[int] = [tracemalloc.get_traced_memory()[0]]

        async def one(delay: float, cancel_after: float | None) -> None:
            if cancel_after is None:
                await client.call("maybe", {"delay": delay})
            else:
                with trio.move_on_after(cancel_after):
                    await client.call("maybe", {"delay": delay})

        batch = 500
        tenth = max(batch, n // 10)
        for i in range(0, n, batch):
            async with trio.open_nursery() as nursery:
                for _ in range(batch):
                    delay = rng.random() * 0.002
                    cancel = rng.random() * 0.002 if rng.random() < 0.5 else None
                    nursery.start_soon(one, delay, cancel)
            if (i + batch) % tenth == 0:
                await _wait_until(lambda: server.statistics().incoming_in_flight == 0)
                await trio.sleep(0.01)
                gc.collect()
                marks.append(tracemalloc.get_traced_memory()[0])
        tracemalloc.stop()
        return marks


def churn_slope(marks: list[int], n: int) -> float:
    """Growth in bytes per request after the first tenth: the least-squares
    slope through the samples from 10% to 100%. (A single difference of two
    samples is at the mercy of hash tables that grew at a peak and of what
    the collector left: about +-60 KB here, run to run.)"""
    ys = marks[1:]
    step = n / (len(marks) - 1)
    xs = [step * (k + 1) for k in range(len(ys))]
    mean_x, mean_y = statistics.fmean(xs), statistics.fmean(ys)
    num = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True))
    den = sum((x - mean_x) ** 2 for x in xs)
    return num / den


def _median(samples: list[float]) -> str:
    return (
        f"{statistics.median(samples):>12,.0f}  (min {min(samples):,.0f}, max {max(samples):,.0f})"
    )


def with_full_collection(counts: list[int]) -> str:
    """``"2 of 5 runs with a full garbage collection inside"``."""
    hit = sum(1 for count in counts if count)
    return f"{hit} of {len(counts)} runs with a full garbage collection inside"


async def main(quick: bool) -> None:
    repeats = 1 if quick else 3
    n_rt = 2_000 if quick else 20_000
    n_nf = 5_000 if quick else 50_000
    print(f"acp_trio {acp_trio.__version__}, trio {trio.__version__}, {os.cpu_count()} cores")
    print()
    for name, pair in (("memory", memory_pair), ("pipes", pipe_pair)):
        rt = [await round_trips(pair, n_rt) for _ in range(repeats)]
        nf = [await notifications(pair, n_nf) for _ in range(repeats)]
        print(f"{name:>7} round trips/s    {_median(rt)}")
        print(f"{name:>7} notifications/s  {_median(nf)}")
    print()
    # The target is for OS pipes, the transport ACP runs on (stdio). Over
    # trio.testing's memory streams every write also costs the writer task a
    # pass of the scheduler (and a checkpoint), which a pipe write does not.
    for name, pair in (("pipes", pipe_pair), ("memory", memory_pair)):
        for kind in ("fan", "chain"):
            runs = max(repeats, 5)
            times = [await cascade(kind, 1000, pair) for _ in range(runs)]
            ms = [t * 1000 for t in times]
            low, high = min(ms), max(ms)
            target = "; target < 100 ms" if name == "pipes" else ""
            print(
                f"{name:>7} cancel a {kind:<5} tree of 1,000 in-flight requests: "
                f"{statistics.median(ms):6.1f} ms (min {low:.1f}, max {high:.1f}){target}"
                f" [{with_full_collection(FULL_COLLECTIONS_IN_WINDOW[-runs:])}]"
            )
    for kind in ("fan", "chain"):
        ms = await cascade_two_processes(kind, 1000, max(repeats, 5))
        print(
            f"  two processes (client and agent) cancel a {kind:<5} tree of 1,000: "
            f"{statistics.median(ms):6.1f} ms (min {min(ms):.1f}, max {max(ms):.1f})"
        )
    n_mem = 2_000 if quick else 10_000
    serving, calling, both = await memory_in_flight(n_mem)
    print(
        f"memory per in-flight request ({n_mem:,} in flight): serving side {serving:,.0f} B, "
        f"calling side {calling:,.0f} B (target < 3,072 each); "
        f"both sides with a caller task each {both:,.0f} B"
    )
    print(
        f"  bare Trio, a task and a CancelScope per request with the same handler: "
        f"{await memory_floor(n_mem):,.0f} B (--memory-breakdown: by line)"
    )
    n_churn = 20_000 if quick else 200_000
    marks = await churn(n_churn)
    print(
        f"memory after churn ({n_churn:,} requests): after 10% "
        f"{marks[1]:,} B, after 100% {marks[-1]:,} B; growth from 10% to 100% (slope of "
        f"10 samples): {churn_slope(marks, n_churn):+.2f} B/request; target: flat (< 1)"
    )
    # Last: freezing and unfreezing would disturb the memory figures above.
    plain, frozen = await full_collection_ms(1000)
    print(
        f"a full garbage collection with 1,000 requests in flight: {plain:.1f} ms; "
        f"with what existed before them frozen out of it (gc.freeze()): {frozen:.1f} ms"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, one repeat")
    parser.add_argument("--cascade-peer", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument(
        "--memory-breakdown",
        action="store_true",
        help="only what a request in flight allocates, by line, beside bare Trio",
    )
    args = parser.parse_args()
    if args.memory_breakdown:
        trio.run(memory_breakdown, 10_000)
    elif args.cascade_peer:
        trio.run(serve_cascade_peer)
    else:
        trio.run(main, args.quick)
