"""The latency a proxy hop adds: ``read`` round trips through 0, 1 and 2 proxies.

acp_trio's client (in this process) spawns the scenario agent directly,
behind the stdlib relay (``peers/relay.py``: one process copying lines both
ways, the limit of one more process on the path), behind the Trio relay
(``peers/trio_relay.py``: the same on Trio's I/O), behind the parsing relay
(``peers/parsing_relay.py``: a Trio relay that decodes each message, gives it
an id of the next hop's own, encodes it again, nothing else: the floor of
the conductor and of each proxy), then through ``python -m acp_trio
conduct`` with 0, 1 and 2 pass-through proxies (``peers/pass_proxy.py``: a
``Proxy`` that changes nothing) and with one logging proxy
(``examples/proxies/logging_proxy.py --quiet``: a bare handler that passes
every message on in a handler of its own) in front of it, and runs the
scenario prompt ``read N /x``: N sequential ``fs/read_text_file`` round trips
agent → client, each crossing every hop twice. Runs are interleaved (each
repeat runs every chain once, fresh processes each time, in the opposite
order of the repeat before); the table shows the median round trips per
second with min-max, the microseconds each round trip costs over the direct
agent, and that cost as a multiple of each relay's.

What a round trip costs on a machine of two cores depends on where the
kernel puts the processes (on one core or two, a wake-up across cores or
not) more than on the code: ``--cpus same`` puts every process on CPU 0, so
that a round trip costs the CPU time of every process on the path, which is
what the Targets table of ``bench_report.py`` judges (``--judged``: only the
chains it judges).

Run: ``.venv/bin/python benchmarks/bench_chain.py`` (``--reads N``,
``--repeats R``, ``--only LABELS``, ``--judged``, ``--cpus same``,
``--quick`` for a smoke run).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import proc_cpu
import trio

import acp_trio
from acp_trio.testing import SCENARIO_AGENT_COMMAND, ScenarioClient

ROOT = Path(__file__).resolve().parents[1]
PEERS = ROOT / "benchmarks" / "peers"
PROXY = [sys.executable, str(PEERS / "pass_proxy.py")]
LOGGING = [sys.executable, str(ROOT / "examples" / "proxies" / "logging_proxy.py"), "--quiet"]
AGENT = list(SCENARIO_AGENT_COMMAND)
CONDUCT = [sys.executable, "-m", "acp_trio", "conduct"]

#: Each path, by label: what the client spawns (the agent last).
CHAINS: dict[str, list[str]] = {
    "agent": AGENT,
    "relay": [sys.executable, str(PEERS / "relay.py"), "--", *AGENT],
    "trio relay": [sys.executable, str(PEERS / "trio_relay.py"), "--", *AGENT],
    "parsing relay": [sys.executable, str(PEERS / "parsing_relay.py"), "--", *AGENT],
    "conductor": [*CONDUCT, "--", *AGENT],
    "1 proxy": [*CONDUCT, "--", *PROXY, "--", *AGENT],
    "2 proxies": [*CONDUCT, "--", *PROXY, "--", *PROXY, "--", *AGENT],
    "1 logging": [*CONDUCT, "--", *LOGGING, "--", *AGENT],
}
#: What the Targets table judges (``bench_report.py``): the parsing relay,
#: the conductor and one proxy, over the direct agent.
JUDGED = ("agent", "parsing relay", "conductor", "1 proxy")


class Run(NamedTuple):
    """One run: round trips per second, and the CPU microseconds each process
    of the path spent per round trip (``proc_cpu``; the client included)."""

    per_second: float
    cpu_us: dict[str, float]


async def one_run(label: str, reads: int) -> Run:
    client = ScenarioClient()
    async with acp_trio.open_spawned_agent(client, CHAINS[label]) as agent:
        await agent.initialize(client.initialize_request())
        session = (await agent.new_session("/")).session_id
        await agent.prompt_text(session, "read 10 /x")  # warm up every hop
        before = proc_cpu.snapshot()
        start = trio.current_time()
        reply = await agent.prompt_text(session, f"read {reads} /x")
        elapsed = trio.current_time() - start
        after = proc_cpu.snapshot()
    assert reply.stop_reason == "end_turn"
    spent = proc_cpu.spent(before, after)
    return Run(reads / elapsed, {name: run * 1e6 / reads for name, (run, _) in spent.items()})


async def reads_per_second(label: str, reads: int) -> float:
    return (await one_run(label, reads)).per_second


async def measure_runs(
    reads: int, repeats: int, labels: Sequence[str] = tuple(CHAINS)
) -> dict[str, list[Run]]:
    """Each run, by chain label (interleaved, each repeat in the opposite
    order of the one before)."""
    results: dict[str, list[Run]] = {label: [] for label in labels}
    for repeat in range(repeats):
        for label in labels if repeat % 2 == 0 else labels[::-1]:
            with trio.fail_after(120):
                results[label].append(await one_run(label, reads))
    return results


async def measure(
    reads: int, repeats: int, labels: Sequence[str] = tuple(CHAINS)
) -> dict[str, list[float]]:
    """Round trips per second of each run, by chain label."""
    runs = await measure_runs(reads, repeats, labels)
    return {label: [r.per_second for r in values] for label, values in runs.items()}


async def main(reads: int, repeats: int, labels: Sequence[str] = tuple(CHAINS)) -> list[str]:
    """Measure and format: the table's lines."""
    return table(reads, repeats, await measure(reads, repeats, labels))


