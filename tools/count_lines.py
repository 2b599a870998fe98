"""Lines of code in Python files: no blank lines, comments or docstrings.

.venv/bin/python tools/count_lines.py FILE...
.venv/bin/python tools/count_lines.py        # the comparison in docs/compared.md

Without arguments it counts the example pair written with acp_trio against
the same pair written with the official Python SDK, 0.12.1 and 1.0.0rc3,
and prints the table of docs/compared.md (Markdown).
"""

from __future__ import annotations

import ast
import io
import sys
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PEERS = "benchmarks/peers"
#: (what, acp_trio, official Python SDK 0.12.1, official Python SDK 1.0.0rc3)
ROWS = [
    (
        "agent",
        "examples/coding_agent.py",
        f"{PEERS}/official_coding_agent.py",
        f"{PEERS}/official_rc_coding_agent.py",
    ),
    (
        "client",
        "examples/editor_client.py",
        f"{PEERS}/official_editor_client.py",
        f"{PEERS}/official_rc_editor_client.py",
    ),
]
VERSIONS = ["0.12.1", "1.0.0rc3"]


def code_lines(path: Path) -> int:
    """Lines holding a token that is not a comment, a docstring or layout."""
    source = path.read_text()
    docstrings: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            value = body[0].value
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                end = body[0].end_lineno or body[0].lineno
                docstrings.update(range(body[0].lineno, end + 1))
    layout = {
        tokenize.COMMENT,
        tokenize.NL,
        tokenize.NEWLINE,
        tokenize.INDENT,
        tokenize.DEDENT,
        tokenize.ENCODING,
        tokenize.ENDMARKER,
    }
    lines: set[int] = set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type not in layout:
            lines.update(range(token.start[0], token.end[0] + 1))
    return len(lines - docstrings)


def counts() -> list[tuple[str, list[int]]]:
    """Each row's counts (acp_trio, then each official version), then the pair's."""
    rows = [(what, [code_lines(ROOT / path) for path in paths]) for what, *paths in ROWS]
    pair = [sum(column) for column in zip(*(numbers for _, numbers in rows), strict=True)]
    return [*rows, ("the pair", pair)]


def comparison() -> list[str]:
    """docs/compared.md's table: the counts, and acp_trio's share of each official version."""
    head = ["lines of code", "acp_trio"]
    for version in VERSIONS:
        head += [f"official Python SDK {version}", "ratio"]
    lines = ["| " + " | ".join(head) + " |", "| --- |" + " ---: |" * (len(head) - 1)]
    for what, (ours, *theirs) in counts():
        cells = [what, str(ours)]
        for count in theirs:
            cells += [str(count), f"{ours / count:.0%}"]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


if __name__ == "__main__":
    for name in sys.argv[1:]:
        print(f"{code_lines(Path(name)):5d}  {name}")
    if len(sys.argv) == 1:
        print("\n".join(comparison()))
