"""The CHANGELOG is for users (Keep a Changelog 1.1): versions, then
Added / Changed / Deprecated / Removed / Fixed / Security, a line per change.
No benchmark figures or tables: measurements live in
``docs/benchmark-history.md``, reasoning in the commit messages."""

from __future__ import annotations

import re

import pytest
from docblocks import ROOT

CHANGELOG = ROOT / "CHANGELOG.md"
KINDS = {"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}

#: A figure of a run: a number next to a time, a rate, a share or a ratio.
FIGURE = re.compile(
    r"\d(?:[\d,.]*\d)?\s*(?:ms|µs|us|ns)\b"  # 0.46 ms, 122 µs
    r"|\d(?:[\d,.]*\d)?\s*(?:[\w ]{0,20})/s\b"  # 6,015 round trips/s, 3 MB/s
    r"|\d(?:[\d,.]*\d)?\s*%"  # 164%
    r"|\b\d+(?:\.\d+)?x\b"  # 4.19x
    r"|\d(?:[\d,.]*\d)?k?\s*(?:→|->)\s*\d"  # 17.6k -> 25.0k
)


def problems(text: str) -> list[str]:
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        if re.match(r"\s*\|", line) or "|---" in line or "| ---" in line:
            found.append(f"line {number}: a table: {line.strip()}")
        for match in FIGURE.finditer(line):
            found.append(f"line {number}: a figure of a run ({match.group()!r}): {line.strip()}")
    return found


def test_the_changelog_has_no_table_and_no_benchmark_figure() -> None:
    found = problems(CHANGELOG.read_text())
    assert not found, "\n".join(found)


@pytest.mark.parametrize(
    "line",
    [
        "| acp_trio x acp_trio | 116,009 (4.19x) |",
        "| --- | --- |",
        "cancel latency p50 0.46 ms",
        "adds 122 µs to a round trip",
        "6,015 round trips/s",
        "streams at 164% of the Trio floor",
        "read 5000 2.0-2.4x the official pair",
        "round trips 17.6k → 25.0k",
    ],
)
def test_the_check_sees_tables_and_figures(line: str) -> None:
    assert problems(line)


def test_a_release_has_only_the_kinds_of_change() -> None:
    text = CHANGELOG.read_text()
    assert text.startswith("# Changelog\n")
    versions = re.findall(r"^## (.*)$", text, flags=re.MULTILINE)
    assert versions[:1] == ["[Unreleased]"], versions
    kinds = set(re.findall(r"^### (.*)$", text, flags=re.MULTILINE))
    assert kinds, "no Added / Changed / ... section"
    assert kinds <= KINDS, kinds - KINDS
    # The deprecation policy it promises (docs/policy.md says the same).
    assert "for one minor release" in text
