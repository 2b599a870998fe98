#!/usr/bin/env python3
"""Generate every ``_generated_*.py`` module of acp_trio from the ACP JSON Schema.

Usage (from the repository root)::

    python tools/gen_schema.py            # from the pinned @agentclientprotocol/sdk (make regen)
    python tools/gen_schema.py --check    # exit 1 if the committed files are stale
    python tools/gen_schema.py --help     # all options

A thin entry point: the generator lives in the ``schemagen`` package beside
this file (its docstring gives the overview). ``build_parser``,
``generate_all`` and ``main`` are re-exported for callers that load this
file by path (``tests/schema/test_generated.py``).
"""

from __future__ import annotations

import sys
from pathlib import Path

# ``tools/`` is not a package: put it on sys.path so ``import schemagen`` works however
# this file is started (as a script from any cwd, or loaded by path from the tests).
_TOOLS = str(Path(__file__).resolve().parent)
if _TOOLS not in sys.path:
    sys.path.insert(0, _TOOLS)

from schemagen.cli import build_parser, main  # noqa: E402
from schemagen.driver import generate, generate_all  # noqa: E402

__all__ = ["build_parser", "generate", "generate_all", "main"]

if __name__ == "__main__":
    raise SystemExit(main())
