"""The slow path: a careful, table-driven structurer that explains failures.

The generated fast path stops at the first problem and says nothing about
it. When it fails, the converter runs this walker over the same input. It
follows exactly the same rules (strict types, the schema's leniency
keywords, union dispatch, unknown-key residue) but records every problem
with its JSON path instead of stopping. It also builds the value, through
the classes' real ``__init__``, so tests can check that both paths agree on
any input.

It is driven by the generated tables (``_generated_*tables.py``), never by
introspecting the classes at call time.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, Final

from acp_trio.schema._runtime import (
    DEFAULTED,
    FLATTEN,
    LENIENT,
    NULL_CLEARS,
    NULL_DEFAULT,
    REQUIRED,
    SKIP_ITEMS,
    ClassSpec,
    FieldSpec,
    TypeExpr,
    UnionSpec,
    residue,
)

__all__ = ["FAIL", "child", "describe", "json_type", "walk"]

#: Returned in place of a value that could not be built.
FAIL: Final = object()

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_JSON_NAMES: Final = {
    type(None): "null",
    bool: "boolean",
    int: "integer",
    float: "number",
    str: "string",
    list: "array",
    dict: "object",
}


def json_type(v: Any) -> str:
    return _JSON_NAMES.get(type(v), type(v).__name__)


def child(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if _IDENT.match(key) else f"{path}[{json.dumps(key)}]"


def _short(v: Any) -> str:
    text = json.dumps(v) if isinstance(v, (str, int, float, bool)) or v is None else json_type(v)
    return text if len(text) <= 40 else text[:37] + "..."


def describe(tx: TypeExpr) -> str:
    """Human wording of a type expression ("a string", "an array of ...")."""
    kind = tx[0]
    if kind == "str":
        return "a non-empty string" if tx[1] == 1 else "a string"
    if kind == "int":
        bounds = [
            f">= {tx[1]}" if tx[1] is not None else "",
            f"<= {tx[2]}" if tx[2] is not None else "",
        ]
        extra = " and ".join(b for b in bounds if b)
        return f"an integer {extra}".rstrip()
    if kind == "lit":
        return "one of " + ", ".join(json.dumps(v) for v in tx[1])
    if kind == "list":
        return f"an array of {_plural(tx[1])}"
    if kind == "map":
        return f"an object of {_plural(tx[1])}"
    if kind == "class":
        return f"a {tx[1].__name__} object"
    if kind == "union":
        return f"a {tx[1]}"
    return {
        "num": "a number",
        "bool": "a boolean",
        "obj": "an object",
        "any": "any value",
        "null": "null",
    }[kind]


def _plural(tx: TypeExpr) -> str:
    text = describe(tx)
    for article in ("an ", "a "):
        if text.startswith(article):
            return text[len(article) :] + " items"
    return text


class Walker:
    """Structures one value against the generated tables, collecting errors."""

    def __init__(self, classes: Mapping[type, ClassSpec], unions: Mapping[str, UnionSpec]):
        self.classes = classes
        self.unions = unions

    def conv(self, v: Any, tx: TypeExpr, path: str, errs: list[str]) -> Any:
        kind = tx[0]
        if kind == "class":
            spec = self.classes[tx[1]]
            if spec.tag is not None and type(v) is dict and spec.tag[0] in v:
                key, value = spec.tag
                if v[key] != value:
                    errs.append(
                        f"{child(path, key)}: expected {json.dumps(value)}, got {_short(v[key])}"
                    )
                    return FAIL
                return self.cls(v, spec, path, errs, key)
            return self.cls(v, spec, path, errs, None)
        if kind == "union":
            return self.union(v, self.unions[tx[1]], path, errs)
        if kind in ("list", "map"):
            return self.container(v, tx, path, errs)
        if self.primitive_ok(v, tx):
            return v
        errs.append(f"{path}: expected {describe(tx)}, got {self.got(v, tx)}")
        return FAIL

    @staticmethod
    def primitive_ok(v: Any, tx: TypeExpr) -> bool:
        kind: str = tx[0]
        t = type(v)
        if kind == "str":
            return t is str and (tx[1] is None or bool(len(v) >= tx[1]))
        if kind == "int":
            low, high = tx[1], tx[2]
            return (
                t is int and (low is None or bool(v >= low)) and (high is None or bool(v <= high))
            )
        if kind == "num":
            return t is int or t is float
        if kind == "bool":
            return t is bool
        if kind == "obj":
            return t is dict
        if kind == "lit":
            return t is str and bool(v in tx[1])
        if kind == "null":
            return v is None
        return kind == "any"

    @staticmethod
    def got(v: Any, tx: TypeExpr) -> str:
        same = (tx[0] in ("str", "lit") and type(v) is str) or (tx[0] == "int" and type(v) is int)
        return _short(v) if same else json_type(v)

    def container(self, v: Any, tx: TypeExpr, path: str, errs: list[str]) -> Any:
        ok = True
        if tx[0] == "list" and type(v) is list:
            out_l = []
            for i, item in enumerate(v):
                r = self.conv(item, tx[1], child(path, i), errs)
                ok = ok and r is not FAIL
                out_l.append(r)
            return out_l if ok else FAIL
        if tx[0] == "map" and type(v) is dict:
            out_d = {}
            for k, item in v.items():
                r = self.conv(item, tx[1], child(path, k), errs)
                ok = ok and r is not FAIL
                out_d[k] = r
            return out_d if ok else FAIL
        errs.append(f"{path}: expected {describe(tx)}, got {json_type(v)}")
        return FAIL

    # -- classes --------------------------------------------------------------------------

    def cls(self, v: Any, spec: ClassSpec, path: str, errs: list[str], tag: str | None) -> Any:
        if type(v) is not dict:
            errs.append(f"{path}: expected {describe(('class', spec.cls))}, got {json_type(v)}")
            return FAIL
        kwargs: dict[str, Any] = {}
        ok = True
        res = spec.residue
        for f in spec.fields:
            if f.flags & FLATTEN:
                r = self.flatten(v, f, path, errs)
                if r is FAIL:
                    ok = False
                else:
                    kwargs[f.attr] = r
                    res = spec.flatten_residue[type(r)]
                continue
            p = child(path, f.wire)
            raw = v.get(f.wire)
            if f.flags & REQUIRED:
                if f.flags & LENIENT:  # missing, null or malformed: the empty list
                    r = [] if raw is None else self.lenient(raw, f, p)
                    kwargs[f.attr] = [] if r is FAIL else r
                elif f.wire not in v:
                    errs.append(f"{p}: missing required field")
                    ok = False
                elif raw is None and f.flags & NULL_DEFAULT:  # null: the field's default
                    if not f.flags & DEFAULTED:
                        kwargs[f.attr] = [] if f.type[0] == "list" else {}
                else:
                    r = self.items(raw, f, p, errs)
                    ok = ok and r is not FAIL
                    kwargs[f.attr] = r
                continue
            if f.flags & NULL_CLEARS and f.wire in v and raw is None:
                kwargs[f.attr] = None
                continue
            if raw is None:  # absent (or null where null means absent): the default
                continue
            if f.flags & LENIENT:
                r = self.lenient(raw, f, p)
            else:
                r = self.items(raw, f, p, errs)
                ok = ok and r is not FAIL
            if r is not FAIL:
                kwargs[f.attr] = r
        if not ok:
            return FAIL
        kwargs["extra_"] = residue(v, tag, res)
        return spec.cls(**kwargs)

    def items(self, raw: Any, f: FieldSpec, path: str, errs: list[str]) -> Any:
        """A strict field; a skip-invalid-items list (v2) that is not lenient too must
        be a list, but its malformed items are dropped."""
        if f.flags & SKIP_ITEMS and f.type[0] == "list" and type(raw) is list:
            return self.lenient(raw, f, path)
        return self.conv(raw, f.type, path, errs)

    def lenient(self, raw: Any, f: FieldSpec, path: str) -> Any:
        """Convert a default-on-error field; FAIL means "use the default"."""
        tx = f.type
        if f.flags & SKIP_ITEMS and tx[0] == "list":
            if type(raw) is not list:
                return FAIL
            out = []
            for i, item in enumerate(raw):
                r = self.conv(item, tx[1], child(path, i), [])
                if r is not FAIL:
                    out.append(r)
            return out
        return self.conv(raw, tx, path, [])

    def flatten(self, v: dict[str, Any], f: FieldSpec, path: str, errs: list[str]) -> Any:
        """A union whose variants' keys sit in the parent object."""
        spec = self.unions[f.type[1]]
        for tx in spec.branches:
            if self.matches(v, tx):
                bspec = self.classes[tx[1]]
                sub = ClassSpec(bspec.cls, None, bspec.fields, (frozenset(v), frozenset(), {}))
                return self.cls(v, sub, path, errs, None)
        errs.append(f"{path}: {self.no_branch(v, spec)}")
        return FAIL

    # -- unions ---------------------------------------------------------------------------

    def union(self, v: Any, spec: UnionSpec, path: str, errs: list[str]) -> Any:
        if spec.key is None:
            catch_all = any(tx[0] == "any" for tx in spec.branches)
            for tx in spec.branches:
                if self.matches(v, tx):
                    if not catch_all:
                        return self.conv(v, tx, path, errs)
                    r = self.conv(v, tx, path, [])  # failing here leaves the catch-all
                    if r is not FAIL:
                        return r
            errs.append(f"{path}: {self.no_branch(v, spec)}")
            return FAIL
        if type(v) is not dict:
            errs.append(f"{path}: expected a {spec.name} object, got {json_type(v)}")
            return FAIL
        key = spec.key
        tag = v.get(key)
        if type(tag) is str:
            inner = spec.nested.get(tag)
            if inner is not None:
                rest = {k: x for k, x in v.items() if k != key}
                return self.union(rest, self.unions[inner], path, errs)
            cls = spec.tags.get(tag)
            if cls is not None:
                return self.cls(v, self.classes[cls], path, errs, key)
            assert spec.unknown is not None
            if spec.fallback is not None and not spec.other:
                r = self.cls(v, self.classes[spec.fallback], path, [], None)
                if r is not FAIL:
                    return r
            return spec.unknown(raw=v)
        if spec.fallback is not None:
            return self.cls(v, self.classes[spec.fallback], path, errs, None)
        if key not in v:
            errs.append(f"{child(path, key)}: missing required field")
        else:
            errs.append(f"{child(path, key)}: expected a string, got {json_type(tag)}")
        return FAIL

    def matches(self, v: Any, tx: TypeExpr) -> bool:
        """The structural-dispatch predicate (mirrors the generated one)."""
        kind = tx[0]
        if kind == "class":
            spec = self.classes[tx[1]]
            need = [f.wire for f in spec.fields if f.flags & REQUIRED and not f.flags & FLATTEN]
            return type(v) is dict and all(k in v for k in need)
        if kind == "list":
            return type(v) is list and (not v or self.matches(v[0], tx[1]))
        if kind in ("lit", "str"):
            return type(v) is str
        return self.primitive_ok(v, tx if kind != "int" else ("int", None, None))

    def no_branch(self, v: Any, spec: UnionSpec) -> str:
        options = []
        for tx in spec.branches:
            if tx[0] == "class":
                cspec = self.classes[tx[1]]
                need = [f.wire for f in cspec.fields if f.flags & REQUIRED]
                keys = ", ".join(repr(k) for k in need if k)
                options.append(f"{tx[1].__name__} (with {keys})" if keys else tx[1].__name__)
            else:
                options.append(describe(tx))
        return f"expected one of: {'; '.join(options)}; got {json_type(v)}"


def walk(
    classes: Mapping[type, ClassSpec],
    unions: Mapping[str, UnionSpec],
    data: Any,
    tx: TypeExpr,
) -> tuple[Any, list[str]]:
    """Structure ``data`` as ``tx``; return (value or FAIL, errors)."""
    errs: list[str] = []
    value = Walker(classes, unions).conv(data, tx, "$", errs)
    return value, errs
