"""``mypy --strict`` for code outside the package (the README's and guides'
blocks, written to a temporary directory): the typecheck tier.

It runs with the project's own settings and mypy cache, the ones
``make typecheck`` checks the package with just before, so mypy reuses what
it knows of acp_trio, trio and attrs and checks only the new files.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def mypy_strict() -> list[str]:
    """The command line, without the files to check."""
    return [
        *(sys.executable, "-m", "mypy", "--strict"),
        *("--config-file", str(ROOT / "pyproject.toml")),
        *("--cache-dir", str(ROOT / ".mypy_cache")),
    ]
