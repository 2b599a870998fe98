"""What one round trip costs the process in the middle, counted rather than
timed: task steps, tasks spawned and waits for I/O (a Trio instrument), and
the wall time spent in task steps (the process's own critical path, its
writes included: a write that wakes the next process is most of it), and
CPU time (user + system, from ``os.times``), for the stdlib relay, a bare
Trio relay (``peers/trio_relay.py``), ``python -m acp_trio conduct`` with
no proxy and with one pass-through proxy behind it (the conductor's share
of a proxy hop: the difference), and the proxy process behind the
conductor: the pass-through ``Proxy`` (``peers/pass_proxy.py``) and the
logging proxy (a bare handler, ``examples/proxies/logging_proxy.py
--quiet``). Counts do not depend on the machine's load; CPU time a little,
and much on a machine busy with other work (every wake finds cold caches).

With ``--calls``, the Python function calls (a generator's resumption
counts as one, as for a profiler) and calls of builtins instead: the
interpreter's work per round trip, machine-independent, without the
timings (counting them slows the process down).

With ``--instructions``, the machine instructions the process in the middle
ran per round trip (``valgrind --tool=callgrind``, about fifty times slower,
so take ``--reads`` small): the cost of its work on any load, repeatable to
a fraction of a percent. With ``--profile DIR``, each counted process also
writes a ``cProfile`` (CPU time) of its run to DIR, to see where it goes.

The client runs the scenario prompt ``read N /x`` twice, with N = 1,000 and
N = ``--reads``, each through a fresh middle process; the figures are the
difference divided by the difference in N (start-up and the turn's other
messages cancel out). CPU time is counted in clock ticks (10 ms), so take
N large enough.

Run: ``.venv/bin/python benchmarks/chain_counts.py`` (``--reads N``,
``--python PATH`` to count another checkout's conductor, ``--calls``,
``--quick``). This script is also the wrapper it runs the counted process
with (``--wrap OUT COMMAND...``, ``--wrap-calls OUT COMMAND...``).
"""

from __future__ import annotations

