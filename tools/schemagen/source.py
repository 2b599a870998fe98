"""Where the schema comes from, and the structural copy the package ships.

The input is the ACP JSON Schema as the ``@agentclientprotocol/sdk`` npm
package publishes it (``schema/v1/schema.json``, ``schema.unstable.json``,
and the same under ``schema/v2/``): the package the TypeScript interop tests
already pin, exactly, in ``tests/interop/package.json`` and its lock. One pin
means the generated types and the TypeScript peer the tests run against
speak the same protocol release.

The package has no method tables of its own: each request and notification
definition carries ``x-method`` (its wire name) and ``x-side`` (who handles
it), and :func:`method_tables` derives the tables from them, the way
upstream derives its ``meta.json``.

What acp_trio needs at run time from the schema is written into the package
by the generator, so an install needs no npm: the modules, and a
*structural* copy of each schema file (:func:`structural`: every
``description`` left out, everything that validation or the generator reads
kept), which the checker validates against with ``jsonschema``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final

REPO_ROOT: Final = Path(__file__).resolve().parents[2]
PACKAGE: Final = "@agentclientprotocol/sdk"
#: The npm project that pins the package (``make`` installs it there).
NPM_PROJECT: Final = REPO_ROOT / "tests" / "interop"
PACKAGE_DIR: Final = NPM_PROJECT / "node_modules" / "@agentclientprotocol" / "sdk"
#: The structural copies, in the package (``acp_trio/schema/json/v1/schema.json``, ...).
SHIPPED_DIR: Final = REPO_ROOT / "acp_trio" / "schema" / "json"

#: flavour -> the file's path under the package's ``schema/`` folder (and under SHIPPED_DIR).
FILES: Final = {
    "v1": "v1/schema.json",
    "v1-unstable": "v1/schema.unstable.json",
    "v2": "v2/schema.json",
    "v2-unstable": "v2/schema.unstable.json",
}

# Keywords whose value is a map of name -> schema, and keywords whose value is
# data (never a schema): a walk must not take a property called "description"
# for the annotation.
_SCHEMA_MAPS: Final = ("properties", "$defs", "patternProperties", "dependentSchemas")
_DATA: Final = ("enum", "const", "default", "examples", "required")
#: Annotations left out of the structural copy: prose, never read by a validator.
_PROSE: Final = ("description", "$comment", "examples")

_GROUPS: Final = {
    "agent": ("agentMethods",),
    "client": ("clientMethods",),
    "protocol": ("protocolMethods",),
    "proxy": ("proxyMethods",),
    "both": ("agentMethods", "clientMethods"),
}


class SourceError(SystemExit):
    """The schema source is missing or not what the pin says (a usage error)."""


def pinned_version() -> str:
    """The exact version ``tests/interop/package.json`` pins."""
    manifest = json.loads((NPM_PROJECT / "package.json").read_text(encoding="utf-8"))
    version = manifest.get("dependencies", {}).get(PACKAGE)
    if not isinstance(version, str) or not version[:1].isdigit():
        raise SourceError(f"{NPM_PROJECT / 'package.json'} must pin {PACKAGE} to an exact version")
    return version


def package_version(package_dir: Path) -> str:
    """The version of the package unpacked at ``package_dir`` (its package.json)."""
    manifest_path = package_dir / "package.json"
    if not manifest_path.is_file():
        raise SourceError(_missing(package_dir))
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    if manifest.get("name") != PACKAGE:
        raise SourceError(f"{package_dir} is {manifest.get('name')!r}, not {PACKAGE}")
    return str(manifest["version"])


def _missing(package_dir: Path) -> str:
    return (
        f"{PACKAGE} is not installed at {package_dir}: run "
        "`make tests/interop/node_modules/.installed` (needs npm), or pass --from-shipped "
        "to regenerate the modules from the structural schema committed in acp_trio/schema/json"
    )


def label(version: str) -> str:
    """How the generated files name their source: ``@agentclientprotocol/sdk@2.4.0``."""
    return f"{PACKAGE}@{version}"


def read_package(
    package_dir: Path = PACKAGE_DIR, *, check_pin: bool = True
) -> tuple[str, dict[str, Any]]:
    """``(label, {flavour: schema})`` from an unpacked package (each file as published).

    With ``check_pin`` (the default package folder), the installed version must
    be the one ``tests/interop/package.json`` pins: a stale ``node_modules``
    would otherwise regenerate from the wrong release.
    """
    version = package_version(package_dir)
    if check_pin and version != (pinned := pinned_version()):
        raise SourceError(
            f"{package_dir} has {PACKAGE} {version} but tests/interop/package.json pins "
            f"{pinned}: run `make tests/interop/node_modules/.installed` (npm ci)"
        )
    schemas: dict[str, Any] = {}
    for flavour, name in FILES.items():
        path = package_dir / "schema" / name
        if not path.is_file():
            raise SourceError(f"{PACKAGE} {version} has no schema/{name}")
        schemas[flavour] = json.loads(path.read_text(encoding="utf-8"))
    return label(version), schemas


def read_shipped(shipped_dir: Path = SHIPPED_DIR) -> tuple[str, dict[str, Any]]:
    """``(label, {flavour: structural schema})`` from the committed copies."""
    schemas: dict[str, Any] = {}
    labels = set()
    for flavour, name in FILES.items():
        schema = json.loads((shipped_dir / name).read_text(encoding="utf-8"))
        labels.add(schema.get("x-source"))
        schemas[flavour] = schema
    if len(labels) != 1 or not isinstance(source := labels.pop(), str):
        raise SourceError(f"the files in {shipped_dir} do not name one x-source")
    return source, schemas


def structural(schema: Any, source: str, name: str) -> dict[str, Any]:
    """The schema without its prose (``description``, ``$comment``,
    ``examples``): validating with it gives the same verdicts. It records
    where it comes from in ``$comment`` (for a reader) and ``x-source``."""
    stripped = _strip(schema)
    head = {k: stripped.pop(k) for k in ("$schema",) if k in stripped}
    head["$comment"] = (
        f"Generated by tools/gen_schema.py from {source} (schema/{name}; Apache-2.0) "
        "without its descriptions, for validation. Do not edit."
    )
    head["x-source"] = source
    stripped.pop("x-source", None)
    return {**head, **stripped}


def _strip(node: Any) -> Any:
    if isinstance(node, list):
        return [_strip(item) for item in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _PROSE:
            continue
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            out[key] = {name: _strip(sub) for name, sub in value.items()}
        elif key in _DATA:
            out[key] = value
        else:
            out[key] = _strip(value)
    return out


def dump(schema: dict[str, Any]) -> str:
    """The committed text of a structural schema (one key per line, for diffs)."""
    return json.dumps(schema, indent=1, ensure_ascii=False) + "\n"


def method_tables(schema: dict[str, Any], version: int) -> dict[str, Any]:
    """The method tables (``agentMethods``, ``clientMethods``,
    ``protocolMethods``, ``proxyMethods``) from the definitions' ``x-method``
    and ``x-side``, in definition order; the key of a method is its wire name
    without a ``$/`` prefix, ``/`` made ``_``. A method handled by ``both``
    sides is in both tables."""
    tables: dict[str, dict[str, str]] = {}
    for name, definition in schema.get("$defs", {}).items():
        if not isinstance(definition, dict) or "x-method" not in definition:
            continue
        wire = definition["x-method"]
        side = definition.get("x-side")
        if side not in _GROUPS:
            raise SourceError(f"{name}: x-side {side!r} is none of {', '.join(_GROUPS)}")
        key = wire.removeprefix("$/").replace("/", "_")
        for group in _GROUPS[side]:
            known = tables.setdefault(group, {}).setdefault(key, wire)
            if known != wire:
                raise SourceError(f"{name}: {wire} and {known} have the same key {key}")
    out: dict[str, Any] = {"version": version}
    for group in ("agentMethods", "clientMethods", "protocolMethods", "proxyMethods"):
        if group in tables:
            out[group] = tables[group]
    return out
