"""Load the schema the package ships and build valid instances of every definition.

The builder is deterministic. For each definition it yields a "full"
instance (every optional property, with a value), a "minimal" one (required
properties only), a "nulls" one (every nullable optional property set to
``null``) and a "defaults" one (optional properties that have a schema
default, sent with exactly that value); for a union, that set for every
branch. Each definition is tested on its own, so a nested union just takes
its first branch here.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

REPO_ROOT = Path(__file__).resolve().parents[2]
#: The structural schemas the package ships (generated from the pinned npm
#: package; tests/schema/test_generated.py checks they are up to date).
SCHEMA_DIR = REPO_ROOT / "acp_trio" / "schema" / "json"

GENERATOR = REPO_ROOT / "tools" / "gen_schema.py"


def generator() -> types.ModuleType:
    """``tools/gen_schema.py`` as a module (which puts ``tools/`` on sys.path,
    so ``schemagen`` imports too)."""
    spec = importlib.util.spec_from_file_location("gen_schema", GENERATOR)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["gen_schema"] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


FLAVOURS = ("stable", "unstable", "v2", "v2-unstable")
#: flavour -> (folder in SCHEMA_DIR, schema file)
FILES = {
    "stable": ("v1", "schema.json"),
    "unstable": ("v1", "schema.unstable.json"),
    "v2": ("v2", "schema.json"),
    "v2-unstable": ("v2", "schema.unstable.json"),
}
#: full: every property; min: required only; nulls: nullable optionals as null;
#: defaults: optionals that have a schema default, sent explicitly with that value.
MODES = ("full", "min", "nulls", "defaults")
UNKNOWN_TAG = "future_variant"


@functools.cache
def load(flavour: str) -> dict[str, Any]:
    folder, name = FILES[flavour]
    result: dict[str, Any] = json.loads((SCHEMA_DIR / folder / name).read_text(encoding="utf-8"))
    return result


@functools.cache
def load_meta(flavour: str) -> dict[str, Any]:
    """The method tables, from the definitions' ``x-method`` and ``x-side``
    (the generator's derivation; tests/schema/test_source.py checks it)."""
    generator()  # puts tools/ on sys.path
    from schemagen.source import method_tables  # type: ignore[import-not-found]

    result: dict[str, Any] = method_tables(load(flavour), 2 if flavour.startswith("v2") else 1)
    return result


@functools.cache
def validator(flavour: str, def_name: str) -> Draft202012Validator:
    schema = load(flavour)
    root = {"$schema": schema["$schema"], "$ref": f"#/$defs/{def_name}", "$defs": schema["$defs"]}
    return Draft202012Validator(root)


@functools.cache
def root_validator(flavour: str) -> Draft202012Validator:
    return Draft202012Validator(load(flavour))


class Builder:
    """Valid JSON instances of schema fragments (see the module docstring)."""

    def __init__(self, flavour: str) -> None:
        self.defs: dict[str, Any] = load(flavour)["$defs"]

    def instances(self, def_name: str) -> list[Any]:
        node = self.defs[def_name]
        branches = node.get("oneOf") or node.get("anyOf")
        out: list[Any] = []
        if branches and not self._is_enum(node):
            for b in branches:
                if b.get("title") == "other":
                    continue  # an unknown variant: schema-valid only as a raw dict, tested apart
                merged = self._with_common(node, b)
                for mode in MODES:
                    out.append(self.one(merged, mode))
        elif self._is_enum(node):
            out = [b["const"] for b in branches if "const" in b]
            out += [
                -31999 if b.get("type") == "integer" else "_custom"
                for b in branches
                if "const" not in b
            ]
        else:
            out = [self.one(node, mode) for mode in MODES]
        unique: list[Any] = []
        for x in out:
            if x not in unique or type(x) is not type(unique[unique.index(x)]):
                unique.append(x)
        return unique

    @staticmethod
    def _is_enum(node: dict[str, Any]) -> bool:
        b = node.get("oneOf") or node.get("anyOf") or []
        return (
            bool(b)
            and "properties" not in node
            and all(
                "const" in x or (x.get("title") in ("other", "Other") and "properties" not in x)
                for x in b
            )
        )

    @staticmethod
    def _with_common(node: dict[str, Any], branch: dict[str, Any]) -> dict[str, Any]:
        """A union branch plus the union's own (common) properties."""
        if "properties" not in node:
            return branch
        common = {
            "type": "object",
            "properties": node["properties"],
            "required": node.get("required", []),
        }
        return {"allOf": [common, branch]}

    def one(self, node: dict[str, Any], mode: str) -> Any:
        if "$ref" in node:
            return self.one(self.defs[node["$ref"].rsplit("/", 1)[-1]], mode)
        if "const" in node:
            return node["const"]
        all_of = node.get("allOf")
        own = [k for k in node if k not in ("allOf", "description", "title", "default")]
        if all_of and len(all_of) == 1 and not [k for k in own if not k.startswith("x-")]:
            return self.one(all_of[0], mode)
        if "allOf" in node or ("properties" in node and ("anyOf" in node or "oneOf" in node)):
            return self._merged(node, mode)
        branches = node.get("oneOf") or node.get("anyOf")
        if branches:
            if mode == "nulls" and {"type": "null"} in branches:
                return None
            real = [
                b for b in branches if b != {"type": "null"} and b.get("title") not in ("other",)
            ]
            return self.one(real[0], mode if mode in ("full", "defaults") else "min")
        t = node.get("type")
        if isinstance(t, list):
            if mode == "nulls" and "null" in t:
                return None
            t = next(x for x in t if x != "null")
        if t is None:
            return {"any": [1, "x", None, {"nested": True}]}  # any JSON value
        if t == "object":
            return self._object(node, mode)
        if t == "array":
            if mode in ("full", "defaults") or node.get("minItems"):
                return [self.one(node["items"], "full")]
            return []
        if t == "string":
            if node.get("format") == "uri":
                return "https://example.com/x"
            return "s" * max(1, node.get("minLength", 1))
        if t == "integer":
            low = node.get("minimum", 0)
            return max(int(low), 7) if node.get("maximum", 10**9) >= 7 else int(low)
        if t == "number":
            return 1.5 if node.get("maximum", 2) >= 1.5 else node["maximum"] / 2  # v2 priority
        if t == "boolean":
            return True
        if t == "null":
            return None
        raise AssertionError(f"no instance for {node}")

    def _merged(self, node: dict[str, Any], mode: str) -> Any:
        out: dict[str, Any] = {}
        parts = list(node.get("allOf", []))
        own = {k: v for k, v in node.items() if k not in ("allOf", "anyOf", "oneOf")}
        if "properties" in own or own.get("type") == "object":
            parts.insert(0, own)
        branches = (node.get("anyOf") or node.get("oneOf")) if "properties" in node else None
        if branches:  # variants whose keys sit in this object: take the first known one
            parts.append(next(b for b in branches if b.get("title") != "other"))
        for p in parts:
            v = self.one(p, mode)
            assert isinstance(v, dict), (node, v)
            out.update(v)
        return out

    def _object(self, node: dict[str, Any], mode: str) -> dict[str, Any]:
        props = node.get("properties", {})
        required = set(node.get("required", []))
        out: dict[str, Any] = {}
        for key, p in props.items():
            if mode == "defaults" and key not in required:
                if "default" in p:
                    out[key] = p["default"]
                continue
            if key not in required and mode == "min":
                continue
            if key == "_meta":
                out[key] = None if mode == "nulls" else {"traceparent": "00-abc-01", "k": [1]}
                continue
            if key not in required and mode == "nulls" and not self._nullable(p):
                continue
            out[key] = self.one(p, "nulls" if (mode == "nulls" and key not in required) else mode)
            if mode == "nulls" and key in required:
                out[key] = self.one(p, "min")
        ap = node.get("additionalProperties")
        if not props and mode == "full" and ap in (True, None):
            out["free"] = {"any": 1}
        elif isinstance(ap, dict) and ap and mode == "full":
            out["entry"] = self.one(ap, "full")
        return out

    def _nullable(self, p: dict[str, Any]) -> bool:
        t = p.get("type")
        if isinstance(t, list):
            return "null" in t
        branches = p.get("anyOf") or []
        return {"type": "null"} in branches or not any(
            k for k in p if k not in ("description",) and not k.startswith("x-")
        )


def def_cases(flavour: str) -> Iterator[tuple[str, str, int, Any]]:
    """(flavour, def name, index, instance) for every non-routing definition."""
    b = Builder(flavour)
    for name, node in b.defs.items():
        if node.get("x-docs-ignore"):
            continue
        for i, inst in enumerate(b.instances(name)):
            yield flavour, name, i, inst
