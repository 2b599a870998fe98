#!/usr/bin/env python3
"""Generate ``acp_trio/v2/_generated_proxies.py``: the typed v2 proxy methods
(object or keyword form), from the v2 schema, with the v1 proxies' emitter.

Usage (from the repository root)::

    python tools/gen_v2_proxies.py          # write the module
    python tools/gen_v2_proxies.py --check  # exit 1 if the committed one is stale

Kept apart from ``gen_schema.py`` (which generates the schema modules): the
proxies belong to the typed API in ``acp_trio.v2``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

_TOOLS = Path(__file__).resolve().parent
if str(_TOOLS) not in sys.path:
    sys.path.insert(0, str(_TOOLS))

from schemagen.analysis import analyze  # noqa: E402
from schemagen.driver import (  # noqa: E402
    SCHEMA_DIR,
    detect_schema_version,
    ruff_format,
    ruff_sort_imports,
)
from schemagen.emit_proxies import V2_METHOD_NAMES, ProxiesEmitter  # noqa: E402

REPO = _TOOLS.parent
TARGET = REPO / "acp_trio" / "v2" / "_generated_proxies.py"


def generate(schema_path: Path | None = None) -> str:
    schema_path = schema_path or SCHEMA_DIR.parent / "v2" / "schema.json"
    meta_path = schema_path.with_name("meta.json")
    schema = json.loads(schema_path.read_text(encoding="utf-8"))
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    model = analyze(schema, meta)
    emitter = ProxiesEmitter(
        model,
        "acp_trio.schema.v2._generated_types",
        methods_module="acp_trio.schema.v2._generated_methods",
        names=V2_METHOD_NAMES,
    )
    version = detect_schema_version(schema_path) or "unknown"
    source = emitter.emit(version, f"{schema_path.name}, {meta_path.name}", {})
    source = source.replace("tools/gen_schema.py", "tools/gen_v2_proxies.py")
    name = "acp_trio/v2/_generated_proxies.py"
    return ruff_format(ruff_sort_imports(source, name), name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if the module is stale")
    args = parser.parse_args(argv)
    source = generate()
    if args.check:
        if not TARGET.is_file() or TARGET.read_text(encoding="utf-8") != source:
            print(f"{TARGET.relative_to(REPO)} is stale: run python tools/gen_v2_proxies.py")
            return 1
        return 0
    TARGET.write_text(source, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
