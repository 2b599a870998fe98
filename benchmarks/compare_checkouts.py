"""Two or more checkouts of acp_trio side by side, for a before/after claim:
the pinned ``read`` judge, interleaved, and counts that do not depend on the
machine's load.

Each checkout is a directory with the package and its ``benchmarks/`` (a
``git worktree``, or ``git archive COMMIT | tar -x -C DIR``); every run uses
this Python with ``PYTHONPATH=DIR``, so one virtualenv serves them all.

- ``read`` (default): ``bench_sdks.py``'s ``read 5000`` with the floor client,
  behind it the checkout's agent and the Trio floor agent
  (``peers/trio_floor_agent.py``), both processes pinned to CPU 0
  (``--cpus same``). Each round runs every checkout once, the order turning
  round by round; printed per checkout: the agent's round trips per second,
  the Trio floor's in the same runs, and the agent's share of the floor
  (median of the runs' own shares, and their range).
- ``--steps``: the agent's task steps and run-loop I/O waits per round trip
  (``chain_counts.py --wrap``, a Trio instrument), from two prompts of
  ``read`` N1 and N2 round trips: (count at N2 - count at N1) / (N2 - N1);
  and the same for both sides in one process (``bench_connection``'s round
  trips over pipes).
- ``--instructions``: instructions per round trip under valgrind's
  callgrind, the same difference: the agent behind the floor client (only
  the agent under valgrind), and both sides in one process
  (``bench_connection.round_trips`` over pipes). Counts repeat within about
  1% where the order of events does not depend on timing (one process; an
  agent whose round trip takes the same steps each time); between two
  processes, where it does, take several runs.

Run: ``.venv/bin/python benchmarks/compare_checkouts.py --rounds 9 BEFORE
AFTER`` (``--steps``, ``--instructions``, ``--no-read``).
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

PY = sys.executable
# The floor client kills an agent that takes over 5 s to exit; an agent
# under valgrind may: this keeps it alive until it has written its counts.
SURVIVE = "import subprocess, sys; subprocess.Popen(sys.argv[1:], start_new_session=True).wait()"
CALLGRIND = ["valgrind", "--tool=callgrind", "--dump-instr=no", "--compress-strings=no"]

# Both sides in one process: bench_connection's round trips over pipes,
# with an instrument counting task steps and run-loop I/O waits (or none).
ONE_PROCESS = """
import sys, collections, trio
sys.path.insert(0, {benchmarks!r})
import bench_connection as bc
counts = collections.Counter()
class Count(trio.abc.Instrument):
    def before_task_step(self, task): counts["task steps"] += 1
    def before_io_wait(self, timeout): counts["I/O waits"] += 1
trio.run(bc.round_trips, bc.pipe_pair, {n}, instruments=[Count()] if {count} else [])
print(dict(counts))
"""


def run(checkout: Path, command: list[str]) -> str:
    """Run ``command`` on ``checkout``'s code; its output."""
    env = dict(os.environ, PYTHONPATH=str(checkout), PYTHONHASHSEED="0", ACP_TRIO_JSON="auto")
    done = subprocess.run(
        command, env=env, cwd=checkout, check=True, capture_output=True, text=True
    )
    return done.stdout