def table(reads: int, repeats: int, results: dict[str, list[float]]) -> list[str]:
    """Medians, ranges, µs over the direct agent, and that as a multiple of
    each relay's (the stdlib relay's, the parsing relay's) where measured."""
    base = statistics.median(results["agent"])

    def added(label: str) -> float:
        return 1 / statistics.median(results[label]) - 1 / base

    relays = [(r, added(r)) for r in ("relay", "parsing relay") if r in results]
    lines = [
        f"read {reads} /x, {repeats} interleaved runs; medians (min-max)",
        f"{'chain':<14} {'round trips/s':>14} {'range':>17} {'µs/round trip over agent':>26}"
        + "".join(f" {'x ' + r:>16}" for r, _ in relays),
    ]
    for label, values in results.items():
        median = statistics.median(values)
        extra = added(label)
        times = "".join(
            f" {extra / cost:>16.2f}" if label != "agent" and cost > 0 else f" {'':>16}"
            for _, cost in relays
        )
        lines.append(
            f"{label:<14} {median:>14,.0f} {min(values):>8,.0f}-{max(values):<8,.0f}"
            f" {extra * 1e6:>26.0f}{times}"
        )
    return lines


def cpu_table(cpu: dict[str, list[dict[str, float]]]) -> list[str]:
    """CPU microseconds per round trip, every process of the path summed
    (median of the runs), and what the path adds over the direct agent's."""
    if not any(runs and runs[0] for runs in cpu.values()):
        return []
    total = {label: statistics.median(sum(r.values()) for r in runs) for label, runs in cpu.items()}
    base = total.get("agent", 0.0)
    lines = ["CPU per round trip, every process of the path (/proc schedstat), medians"]
    for label, runs in cpu.items():
        by_process = {name: statistics.median(r.get(name, 0.0) for r in runs) for name in runs[0]}
        parts = ", ".join(f"{name} {us:.0f}" for name, us in by_process.items())
        over = total[label] - base
        lines.append(f"{label:<14} {total[label]:>7.0f} µs, {over:>+6.0f} over the agent ({parts})")
    return lines


def pin_to_one_cpu() -> None:
    """``--cpus same``: this process and every process it spawns on CPU 0
    (children inherit the affinity), so that a round trip costs the CPU time
    of every process on the path, without cross-CPU wake-ups."""
    os.sched_setaffinity(0, {0})


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reads", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="a smoke run")
    parser.add_argument(
        "--only",
        metavar="LABELS",
        help="comma-separated chains (the direct agent is always run): " + ", ".join(CHAINS),
    )
    parser.add_argument(
        "--judged", action="store_true", help="only the chains the Targets table judges"
    )
    parser.add_argument(
        "--cpus",
        choices=("any", "same"),
        default="any",
        help="any: the kernel places the processes; same: all of them on CPU 0",
    )
    parser.add_argument(
        "--json", metavar="FILE", help="also write every run's figures to FILE (bench_report.py)"
    )
    args = parser.parse_args()
    reads, repeats = (50, 1) if args.quick else (args.reads, args.repeats)
    labels = list(JUDGED if args.judged else CHAINS)
    if args.only:
        named = [label.strip() for label in args.only.split(",") if label.strip()]
        unknown = [label for label in named if label not in CHAINS]
        if unknown:
            parser.error(f"unknown chains {unknown}; chains: {', '.join(CHAINS)}")
        labels = ["agent", *[label for label in named if label != "agent"]]
    if args.cpus == "same":
        pin_to_one_cpu()
    load = os.getloadavg()[0]
    runs = trio.run(measure_runs, reads, repeats, labels)
    by_label = {label: [r.per_second for r in values] for label, values in runs.items()}
    cpu = {label: [r.cpu_us for r in values] for label, values in runs.items()}
    print(f"placement: {args.cpus}; load average {load:.1f} before, {os.getloadavg()[0]:.1f} after")
    print("\n".join(table(reads, repeats, by_label)))
    print()
    print("\n".join(cpu_table(cpu)))
    if args.json:
        record = {
            "reads": reads,
            "repeats": repeats,
            "placement": args.cpus,
            "load": [load, os.getloadavg()[0]],
            "runs": by_label,
            "cpu_us": cpu,
        }
        Path(args.json).write_text(json.dumps(record, indent=1) + "\n")
