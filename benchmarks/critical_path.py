"""Where a serial request/reply round trip over pipes spends its time.

The ``read`` workload of ``bench_sdks.py`` is a chain of round trips: the agent
writes a request, sleeps until the reply comes, and writes the next. This
script splits one such round trip into what the kernel, Trio and acp_trio
cost, on this machine:

1. **kernel**: two processes bouncing a message over two pipes with blocking
   reads and nothing else (each side sleeps and is woken by the other);
2. **event loop wake-up**: in a ping-pong like (1), the time from ``epoll``
   returning to the code that reads the pipe, for a plain ``select.epoll``
   loop and for a bare Trio task;
3. **cold code**: a fixed piece of JSON work timed right after each wake-up,
   and the same work in a tight loop;
4. **acp_trio**: the real ``read`` workload (``peers/trio_client.py`` against
   ``python -m acp_trio scenario-agent``), with each process timing, per
   round trip, its own path from the ``read`` that brought a message to the
   ``write`` of its answer (or next request), and from ``epoll`` returning to
   that ``read``. The timing is put into both processes by a
   ``sitecustomize`` module (on ``PYTHONPATH``) that wraps ``os.read``,
   ``os.write`` and ``select.epoll``: a few hundred nanoseconds per call.

Medians over all round trips. The two processes of each measurement run on
different CPUs by default (``--cpus split``), the case where every message
wakes a sleeping process on the other CPU; ``--cpus same`` puts both on one.
Run with ``.venv-bench/bin/python`` (orjson installed) or ``.venv/bin/python``::

    python benchmarks/critical_path.py            # about 10 s
    python benchmarks/critical_path.py --quick
"""

from __future__ import annotations

import argparse
import json
import os
import select
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
FRAME = (
    b'{"jsonrpc":"2.0","id":384,"method":"fs/read_text_file",'
    b'"params":{"sessionId":"s-1","path":"/bench/file"}}'
)


from bench_sdks import _pinned  # noqa: E402 (a sibling script)

#: --cpus: where this process (or the client) and the other one run.
PLACEMENTS = {"split": (0, 1), "same": (0, 0), "any": (None, None)}
CPUS = "split"


def _pin(cpu: int | None) -> None:
    if cpu is not None:
        os.sched_setaffinity(0, {cpu})


def _echo_child(r: int, w: int, n: int) -> None:
    _pin(PLACEMENTS[CPUS][1])
    for _ in range(n):
        os.write(w, os.read(r, 65536))
    os._exit(0)


def _pipes_and_child(n: int) -> tuple[int, int, int]:
    """Fork an echo child; return (our write end, our read end, child pid)."""
    r1, w1 = os.pipe()
    r2, w2 = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.close(w1)
        os.close(r2)
        _echo_child(r1, w2, n)
    os.close(r1)
    os.close(w2)
    return w1, r2, pid


def kernel_ping_pong(n: int) -> float:
    """µs per round trip with blocking reads on both sides."""
    w, r, pid = _pipes_and_child(n)
    start = time.perf_counter()
    for _ in range(n):
        os.write(w, FRAME)
        os.read(r, 65536)
    elapsed = time.perf_counter() - start
    os.waitpid(pid, 0)
    os.close(w)
    os.close(r)
    return elapsed / n * 1e6


def _json_work() -> bytes:
    value = json.loads(FRAME)
    del value["method"]
    value["result"] = {"content": "x" * 64}
    return json.dumps(value).encode()


def epoll_wake(n: int) -> tuple[float, float, float]:
    """(µs per round trip, median µs from epoll returning to the read,
    median µs of the JSON work right after the read)."""
    w, r, pid = _pipes_and_child(n)
    os.set_blocking(r, False)
    ep = select.epoll()
    ep.register(r, select.EPOLLIN)
    clock = time.perf_counter_ns
    wake: list[int] = []
    work: list[int] = []
    start = time.perf_counter()
    for _ in range(n):
        os.write(w, FRAME)
        ep.poll()
        t0 = clock()
        os.read(r, 65536)
        t1 = clock()
        _json_work()
        work.append(clock() - t1)
        wake.append(t1 - t0)
    elapsed = time.perf_counter() - start
    os.waitpid(pid, 0)
    ep.close()
    os.close(w)
    os.close(r)
    return elapsed / n * 1e6, statistics.median(wake) / 1e3, statistics.median(work) / 1e3


def _trio_ping_pong(n: int) -> None:
    """The bare Trio side of a ping-pong (run in a child process that has the
    timing ``sitecustomize``): prints µs per round trip."""
    import trio

    w, r, pid = _pipes_and_child(n)
    os.set_blocking(r, False)

    async def main() -> float:
        start = time.perf_counter()
        for _ in range(n):
            os.write(w, FRAME)
            while True:
                try:
                    os.read(r, 65536)
                except BlockingIOError:
                    await trio.lowlevel.wait_readable(r)
                    continue
                break
        return time.perf_counter() - start

    elapsed = trio.run(main)
    os.waitpid(pid, 0)
    print(json.dumps({"per_round_trip_us": elapsed / n * 1e6}))


