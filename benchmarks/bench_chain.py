"""The latency a proxy hop adds: ``read`` round trips through 0, 1 and 2 proxies.

acp_trio's client (in this process) spawns the scenario agent directly,
behind the stdlib relay (``peers/relay.py``: one process copying lines both
ways, the honest limit of one hop) and behind the Trio relay
(``peers/trio_relay.py``: the same on Trio's I/O, the limit of one Trio
process on the path), then through ``python -m acp_trio
conduct`` with 0, 1 and 2 pass-through proxies (``peers/pass_proxy.py``: a
``Proxy`` that changes nothing) and with one logging proxy
(``examples/proxies/logging_proxy.py --quiet``: a bare handler that passes
every message on in a handler of its own) in front of it, and runs the
scenario prompt ``read N /x``: N sequential ``fs/read_text_file`` round trips
agent → client, each crossing every hop twice. Runs are interleaved (each
repeat runs every chain once, fresh processes each time); the table shows
the median round trips per second with min-max, the microseconds each
round trip costs over the direct agent, and that cost as a multiple of the
relay's.

Run: ``.venv/bin/python benchmarks/bench_chain.py`` (``--reads N``,
``--repeats R``, ``--quick`` for a smoke run).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import trio

import acp_trio
from acp_trio.testing import SCENARIO_AGENT_COMMAND, ScenarioClient

ROOT = Path(__file__).resolve().parents[1]
PROXY = [sys.executable, str(ROOT / "benchmarks" / "peers" / "pass_proxy.py")]
LOGGING = [sys.executable, str(ROOT / "examples" / "proxies" / "logging_proxy.py"), "--quiet"]
AGENT = list(SCENARIO_AGENT_COMMAND)
RELAY = [sys.executable, str(ROOT / "benchmarks" / "peers" / "relay.py")]
TRIO_RELAY = [sys.executable, str(ROOT / "benchmarks" / "peers" / "trio_relay.py")]


def chain_command(proxies: int | None) -> list[str]:
    """``None``: the agent itself; ``-1``: behind the stdlib relay; ``-3``:
    behind the Trio relay; ``-2``: the conductor with one logging proxy; else
    the conductor with that many pass-through proxies."""
    if proxies is None:
        return AGENT
    if proxies == -1:
        return [*RELAY, "--", *AGENT]
    if proxies == -3:
        return [*TRIO_RELAY, "--", *AGENT]
    command = [sys.executable, "-m", "acp_trio", "conduct"]
    for proxy in [LOGGING] if proxies == -2 else [PROXY] * proxies:
        command += ["--", *proxy]
    return [*command, "--", *AGENT]


async def reads_per_second(proxies: int | None, reads: int) -> float:
    client = ScenarioClient()
    async with acp_trio.open_spawned_agent(client, chain_command(proxies)) as agent:
        await agent.initialize(client.initialize_request())
        session = (await agent.new_session("/")).session_id
        await agent.prompt_text(session, "read 10 /x")  # warm up every hop
        start = trio.current_time()
        reply = await agent.prompt_text(session, f"read {reads} /x")
        elapsed = trio.current_time() - start
    assert reply.stop_reason == "end_turn"
    return reads / elapsed


LABELS: dict[int | None, str] = {
    None: "agent",
    -1: "relay",
    -3: "trio relay",
    0: "conductor",
    1: "1 proxy",
    2: "2 proxies",
    -2: "1 logging",
}


async def measure(reads: int, repeats: int) -> dict[str, list[float]]:
    """Round trips per second of each run, by chain label (runs interleaved)."""
    results: dict[str, list[float]] = {label: [] for label in LABELS.values()}
    for _ in range(repeats):
        for key, label in LABELS.items():
            with trio.fail_after(120):
                results[label].append(await reads_per_second(key, reads))
    return results


async def main(reads: int, repeats: int) -> list[str]:
    """Measure and format: the table's lines."""
    return table(reads, repeats, await measure(reads, repeats))


def table(reads: int, repeats: int, by_label: dict[str, list[float]]) -> list[str]:
    results = {key: by_label[label] for key, label in LABELS.items()}
    base = statistics.median(results[None])
    relay = 1 / statistics.median(results[-1]) - 1 / base
    lines = [
        f"read {reads} /x, {repeats} interleaved runs; medians (min-max)",
        f"{'chain':<11} {'round trips/s':>14} {'range':>17} {'µs/round trip over agent':>26}"
        f" {'x relay':>8}",
    ]
    for key, label in LABELS.items():
        values = results[key]
        median = statistics.median(values)
        extra = 1 / median - 1 / base
        times = f"{extra / relay:>8.2f}" if key is not None and relay > 0 else f"{'':>8}"
        lines.append(
            f"{label:<11} {median:>14,.0f} {min(values):>8,.0f}-{max(values):<8,.0f}"
            f" {extra * 1e6:>26.0f} {times}"
        )
    return lines


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reads", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="a smoke run")
    parser.add_argument(
        "--json", metavar="FILE", help="also write every run's figures to FILE (bench_report.py)"
    )
    args = parser.parse_args()
    reads, repeats = (50, 1) if args.quick else (args.reads, args.repeats)
    by_label = trio.run(measure, reads, repeats)
    print("\n".join(table(reads, repeats, by_label)))
    if args.json:
        record = {"reads": reads, "repeats": repeats, "runs": by_label}
        Path(args.json).write_text(json.dumps(record, indent=1) + "\n")
