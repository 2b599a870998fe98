"""The README's line counts of the example pair against the official-SDK
pair are the ones ``tools/count_lines.py`` measures now."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def load_counter() -> ModuleType:
    spec = importlib.util.spec_from_file_location("count_lines", ROOT / "tools" / "count_lines.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_readme_table_matches_the_counts() -> None:
    counter = load_counter()
    readme = (ROOT / "README.md").read_text()
    total = [0, 0]
    for what, ours, theirs in counter.PAIRS:
        counts = [counter.code_lines(ROOT / ours), counter.code_lines(ROOT / theirs)]
        total = [total[0] + counts[0], total[1] + counts[1]]
        row = rf"\| {what} \| {counts[0]} \| {counts[1]} \| {counts[0] / counts[1]:.0%}"
        assert re.search(row, readme), (what, counts)
    assert f"| the pair | {total[0]} | {total[1]} |" in readme
    # The target: the acp_trio pair is at most half the official one.
    assert 2 * total[0] <= total[1]


def test_the_counter_skips_docstrings_comments_and_blank_lines(tmp_path: Path) -> None:
    source = tmp_path / "x.py"
    source.write_text(
        '"""Doc."""\n\n# note\ndef f() -> int:\n    """Doc\n    more."""\n    return 1\n'
    )
    assert load_counter().code_lines(source) == 2
