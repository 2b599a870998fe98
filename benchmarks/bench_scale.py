"""Many remote ACP connections at once on loopback: acp_trio's server
(benchmarks/remote_server.py, the scenario agent, a process of its own)
and N acp_trio clients in this process, each its own ACP connection.

    .venv/bin/python benchmarks/bench_scale.py --connections 1000
    .venv/bin/python benchmarks/bench_scale.py --connections 5000 --profile websocket

For each profile (a fresh server each): every client opens its connection
and its session (``initialize`` then ``session/new``, at most
``--concurrency`` at a time), then all send the first prompt at once
(``echo hello``), then all the second (``stream 50``); each prompt's
latency is recorded. The total is the wall time from the first open to the
last prompt's answer; on a machine with other work, part of it is time each
process was runnable but waited for a CPU (/proc/PID/schedstat), printed
and recorded too. Then the server's resident memory (VmRSS, from
/proc) at rest and with all connections open and idle (between the opens
and the first prompt), and the CPU seconds of each side for each phase.
Every prompt must end ``end_turn`` with its updates (one for ``echo``, N
for ``stream N``): a lost message fails that client. ``--json FILE``
writes every figure (``make bench-report``); the exit status is 1 if any
client failed.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import trio

from acp_trio import schema
from acp_trio.remote import open_remote_agent
from acp_trio.testing import ScenarioClient

SERVER = Path(__file__).resolve().parent / "remote_server.py"
PROFILES = ("websocket", "http1", "http")
PROMPTS = ("echo hello", "stream 50")


def own_cpu() -> float:
    """CPU seconds this process (the clients) used so far."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def server_stats(pid: int) -> tuple[int, float]:
    """The server's resident memory (KiB) and CPU seconds so far."""
    rss = 0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            rss = int(line.split()[1])
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12])  # utime + stime
    return rss, ticks / os.sysconf("SC_CLK_TCK")