import argparse
import ast
import collections
import os
import runpy
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def wrapped(out: str, command: list[str], calls: bool = False, profile_to: str = "") -> None:
    """Run ``command`` (``-m module ...`` or ``script ...``) in this process,
    every ``trio.run`` instrumented (with ``calls``: every call counted);
    write the counts to ``out`` at exit."""
    import atexit
    import threading

    import trio

    counts: collections.Counter[str] = collections.Counter()
    if calls:
        # Every thread's (the stdlib relay copies in two).
        def profile(frame: Any, event: str, arg: Any) -> None:
            if event == "call":
                counts["Python calls"] += 1
            elif event == "c_call":
                counts["builtin calls"] += 1

        sys.setprofile(profile)
        threading.setprofile(profile)

    class Count(trio.abc.Instrument):
        started = 0.0
        in_steps = 0.0

        def before_task_step(self, task: trio.lowlevel.Task) -> None:
            counts["task steps"] += 1
            self.started = time.perf_counter()

        def after_task_step(self, task: trio.lowlevel.Task) -> None:
            self.in_steps += time.perf_counter() - self.started
            counts["µs in steps"] = round(self.in_steps * 1e6)

        def task_spawned(self, task: trio.lowlevel.Task) -> None:
            counts["tasks spawned"] += 1

        def before_io_wait(self, timeout: float) -> None:
            counts["I/O waits"] += 1

    run = trio.run

    def instrumented(*args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("instruments", []).append(Count())
        return run(*args, **kwargs)

    def report() -> None:
        times = os.times()
        counts["CPU µs"] = round((times.user + times.system) * 1e6)
        Path(out).write_text(repr(dict(counts)))

    trio.run = instrumented  # type: ignore[assignment]
    atexit.register(report)
    if profile_to:
        import cProfile

        profiler = cProfile.Profile(time.process_time)
        atexit.register(lambda: profiler.dump_stats(profile_to))
        profiler.enable()
    if command[0] == "-m":
        sys.argv = command[1:]
        runpy.run_module(command[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = command
        runpy.run_path(command[0], run_name="__main__")


CLIENT = """
import sys, trio, acp_trio
from acp_trio.testing import ScenarioClient
async def main(reads, command):
    client = ScenarioClient()
    async with acp_trio.open_spawned_agent(client, command) as agent:
        await agent.initialize(client.initialize_request())
        session = (await agent.new_session("/")).session_id
        await agent.prompt_text(session, f"read {reads} /x")
trio.run(main, int(sys.argv[1]), sys.argv[2:])
"""


def counts(
    python: str,
    middle: list[str],
    reads: int,
    calls: bool = False,
    instructions: bool = False,
    profile: str = "",
) -> dict[str, int]:
    """The counts of the process ``middle`` runs (its command up to the
    agent's; a ``{wrap}`` item in it is where the counted process starts,
    else it is the first; ``{python}`` is ``python``); with ``calls``, its
    calls; with ``instructions``, its instructions (callgrind); with
    ``profile``, a cProfile of it written there."""
    middle = [python if item == "{python}" else item for item in middle]
    with tempfile.TemporaryDirectory() as tmp:
        out = str(Path(tmp) / "counts")
        if instructions:
            # Run bare, but leave at once when done (callgrind writes its
            # counts at the exit, and the interpreter's teardown at fifty
            # times slower would outlast the shutdown graces).
            grind = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"]
            wrap = [*grind, python, __file__, "--wrap-bare", out]
        else:
            flag = "--wrap-calls" if calls else "--wrap"
            wrap = [python, __file__, flag + (f"={profile}" if profile else ""), out]
        if "{wrap}" in middle:
            at = middle.index("{wrap}")
            command = [python, *middle[:at], *wrap, *middle[at + 1 :]]
        else:
            command = [*wrap, *middle]
        command += ["--", python, "-m", "acp_trio", "scenario-agent"]
        env = {**os.environ, "PYTHONHASHSEED": "0"}
        subprocess.run(
            [python, "-c", CLIENT, str(reads), *command],
            check=True,
            env=env,
            stderr=subprocess.DEVNULL if instructions else None,
        )
        if instructions:
            for line in Path(out).read_text().splitlines():
                if line.startswith(("totals:", "summary:")):
                    return {"instructions": int(line.split()[1])}
            raise RuntimeError("callgrind wrote no totals")
        result: dict[str, int] = ast.literal_eval(Path(out).read_text())
        return result


CONDUCT = ["-m", "acp_trio", "conduct", "--"]
MIDDLES = {
    "stdlib relay": [str(HERE / "peers" / "relay.py")],
    "Trio relay": [str(HERE / "peers" / "trio_relay.py")],
    "parsing relay": [str(HERE / "peers" / "parsing_relay.py")],
    "conductor": CONDUCT[:-1],
    "conductor + 1 Proxy": [*CONDUCT, "{python}", str(HERE / "peers" / "pass_proxy.py")],
    "the Proxy": [*CONDUCT, "{wrap}", str(HERE / "peers" / "pass_proxy.py")],
    "the logging proxy": [
        *CONDUCT,
        "{wrap}",
        str(HERE.parent / "examples" / "proxies" / "logging_proxy.py"),
        "--quiet",
    ],
}


def main(
    python: str,
    reads: int,
    calls: bool = False,
    instructions: bool = False,
    only: list[str] | None = None,
    base: int = 1000,
    profile: str = "",
) -> list[str]:
    keys = ["task steps", "tasks spawned", "I/O waits", "µs in steps", "CPU µs"]
    if calls:
        keys = ["Python calls", "builtin calls"]
    if instructions:
        keys = ["instructions"]
    lines = [f"per round trip ({reads} - {base} reads): " + ", ".join(keys)]
    for label, middle in MIDDLES.items():
        if only and label not in only:
            continue
        slug = label.replace(" ", "-").replace(",", "")
        low = counts(python, middle, base, calls, instructions)
        high = counts(
            python,
            middle,
            reads,
            calls,
            instructions,
            profile=f"{profile}/{slug}.prof" if profile else "",
        )
        per = [(high.get(k, 0) - low.get(k, 0)) / (reads - base) for k in keys]
        lines.append(f"{label:<19} " + "  ".join(f"{v:>9.2f}" for v in per))
    return lines


def bare(command: list[str]) -> None:
    """``--wrap-bare``: run ``command`` here, deaf to SIGTERM (a teardown
    slowed down by callgrind outlasts the graces before it), and leave with
    ``os._exit`` as soon as it is done."""
    import signal

    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        if command[0] == "-m":
            sys.argv = command[1:]
            runpy.run_module(command[1], run_name="__main__", alter_sys=True)
        else:
            sys.argv = command
            runpy.run_path(command[0], run_name="__main__")
    except SystemExit:
        pass
    finally:
        sys.stdout.flush()
        os._exit(0)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--wrap-bare"]:
        bare(sys.argv[3:])
    if sys.argv[1].startswith(("--wrap=", "--wrap-calls=")) or sys.argv[1:2] in (
        ["--wrap"],
        ["--wrap-calls"],
    ):
        flag, _, profile = sys.argv[1].partition("=")
        wrapped(sys.argv[2], sys.argv[3:], calls=flag == "--wrap-calls", profile_to=profile)
        sys.exit(0)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reads", type=int, default=9000)
    parser.add_argument("--base", type=int, default=1000, help="the smaller run's reads")
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--calls", action="store_true", help="count calls instead of time")
    parser.add_argument(
        "--instructions", action="store_true", help="count instructions (valgrind's callgrind)"
    )
    parser.add_argument(
        "--only", metavar="LABELS", help="comma-separated middles: " + ", ".join(MIDDLES)
    )
    parser.add_argument("--profile", metavar="DIR", help="write a cProfile of each middle to DIR")
    parser.add_argument("--quick", action="store_true", help="a smoke run")
    args = parser.parse_args()
    only = [label.strip() for label in args.only.split(",")] if args.only else None
    reads = 1200 if args.quick else args.reads
    lines = main(
        args.python, reads, args.calls, args.instructions, only, args.base, args.profile or ""
    )
    print("\n".join(lines))
