"""The cascade benchmarks still run (small sizes): each cascade finishes,
leaves nothing in flight, and reports a time. Not a timing test."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import bench_connection
import cascade_floor

LIMIT = 60  # real seconds: real pipes and processes


@pytest.mark.parametrize("kind", ["fan", "chain"])
async def test_the_bare_trio_cascade_finishes(kind: str) -> None:
    with trio.fail_after(LIMIT):
        seconds = await cascade_floor.bare_trio_cascade(kind, 20)
    assert 0 < seconds < LIMIT


@pytest.mark.parametrize("kind", ["fan", "chain"])
async def test_the_connection_cascade_finishes(kind: str) -> None:
    with trio.fail_after(LIMIT):
        seconds = await bench_connection.cascade(kind, 20, bench_connection.pipe_pair)
    assert 0 < seconds < LIMIT


@pytest.mark.parametrize("kind", ["fan", "chain"])
async def test_the_two_process_cascade_finishes(kind: str) -> None:
    with trio.fail_after(LIMIT):
        times = await bench_connection.cascade_two_processes(kind, 20, 2)
    assert len(times) == 2
    assert all(0 < ms < LIMIT * 1000 for ms in times)
