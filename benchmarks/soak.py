"""Soak test: a million prompts with random cancellation over real pipes.

Not part of the test suite. It drives ``--requests`` prompts (default
1,000,000) from a typed client in this process to the scenario agent
(``python -m acp_trio scenario-agent``) in a subprocess, over its stdin and
stdout, with ``--concurrency`` prompts in flight (one session each). The
prompts mix ``echo``, ``stream 3``, ``read 1 /f`` (the agent calls back),
``sleep 1`` and ``wait_for_cancel``; a ``--cancel-rate`` share of them is
cancelled at a random moment, half by a caller deadline (the SDK sends
``session/cancel`` and keeps the turn until its late answer), half by
``AgentProxy.cancel()`` (``session/cancel``, answer awaited). ``wait_for_cancel``
prompts are always cancelled. With ``--in-process`` both sides run here,
joined by two ``os.pipe()`` pairs.

Every ``--report-every`` prompts (default: a twentieth of them) it prints
the RSS (``VmRSS`` in ``/proc/<pid>/status``) and open file descriptors
(``/proc/<pid>/fd``) of this process and of the agent process, and the
memory traced by ``tracemalloc`` here (``--no-tracemalloc`` to skip it; it
halves the speed).

Verdict: the first report is the baseline (everything warmed up); from it
to the last report, growth must stay within ``--max-rss-growth`` MiB per
process (default 16), ``--max-traced-growth`` MiB (default 2) and
``--max-fd-growth`` descriptors (default 0); every prompt must end with an
allowed outcome, and at the end nothing may be left in flight. Exit status
0 if so, 1 otherwise.

Run: ``python benchmarks/soak.py`` (about 7 minutes at ~2,400 prompts/s
with tracemalloc on a small machine, 3 without; ``--requests 100000`` for a
shorter run).
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
import tracemalloc
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import trio

import acp_trio
from acp_trio import AgentProxy, Client, ConnectionConfig, RequestError
from acp_trio.schema import (
    ClientCapabilities,
    FileSystemCapabilities,
    InitializeRequest,
    NewSessionRequest,
    ReadTextFileRequest,
    ReadTextFileResponse,
    SessionNotification,
)
from acp_trio.testing import SCENARIO_AGENT_COMMAND, ScenarioAgent

COMMANDS = [
    ("echo soak", 50),
    ("stream 3", 15),
    ("read 1 /f", 15),
    ("sleep 1", 10),
    ("wait_for_cancel", 10),
]
ALLOWED = {"end_turn", "cancelled", -32800, "deadline"}
MiB = 1024 * 1024


class SoakClient(Client):
    """Answers reads, ignores updates, records nothing (a recording client
    would be the leak)."""

    async def session_update(self, params: SessionNotification) -> None:
        pass

    async def read_text_file(self, params: ReadTextFileRequest) -> ReadTextFileResponse:
        return ReadTextFileResponse(content="x" * 64)


def proc_rss_mib(pid: int | str) -> float:
    with open(f"/proc/{pid}/status") as status:
        for row in status:
            if row.startswith("VmRSS:"):
                return int(row.split()[1]) / 1024
    return float("nan")


def proc_fds(pid: int | str) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


class Sample:
    def __init__(self, done: int, elapsed: float, agent_pid: int | None, traced: bool) -> None:
        self.done = done
        self.elapsed = elapsed
        self.rss = proc_rss_mib("self")
        self.fds = proc_fds("self")
        self.traced = tracemalloc.get_traced_memory()[0] / MiB if traced else float("nan")
        self.agent_rss = proc_rss_mib(agent_pid) if agent_pid else float("nan")
        self.agent_fds = proc_fds(agent_pid) if agent_pid else 0

    def row(self, previous: Sample | None) -> str:
        rate = (self.done - (previous.done if previous else 0)) / max(
            self.elapsed - (previous.elapsed if previous else 0), 1e-9
        )
        return (
            f"{self.done:>10,} {self.elapsed:>8.1f} {rate:>9,.0f} "
            f"{self.rss:>9.1f} {self.traced:>9.2f} {self.fds:>5} "
            f"{self.agent_rss:>10.1f} {self.agent_fds:>6}"
        )


HEADER = (
    f"{'prompts':>10} {'time s':>8} {'prompts/s':>9} {'RSS MiB':>9} {'traced':>9} "
    f"{'fds':>5} {'agent RSS':>10} {'a.fds':>6}"
)


@asynccontextmanager
async def open_agent(
    client: Client, in_process: bool
) -> AsyncIterator[tuple[AgentProxy, int | None]]:
    """The client's proxy and the agent's pid (``None`` in-process)."""
    if not in_process:
        # What open_spawned_agent does, keeping the process at hand.
        async with acp_trio.lowlevel.open_agent_process(SCENARIO_AGENT_COMMAND) as process:
            config = ConnectionConfig(exit_details=process.exit_details)
            async with acp_trio.open_agent(client, process.stream, config=config) as agent:
                yield agent, process.pid
        return
    a_read, b_write = os.pipe()
    b_read, a_write = os.pipe()
    agent_end = trio.StapledStream(trio.lowlevel.FdStream(a_write), trio.lowlevel.FdStream(a_read))
    client_end = trio.StapledStream(trio.lowlevel.FdStream(b_write), trio.lowlevel.FdStream(b_read))
    async with (
        acp_trio.open_client(ScenarioAgent(), agent_end),
        acp_trio.open_agent(client, client_end) as agent,
    ):
        yield agent, None


async def soak(args: argparse.Namespace) -> int:
    rng = random.Random(args.seed)
    commands = [c for c, _ in COMMANDS]
    weights = [w for _, w in COMMANDS]
    outcomes: Counter[Any] = Counter()
    samples: list[Sample] = []
    done = 0
    issued = 0
    every = args.report_every or max(args.requests // 20, 1)
    client = SoakClient()
    caps = ClientCapabilities(fs=FileSystemCapabilities(read_text_file=True))
    start = time.perf_counter()
    async with open_agent(client, args.in_process) as (agent, agent_pid):
        await agent.initialize(InitializeRequest(protocol_version=1, client_capabilities=caps))

        def sample() -> None:
            samples.append(Sample(done, time.perf_counter() - start, agent_pid, args.tracemalloc))
            print(samples[-1].row(samples[-2] if len(samples) > 1 else None), flush=True)

        async def worker() -> None:
            nonlocal done, issued
            new = NewSessionRequest(cwd="/", mcp_servers=[])
            session = (await agent.new_session(new)).session_id
            while issued < args.requests:
                issued += 1
                command = rng.choices(commands, weights)[0]
                cancel = command == "wait_for_cancel" or rng.random() < args.cancel_rate
                by_deadline = cancel and rng.random() < 0.5
                delay = rng.random() * 0.002
                outcome: Any = "deadline"
                async with trio.open_nursery() as nursery:
                    if cancel and not by_deadline:

                        async def cancel_later(delay: float) -> None:
                            await trio.sleep(delay)
                            await agent.cancel(session)

                        nursery.start_soon(cancel_later, delay)
                    with trio.move_on_after(delay if by_deadline else 1e9):
                        try:
                            outcome = (await agent.prompt_text(session, command)).stop_reason
                        except RequestError as exc:
                            outcome = exc.code
                outcomes[outcome] += 1
                done += 1
                if done % every == 0:
                    sample()

        print(HEADER, flush=True)
        async with trio.open_nursery() as nursery:
            for _ in range(args.concurrency):
                nursery.start_soon(worker)
        await trio.sleep(0.1)
        stats = agent.connection.statistics()
        left = agent.connection.request_tree()
        if not samples or samples[-1].done != done:
            sample()
    elapsed = time.perf_counter() - start
    print(f"\n{done:,} prompts in {elapsed:.1f} s ({done / elapsed:,.0f}/s); outcomes:")
    for outcome, count in outcomes.most_common():
        print(f"  {outcome!s:>12}: {count:,}")
    failures: list[str] = []
    unexpected = {k: v for k, v in outcomes.items() if k not in ALLOWED}
    if unexpected:
        failures.append(f"unexpected outcomes: {unexpected}")
    if sum(outcomes.values()) != args.requests:
        failures.append(f"{sum(outcomes.values())} outcomes for {args.requests} prompts")
    if stats.incoming_in_flight or stats.outgoing_pending or left:
        failures.append(f"left in flight: {stats}, {left}")
    if len(samples) >= 2:
        base, last = samples[0], samples[-1]
        growth = {
            "RSS (MiB)": (last.rss - base.rss, args.max_rss_growth),
            "fds": (last.fds - base.fds, args.max_fd_growth),
        }
        if args.tracemalloc:
            growth["traced (MiB)"] = (last.traced - base.traced, args.max_traced_growth)
        if agent_pid:
            growth["agent RSS (MiB)"] = (last.agent_rss - base.agent_rss, args.max_rss_growth)
            growth["agent fds"] = (last.agent_fds - base.agent_fds, args.max_fd_growth)
        print(f"\ngrowth from the first report ({base.done:,} prompts) to the last:")
        for name, (value, bound) in growth.items():
            verdict = "ok" if value <= bound else "TOO MUCH"
            print(f"  {name:>16}: {value:+.2f} (bound {bound}) {verdict}")
            if value > bound:
                failures.append(f"{name} grew by {value:.2f} (bound {bound})")
    for failure in failures:
        print(f"FAIL: {failure}")
    print("PASS" if not failures else "FAIL")
    return 1 if failures else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=1_000_000, help="prompts to send")
    parser.add_argument("--report-every", type=int, default=0, help="prompts between reports")
    parser.add_argument("--concurrency", type=int, default=32, help="prompts in flight")
    parser.add_argument("--cancel-rate", type=float, default=0.3, help="share cancelled")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--in-process", action="store_true", help="agent here, over os.pipe()")
    parser.add_argument("--no-tracemalloc", dest="tracemalloc", action="store_false")
    parser.add_argument("--max-rss-growth", type=float, default=16.0, help="MiB per process")
    parser.add_argument("--max-traced-growth", type=float, default=2.0, help="MiB")
    parser.add_argument("--max-fd-growth", type=int, default=0)
    args = parser.parse_args(argv)
    if args.requests < 1 or args.concurrency < 1:
        parser.error("--requests and --concurrency must be positive")
    if args.tracemalloc:
        tracemalloc.start()
    return trio.run(soak, args)


if __name__ == "__main__":
    sys.exit(main())