def read_run(checkout: Path) -> tuple[float, float]:
    """One run of the judge: (the checkout's agent, the Trio floor agent),
    round trips per second."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "runs.json"
        bench = str(checkout / "benchmarks" / "bench_sdks.py")
        pairs = "read,floor:acp_trio,floor:trio-floor"
        run(
            checkout,
            [PY, bench, "--only", pairs, "--repeat", "1", "--cpus", "same", "--json", str(out)],
        )
        runs = json.loads(out.read_text())["runs"]["read"]
    return runs["floor x acp_trio"][0]["per_second"], runs["floor x trio-floor"][0]["per_second"]


def judge(checkouts: list[Path], rounds: int) -> None:
    print(f"read 5000, floor client, both processes on CPU 0, {rounds} interleaved rounds")
    results: dict[Path, list[tuple[float, float]]] = {c: [] for c in checkouts}
    loads: list[float] = []
    for number in range(rounds):
        for checkout in checkouts if number % 2 == 0 else checkouts[::-1]:
            results[checkout].append(read_run(checkout))
            loads.append(os.getloadavg()[0])
    for checkout, runs in results.items():
        agent = [a for a, _ in runs]
        floor = [f for _, f in runs]
        shares = [a / f for a, f in runs]
        print(
            f"  {checkout.name:<20} agent {statistics.median(agent):>7,.0f} "
            f"[{min(agent):,.0f}-{max(agent):,.0f}]  Trio floor {statistics.median(floor):>7,.0f} "
            f"[{min(floor):,.0f}-{max(floor):,.0f}]  share {statistics.median(shares):.1%} "
            f"[{min(shares):.1%}-{max(shares):.1%}]"
        )
        print(f"  {'':<20} shares by round: {' '.join(f'{s:.1%}' for s in shares)}")
    print(f"  load average (1 min) during the runs: {min(loads):.1f}-{max(loads):.1f}")


def floor_client(checkout: Path, n: int, agent: list[str]) -> None:
    client = str(checkout / "benchmarks" / "peers" / "floor_client.py")
    run(checkout, [PY, client, "--workload", "read", "--n", str(n), "--", *agent])


def steps_at(checkout: Path, n: int) -> dict[str, int]:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "counts"
        wrap = [PY, str(checkout / "benchmarks" / "chain_counts.py"), "--wrap", str(out)]
        floor_client(checkout, n, [*wrap, "-m", "acp_trio", "scenario-agent"])
        counts: dict[str, int] = ast.literal_eval(out.read_text())
        return counts


def one_process_steps_at(checkout: Path, n: int) -> dict[str, int]:
    code = ONE_PROCESS.format(benchmarks=str(checkout / "benchmarks"), n=n, count=True)
    counts: dict[str, int] = ast.literal_eval(run(checkout, [PY, "-c", code]).strip())
    return counts


def callgrind_total(path: Path, wait: float = 0) -> int:
    deadline = time.monotonic() + wait
    while True:
        try:
            for line in path.read_text().splitlines():
                if line.startswith(("summary:", "totals:")):
                    return int(line.split()[1])
        except FileNotFoundError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"no totals in {path}")
        time.sleep(1)


def agent_instructions_at(checkout: Path, n: int) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "callgrind.out"
        agent = [PY, "-c", SURVIVE, *CALLGRIND, f"--callgrind-out-file={out}", PY]
        floor_client(checkout, n, [*agent, "-m", "acp_trio", "scenario-agent"])
        return callgrind_total(out, wait=600)


def one_process_instructions_at(checkout: Path, n: int) -> int:
    code = ONE_PROCESS.format(benchmarks=str(checkout / "benchmarks"), n=n, count=False)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "callgrind.out"
        run(checkout, [*CALLGRIND, f"--callgrind-out-file={out}", PY, "-c", code])
        return callgrind_total(out)


def per_round_trip(at: Any, checkout: Path, n1: int, n2: int) -> Any:
    first, second = at(checkout, n1), at(checkout, n2)
    if isinstance(first, dict):
        return {k: round((second[k] - first[k]) / (n2 - n1), 2) for k in second if k in first}
    return (second - first) / (n2 - n1)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("checkouts", nargs="+", type=Path)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--no-read", action="store_true", help="skip the wall-clock judge")
    parser.add_argument("--steps", action="store_true")
    parser.add_argument("--instructions", action="store_true")
    parser.add_argument("--n", type=int, nargs=2, default=(200, 1200), metavar=("N1", "N2"))
    args = parser.parse_args()
    checkouts = [c.resolve() for c in args.checkouts]
    n1, n2 = args.n
    if not args.no_read:
        judge(checkouts, args.rounds)
    if args.steps:
        print(f"counts per round trip (read {n1} and {n2}): the agent; both sides in one process")
        for checkout in checkouts:
            agent = per_round_trip(steps_at, checkout, n1, n2)
            agent = {k: v for k, v in agent.items() if "µs" not in k}
            one = per_round_trip(one_process_steps_at, checkout, n1, n2)
            print(f"  {checkout.name:<20} {agent}; {one}")
    if args.instructions:
        print(f"instructions per round trip, callgrind (read {n1} and {n2})")
        for checkout in checkouts:
            agent = per_round_trip(agent_instructions_at, checkout, n1, n2)
            one = per_round_trip(one_process_instructions_at, checkout, n1, n2)
            print(
                f"  {checkout.name:<20} the agent {agent:>9,.0f}; both sides in one process", end=""
            )
            print(f" {one:>9,.0f}")


if __name__ == "__main__":
    main()
