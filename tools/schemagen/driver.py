"""Drive one generation: read the schemas (:mod:`.source`), analyse, emit, ``ruff format``.

Holds the output package's location. Formatting with the repository's ruff
settings makes the output deterministic and lint-clean.
"""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from .analysis import analyze
from .delta import Base, Delta, defined_names, reused_definitions
from .emit_codec import CodecEmitter
from .emit_proxies import V2_METHOD_NAMES, ProxiesEmitter
from .emit_tables import emit_methods, emit_tables
from .emit_types import TypesEmitter
from .source import (
    FILES,
    PACKAGE_DIR,
    dump,
    method_tables,
    read_package,
    read_shipped,
    structural,
)

REPO_ROOT = Path(__file__).resolve().parents[2]
# Every generated module is under the package: schema/ (v1), schema/v2/, and
# v2/ (the typed v2 proxies); the names generate_all returns are relative to it.
OUT_DIR = REPO_ROOT / "acp_trio"
DOCS_URL = "https://agentclientprotocol.com/protocol/schema"
UNSTABLE_DOCS_URL = "https://agentclientprotocol.com/protocol/draft/schema"
V2_DOCS_URL = "https://agentclientprotocol.com/protocol/v2/schema"


def ruff_command() -> list[str]:
    """``python -m ruff`` from this interpreter, else a ``ruff`` on PATH."""
    if importlib.util.find_spec("ruff") is not None:
        return [sys.executable, "-m", "ruff"]
    found = shutil.which("ruff")
    if found:
        return [found]
    raise SystemExit("ruff is needed to format the output: pip install ruff")


def ruff_format(source: str, filename: str) -> str:
    """Format with the repository's ruff settings (line length 100)."""
    cmd = [*ruff_command(), "format", "--stdin-filename", filename, "-"]
    proc = subprocess.run(
        cmd, input=source, capture_output=True, text=True, cwd=REPO_ROOT, check=False
    )
    if proc.returncode != 0:
        raise SystemExit(f"ruff format failed on {filename}:\n{proc.stderr}")
    return proc.stdout


def ruff_sort_imports(source: str, filename: str) -> str:
    """Sort the imports (the subpackage's own modules sort after ``_runtime``)."""
    cmd = [*ruff_command(), "check", "--select", "I", "--fix", "--quiet"]
    cmd += ["--stdin-filename", filename, "-"]
    proc = subprocess.run(
        cmd, input=source, capture_output=True, text=True, cwd=REPO_ROOT, check=False
    )
    if proc.returncode != 0:
        raise SystemExit(f"ruff check failed on {filename}:\n{proc.stderr}")
    return proc.stdout


def generate(
    schema: dict[str, Any],
    meta: dict[str, Any],
    schema_version: str,
    flavour: str,
    docs: str,
    subpackage: str = "",
    base: Base | None = None,
) -> dict[str, str]:
    """Return {file name: formatted source} for one schema flavour.

    With ``subpackage`` (``"v2"``) the modules go to ``acp_trio/schema/<subpackage>/``
    (the names are relative to the output folder) and get no typed proxies. With
    ``base`` (the stable generation of the same package) an unstable flavour is
    generated as a delta over it (see :mod:`.delta`).
    """
    return generate_flavour(schema, meta, schema_version, flavour, docs, subpackage, base)[0]


