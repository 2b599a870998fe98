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
from .driver import OUT_DIR, SCHEMA_DIR, generate_all


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description=OVERVIEW, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--schema", default=str(SCHEMA_DIR / "schema.json"), help="stable schema.json")
    p.add_argument("--meta", help="meta.json (default: next to --schema)")
    p.add_argument("--unstable-schema", help="default: schema.unstable.json next to --schema")
    p.add_argument("--unstable-meta", help="default: meta.unstable.json next to --schema")
    p.add_argument("--no-unstable", action="store_true", help="skip the unstable module")
    p.add_argument(
        "--v2-schema", help="ACP v2 schema.json (meta.json beside it); default: the snapshot's v2/"
    )
    p.add_argument("--no-v2", action="store_true", help="skip the v2 modules")
    p.add_argument(
        "--schema-version",
        help="default: from the README beside the schema folder, or a Cargo.toml next to it",
    )
    p.add_argument(
        "--out", default=str(OUT_DIR), help="the package directory (acp_trio/) to write into"
    )
    p.add_argument("--check", action="store_true", help="only compare; exit 1 on drift")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
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
