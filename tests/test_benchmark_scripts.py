"""The cascade benchmarks still run (small sizes): each cascade finishes,
leaves nothing in flight, and reports a time. Not a timing test."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import bench_connection
import cascade_floor

# The benchmark scripts run here at small sizes (the slow tier: make test-slow).
pytestmark = pytest.mark.slow

LIMIT = 60  # real seconds: real pipes and processes


@pytest.mark.parametrize("kind", ["fan", "chain"])
async def test_the_bare_trio_cascade_finishes(kind: str) -> None:
    with trio.fail_after(LIMIT):
        seconds = await cascade_floor.bare_trio_cascade(kind, 20)
    assert 0 < seconds < LIMIT


@pytest.mark.parametrize("kind", ["fan", "chain"])
async def test_the_connection_cascade_finishes(kind: str) -> None:
    runs = len(bench_connection.FULL_COLLECTIONS_IN_WINDOW)
    with trio.fail_after(LIMIT):
        seconds = await bench_connection.cascade(kind, 20, bench_connection.pipe_pair)
    assert 0 < seconds < LIMIT
    # Each run records the full garbage collections inside its timing.
    assert len(bench_connection.FULL_COLLECTIONS_IN_WINDOW) == runs + 1
    assert bench_connection.FULL_COLLECTIONS_IN_WINDOW[-1] >= 0


async def test_a_full_collection_inside_the_timing_is_counted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real_wait_until = bench_connection._wait_until
    calls = 0

    async def wait_until(predicate: Callable[[], bool]) -> None:
        nonlocal calls
        calls += 1
        if calls == 2:  # the wait for the cascade to settle: inside the timing
            gc.collect()
        await real_wait_until(predicate)

    monkeypatch.setattr(bench_connection, "_wait_until", wait_until)
    with trio.fail_after(LIMIT):
        await bench_connection.cascade("fan", 20, bench_connection.pipe_pair)
    assert calls == 2
    assert bench_connection.FULL_COLLECTIONS_IN_WINDOW[-1] >= 1
    assert bench_connection.with_full_collection([0, 1, 0, 2]) == (
        "2 of 4 runs with a full garbage collection inside"
    )


@pytest.mark.parametrize("kind", ["fan", "chain"])
async def test_the_two_process_cascade_finishes(kind: str) -> None:
    with trio.fail_after(LIMIT):
        times = await bench_connection.cascade_two_processes(kind, 20, 2)
    assert len(times) == 2
    assert all(0 < ms < LIMIT * 1000 for ms in times)
    # Each run's CPU, every process of it (the agent process included).
    assert all(ms > 0 for ms in bench_connection.CPU_MS_IN_WINDOW[-2:])


@pytest.mark.parametrize("kind", ["fan", "chain"])
async def test_the_two_process_cascade_in_bare_trio_finishes_with_nothing_in_flight(
    kind: str,
) -> None:
    with trio.fail_after(LIMIT):
        runs = await cascade_floor.interleaved_two_processes(kind, 2, n=20)
    assert len(runs.sdk) == len(runs.floor) == 2
    assert all(ms > 0 for ms in runs.floor)
    assert len(runs.floor_cpu) == 2
    assert all(ms > 0 for ms in runs.floor_cpu)


def test_the_parsing_relay_gives_each_hop_its_ids_and_passes_cancels_on() -> None:
    """The floor client through the parsing relay: every round trip done,
    and on ``session/cancel`` each held request is cancelled with the id the
    client knows it by (the client counts only cancels of requests it
    holds, so ids left unmapped would count none)."""
    peers = Path(__file__).resolve().parents[1] / "benchmarks" / "peers"
    relay = [sys.executable, str(peers / "parsing_relay.py"), "--"]
    for workload in ("read", "cancel"):
        command = [sys.executable, str(peers / "floor_client.py"), "--workload", workload]
        command += ["--n", "10", "--", *relay, sys.executable, str(peers / "floor_agent.py")]
        done = subprocess.run(command, capture_output=True, text=True, timeout=LIMIT, check=True)
        result = json.loads(done.stdout.splitlines()[-1])
        if workload == "cancel":
            assert result["wire_cancels"] >= 10
        else:
            assert result["per_second"] > 0


async def test_the_cost_of_a_full_collection_is_measured_and_nothing_stays_frozen() -> None:
    with trio.fail_after(LIMIT):
        plain, frozen = await bench_connection.full_collection_ms(20)
    assert plain > 0
    assert frozen > 0
    assert gc.get_freeze_count() == 0


async def test_the_prompt_deadline_benchmark_measures_each_cancel() -> None:
    import prompt_deadline

    from acp_trio.testing import SCENARIO_AGENT_COMMAND

    with trio.fail_after(LIMIT):
        latencies = await prompt_deadline.measure(list(SCENARIO_AGENT_COMMAND), 3)
    assert len(latencies) == 3
    assert all(latency >= 0 for latency in latencies)


async def test_the_chain_benchmark_runs_every_chain() -> None:
    import bench_chain

    with trio.fail_after(LIMIT * 2):
        lines = await bench_chain.main(20, 1)
    labels = [line[:14].strip() for line in lines[2:]]
    assert labels == list(bench_chain.CHAINS)
    assert labels[3] == "parsing relay"


@pytest.mark.parametrize("middle", ["conductor", "conductor + 1 Proxy", "the Proxy"])
def test_the_chain_counts_count_the_process_in_the_middle(middle: str) -> None:
    import chain_counts

    counted = chain_counts.counts(sys.executable, chain_counts.MIDDLES[middle], 30)
    assert counted["task steps"] > 30
    assert "CPU µs" in counted


def test_the_chain_counts_count_calls_in_every_thread() -> None:
    """With ``calls``, both of the stdlib relay's copying threads are counted
    (two builtin calls per line, its write and flush; a round trip is two
    lines, one each way: the main thread alone would make it two)."""
    import chain_counts

    middle = chain_counts.MIDDLES["stdlib relay"]
    low = chain_counts.counts(sys.executable, middle, 10, calls=True)
    high = chain_counts.counts(sys.executable, middle, 40, calls=True)
    assert high["builtin calls"] - low["builtin calls"] > 3 * 30


@pytest.mark.parametrize("agent", ["floor_agent.py", "trio_floor_agent.py", "burst_agent.py"])
@pytest.mark.parametrize("workload", ["stream", "read", "cancel"])
def test_the_floor_agents_serve_every_workload(agent: str, workload: str) -> None:
    """The stdlib and Trio floor agents and the burst agent behind the raw
    client, as ``bench_sdks.py`` runs them (the cancel workload: every held
    request cancelled on the wire). ``stream`` is big enough to fill the
    pipe: the Trio floor's writer task then writes the rest in batches."""
    peers = Path(__file__).resolve().parents[1] / "benchmarks" / "peers"
    n = "3000" if workload == "stream" else "20"
    command = [sys.executable, str(peers / "floor_client.py"), "--workload", workload]
    command += ["--n", n, "--", sys.executable, str(peers / agent)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=LIMIT, check=True)
    result = json.loads(done.stdout.splitlines()[-1])
    assert result["n"] == int(n)
    if workload == "cancel":
        assert len(result["latencies_ms"]) == 20
        assert result["wire_cancels"] >= 20
    else:
        assert result["per_second"] > 0
        # The client and its agent, from /proc.
        assert result["tree_cpu_seconds"] > result["cpu_seconds"] > 0


@pytest.mark.parametrize("profile", ["websocket", "http", "http1"])
async def test_the_remote_benchmark_runs_against_its_server_process(profile: str) -> None:
    pytest.importorskip("hypercorn")
    import functools

    import bench_remote

    run = functools.partial(
        bench_remote.trio_client, profile=profile, commands=["stream 20 4", "read 3 /x"], runs=1
    )
    with trio.fail_after(LIMIT):
        medians = await bench_remote.with_trio_server(run)
    assert len(medians) == 2
    assert all(ms > 0 for ms in medians)
