"""Drive one generation: read the schema files, analyse, emit, ``ruff format``.

Holds the default locations (the schema snapshot beside the repository, the
output package) and finds the schema release for the banners. Formatting with
the repository's ruff settings makes the output deterministic and lint-clean.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

from .analysis import analyze
from .delta import Base, Delta, defined_names, reused_definitions
from .emit_codec import CodecEmitter
from .emit_proxies import V2_METHOD_NAMES, ProxiesEmitter
from .emit_tables import emit_methods, emit_tables
from .emit_types import TypesEmitter

REPO_ROOT = Path(__file__).resolve().parents[2]
SCHEMA_DIR = REPO_ROOT.parent / "shared" / "acp-schema" / "v1"
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


def detect_schema_version(schema_path: Path) -> str | None:
    """The schema release, from the snapshot's README or an upstream checkout's Cargo.toml.

    A snapshot taken from the TypeScript SDK's package (its README names the
    ``@agentclientprotocol/sdk`` release, not the schema's) is labelled with
    that package, npm style: ``@agentclientprotocol/sdk@2.4.0``.
    """
    readme = schema_path.parent.parent / "README.md"
    text = readme.read_text(encoding="utf-8") if readme.is_file() else ""
    found = re.search(r"v1 schema version: `([^`]+)`", text)
    if found:
        return found.group(1)
    cargo = schema_path.parent / "Cargo.toml"  # upstream keeps schema/v1/Cargo.toml beside it
    if cargo.is_file():
        found = re.search(r'^version\s*=\s*"([^"]+)"', cargo.read_text(encoding="utf-8"), re.M)
        if found:
            return found.group(1)
    found = re.search(r"`(@agentclientprotocol/sdk)`\s+(\d[\w.+-]*)", text)
    if found:
        return f"{found.group(1)}@{found.group(2)}"
    return None


def generate(
    schema_path: Path,
    meta_path: Path,
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
    return generate_flavour(
        schema_path, meta_path, schema_version, flavour, docs, subpackage, base
    )[0]


def generate_flavour(
    schema_path: Path,
    meta_path: Path,
    schema_version: str,
    flavour: str,
    docs: str,
    subpackage: str = "",
    base: Base | None = None,
) -> tuple[dict[str, str], Base]:
    """:func:`generate`, also returning what a delta over this generation needs."""
    schema = json.loads(schema_path.read_text(encoding="utf-8"))
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    model = analyze(schema, meta)
    folder = f"{subpackage}/" if subpackage else ""
    prefix = folder + "_generated_" + ("unstable_" if flavour == "unstable" else "")
    package = "acp_trio.schema" + (f".{subpackage}" if subpackage else "")
    types_module = f"{package}.{prefix.removeprefix(folder)}types"
    source = f"{schema_path.name}, {meta_path.name}"
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


def generate_v2_proxies(schema_path: Path, meta_path: Path, schema_version: str) -> str:
    """``acp_trio/v2/_generated_proxies.py``: the typed v2 proxy methods
    (object or keyword form), with the v1 proxies' emitter."""
    schema = json.loads(schema_path.read_text(encoding="utf-8"))
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    emitter = ProxiesEmitter(
        analyze(schema, meta),
        "acp_trio.schema.v2._generated_types",
        methods_module="acp_trio.schema.v2._generated_methods",
        names=V2_METHOD_NAMES,
    )
    source = emitter.emit(schema_version, f"{schema_path.name}, {meta_path.name}", {})
    name = "acp_trio/v2/_generated_proxies.py"
    return ruff_format(ruff_sort_imports(source, name), name)


def generate_all(args: argparse.Namespace) -> dict[str, str]:
    """Every generated module, by its path under the package (``schema/...``,
    ``v2/_generated_proxies.py``)."""
    files = _generate_schema_modules(args)
    out = {f"schema/{name}": source for name, source in files.items()}
    if not args.no_v2:
        v2 = _v2_schema(args)
        v2_version = args.schema_version or detect_schema_version(v2) or "unknown"
        out["v2/_generated_proxies.py"] = generate_v2_proxies(
            v2, v2.with_name("meta.json"), v2_version
        )
    return out


def _v2_schema(args: argparse.Namespace) -> Path:
    return Path(args.v2_schema) if args.v2_schema else SCHEMA_DIR.parent / "v2" / "schema.json"


def _generate_schema_modules(args: argparse.Namespace) -> dict[str, str]:
    schema = Path(args.schema)
    meta = Path(args.meta) if args.meta else schema.with_name("meta.json")
    version = args.schema_version or detect_schema_version(schema) or "unknown"
    out, base = generate_flavour(schema, meta, version, "stable", DOCS_URL)
    if not args.no_unstable:
        unstable = (
            Path(args.unstable_schema)
            if args.unstable_schema
            else schema.with_name("schema.unstable.json")
        )
        umeta = (
            Path(args.unstable_meta)
            if args.unstable_meta
            else schema.with_name("meta.unstable.json")
        )
        if unstable.is_file() and umeta.is_file():
            out.update(generate(unstable, umeta, version, "unstable", UNSTABLE_DOCS_URL, "", base))
    if not args.no_v2:
        v2 = _v2_schema(args)
        v2_meta = v2.with_name("meta.json")
        v2_version = args.schema_version or detect_schema_version(v2) or "unknown"
        v2_out, v2_base = generate_flavour(v2, v2_meta, v2_version, "stable", V2_DOCS_URL, "v2")
        out.update(v2_out)
        v2_unstable = v2.with_name("schema.unstable.json")
        if not args.no_unstable and v2_unstable.is_file():
            umeta = v2.with_name("meta.unstable.json")
            out.update(
                generate(v2_unstable, umeta, v2_version, "unstable", V2_DOCS_URL, "v2", v2_base)
            )
    return out
