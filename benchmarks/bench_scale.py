"""Many remote ACP connections at once on loopback: acp_trio's server
(benchmarks/remote_server.py, the scenario agent, a process of its own)
and N acp_trio clients in this process, each its own ACP connection.

    .venv/bin/python benchmarks/bench_scale.py --connections 1000 --profile websocket

Phases, each timed: every client opens its connection and its session
(``initialize`` then ``session/new``, at most ``--concurrency`` at a time),
then all prompt at once (``stream 4 16``: four updates, then the reply),
twice; each prompt's latency is recorded. Then the server's resident
memory (VmRSS, from /proc) at rest, with all connections open, and the
CPU seconds it used. Every prompt must end ``end_turn`` with its four
updates: a lost message fails the run.
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

import trio

from acp_trio import schema
from acp_trio.remote import open_remote_agent
from acp_trio.testing import ScenarioClient

SERVER = Path(__file__).resolve().parent / "remote_server.py"


def own_cpu() -> float:
    """CPU seconds this process (the clients) used so far."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def server_stats(pid: int) -> tuple[int, float]:
    """The server's resident memory (MiB) and CPU seconds so far."""
    rss = 0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            rss = int(line.split()[1]) // 1024
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12])  # utime + stime
    return rss, ticks / os.sysconf("SC_CLK_TCK")


async def main(connections: int, profile: str, concurrency: int, rounds: int) -> int:
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
        opened = trio.Event()
        go = [trio.Event() for _ in range(rounds)]
        round_done: list[int] = [0] * rounds
        round_over = [trio.Event() for _ in range(rounds)]
        ready = 0
        failures: list[str] = []
        latencies: list[list[float]] = [[] for _ in range(rounds)]
        limiter = trio.CapacityLimiter(concurrency)
        all_done = trio.Event()
        finished = 0

        async def one(index: int) -> None:
            nonlocal ready, finished
            client = ScenarioClient()
            try:
                # (One connection's failure is recorded, and its block left
                # as any other: a failure must not leave a block half open.)
                await limiter.acquire()
                holding = True
                try:
                    async with open_remote_agent(client, url, profile=profile) as agent:  # type: ignore[arg-type]
                        await agent.initialize(client.initialize_request())
                        session = await agent.new_session(
                            schema.NewSessionRequest(cwd="/", mcp_servers=[])
                        )
                        limiter.release()
                        holding = False
                        ready += 1
                        if ready == connections:
                            opened.set()
                        for r in range(rounds):
                            await go[r].wait()
                            started = time.perf_counter()
                            result = await agent.prompt_text(session.session_id, "stream 4 16")
                            latencies[r].append(time.perf_counter() - started)
                            if result.stop_reason != "end_turn":
                                failures.append(f"{index}: {result.stop_reason}")
                            round_done[r] += 1
                            if round_done[r] == connections:
                                round_over[r].set()
                        if len(client.texts()) != 4 * rounds:
                            failures.append(f"{index}: {len(client.texts())} updates")
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
        client_cpu = [own_cpu()]
        server_cpu = [rest_cpu]
        async with trio.open_nursery() as clients:
            for index in range(connections):
                clients.start_soon(one, index)
            await opened.wait()
            open_time = time.perf_counter() - started
            open_rss, cpu = server_stats(process.pid)
            client_cpu.append(own_cpu())
            server_cpu.append(cpu)
            round_times = []
            for r in range(rounds):
                t = time.perf_counter()
                go[r].set()
                await round_over[r].wait()
                round_times.append(time.perf_counter() - t)
                client_cpu.append(own_cpu())
                server_cpu.append(server_stats(process.pid)[1])
        _, end_cpu = server_stats(process.pid)
        process.terminate()
        nursery.cancel_scope.cancel()
    print(f"{connections} connections over {profile}:")

    def cpu(phase: int) -> str:
        if phase + 1 >= len(client_cpu):
            return ""
        return (
            f"; CPU: clients {client_cpu[phase + 1] - client_cpu[phase]:.1f} s, "
            f"server {server_cpu[phase + 1] - server_cpu[phase]:.1f} s"
        )

    print(f"- all opened (initialize + session/new) in {open_time:.2f} s{cpu(0)}")
    for r, (took, lat) in enumerate(zip(round_times, latencies, strict=True)):
        if lat:
            lat.sort()
            p50 = statistics.median(lat) * 1000
            p99 = lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1000
            print(
                f"- round {r + 1}: {connections} prompts at once in {took:.2f} s "
                f"(latency p50 {p50:.0f} ms, p99 {p99:.0f} ms){cpu(r + 1)}"
            )
    print(
        f"- server RSS {rest_rss} MiB at rest, {open_rss} MiB with all open "
        f"({(open_rss - rest_rss) * 1024 / connections:.0f} KiB a connection); "
        f"server CPU {end_cpu - rest_cpu:.1f} s"
    )
    if failures:
        print(f"FAILED ({len(failures)}): {failures[:5]}")
        return 1
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--connections", type=int, default=1000)
    parser.add_argument("--profile", choices=["websocket", "http", "http1"], default="websocket")
    parser.add_argument("--concurrency", type=int, default=50, help="connections opening at once")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    sys.exit(trio.run(main, args.connections, args.profile, args.concurrency, args.rounds))
