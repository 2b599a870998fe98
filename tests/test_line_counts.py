"""The README's line counts of the example pair against the official-SDK
pairs (0.12.1 and 1.0.0rc3) are the ones ``tools/count_lines.py`` measures
now."""

from __future__ import annotations

import importlib.util
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
    for line in counter.comparison():
        assert line in readme, line
    # The target: the acp_trio pair is at most half of either official one.
    ours, *theirs = dict(counter.counts())["the pair"]
    assert len(theirs) == 2
    assert all(2 * ours <= count for count in theirs), (ours, theirs)


def test_the_counter_skips_docstrings_comments_and_blank_lines(tmp_path: Path) -> None:
    source = tmp_path / "x.py"
    source.write_text(
        '"""Doc."""\n\n# note\ndef f() -> int:\n    """Doc\n    more."""\n    return 1\n'
    )
    assert load_counter().code_lines(source) == 2