def cpu_wait(pid: int | str) -> float:
    """Seconds the process's main thread waited for a CPU while runnable
    (/proc/PID/schedstat): what a loaded machine adds to the wall time."""
    try:
        return int(Path(f"/proc/{pid}/schedstat").read_text().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0


def updates_of(prompt: str) -> int:
    """How many ``session/update`` chunks the scenario agent sends for it."""
    words = prompt.split()
    if words[0] == "stream":
        return int(words[1])
    return 1 if words[0] == "echo" else 0


def percentiles(values: list[float]) -> dict[str, float] | None:
    """Median and p95 of ``values`` (milliseconds), ``None`` for none."""
    if not values:
        return None
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {"median": statistics.median(ordered), "p95": p95}


async def run_profile(
    connections: int, profile: str, concurrency: int, prompts: list[str], limit: float
) -> dict[str, Any]:
    """One profile against a fresh server process: the figures as a dict."""
    async with trio.open_nursery() as nursery:
        process: trio.Process = await nursery.start(
            functools.partial(
                trio.run_process,
                [sys.executable, str(SERVER)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                check=False,
            )
        )
        assert process.stdout is not None
        line = b""
        while not line.endswith(b"\n"):
            line += await process.stdout.receive_some()
        url = json.loads(line)["url"]
        rest_rss, rest_cpu = server_stats(process.pid)
        rounds = len(prompts)
        opened = trio.Event()
        go = [trio.Event() for _ in range(rounds)]
        round_done: list[int] = [0] * rounds
        round_over = [trio.Event() for _ in range(rounds)]
        ready = 0
        failures: list[str] = []
        ok = 0
        latencies: list[list[float]] = [[] for _ in range(rounds)]
        open_times: list[float] = []
        client_times: list[float] = []
        limiter = trio.CapacityLimiter(concurrency)
        all_done = trio.Event()
        finished = 0
        expected = sum(updates_of(p) for p in prompts)

        async def one(index: int) -> None:
            nonlocal ready, finished, ok
            client = ScenarioClient()
            try:
                # (One connection's failure is recorded, and its block left
                # as any other: a failure must not leave a block half open.)
                await limiter.acquire()
                holding = True
                try:
                    began = time.perf_counter()
                    async with open_remote_agent(client, url, profile=profile) as agent:  # type: ignore[arg-type]
                        await agent.initialize(client.initialize_request())
                        session = await agent.new_session(
                            schema.NewSessionRequest(cwd="/", mcp_servers=[])
                        )
                        busy = time.perf_counter() - began
                        open_times.append(busy)
                        limiter.release()
                        holding = False
                        ready += 1
                        if ready == connections:
                            opened.set()
                        good = True
                        for r, prompt in enumerate(prompts):
                            await go[r].wait()
                            started = time.perf_counter()
                            result = await agent.prompt_text(session.session_id, prompt)
                            took = time.perf_counter() - started
                            latencies[r].append(took)
                            busy += took
                            if result.stop_reason != "end_turn":
                                failures.append(f"{index}: {result.stop_reason}")
                                good = False
                            round_done[r] += 1
                            if round_done[r] == connections:
                                round_over[r].set()
                        if len(client.texts()) != expected:
                            failures.append(f"{index}: {len(client.texts())} updates")
                            good = False
                        client_times.append(busy)
                        ok += good
                        finished += 1
                        if finished == connections:
                            all_done.set()
                        await all_done.wait()
                finally:
                    if holding:
                        limiter.release()
            except Exception as exc:
                failures.append(f"{index}: {exc!r}")
                for event in (opened, all_done, *go, *round_over):
                    event.set()

        started = time.perf_counter()
        waited = (cpu_wait("self"), cpu_wait(process.pid))
        client_cpu = [own_cpu()]
        server_cpu = [rest_cpu]
        open_time = 0.0
        open_rss = rest_rss
        round_times: list[float] = []
        with trio.move_on_after(limit) as deadline:
            async with trio.open_nursery() as clients:
                for index in range(connections):
                    clients.start_soon(one, index)
                await opened.wait()
                open_time = time.perf_counter() - started
                open_rss, cpu = server_stats(process.pid)
                client_cpu.append(own_cpu())
                server_cpu.append(cpu)
                for r in range(rounds):
                    t = time.perf_counter()
                    go[r].set()
                    await round_over[r].wait()
                    round_times.append(time.perf_counter() - t)
                    client_cpu.append(own_cpu())
                    server_cpu.append(server_stats(process.pid)[1])
        total = time.perf_counter() - started
        if deadline.cancelled_caught:
            failures.append(f"timed out after {limit:.0f} s")
        _, end_cpu = server_stats(process.pid)
        waited = (cpu_wait("self") - waited[0], cpu_wait(process.pid) - waited[1])
        client_end_cpu = own_cpu()
        process.terminate()
        nursery.cancel_scope.cancel()

    def cpu(phase: int) -> dict[str, float] | None:
        if phase + 1 >= len(client_cpu):
            return None
        return {
            "clients_s": client_cpu[phase + 1] - client_cpu[phase],
            "server_s": server_cpu[phase + 1] - server_cpu[phase],
        }

    return {
        "clients": connections,
        "ok": ok,
        "failed": connections - ok,
        "failures": failures[:5],
        "total_s": total,
        "open_s": open_time,
        "open_cpu": cpu(0),
        "open_ms": percentiles([t * 1000 for t in open_times]),
        "client_ms": percentiles([t * 1000 for t in client_times]),
        "rounds": [
            {
                "prompt": prompt,
                "seconds": took,
                "latency_ms": percentiles([x * 1000 for x in lat]),
                "cpu": cpu(r + 1),
            }
            for r, (prompt, took, lat) in enumerate(
                zip(prompts, round_times, latencies, strict=False)
            )
        ],
        "server_rss_kib": {"rest": rest_rss, "open": open_rss},
        "rss_growth_kib": open_rss - rest_rss,
        "idle_kib_per_connection": (open_rss - rest_rss) / connections,
        "server_cpu_s": end_cpu - rest_cpu,
        "clients_cpu_s": client_end_cpu - client_cpu[0],
        # Runnable but waiting for a CPU (other processes had it).
        "cpu_wait_s": {"clients": waited[0], "server": waited[1]},
    }


def show(profile: str, figures: dict[str, Any]) -> None:
    def cpu(phase: dict[str, float] | None) -> str:
        if phase is None:
            return ""
        return f"; CPU: clients {phase['clients_s']:.1f} s, server {phase['server_s']:.1f} s"

    def ms(p: dict[str, float] | None) -> str:
        return f"p50 {p['median']:.0f} ms, p95 {p['p95']:.0f} ms" if p else "none"

    print(f"{figures['clients']} connections over {profile}:")
    print(
        f"- {figures['ok']} of {figures['clients']} in {figures['total_s']:.2f} s"
        f" ({figures['failed']} failed); a client's own time {ms(figures['client_ms'])}"
    )
    print(
        f"- all opened (initialize + session/new) in {figures['open_s']:.2f} s"
        f" (each {ms(figures['open_ms'])}){cpu(figures['open_cpu'])}"
    )
    for r, round_ in enumerate(figures["rounds"]):
        print(
            f"- round {r + 1}: {figures['clients']} `{round_['prompt']}` at once in "
            f"{round_['seconds']:.2f} s (latency {ms(round_['latency_ms'])}){cpu(round_['cpu'])}"
        )
    rss = figures["server_rss_kib"]
    print(
        f"- server RSS {rss['rest'] / 1024:.0f} MiB at rest, {rss['open'] / 1024:.0f} MiB with"
        f" all open ({figures['idle_kib_per_connection']:.0f} KiB an idle connection);"
        f" server CPU {figures['server_cpu_s']:.1f} s"
    )
    wait = figures["cpu_wait_s"]
    print(
        f"- CPU in all: clients {figures['clients_cpu_s']:.1f} s, server"
        f" {figures['server_cpu_s']:.1f} s; runnable but waiting for a CPU (the machine's"
        f" other load): clients {wait['clients']:.1f} s, server {wait['server']:.1f} s"
    )
    if figures["failures"]:
        print(f"  FAILED ({figures['failed']}): {figures['failures']}")


async def main(args: argparse.Namespace) -> int:
    profiles = [p.strip() for p in args.profile.split(",") if p.strip()]
    prompts = [p.strip() for p in args.prompts.split(";") if p.strip()]
    record: dict[str, Any] = {
        "connections": args.connections,
        "concurrency": args.concurrency,
        "prompts": prompts,
        "profiles": {},
    }
    for profile in profiles:
        figures = await run_profile(
            args.connections, profile, args.concurrency, prompts, args.timeout
        )
        record["profiles"][profile] = figures
        show(profile, figures)
    if args.json:
        await trio.Path(args.json).write_text(json.dumps(record, indent=1) + "\n")
    return 1 if any(f["failed"] for f in record["profiles"].values()) else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--connections", type=int, default=1000)
    parser.add_argument(
        "--profile",
        default=",".join(PROFILES),
        help="the profiles to run, comma-separated (websocket, http1, http; default: all)",
    )
    parser.add_argument("--concurrency", type=int, default=50, help="connections opening at once")
    parser.add_argument(
        "--prompts",
        default=";".join(PROMPTS),
        help="the prompts each client sends, one round each, ';'-separated"
        f" (default: {';'.join(PROMPTS)!r})",
    )
    parser.add_argument(
        "--timeout", type=float, default=600, help="seconds a profile may take (then: failed)"
    )
    parser.add_argument(
        "--json", metavar="FILE", help="also write every figure to FILE (bench_report.py)"
    )
    args = parser.parse_args()
    bad = set(args.profile.split(",")) - set(PROFILES)
    if bad:
        parser.error(f"unknown profile: {', '.join(sorted(bad))}")
    sys.exit(trio.run(main, args))
