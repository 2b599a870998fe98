"""The cancel cascade of ``bench_connection.py`` written in bare Trio: the
floor under acp_trio's number on the same machine at the same moment.

``bench_connection.cascade`` cancels a tree of 1,000 in-flight requests
between two connections that share one Trio loop, over two OS pipes, and
times until every level is answered. That is CPU work on one core, so the
milliseconds follow the machine's speed of the moment (on the shared
machines here, by up to 2x within an hour). This module does the same work
with nothing but Trio, ``os`` and the JSON decoder acp_trio uses, and no
SDK at all:

- two "sides", each a reader task (``wait_readable``, ``os.read``, split
  lines, decode each one, cancel the scope a ``$/cancel_request`` names);
- each request a task in its own ``CancelScope``, parked in
  ``wait_task_rescheduled``; its abort function writes the cancel of the
  request it waits on (if any) straight to the pipe, as acp_trio's does;
- once cancelled, each task writes its ``-32800`` reply and exits, and the
  other side's reader decodes that reply too.

``chain``: request ``i`` lives on side ``i % 2`` and waits on request
``i + 1``. ``fan``: one request on one side waits on 1,000 requests on the
other (1,001 in all, as in ``bench_connection.py``). What acp_trio adds on
top (message validation, the request table, the handler API, exactly one
reply, the trace hook, logging) is the difference between the two numbers;
their ratio depends far less on the machine's speed than either number.

Run: ``python benchmarks/cascade_floor.py`` (both shapes, acp_trio and the
floor interleaved, 9 rounds). ``bench_sdks.py`` prints the chain's ratio
next to the cascade target.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import trio
import trio.testing

try:
    import orjson

    _loads: Any = orjson.loads
except ImportError:  # pragma: no cover - the bench environment has it
    import json

    _loads = json.loads

_CANCEL = b'{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":%d}}\n'
_CANCELLED = b'{"jsonrpc":"2.0","id":%d,"error":{"code":-32800,"message":"Request cancelled"}}\n'


class _Side:
    def __init__(self, read_fd: int, write_fd: int) -> None:
        self.read_fd = read_fd
        self.write_fd = write_fd
        self.scopes: dict[int, trio.CancelScope] = {}
        self.replies_read = 0


async def bare_trio_cascade(kind: str, n: int = 1000) -> float:
    """Seconds from cancelling the top request until every request has
    answered and every answer has been read and decoded."""
    r1, w1 = os.pipe()
    r2, w2 = os.pipe()
    for fd in (r1, w1, r2, w2):
        os.set_blocking(fd, False)
    for fd in (w1, w2):
        # Room for a fan's 1,000 cancels in one go: the floor has no writer
        # task to take what a full pipe refuses (acp_trio's has).
        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, 1 << 20)
    a, b = _Side(r1, w2), _Side(r2, w1)
    total = n if kind == "chain" else n + 1
    finished = 0
    all_done = trio.Event()

    def place(i: int) -> tuple[_Side, _Side]:
        """(the side request i runs on, the side its caller is on)."""
        if kind == "chain":
            return (a, b) if i % 2 == 0 else (b, a)
        return (a, b) if i == 0 else (b, a)

    def children(i: int) -> list[int]:
        if kind == "chain":
            return [i + 1] if i + 1 < n else []
        return list(range(1, total)) if i == 0 else []

    def check_done() -> None:
        if finished == total and a.replies_read + b.replies_read == total:
            all_done.set()

    async def request(i: int, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        nonlocal finished
        side, _ = place(i)
        with trio.CancelScope() as scope:
            side.scopes[i] = scope
            task_status.started()

            def abort(_: Any) -> trio.lowlevel.Abort:
                for child in children(i):
                    # The child runs on the other side: this side's write fd
                    # leads there.
                    os.write(side.write_fd, _CANCEL % child)
                return trio.lowlevel.Abort.SUCCEEDED

            await trio.lowlevel.wait_task_rescheduled(abort)
        del side.scopes[i]
        os.write(side.write_fd, _CANCELLED % i)
        finished += 1
        check_done()

    async def reader(side: _Side) -> None:
        held = b""
        while True:
            await trio.lowlevel.wait_readable(side.read_fd)
            data = os.read(side.read_fd, 65536)
            *lines, held = (held + data).split(b"\n")
            for line in lines:
                message = _loads(line)
                if message.get("method") == "$/cancel_request":
                    side.scopes[message["params"]["requestId"]].cancel()
                else:
                    side.replies_read += 1
                    check_done()

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(reader, a)
            nursery.start_soon(reader, b)
            for i in range(total):
                await nursery.start(request, i)
            await trio.testing.wait_all_tasks_blocked()
            start = time.perf_counter()
            a.scopes[0].cancel()
            await all_done.wait()
            elapsed = time.perf_counter() - start
            nursery.cancel_scope.cancel()
    finally:
        for fd in (r1, w1, r2, w2):
            os.close(fd)
    # Request 0's reply goes to a caller that is not there (the caller is
    # the benchmark): it was written and read like the others.
    return elapsed


def interleaved(kind: str, rounds: int, n: int = 1000) -> tuple[list[float], list[float]]:
    """(acp_trio ms, bare Trio ms), alternating run by run, each in its own
    ``trio.run`` (as ``bench_sdks.py`` runs the cascades)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import bench_connection as bc

    sdk: list[float] = []
    floor: list[float] = []
    for r in range(rounds):
        runs = [
            (sdk, lambda: trio.run(bc.cascade, kind, n, bc.pipe_pair)),
            (floor, lambda: trio.run(bare_trio_cascade, kind, n)),
        ]
        for out, run in runs if r % 2 == 0 else runs[::-1]:
            out.append(run() * 1000)
    return sdk, floor


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    print(
        f"trio {trio.__version__}, {os.cpu_count()} cores; 1,000 requests, both sides in one loop"
    )
    for kind in ("fan", "chain"):
        sdk, floor = interleaved(kind, args.rounds)
        ratios = [s / f for s, f in zip(sdk, floor, strict=True)]
        print(
            f"  {kind:<5} acp_trio {statistics.median(sdk):6.1f} ms (min {min(sdk):.1f}, max "
            f"{max(sdk):.1f}); bare Trio {statistics.median(floor):6.1f} ms (min {min(floor):.1f},"
            f" max {max(floor):.1f}); acp_trio / bare Trio, median of pairs "
            f"{statistics.median(ratios):.2f}x"
        )


if __name__ == "__main__":
    main()
