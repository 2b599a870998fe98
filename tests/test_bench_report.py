"""``make bench-report``: the report reads what the benchmark scripts write
(``--json``), judges every target from it, and writes the page. Small sizes:
not a timing test."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_report  # noqa: E402
import report_figures  # noqa: E402

LIMIT = 300  # real seconds: real processes


def _script(name: str, *args: str, tmp: Path) -> dict[str, Any]:
    out = tmp / f"{name}.json"
    command = [sys.executable, str(ROOT / "benchmarks" / name), *args, "--json", str(out)]
    subprocess.run(command, cwd=ROOT, capture_output=True, timeout=LIMIT, check=True)
    record: dict[str, Any] = json.loads(out.read_text())
    return record


def _machine() -> dict[str, Any]:
    return {
        "cpu": "test CPU",
        "cores": 2,
        "usable": 2,
        "system": "Linux",
        "python": "3.11",
        "loop_s": 0.15,
        "load": [1.0, 1.0, 1.0],
    }


def _results(**parts: Any) -> dict[str, Any]:
    return {
        "date": "2026-12-06 00:00 UTC",
        "quick": False,
        "machine_before": _machine(),
        "machine_after": _machine(),
        **parts,
    }


def _sdks(runs: dict[str, dict[str, list[float]]], **extra: Any) -> dict[str, Any]:
    return {
        "machine": "2 cores",
        "versions": "test",
        "repeats": 3,
        "placement": "any",
        "sizes": {"stream": 20000, "read": 5000, "cancel": 50},
        "skipped": {},
        "runs": {
            workload: {pair: [{"per_second": x} for x in xs] for pair, xs in pairs.items()}
            for workload, pairs in runs.items()
        },
        **extra,
    }


def _verdicts(results: dict[str, Any]) -> dict[str, tuple[str, bool | None]]:
    return {what: (value, ok) for what, value, ok in report_figures.targets(results)}


def _rows(results: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {row["what"]: row for row in report_figures.floor_targets(results)}


def test_each_target_is_judged_against_its_own_floor() -> None:
    # The pinned judges: ratios of runs made one after the other.
    judges = _sdks(
        {
            "read": {
                "floor x trio-floor": [100.0, 200.0, 100.0],
                "floor x acp_trio": [96.0, 180.0, 90.0],  # 96%, 90%, 90%: median 90%
            },
            "stream": {
                "floor x trio-floor": [100.0, 100.0, 100.0],
                "floor x acp_trio": [91.0, 95.0, 80.0],  # median 91%: met
            },
        }
    )
    # 1,000 round trips/s direct: 1,000 µs; the parsing relay adds 100, the
    # conductor 120 (1.2x: met), the first proxy 260 more (2.6x: missed).
    chain = {
        "reads": 2000,
        "repeats": 3,
        "runs": {
            "agent": [1000.0],
            "parsing relay": [1e6 / 1100],
            "conductor": [1e6 / 1120],
            "1 proxy": [1e6 / 1380],
        },
    }
    connection = {
        "memory": [2100.0, 800.0, 4000.0],
        "memory_floor": 2000.0,  # 1.05x: met
        "pipes": {"fan": [60.0, 50.0], "chain": [75.0, 80.0]},
        "floor": {"fan": [50.0, 50.0], "chain": [50.0, 50.0]},  # fan 1.1x, chain 1.55x
        "procs": {"fan": [60.0], "chain": [70.0]},
        "procs_floor": {"fan": [50.0], "chain": [50.0]},  # 1.2x: met; 1.4x: missed
    }
    remote = {
        "cells": {
            "acp_trio server + acp_trio client, HTTP/1.1": {"stream_ms": 66.0, "read_ms": 200.0},
            "acp_trio server + TypeScript client, HTTP/1.1": {"stream_ms": 60.0, "read_ms": 1.0},
            "acp_trio server + acp_trio client, HTTP/2 h2c": {"stream_ms": 1.0, "read_ms": 360.0},
        }
    }
    rows = _rows(
        _results(
            sdks=_sdks({}, connection=connection),
            judges=judges,
            chain_judges=chain,
            remote_judges=remote,
        )
    )
    verdicts = {what: (row["ratio"], row["ok"]) for what, row in rows.items()}
    assert verdicts == {
        "memory per request in flight, serving": ("1.05x", True),
        "cancel cascade of 1,000, one process: fan-out": ("1.10x", True),
        "cancel cascade of 1,000, one process: chain": ("1.55x", False),
        "cancel cascade of 1,000, two processes: fan-out": ("1.20x", True),
        "cancel cascade of 1,000, two processes: chain": ("1.40x", False),
        "the conductor: µs a round trip adds": ("1.20x", True),
        "each proxy behind it: µs a round trip adds": ("2.60x", False),
        "`read`: acp_trio's agent, round trips/s, both processes on CPU 0": ("90%", False),
        "`stream`: acp_trio's agent, chunks/s, both processes on CPU 0": ("91%", True),
        "our HTTP/1.1 client: `stream` ms against our server": ("1.10x", True),
        "our client over h2c: `read` ms": ("1.80x", False),
    }
    assert rows["the conductor: µs a round trip adds"]["ours"] == "120 µs"
    assert rows["the conductor: µs a round trip adds"]["theirs"] == "100 µs"
    # Every row names a floor the page explains.
    assert all(row["floor"] in report_figures.FLOORS for row in rows.values())


def test_the_page_and_the_printout_say_which_floor_judges_what() -> None:
    judges = _sdks({"read": {"floor x trio-floor": [100.0], "floor x acp_trio": [97.0]}})
    results = _results(judges=judges, sdks=None, chain=None, remote=None)
    page = bench_report.render(results, [], "benchmarks")
    row = (
        "| `read`: acp_trio's agent, round trips/s, both processes on CPU 0 "
        "| `benchmarks/peers/trio_floor_agent.py` | 97 | 100 | 97% | ≥ 95% | met |"
    )
    assert row in page
    assert "### The floors" in page
    for program, _, why in report_figures.FLOORS.values():
        assert f"- {program}, for " in page
        assert why in page
    text = bench_report.targets_text(results)
    assert "97% (goal   ≥ 95%, floor: trio-floor)  met" in text
    assert "the conductor: µs a round trip adds" in text
    assert text.count("not measured") == 10


def test_the_other_goals_are_judged_from_the_medians() -> None:
    sdks = _sdks(
        {
            "stream": {
                "floor x floor": [300.0, 300.0, 300.0],
                "floor x acp_trio-burst": [271.0, 260.0, 280.0],  # 271 / 300
                "acp_trio x acp_trio": [310.0, 300.0, 290.0],
                "official x official": [100.0, 100.0, 100.0],
            },
        }
    )
    verdicts = _verdicts(_results(sdks=sdks))
    nowait = "`stream` through `notify_nowait` bursts at least 90% of the stdlib floor"
    assert verdicts[nowait] == ("90%", True)
    assert verdicts["`stream`: the acp_trio pair at least 3.0x the official pair"] == (
        "3.00x",
        True,
    )


def test_what_was_not_measured_is_said_and_not_judged() -> None:
    results = _results(sdks=None, chain=None, remote=None)
    rows = _rows(results)
    stream = rows["`stream`: acp_trio's agent, chunks/s, both processes on CPU 0"]
    assert (stream["ours"], stream["ok"]) == ("not measured", None)
    page = bench_report.render(results, [], "benchmarks")
    assert page.count("Not measured in this run") == 4
    row = (
        "| `stream`: acp_trio's agent, chunks/s, both processes on CPU 0 "
        "| `benchmarks/peers/trio_floor_agent.py` | not measured |  |  | ≥ 90% | — |"
    )
    assert row in page


@pytest.mark.slow  # runs the benchmark scripts
def test_the_page_is_written_from_what_the_scripts_write(tmp_path: Path) -> None:
    """bench_sdks.py and bench_chain.py at small sizes, their ``--json`` read
    by the report: every pair run is in its table, every chain in its own."""
    sdks = _script(
        "bench_sdks.py",
        "--quick",
        "--only",
        "stream,read,floor,floor:trio-floor,floor:acp_trio",
        tmp=tmp_path,
    )
    chain = _script("bench_chain.py", "--quick", tmp=tmp_path)
    assert set(chain["runs"]) == {
        "agent",
        "relay",
        "trio relay",
        "parsing relay",
        "conductor",
        "1 proxy",
        "2 proxies",
        "1 logging",
    }
    # The judged chains, every process on CPU 0, with each process's CPU.
    judged = _script("bench_chain.py", "--quick", "--judged", "--cpus", "same", tmp=tmp_path)
    assert set(judged["runs"]) == {"agent", "parsing relay", "conductor", "1 proxy"}
    assert judged["placement"] == "same"
    assert {"conduct", "pass_proxy.py", "scenario-agent"} <= set(judged["cpu_us"]["1 proxy"][0])
    results = _results(sdks=sdks, chain=chain, remote=None, judges=sdks, chain_judges=judged)
    page = bench_report.render(results, [("floors.svg", "the floors")], "benchmarks")
    for pair in ("floor x floor", "floor x trio-floor", "floor x acp_trio"):
        assert f"| `{pair}` |" in page
    for label in ("relay", "conductor", "1 proxy", "2 proxies"):
        assert f"| {label} |" in page
    assert "![the floors](benchmarks/floors.svg)" in page
    rows = _rows(results)
    share = rows["`stream`: acp_trio's agent, chunks/s, both processes on CPU 0"]
    assert share["ratio"].endswith("%")
    assert share["ok"] is not None
    assert rows["the conductor: µs a round trip adds"]["ok"] is not None
    assert "| parsing relay |" in page


def test_the_charts_are_svg_files_named_in_the_page(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib", reason="the charts need the bench extra")
    sdks = _sdks(
        {
            "stream": {"floor x trio-floor": [100.0], "floor x acp_trio": [96.0]},
            "read": {"floor x trio-floor": [100.0], "floor x acp_trio": [97.0]},
        }
    )
    results = _results(sdks=sdks, chain=None, remote=None)
    bench_report.write_report(results, tmp_path / "benchmarks.md", tmp_path / "benchmarks")
    page = (tmp_path / "benchmarks.md").read_text()
    assert "(benchmarks/floors.svg)" in page
    assert (tmp_path / "benchmarks" / "floors.svg").read_text().lstrip().startswith("<?xml")
    again = json.loads((tmp_path / "benchmarks" / "results.json").read_text())
    assert again == results


def _scale_profile(clients: int, ok: int, total: float) -> dict[str, Any]:
    return {
        "clients": clients,
        "ok": ok,
        "failed": clients - ok,
        "failures": [f"{i}: BrokenResourceError()" for i in range(min(5, clients - ok))],
        "total_s": total,
        "open_s": total / 2,
        "open_cpu": None,
        "open_ms": None,
        "client_ms": {"median": 100.0, "p95": 200.0},
        "rounds": [],
        "server_rss_kib": {"rest": 65536, "open": 65536 + 44 * clients},
        "rss_growth_kib": 44 * clients,
        "idle_kib_per_connection": 44.0,
        "server_cpu_s": 1.0,
        "clients_cpu_s": 1.0,
        "cpu_wait_s": {"clients": 0.5, "server": 0.5},
    }


def _scale(**profiles: dict[str, Any]) -> dict[str, Any]:
    return {"connections": 1000, "concurrency": 50, "prompts": ["echo hello"], "profiles": profiles}


def test_the_scale_targets_are_judged_by_count_and_time() -> None:
    scale = _scale(
        websocket=_scale_profile(1000, 1000, 4.2),  # met
        http1=_scale_profile(1000, 1000, 7.1),  # too slow
        http=_scale_profile(1000, 999, 3.0),  # one failed
    )
    verdicts = _verdicts(
        _results(scale=scale, scale_ws=_scale(websocket=_scale_profile(5000, 4999, 20.0)))
    )
    assert verdicts["WebSocket: 1,000 of 1,000 clients in under 5 s"] == (
        "1,000 of 1,000 in 4.20 s (0.80 s to spare)",
        True,
    )
    assert verdicts["HTTP/1.1: 1,000 of 1,000 clients in under 5 s"] == (
        "1,000 of 1,000 in 7.10 s (2.10 s over)",
        False,
    )
    assert verdicts["HTTP/2 h2c: 1,000 of 1,000 clients in under 5 s"] == (
        "999 of 1,000 in 3.00 s (2.00 s to spare)",
        False,
    )
    assert verdicts["5,000 WebSocket clients at once, none failing"] == (
        "1 of 5,000 failed (20.00 s)",
        False,
    )
    page = bench_report.render(_results(scale=scale), [], "benchmarks")
    assert "HTTP/2 h2c, 1,000 clients, the first failures: `0: BrokenResourceError()`." in page
    none = _verdicts(_results(scale=None))
    assert none["5,000 WebSocket clients at once, none failing"] == ("not measured", None)


@pytest.mark.slow  # runs bench_scale.py
def test_the_scale_section_is_written_from_what_bench_scale_writes(tmp_path: Path) -> None:
    """bench_scale.py with three clients on each profile: every profile in
    the table, every client counted, the command a reader runs; a run of
    another size than the target's is shown, not judged."""
    scale = _script("bench_scale.py", "--connections", "3", tmp=tmp_path)
    assert scale["prompts"] == ["echo hello", "stream 50"]
    for profile in ("websocket", "http1", "http"):
        figures = scale["profiles"][profile]
        assert (figures["clients"], figures["ok"], figures["failed"]) == (3, 3, 0)
        assert [r["prompt"] for r in figures["rounds"]] == ["echo hello", "stream 50"]
        assert figures["total_s"] >= figures["open_s"] > 0
        assert figures["server_rss_kib"]["open"] > 0
    scale["command"] = "python benchmarks/bench_scale.py --connections 3"
    results = _results(scale=scale)
    page = bench_report.render(results, [], "benchmarks")
    for name in ("WebSocket", "HTTP/1.1", "HTTP/2 h2c"):
        assert f"| {name} | 3 of 3 |" in page
    assert "Run: `python benchmarks/bench_scale.py --connections 3`." in page
    verdict = _verdicts(results)["HTTP/1.1: 1,000 of 1,000 clients in under 5 s"]
    assert verdict[0].startswith("3 of 3 in ")
    assert verdict[1] is None
