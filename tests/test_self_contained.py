"""The project stands on its own: nothing in the package, the tests, the
tools, the docs, the Makefile or ``.ci/run`` reads or names the developers'
notes folder beside a checkout (a clone has nothing beside it). The schema
comes from the pinned npm package, and what runs from an install is in the
package (``acp_trio/schema/json/``)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCANNED = ["acp_trio", "tests", "tools", "docs", "examples", "benchmarks", "Makefile", ".ci/run"]
SKIPPED_DIRS = {"node_modules", "__pycache__", ".venv", ".mypy_cache", ".pytest_cache", "_build"}

NOTES = "shared"  # (spelled apart, so that this file does not name it either)
FORBIDDEN = [
    re.compile(r"\.\./" + NOTES + r"\b"),
    re.compile(r"/work/" + NOTES + r"\b"),
    re.compile(r"""/\s*["']""" + NOTES + r"""["']"""),  # Path(...) / "<notes>"
    re.compile(r"""join\([^)]*["']""" + NOTES + r"""["']"""),  # os.path.join(..., "<notes>")
    re.compile(
        NOTES + r"/(acp-" + "schema|design|protocol-" + "notes|scenario-agent|peer-sdks|field)"
    ),
    re.compile(r"acp-" + r"schema(?![-\w])"),  # the folder, not a directive or an anchor
    re.compile(r"protocol-" + "notes"),
]


def files() -> list[Path]:
    out = []
    for name in SCANNED:
        path = ROOT / name
        if path.is_file():
            out.append(path)
            continue
        for found in path.rglob("*"):
            if found.is_file() and not SKIPPED_DIRS & set(found.relative_to(ROOT).parts):
                out.append(found)
    return sorted(out)


def test_nothing_names_the_notes_folder_beside_the_checkout() -> None:
    named = []
    for path in files():
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue  # a picture
        for number, line in enumerate(text.splitlines(), 1):
            if any(pattern.search(line) for pattern in FORBIDDEN):
                named.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()[:100]}")
    assert not named, "\n".join(named)


@pytest.mark.parametrize(
    "line",
    [
        'SCHEMA = ROOT.parent / "' + NOTES + '" / "x"',
        "see ../" + NOTES + "/design.md",
        "os.path.join('..', '" + NOTES + "', 'x')",
        "# from /work/" + NOTES + "/scenario-agent.md",
        "the acp-" + "schema snapshot",
    ],
)
def test_the_patterns_catch_each_way_of_naming_it(line: str) -> None:
    assert any(pattern.search(line) for pattern in FORBIDDEN)


def test_words_that_merely_say_shared_pass() -> None:
    for line in ['assert client.texts() == ["shared", "shared"]', "a shared vocabulary"]:
        assert not any(pattern.search(line) for pattern in FORBIDDEN)
    assert len(files()) > 300
