"""The cancel cascade of ``bench_connection.py`` written in bare Trio: the
floor under acp_trio's number on the same machine at the same moment.

``bench_connection.cascade`` cancels a tree of 1,000 in-flight requests
between two connections that share one Trio loop, over two OS pipes, and
times from the cancel until every request has answered. That is CPU work on
one core, so the milliseconds follow the machine's speed of the moment (on
the shared machines here, by up to 2x within an hour). This module does the
same work with nothing but Trio and ``os``, and no SDK at all:

- two "sides", each a reader task (``wait_readable``, ``os.read`` of up to
  64 KiB, split lines, cancel the scope a ``$/cancel_request`` names, drop
  a ``-32800`` reply), matching the frames by their bytes as acp_trio's
  reader does for these two (neither decodes them);
- each incoming request a task in its own ``CancelScope``; each outgoing
  request a task parked in ``wait_task_rescheduled`` whose abort function
  writes that request's ``$/cancel_request`` on the spot, as acp_trio's
  does (the chain's handler waits on its one call in its own task; the
  fan-out's handler runs 1,000 caller tasks in a nursery, as the benchmark's
  handler does);
- once cancelled, each handler writes its ``-32800`` reply and exits;
- writes go straight to the pipe (64 KiB, the default size), and what a
  full pipe refuses goes to a writer task that waits until it is writable;
  the cancels one ``cancel()`` makes are joined into one write, as
  acp_trio's reader joins them.

``chain``: request ``i`` lives on side ``i % 2`` and calls request ``i + 1``.
``fan``: one request on one side calls 1,000 requests on the other (1,001
in all). Both start the clock just before the cancel and stop it when every
request has answered, polled every millisecond, as ``cascade`` does. What
acp_trio adds on top (message validation, the request table, the handler
API, exactly one reply, the trace hook, logging) is the difference between
the two numbers; their ratio depends far less on the machine's speed than
either number.

Run: ``python benchmarks/cascade_floor.py`` (both shapes, acp_trio and the
floor interleaved, 9 rounds). ``bench_sdks.py`` prints both beside the
cascade target.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import subprocess
import sys
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, NamedTuple

import proc_cpu
import trio
import trio.testing

RECEIVE_SIZE = 64 * 1024  # as acp_trio reads
PEERS = Path(__file__).resolve().parent / "peers"
sys.path.insert(0, str(PEERS))

#: For each run of :func:`bare_trio_cascade`, the full garbage collections
#: inside its timed window (as ``bench_connection.FULL_COLLECTIONS_IN_WINDOW``).
FULL_COLLECTIONS_IN_WINDOW: list[int] = []
#: For each run of a cascade (one process or two), the CPU milliseconds
#: every process of it spent inside the timed window (``proc_cpu``): what a
#: busy machine inflates far less than the wall time.
CPU_MS_IN_WINDOW: list[float] = []
_CANCEL = b'{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":%d}}\n'
_CANCEL_HEAD = _CANCEL.split(b"%d")[0]
_CANCEL_TAIL = len(b"}}")
_CANCELLED = b'{"jsonrpc":"2.0","id":%d,"error":{"code":-32800,"message":"Request cancelled"}}\n'


class _Side:
    """One end: the pipe it reads, the pipe it writes, its handlers' scopes."""

    def __init__(self, read_fd: int, write_fd: int) -> None:
        self.read_fd = read_fd
        self.write_fd = write_fd
        self.scopes: dict[int, trio.CancelScope] = {}
        self.backlog: deque[bytes] = deque()
        self.writer_lot = trio.lowlevel.ParkingLot()
        self.held: list[bytes] | None = None
        # Replies due from handlers the reader cancelled since the last
        # write: from the second, frames go to the writer task, which joins
        # them (acp_trio's Outbox.reply_due: a cancelled fan's replies in
        # one write, a lone reply at once).
        self.due = 0
        self.to_writer = False

    def write(self, frame: bytes) -> None:
        if self.held is not None:
            self.held.append(frame)
            return
        if not self.backlog and not self.to_writer:
            self.due = 0
            try:
                written = os.write(self.write_fd, frame)
            except BlockingIOError:
                written = 0
            if written == len(frame):
                return
            frame = frame[written:]
        self.backlog.append(frame)
        self.writer_lot.unpark()

    async def writer(self) -> None:
        while True:
            while not self.backlog:
                await self.writer_lot.park()
            await trio.lowlevel.wait_writable(self.write_fd)
            data = b"".join(self.backlog)
            self.backlog.clear()
            self.due = 0
            self.to_writer = False
            try:
                written = os.write(self.write_fd, data)
            except BlockingIOError:
                written = 0
            if written < len(data):
                self.backlog.appendleft(data[written:])

    def cancel(self, line: bytes) -> None:
        """A ``$/cancel_request``: cancel the scope it names; what the cancel
        makes the aborts write goes out in one write."""
        self.held = []
        scope = self.scopes.get(int(line[len(_CANCEL_HEAD) : -_CANCEL_TAIL]))
        if scope is not None:
            self.due += 1
            if self.due > 1:
                self.to_writer = True
            scope.cancel()
        burst, self.held = self.held, None
        if burst:
            self.write(b"".join(burst))

    async def reader(self) -> None:
        held = b""
        while True:
            await trio.lowlevel.wait_readable(self.read_fd)
            *lines, held = (held + os.read(self.read_fd, RECEIVE_SIZE)).split(b"\n")
            for line in lines:
                if line.startswith(_CANCEL_HEAD):
                    self.cancel(line)
                # else: a -32800 reply to a call that is gone: dropped