def _with_timing(command: list[str]) -> tuple[str, list[dict[str, Any]]]:
    """Run ``command`` with the timing ``sitecustomize``; its stdout and the
    lines the timed processes reported."""
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "sitecustomize.py").write_text(_SITECUSTOMIZE)
        env = dict(os.environ, PYTHONPATH=tmp)
        done = subprocess.run(
            command, env=env, cwd=ROOT, capture_output=True, text=True, timeout=600, check=False
        )
    if done.returncode != 0:
        sys.exit(f"{command[1]} failed: {done.stderr.strip()[-500:]}")
    reports = [
        json.loads(line.split(" ", 1)[1])
        for line in done.stderr.splitlines()
        if line.startswith("CRITICAL-PATH ")
    ]
    return done.stdout, reports


def trio_wake(n: int) -> tuple[float, float]:
    """(µs per round trip, median µs from epoll returning to the read) for a
    bare Trio task."""
    command = [sys.executable, __file__, "--cpus", CPUS, "--trio-child", str(n)]
    stdout, reports = _with_timing(command)
    rate = json.loads(stdout.strip().splitlines()[-1])["per_round_trip_us"]
    return rate, reports[0]["wake_us"]


def warm_json_work(n: int) -> float:
    start = time.perf_counter_ns()
    for _ in range(n):
        _json_work()
    return (time.perf_counter_ns() - start) / n / 1e3


_SITECUSTOMIZE = """
import atexit, os, select, statistics, sys, time
_read, _write, _clock, _epoll = os.read, os.write, time.perf_counter_ns, select.epoll
_state = {"read": 0, "woke": 0}
_path, _wake = [], []

class _Epoll:
    def __init__(self, *args):
        self._e = _epoll(*args)
        for name in ("register", "modify", "unregister", "close", "fileno"):
            setattr(self, name, getattr(self._e, name))
    def poll(self, timeout=-1, maxevents=-1):
        events = self._e.poll(timeout, maxevents)
        if events and timeout != 0:
            _state["woke"] = _clock()
        return events

def read(fd, n):
    data = _read(fd, n)
    if data and fd > 2:
        now = _clock()
        _state["read"] = now
        if _state["woke"]:
            _wake.append(now - _state["woke"])
            _state["woke"] = 0
    return data

def write(fd, data):
    if fd > 2 and _state["read"]:
        _path.append(_clock() - _state["read"])
        _state["read"] = 0
    return _write(fd, data)

select.epoll, os.read, os.write = _Epoll, read, write

@atexit.register
def _report():
    if len(_path) > 100:
        line = {"who": os.path.basename(sys.argv[0]) + " " + " ".join(sys.argv[1:2]),
                "path_us": statistics.median(_path) / 1e3,
                "wake_us": statistics.median(_wake) / 1e3 if _wake else None,
                "n": len(_path)}
        sys.stderr.write("CRITICAL-PATH " + __import__("json").dumps(line) + "\\n")
"""


def acp_trio_read(n: int) -> tuple[float, list[dict[str, Any]]]:
    """Round trips/s, and per process: median µs from the read of a message
    to the write that follows, and from epoll returning to that read."""
    py = sys.executable
    client = [py, str(HERE / "peers" / "trio_client.py"), "--workload", "read", "--n", str(n)]
    ours, theirs = PLACEMENTS[CPUS]
    agent = _pinned([py, "-m", "acp_trio", "scenario-agent"], theirs)
    stdout, reports = _with_timing([*_pinned(client, ours), "--", *agent])
    result = json.loads([x for x in stdout.splitlines() if x.startswith("{")][-1])
    return result["per_second"], reports


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2,000 round trips, not 20,000")
    parser.add_argument(
        "--cpus",
        choices=("split", "same", "any"),
        default="split",
        help="split (default): this side on CPU 0, the other on CPU 1; same: both on CPU 0; "
        "any: the kernel decides (then a run may land either way)",
    )
    parser.add_argument("--trio-child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    global CPUS
    CPUS = args.cpus
    _pin(PLACEMENTS[CPUS][0])
    if args.trio_child:
        _trio_ping_pong(args.trio_child)
        return
    n = 2_000 if args.quick else 20_000

    print(f"{os.cpu_count()} cores, placement {args.cpus}; {n:,} round trips each (medians)")
    print(
        f"kernel: blocking ping-pong over two pipes      {kernel_ping_pong(n):7.1f} µs/round trip"
    )
    rt, wake, cold = epoll_wake(n)
    print(f"plain epoll loop: round trip {rt:6.1f} µs; epoll -> read {wake:5.2f} µs")
    rt, wake = trio_wake(n)
    print(f"bare Trio task:   round trip {rt:6.1f} µs; epoll -> read {wake:5.2f} µs")
    warm = warm_json_work(n)
    print(
        f"JSON work (decode, edit, encode): right after a wake-up {cold:.2f} µs, warm {warm:.2f} µs"
    )
    rate, rows = acp_trio_read(n)
    print(f"acp_trio read workload (client x scenario agent): {rate:,.0f} round trips/s")
    for row in rows:
        wake_us = row["wake_us"]
        wake_text = "n/a" if wake_us is None else f"{wake_us:.2f} µs"
        print(
            f"  {row['who']:<32} read -> write {row['path_us']:6.2f} µs; epoll -> read {wake_text}"
        )


if __name__ == "__main__":
    main()
