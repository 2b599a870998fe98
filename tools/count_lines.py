"""Lines of code in Python files: no blank lines, comments or docstrings.

.venv/bin/python tools/count_lines.py FILE...
.venv/bin/python tools/count_lines.py        # the README's comparison

Without arguments it counts the example pair written with acp_trio against
the same pair written with the official Python SDK (the README's table).
"""

from __future__ import annotations

import ast
import io
import sys
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# (what, acp_trio version, official Python SDK version)
PAIRS = [
    ("agent", "examples/coding_agent.py", "benchmarks/peers/official_coding_agent.py"),
    ("client", "examples/editor_client.py", "benchmarks/peers/official_editor_client.py"),
]


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


def comparison() -> list[str]:
    """The README's table: each pair's counts and the acp_trio share."""
    rows = [f"{'':8}{'acp_trio':>10}{'official':>10}{'ratio':>8}"]
    totals = [0, 0]
    for what, ours, theirs in PAIRS:
        counts = [code_lines(ROOT / ours), code_lines(ROOT / theirs)]
        totals = [totals[0] + counts[0], totals[1] + counts[1]]
        rows.append(f"{what:8}{counts[0]:10d}{counts[1]:10d}{counts[0] / counts[1]:8.0%}")
    rows.append(f"{'pair':8}{totals[0]:10d}{totals[1]:10d}{totals[0] / totals[1]:8.0%}")
    return rows


if __name__ == "__main__":
    for name in sys.argv[1:]:
        print(f"{code_lines(Path(name)):5d}  {name}")
    if len(sys.argv) == 1:
        print("\n".join(comparison()))