def generate_flavour(
    schema: dict[str, Any],
    meta: dict[str, Any],
    schema_version: str,
    flavour: str,
    docs: str,
    subpackage: str = "",
    base: Base | None = None,
) -> tuple[dict[str, str], Base]:
    """:func:`generate`, also returning what a delta over this generation needs."""
    model = analyze(schema, meta)
    folder = f"{subpackage}/" if subpackage else ""
    prefix = folder + "_generated_" + ("unstable_" if flavour == "unstable" else "")
    package = "acp_trio.schema" + (f".{subpackage}" if subpackage else "")
    types_module = f"{package}.{prefix.removeprefix(folder)}types"
    source = _source_name(flavour, subpackage)
    delta = Delta(base, reused_definitions(base.model, model)) if base else None
    te = TypesEmitter(model, docs, delta)
    ce = CodecEmitter(model, types_module, delta)
    codec = ce.emit(schema_version, source)
    files = {
        f"{prefix}types.py": te.emit(schema_version, source),
        f"{prefix}codec.py": codec,
    }
    files[f"{prefix}tables.py"] = emit_tables(model, types_module, schema_version, source, delta)
    files[f"{prefix}methods.py"] = emit_methods(model, types_module, schema_version, source)
    if flavour == "stable" and not subpackage:
        # The typed proxies drive the stable schema only (the unstable one has no typed API).
        meta_keys = {
            wire: key
            for table in ("agentMethods", "clientMethods")
            for key, wire in meta.get(table, {}).items()
        }
        files[f"{prefix}proxies.py"] = ProxiesEmitter(model, types_module).emit(
            schema_version, source, meta_keys
        )
    if subpackage or delta:
        files = {n: ruff_sort_imports(src, f"acp_trio/schema/{n}") for n, src in files.items()}
    formatted = {name: ruff_format(src, f"acp_trio/schema/{name}") for name, src in files.items()}
    return formatted, Base(model, package, defined_names(codec))


def generate_v2_proxies(schema: dict[str, Any], meta: dict[str, Any], schema_version: str) -> str:
    """``acp_trio/v2/_generated_proxies.py``: the typed v2 proxy methods
    (object or keyword form), with the v1 proxies' emitter."""
    emitter = ProxiesEmitter(
        analyze(schema, meta),
        "acp_trio.schema.v2._generated_types",
        methods_module="acp_trio.schema.v2._generated_methods",
        names=V2_METHOD_NAMES,
    )
    source = emitter.emit(schema_version, _source_name("stable", "v2"), {})
    name = "acp_trio/v2/_generated_proxies.py"
    return ruff_format(ruff_sort_imports(source, name), name)


def _source_name(flavour: str, subpackage: str) -> str:
    """The schema file a module comes from, as the package names it."""
    return FILES[(subpackage or "v1") + ("-unstable" if flavour == "unstable" else "")]


def read_sources(args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    """``(label, {flavour: structural schema})``: from the npm package
    (``--package``, default the pinned one), or with ``--from-shipped`` from
    the structural copies committed in the package."""
    if args.from_shipped:
        label, schemas = read_shipped()
    else:
        package = Path(args.package) if args.package else PACKAGE_DIR
        label, schemas = read_package(package, check_pin=args.package is None)
    return label, {f: structural(s, label, FILES[f]) for f, s in schemas.items()}


def generate_all(args: argparse.Namespace) -> dict[str, str]:
    """Every generated file, by its path under the package: the modules
    (``schema/...``, ``v2/_generated_proxies.py``) and the structural
    schemas (``schema/json/...``)."""
    label, schemas = read_sources(args)
    version = args.schema_version or label
    out: dict[str, str] = {}
    for flavour, schema in schemas.items():
        out[f"schema/json/{FILES[flavour]}"] = dump(schema)
    meta = {f: method_tables(s, 2 if f.startswith("v2") else 1) for f, s in schemas.items()}
    files, base = generate_flavour(schemas["v1"], meta["v1"], version, "stable", DOCS_URL)
    if not args.no_unstable:
        files.update(
            generate(
                schemas["v1-unstable"],
                meta["v1-unstable"],
                version,
                "unstable",
                UNSTABLE_DOCS_URL,
                "",
                base,
            )
        )
    if not args.no_v2:
        v2_files, v2_base = generate_flavour(
            schemas["v2"], meta["v2"], version, "stable", V2_DOCS_URL, "v2"
        )
        files.update(v2_files)
        if not args.no_unstable:
            files.update(
                generate(
                    schemas["v2-unstable"],
                    meta["v2-unstable"],
                    version,
                    "unstable",
                    V2_DOCS_URL,
                    "v2",
                    v2_base,
                )
            )
    out.update({f"schema/{name}": source for name, source in files.items()})
    if not args.no_v2:
        out["v2/_generated_proxies.py"] = generate_v2_proxies(schemas["v2"], meta["v2"], version)
    return out