async def _call(side: _Side, request_id: int) -> None:
    """An outgoing request from ``side``: wait; on cancel, write its cancel
    from the abort function, at once."""

    def abort(_: Any) -> trio.lowlevel.Abort:
        side.write(_CANCEL % request_id)
        return trio.lowlevel.Abort.SUCCEEDED

    await trio.lowlevel.wait_task_rescheduled(abort)


async def bare_trio_cascade(kind: str, n: int = 1000) -> float:
    """Seconds from cancelling the top request until every request has
    answered (written its reply)."""
    r1, w1 = os.pipe()
    r2, w2 = os.pipe()
    for fd in (r1, w1, r2, w2):
        os.set_blocking(fd, False)
    a, b = _Side(r1, w2), _Side(r2, w1)
    total = n if kind == "chain" else n + 1
    answered = 0

    async def handler(i: int, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        nonlocal answered
        side = (a if i % 2 == 0 else b) if kind == "chain" else (a if i == 0 else b)
        with trio.CancelScope() as scope:
            side.scopes[i] = scope
            task_status.started()
            if kind == "chain" and i + 1 < n:
                await _call(side, i + 1)
            elif kind == "fan" and i == 0:
                async with trio.open_nursery() as nursery:
                    for child in range(1, total):
                        nursery.start_soon(_call, side, child)
            else:
                await trio.sleep_forever()
        del side.scopes[i]
        side.write(_CANCELLED % i)
        answered += 1

    try:
        async with trio.open_nursery() as nursery:
            for side in (a, b):
                nursery.start_soon(side.reader)
                nursery.start_soon(side.writer)
            # The deepest first, so that each call has its handler waiting
            # (the fan's first handler starts its callers itself).
            order = range(total - 1, -1, -1) if kind == "chain" else range(1, total)
            for i in order:
                await nursery.start(handler, i)
            if kind == "fan":
                await nursery.start(handler, 0)
            await trio.testing.wait_all_tasks_blocked()
            collections_at_start = gc.get_stats()[2]["collections"]
            cpu_at_start = proc_cpu.snapshot()
            start = time.perf_counter()
            a.scopes[0].cancel()
            while answered < total:  # noqa: ASYNC110 (polled as cascade() polls)
                await trio.sleep(0.001)
            elapsed = time.perf_counter() - start
            CPU_MS_IN_WINDOW.append(proc_cpu.cpu_ms(cpu_at_start))
            FULL_COLLECTIONS_IN_WINDOW.append(
                gc.get_stats()[2]["collections"] - collections_at_start
            )
            nursery.cancel_scope.cancel()
    finally:
        for fd in (r1, w1, r2, w2):
            os.close(fd)
    return elapsed


def _bench_connection() -> Any:
    """acp_trio's side, ``bench_connection.py`` (imported only when needed:
    the floor itself uses no SDK)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import bench_connection

    return bench_connection


class Interleaved(NamedTuple):
    """Interleaved runs: milliseconds, full garbage collections inside each
    run's timed window, and the CPU milliseconds of every process of the run
    inside it."""

    sdk: list[float]
    floor: list[float]
    sdk_full_collections: list[int]
    floor_full_collections: list[int]
    sdk_cpu: list[float]
    floor_cpu: list[float]

    def collections_note(self) -> str:
        """How many runs of each had a full garbage collection inside."""
        note = _bench_connection().with_full_collection
        return (
            f"acp_trio: {note(self.sdk_full_collections)}; "
            f"bare Trio: {note(self.floor_full_collections)}"
        )


def interleaved(kind: str, rounds: int, n: int = 1000) -> Interleaved:
    """acp_trio's cascade and bare Trio's, alternating run by run, each in its
    own ``trio.run`` (as ``bench_sdks.py`` runs the cascades)."""
    bc = _bench_connection()
    sdk: list[float] = []
    floor: list[float] = []
    for r in range(rounds):
        runs = [
            (sdk, lambda: trio.run(bc.cascade, kind, n, bc.pipe_pair)),
            (floor, lambda: trio.run(bare_trio_cascade, kind, n)),
        ]
        for out, run in runs if r % 2 == 0 else runs[::-1]:
            out.append(run() * 1000)
    return Interleaved(
        sdk,
        floor,
        bc.FULL_COLLECTIONS_IN_WINDOW[-rounds:],
        FULL_COLLECTIONS_IN_WINDOW[-rounds:],
        bc.CPU_MS_IN_WINDOW[-rounds:],
        CPU_MS_IN_WINDOW[-rounds:],
    )


@asynccontextmanager
async def bare_trio_two_processes() -> AsyncIterator[Callable[[str, int], Awaitable[float]]]:
    """The two-process cascade in bare Trio (``peers/trio_cascade_peer.py``
    spawned as the agent, this process the client), yielding ``run(kind,
    n)``: milliseconds from the cancel until neither process has anything in
    flight, as ``bench_connection.cascade_peer``'s runs."""
    from trio_cascade_peer import ProcessSide

    process = await trio.lowlevel.open_process(
        [sys.executable, str(PEERS / "trio_cascade_peer.py")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert process.stdin is not None
    assert process.stdout is not None
    try:
        async with trio.open_nursery() as nursery:
            side = ProcessSide(process.stdout.fileno(), process.stdin.fileno(), nursery)
            nursery.start_soon(side.reader)
            nursery.start_soon(side.writer)

            async def run(kind: str, n: int) -> float:
                assert kind == "fan" or n % 2 == 0  # (the chain's bottom is on this side)
                side.bottom = trio.Event()
                start = 0.0
                cpu_at_start = proc_cpu.Snapshot({})
                with trio.CancelScope() as scope:

                    async def cancel_when_ready() -> None:
                        nonlocal start, cpu_at_start
                        if kind == "chain":
                            await side.bottom.wait()
                        else:
                            while len(side.scopes) < n:  # noqa: ASYNC110 (polled as acp_trio's)
                                await trio.sleep(0.001)
                        await trio.testing.wait_all_tasks_blocked()
                        cpu_at_start = proc_cpu.snapshot()
                        start = time.perf_counter()
                        scope.cancel()

                    async with trio.open_nursery() as inner:
                        inner.start_soon(cancel_when_ready)
                        if kind == "chain":
                            await side.call("chain", {"depth": n - 1})
                        else:
                            await side.call("fan", {"n": n})
                while side.in_flight or await side.ask("pending"):  # noqa: ASYNC110
                    await trio.sleep(0.001)  # (polled as acp_trio's is)
                elapsed_ms = (time.perf_counter() - start) * 1000
                CPU_MS_IN_WINDOW.append(proc_cpu.cpu_ms(cpu_at_start))
                return elapsed_ms

            yield run
            nursery.cancel_scope.cancel()
    finally:
        process.kill()
        await process.wait()


async def interleaved_two_processes(kind: str, rounds: int, n: int = 1000) -> Interleaved:
    """acp_trio's two-process cascade and bare Trio's, alternating run by run
    on one agent process each (after one run of each, not counted, that
    warms both up)."""
    bc = _bench_connection()
    sdk: list[float] = []
    floor: list[float] = []
    async with bc.cascade_peer() as sdk_run, bare_trio_two_processes() as floor_run:
        await sdk_run(kind, n)
        await floor_run(kind, n)
        for r in range(rounds):
            runs = [(sdk, sdk_run), (floor, floor_run)]
            for out, run in runs if r % 2 == 0 else runs[::-1]:
                out.append(await run(kind, n))
    return Interleaved(
        sdk, floor, [], [], bc.CPU_MS_IN_WINDOW[-rounds:], CPU_MS_IN_WINDOW[-rounds:]
    )


def _print(kind: str, where: str, runs: Interleaved) -> None:
    sdk, floor = runs.sdk, runs.floor
    ratios = [s / f for s, f in zip(sdk, floor, strict=True)]
    print(
        f"  {kind:<5} {where}: acp_trio {statistics.median(sdk):6.1f} ms (min {min(sdk):.1f}, max "
        f"{max(sdk):.1f}); bare Trio {statistics.median(floor):6.1f} ms (min {min(floor):.1f},"
        f" max {max(floor):.1f}); acp_trio / bare Trio, median of pairs "
        f"{statistics.median(ratios):.2f}x"
    )
    if runs.sdk_cpu and runs.floor_cpu:
        cpu = [s / f for s, f in zip(runs.sdk_cpu, runs.floor_cpu, strict=True)]
        print(
            f"        CPU of every process in the window: acp_trio "
            f"{statistics.median(runs.sdk_cpu):.1f} ms, bare Trio "
            f"{statistics.median(runs.floor_cpu):.1f} ms; median of pairs "
            f"{statistics.median(cpu):.2f}x"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument(
        "--where",
        choices=("one", "two", "both"),
        default="both",
        help="one process (both sides in one loop), two processes, or both",
    )
    args = parser.parse_args()
    print(f"trio {trio.__version__}, {os.cpu_count()} cores; 1,000 requests, over pipes")
    for kind in ("fan", "chain"):
        if args.where in ("one", "both"):
            runs = interleaved(kind, args.rounds)
            _print(kind, "one process", runs)
            print(f"        {runs.collections_note()}")
        if args.where in ("two", "both"):
            _print(kind, "two processes", trio.run(interleaved_two_processes, kind, args.rounds))


if __name__ == "__main__":
    main()
