"""The code blocks of the README and of the docs pages, as the tests see them.

Every ``python`` block of a page carries a marker, an HTML comment on the
line before it (blank lines between are allowed; the comment shows on no
rendered page):

- ``<!-- file: NAME -->``: the block is the file ``NAME`` of its page, or
  one step of it (the blocks of one name are joined in page order). A page's
  files are written to one folder, type-checked together with
  ``mypy --strict``, and each python file is run there as a program that
  must exit 0 (with its output checked where ``tests/test_docs.py`` knows
  what it prints), unless a named test runs it its own way
  (:data:`RUN_BY_TESTS`: a guide's tests with pytest, the README's client
  against its agent, a proxy in a chain).
- ``<!-- not-run: WHY -->``: the block is type-checked with the page's files
  but deliberately not run; ``WHY`` says why (a fragment, say).

Blocks in other languages (``sh``, ``toml``, ``text``, ...) need no marker;
a ``toml`` or ``json`` block with a ``file:`` marker becomes that file (a
guide's ``pyproject.toml``). A ``python`` block without a marker fails
``tests/test_docs.py``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"

#: Files whose running a named test owns, by page: those tests run them as
#: their page describes, so the generic run leaves them alone.
RUN_BY_TESTS: dict[str, set[str]] = {
    "README.md": {"agent.py", "client.py"},  # tests/test_readme.py: as a pair, and checked
    "docs/agents.md": {"agent.py", "conftest.py", "test_agent.py"},  # tests/test_guides.py
    "docs/clients.md": {"client.py", "test_client.py"},  # tests/test_guides.py
    "docs/how-a-turn-ends.md": {"relay.py", "test_relay.py"},  # tests/test_guides.py
    "docs/proxies.md": {"context_proxy.py"},  # tests/test_docs.py: in a conduct chain
    # tests/test_from_asyncio.py: the client with the agent's command, the agent under check-agent
    "docs/from-asyncio.md": {"trio_host.py", "asyncio_client.py", "asyncio_agent.py"},
}

_BLOCK = re.compile(
    r"(?:<!-- (?P<marker>file|not-run): (?P<arg>[^\n]*?) -->\n\s*)?"
    r"^```(?P<lang>[\w-]*)[^\n]*\n(?P<code>.*?)^```",
    flags=re.DOTALL | re.MULTILINE,
)


@dataclass(frozen=True)
class Block:
    """One fenced code block of a page."""

    page: str
    lang: str
    code: str
    line: int
    file: str | None = None
    not_run: str | None = None


def pages() -> list[str]:
    """The README and every docs page, as paths relative to the checkout."""
    found = sorted(
        str(path.relative_to(ROOT))
        for path in DOCS.rglob("*.md")
        if "_build" not in path.relative_to(DOCS).parts
    )
    return ["README.md", *found]


def blocks(page: str, text: str | None = None) -> list[Block]:
    """The fenced code blocks of a page, in order, with their markers."""
    if text is None:
        text = (ROOT / page).read_text()
    found = []
    for match in _BLOCK.finditer(text):
        marker, arg = match["marker"], match["arg"]
        found.append(
            Block(
                page=page,
                lang=match["lang"],
                code=match["code"],
                line=text.count("\n", 0, match.start("lang")) + 1,
                file=arg if marker == "file" else None,
                not_run=arg if marker == "not-run" else None,
            )
        )
    return found


def unmarked(page: str, text: str | None = None) -> list[Block]:
    """The python blocks of a page that carry no marker."""
    return [
        block
        for block in blocks(page, text)
        if block.lang == "python" and block.file is None and block.not_run is None
    ]


def page_files(page: str, text: str | None = None) -> dict[str, str]:
    """The files a page's blocks make, by name: its ``file:`` blocks joined
    by name, and each ``not-run`` block as ``not_run_N.py``."""
    files: dict[str, str] = {}
    for index, block in enumerate(blocks(page, text)):
        if block.file is not None:
            files[block.file] = files.get(block.file, "") + block.code
        elif block.not_run is not None:
            files[f"not_run_{index}.py"] = block.code
    return files


def write_page(page: str, where: Path) -> dict[str, str]:
    """Write a page's files into ``where``; return them by name."""
    files = page_files(page)
    for name, code in files.items():
        (where / name).parent.mkdir(parents=True, exist_ok=True)
        (where / name).write_text(code)
    return files


def programs(page: str) -> list[str]:
    """The python files of a page that the generic test runs."""
    owned = RUN_BY_TESTS.get(page, set())
    return sorted(
        name
        for name in page_files(page)
        if name.endswith(".py") and not name.startswith("not_run_") and name not in owned
    )


def section(page: str, heading: str) -> str:
    """The text under a ``## heading`` of a page, up to the next one."""
    parts = re.split(r"(^## .*$)", (ROOT / page).read_text(), flags=re.MULTILINE)
    for index, part in enumerate(parts):
        if part.startswith("## ") and part[3:].strip() == heading:
            return parts[index + 1]
    raise AssertionError(f"{page}: no heading {heading!r}")
