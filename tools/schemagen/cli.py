"""The command line: options, then write the generated files or, with ``--check``, compare.

Exit codes: 0 when the files are written or up to date, 1 when ``--check``
finds stale files (listed on stderr). The ``--help`` text is the package
overview.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import __doc__ as OVERVIEW
from .driver import OUT_DIR, generate_all
from .source import PACKAGE


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description=OVERVIEW, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--package",
        metavar="DIR",
        help=f"an unpacked {PACKAGE} (its folder, with package.json and schema/); default: "
        "the version tests/interop/package.json pins, as npm installed it",
    )
    p.add_argument(
        "--from-shipped",
        action="store_true",
        help="read the structural schemas committed in acp_trio/schema/json instead of the "
        "npm package (no npm needed; the same modules)",
    )
    p.add_argument("--no-unstable", action="store_true", help="skip the unstable modules")
    p.add_argument("--no-v2", action="store_true", help="skip the v2 modules")
    p.add_argument(
        "--schema-version", help=f"the label in the banners (default: {PACKAGE}@VERSION)"
    )
    p.add_argument(
        "--out", default=str(OUT_DIR), help="the package directory (acp_trio/) to write into"
    )
    p.add_argument("--check", action="store_true", help="only compare; exit 1 on drift")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.package and args.from_shipped:
        raise SystemExit("--package and --from-shipped exclude each other")
    files = generate_all(args)
    out_dir = Path(args.out)
    stale = []
    for name, src in sorted(files.items()):
        path = out_dir / name
        current = path.read_text(encoding="utf-8") if path.is_file() else None
        if current == src:
            continue
        stale.append(name)
        if not args.check:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(src, encoding="utf-8")
    if args.check and stale:
        print("stale generated files: " + ", ".join(stale), file=sys.stderr)
        return 1
    for name in stale:
        print(f"wrote {out_dir / name}")
    return 0
