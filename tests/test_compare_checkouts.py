"""benchmarks/compare_checkouts.py's arithmetic (its runs are benchmarks):
the per-round-trip difference of two counts, and callgrind's total read from
its output file."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import compare_checkouts as compare


def test_a_count_per_round_trip_is_the_difference_of_two_runs() -> None:
    counts = {
        100: {"task steps": 150, "I/O waits": 120},
        300: {"task steps": 350, "I/O waits": 220},
    }
    at = lambda checkout, n: counts[n]  # noqa: E731
    assert compare.per_round_trip(at, Path("."), 100, 300) == {"task steps": 1.0, "I/O waits": 0.5}
    assert compare.per_round_trip(lambda c, n: n * 7 + 1000, Path("."), 100, 300) == 7


def test_the_callgrind_total_is_read_from_its_file(tmp_path: Path) -> None:
    out = tmp_path / "callgrind.out"
    out.write_text("version: 1\ncmd: python\nevents: Ir\nfn=main\n0 5\ntotals: 123456\n")
    assert compare.callgrind_total(out) == 123456
