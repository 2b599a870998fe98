#!/usr/bin/env python3
"""Generate ``acp_trio/schema/_generated_*.py`` from the ACP JSON Schema.

Usage (from the repository root)::

    python tools/gen_schema.py            # stable + unstable, from ../shared/acp-schema/v1
    python tools/gen_schema.py --schema PATH/schema.json --meta PATH/meta.json \\
        --schema-version 1.22.0           # a newer upstream release
    python tools/gen_schema.py --check    # exit 1 if the committed files are stale

The generator works in three steps, one section each below:

1. *analysis* turns the schema's ``$defs`` into a small model (aliases,
   classes, unions, methods), following the shape notes in
   ``shared/protocol-notes.md`` section 14;
2. *emission* writes four modules per schema flavour: types (attrs
   classes and aliases), codec (specialised fast structure/unstructure
   functions), tables (union, leniency and field tables, also walked by the
   slow validator) and methods (the method table);
3. the output is run through ``ruff format`` so it is deterministic and
   already formatted.

No description text from the schema is copied into the output: a class
carries its name, its wire name and a link to the upstream schema page.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import keyword
import re
import shutil
import subprocess
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
SCHEMA_DIR = REPO_ROOT.parent / "shared" / "acp-schema" / "v1"
OUT_DIR = REPO_ROOT / "acp_trio" / "schema"
DOCS_URL = "https://agentclientprotocol.com/protocol/schema"
UNSTABLE_DOCS_URL = "https://agentclientprotocol.com/protocol/draft/schema"

# Fields where JSON ``null`` means "clear" and absence means "unchanged". The
# schema cannot say this (protocol-notes section 14); these get an UNSET default.
NULL_CLEARS: frozenset[tuple[str, str]] = frozenset(
    {
        ("SessionInfoUpdate", "title"),
        ("SessionInfoUpdate", "updatedAt"),
        ("CompactionUpdate", "summary"),
        ("CompactionUpdate", "error"),
        ("CompactionUpdate", "_meta"),
    }
)

EXTRA_ATTR = "extra_"
META_WIRE = "_meta"

# ---------------------------------------------------------------------------------------
# Model
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TExpr:
    """A field type. ``ref`` is the schema name used in annotations, if any."""

    kind: str  # str int num bool any obj lit list map class union
    ref: str | None = None
    item: TExpr | None = None
    values: tuple[str, ...] = ()
    open: bool = False
    minimum: int | None = None
    maximum: int | None = None
    min_length: int | None = None


@dataclass
class Field:
    wire: str
    attr: str
    type: TExpr
    required: bool = False
    nullable: bool = False
    lenient: bool = False
    skip: bool = False
    null_clears: bool = False
    default: Any = None
    has_default: bool = False
    flatten: bool = False


@dataclass
class ClassDef:
    name: str
    fields: list[Field]
    def_name: str | None  # schema def it documents (for the link)
    base: str | None = None
    tag: tuple[str, str] | None = None  # always carries this tag (standalone too)
    variant_of: list[tuple[str, str, str]] = field(default_factory=list)  # union, key, tag
    unknown_of: str | None = None
    flatten_branch: bool = False


@dataclass
class UnionDef:
    name: str
    members: list[str]  # class names, or annotations for structural unions
    key: str | None = None
    tags: dict[str, str] = field(default_factory=dict)  # tag -> class
    fallback: str | None = None
    other: bool = False
    unknown: str | None = None
    branches: list[TExpr] = field(default_factory=list)  # structural only
    def_name: str | None = None


@dataclass
class AliasDef:
    name: str
    type: TExpr
    annotation: str


@dataclass
class Method:
    name: str
    kind: str
    handled_by: str
    params: str
    result: str | None


@dataclass
class Model:
    aliases: dict[str, AliasDef] = field(default_factory=dict)
    classes: dict[str, ClassDef] = field(default_factory=dict)
    unions: dict[str, UnionDef] = field(default_factory=dict)
    methods: list[Method] = field(default_factory=list)
    def_kinds: dict[str, tuple[str, str | None]] = field(default_factory=dict)
    protocol_version: int = 1


# ---------------------------------------------------------------------------------------
# Analysis
# ---------------------------------------------------------------------------------------


def snake(name: str) -> str:
    if name == META_WIRE:
        return "meta"
    out = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()
    out = re.sub(r"[^a-z0-9_]", "_", out)
    return out + "_" if keyword.iskeyword(out) else out


def pascal(tag: str) -> str:
    parts = re.split(r"[_\-\s/]+", re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", tag))
    return "".join(p[:1].upper() + p[1:] for p in parts if p)


def ref_name(node: dict[str, Any]) -> str | None:
    """The def a property points at: ``{$ref}`` or ``{allOf: [{$ref}]}``."""
    if "$ref" in node:
        return str(node["$ref"]).rsplit("/", 1)[-1]
    all_of = node.get("allOf")
    if isinstance(all_of, list) and len(all_of) == 1 and "$ref" in all_of[0]:
        return str(all_of[0]["$ref"]).rsplit("/", 1)[-1]
    return None


def _schema_keys(node: dict[str, Any]) -> set[str]:
    return {k for k in node if k not in ("description", "title") and not k.startswith("x-")}


def _const_branch(b: dict[str, Any]) -> bool:
    return b.get("type") in ("string", "integer") and "const" in b


class Analyzer:
    """Turns ``$defs`` into a :class:`Model`. One method per kind of def."""

    def __init__(self, schema: dict[str, Any], meta: dict[str, Any]) -> None:
        self.schema = schema
        self.defs: dict[str, dict[str, Any]] = schema["$defs"]
        self.meta = meta
        self.model = Model(protocol_version=int(meta.get("version", 1)))
        self.field_refs: dict[str, int] = {}
        self.variant_refs: dict[str, list[tuple[str, str]]] = {}
        self.absorbed: set[str] = set()
        self._pending_flatten_branch: set[str] = set()

    # -- driver ---------------------------------------------------------------------

    def run(self) -> Model:
        self._count_refs()
        for name, d in self.defs.items():
            if d.get("x-docs-ignore"):
                self.model.def_kinds[name] = ("routing", None)
                continue
            if self._is_union(d):
                self._union(name, d)
        for name, d in self.defs.items():
            if name in self.model.def_kinds or name in self.absorbed:
                continue
            self._plain(name, d)
        self._methods()
        self._check_names()
        return self.model

    def _count_refs(self) -> None:
        def walk(node: Any, in_union_branch: bool) -> None:
            if isinstance(node, dict):
                r = node.get("$ref")
                if r and not in_union_branch:
                    n = r.rsplit("/", 1)[-1]
                    self.field_refs[n] = self.field_refs.get(n, 0) + 1
                for v in node.values():
                    walk(v, False)
            elif isinstance(node, list):
                for v in node:
                    walk(v, in_union_branch)

        for name, d in self.defs.items():
            if d.get("x-docs-ignore"):
                continue
            branches = d.get("oneOf") or d.get("anyOf")
            if self._is_union(d) and isinstance(branches, list) and self._tagged(branches):
                walk(d.get("properties", {}), False)
                for b in branches:
                    # the payload ref of a tagged variant is not a field reference
                    payload = self._payload(b)
                    if payload:
                        tag = self._tag_of(b)
                        label = tag[1] if tag else ""
                        self.variant_refs.setdefault(payload, []).append((name, label))
                    rest = {k: v for k, v in b.items() if k != "allOf"}
                    walk(rest, False)
            else:
                walk(d, False)

    # -- classification ---------------------------------------------------------------

    @staticmethod
    def _branches(d: dict[str, Any]) -> list[dict[str, Any]] | None:
        b = d.get("oneOf") or d.get("anyOf")
        return b if isinstance(b, list) else None

    def _is_enum(self, d: dict[str, Any]) -> bool:
        b = self._branches(d)
        if not b or "properties" in d:
            return False
        return all(
            _const_branch(x) or (x.get("title") == "other" and _schema_keys(x) == {"type"})
            for x in b
        ) or all(x.get("type") == "integer" for x in b)

    def _is_union(self, d: dict[str, Any]) -> bool:
        b = self._branches(d)
        if not b or self._is_enum(d):
            return False
        if "properties" in d:
            return self._tagged(b)  # common fields + tagged variants; else a flattened field
        return True

    def _tag_of(self, b: dict[str, Any]) -> tuple[str, str] | None:
        for key, p in b.get("properties", {}).items():
            is_const = isinstance(p, dict) and p.get("type") == "string" and "const" in p
            if is_const and key in b.get("required", []):
                return key, str(p["const"])
        return None

    def _payload(self, b: dict[str, Any]) -> str | None:
        all_of = b.get("allOf")
        if isinstance(all_of, list) and len(all_of) == 1:
            return ref_name(all_of[0])
        return None

    def _tagged(self, branches: list[dict[str, Any]]) -> bool:
        return any(self._tag_of(b) for b in branches)

    # -- types of properties ------------------------------------------------------------

    def texpr(self, node: dict[str, Any]) -> tuple[TExpr, bool]:
        """(type, nullable) of a property schema."""
        r = ref_name(node)
        if r is not None:
            return self.def_texpr(r), False
        any_of = node.get("anyOf")
        if isinstance(any_of, list) and len(any_of) == 2 and {"type": "null"} in any_of:
            other = next(x for x in any_of if x != {"type": "null"})
            return self.texpr(other)[0], True
        t = node.get("type")
        nullable = False
        if isinstance(t, list):
            kinds = [x for x in t if x != "null"]
            nullable = "null" in t
            if len(kinds) != 1:
                raise SystemExit(f"unsupported multi-type property {node}")
            t = kinds[0]
        if t is None:
            if not _schema_keys(node):
                return TExpr("any"), True  # any JSON value, null included
            raise SystemExit(f"unsupported property schema {node}")
        if t == "string":
            return TExpr("str", min_length=node.get("minLength")), nullable
        if t == "integer":
            return TExpr("int", minimum=node.get("minimum"), maximum=node.get("maximum")), nullable
        if t == "number":
            return TExpr("num"), nullable
        if t == "boolean":
            return TExpr("bool"), nullable
        if t == "array":
            return TExpr("list", item=self.texpr(node["items"])[0]), nullable
        if t == "object":
            ap = node.get("additionalProperties", True)
            if ap is True or ap == {}:
                return TExpr("obj"), nullable
            return TExpr("map", item=self.texpr(ap)[0]), nullable
        raise SystemExit(f"unsupported property schema {node}")

    def def_texpr(self, name: str) -> TExpr:
        d = self.defs[name]
        if self._is_union(d) or name in self.model.unions:
            return TExpr("union", ref=name)
        if self._is_enum(d):
            b = self._branches(d) or []
            if all(x.get("type") == "integer" for x in b):
                return TExpr("int", ref=name)
            values = tuple(str(x["const"]) for x in b if "const" in x)
            return TExpr("lit", ref=name, values=values, open=any("const" not in x for x in b))
        keys = _schema_keys(d)
        if not keys:
            return TExpr("any", ref=name)
        if d.get("type") == "object" or "properties" in d:
            return TExpr("class", ref=name)
        t, _ = self.texpr({k: v for k, v in d.items() if k != "description"})
        return TExpr(
            t.kind, ref=name, minimum=t.minimum, maximum=t.maximum, min_length=t.min_length
        )

    # -- plain defs: aliases and classes --------------------------------------------------

    def _plain(self, name: str, d: dict[str, Any]) -> None:
        t = self.def_texpr(name)
        if t.kind == "class":
            self.model.def_kinds[name] = ("class", name)
            self._add_class(
                ClassDef(
                    name,
                    self._fields(name, d),
                    def_name=name,
                )
            )
            return
        if t.kind == "lit":
            ann = "Literal[" + ", ".join(json.dumps(v) for v in t.values) + "]"
            if t.open:
                ann += " | str"
        else:
            ann = {"str": "str", "int": "int", "num": "float", "bool": "bool", "any": "Any"}[t.kind]
        self.model.def_kinds[name] = ("alias", name)
        self.model.aliases[name] = AliasDef(name, t, ann)

    def _fields(self, owner: str, d: dict[str, Any]) -> list[Field]:
        out: list[Field] = []
        required = set(d.get("required", []))
        for wire, p in d.get("properties", {}).items():
            t, nullable = self.texpr(p)
            f = Field(
                wire=wire,
                attr=snake(wire),
                type=t,
                required=wire in required,
                nullable=nullable,
                lenient=bool(p.get("x-deserialize-default-on-error")),
                skip=bool(p.get("x-deserialize-skip-invalid-items")),
                null_clears=(owner, wire) in NULL_CLEARS,
            )
            if "default" in p:
                f.has_default, f.default = True, p["default"]
            if f.required and f.nullable:
                raise SystemExit(f"{owner}.{wire}: required and nullable is not supported")
            out.append(f)
        flat = self._flatten_branches(d)
        if flat:
            out.append(self._flatten_field(flat))
        return out

    def _flatten_branches(self, d: dict[str, Any]) -> list[str] | None:
        b = d.get("anyOf")
        if "properties" not in d or not isinstance(b, list) or self._tagged(b):
            return None
        names = [self._payload(x) for x in b]
        if not all(names):
            raise SystemExit(f"unsupported inline anyOf {b}")
        return [n for n in names if n]

    def _flatten_field(self, branches: list[str]) -> Field:
        prefix = _common_prefix(branches)
        suffix = _common_suffix(branches)
        if not suffix:
            raise SystemExit(f"cannot name the flattened union of {branches}")
        union = prefix + suffix
        if union not in self.model.unions:
            self.model.unions[union] = UnionDef(
                union, members=list(branches), branches=[TExpr("class", ref=b) for b in branches]
            )
            for b in branches:
                self._pending_flatten_branch.add(b)
        return Field(
            wire="",
            attr=snake(suffix),
            type=TExpr("union", ref=union),
            required=True,
            flatten=True,
        )

    def _add_class(self, c: ClassDef) -> None:
        if c.name in self.model.classes:
            raise SystemExit(f"duplicate class name {c.name}")
        if c.name in self._pending_flatten_branch:
            c.flatten_branch = True
        self.model.classes[c.name] = c

    # -- unions -------------------------------------------------------------------------

    def _union(self, name: str, d: dict[str, Any]) -> None:
        branches = self._branches(d) or []
        self.model.def_kinds[name] = ("union", name)
        if not self._tagged(branches):
            self._structural_union(name, branches)
            return
        common = self._fields(name, {k: v for k, v in d.items() if k != "anyOf"})
        u = UnionDef(name, members=[], def_name=name)
        key = None
        payload_count: dict[str, int] = {}
        for b in branches:
            p = self._payload(b)
            if p and self._tag_of(b):
                payload_count[p] = payload_count.get(p, 0) + 1
        for b in branches:
            tag = self._tag_of(b)
            payload = self._payload(b)
            if b.get("title") == "other" and not tag:
                u.other = True
                continue
            if tag:
                if key not in (None, tag[0]):
                    raise SystemExit(f"{name}: mixed discriminators")
                key = tag[0]
                cls = self._variant_class(name, b, tag, payload, common, payload_count)
                u.tags[tag[1]] = cls
            else:
                cls = self._fallback_class(name, b, payload, common)
                u.fallback = cls
            u.members.append(cls)
        u.key = key
        u.unknown = "Unknown" + name
        self._add_class(ClassDef(u.unknown, [], def_name=name, unknown_of=name))
        u.members.append(u.unknown)
        self.model.unions[name] = u

    def _variant_class(
        self,
        union: str,
        b: dict[str, Any],
        tag: tuple[str, str],
        payload: str | None,
        common: list[Field],
        payload_count: dict[str, int],
    ) -> str:
        key, value = tag
        inline = {k: v for k, v in b.get("properties", {}).items() if k != key}
        if payload and payload_count[payload] == 1 and not inline:
            shared_elsewhere = (
                self.field_refs.get(payload, 0) > 0 or len(self.variant_refs.get(payload, [])) > 1
            )
            if common and shared_elsewhere:
                raise SystemExit(f"{union}: cannot merge common fields into shared {payload}")
            if payload in self.model.classes:
                c = self.model.classes[payload]
            else:
                pd = self.defs[payload]
                fields = self._merge(common, self._fields(payload, pd))
                c = ClassDef(payload, fields, def_name=payload)
                if common:
                    self.absorbed.add(payload)
                    self.model.def_kinds[payload] = ("merged", union)
                else:
                    self.model.def_kinds[payload] = ("class", payload)
                self._add_class(c)
            c.variant_of.append((union, key, value))
            if not shared_elsewhere:
                c.tag = (key, value)
            return c.name
        name = pascal(value) if payload and not inline else union + pascal(value)
        if payload and payload_count[payload] > 1:
            if common:
                raise SystemExit(f"{union}: shared payload with common fields")
            base = payload
            if payload not in self.model.classes:
                pd = self.defs[payload]
                self._add_class(ClassDef(payload, self._fields(payload, pd), def_name=payload))
                self.model.def_kinds[payload] = ("class", payload)
            fields = list(self.model.classes[base].fields)
        else:
            base = None
            pf = self._fields(payload, self.defs[payload]) if payload else []
            fields = self._merge(
                common,
                pf,
                self._fields(union, {"properties": inline, "required": b.get("required", [])}),
            )
        if name in self.defs:
            raise SystemExit(f"{union}: variant name {name} collides with a def")
        c = ClassDef(
            name,
            fields,
            def_name=payload or union,
            base=base,
            tag=(key, value),
        )
        c.variant_of.append((union, key, value))
        self._add_class(c)
        return name

    def _fallback_class(
        self, union: str, b: dict[str, Any], payload: str | None, common: list[Field]
    ) -> str:
        if payload and not common and "properties" not in b:
            if payload not in self.model.classes:
                pd = self.defs[payload]
                c = ClassDef(payload, self._fields(payload, pd), def_name=payload)
                self._add_class(c)
                self.model.def_kinds[payload] = ("class", payload)
            return payload
        name = union + pascal(str(b.get("title", "default")))
        fields = self._merge(common, self._fields(union, b))
        self._add_class(ClassDef(name, fields, def_name=union))
        return name

    @staticmethod
    def _merge(*groups: list[Field]) -> list[Field]:
        seen: dict[str, Field] = {}
        for g in groups:
            for f in g:
                seen.setdefault(f.wire or f.attr, f)
        meta = [f for f in seen.values() if f.wire == META_WIRE]
        rest = [f for f in seen.values() if f.wire != META_WIRE and not f.flatten]
        flat = [f for f in seen.values() if f.flatten]
        return rest + flat + meta

    def _structural_union(self, name: str, branches: list[dict[str, Any]]) -> None:
        u = UnionDef(name, members=[], def_name=name)
        for b in branches:
            node = {k: v for k, v in b.items() if k not in ("title", "description")}
            if node == {"type": "null"}:
                u.branches.append(TExpr("null"))
                continue
            t, _ = self.texpr(node)
            u.branches.append(t)
        self.model.unions[name] = u

    # -- methods -------------------------------------------------------------------------

    def _routing_params(self, route: str) -> list[str]:
        params = self.defs[route]["properties"]["params"]["anyOf"][0]["anyOf"]
        return [n for n in (ref_name(p) for p in params) if n and "x-method" in self.defs[n]]

    def _methods(self) -> None:
        results: dict[str, str] = {}
        for route in ("AgentResponse", "ClientResponse"):
            for branch in self.defs[route]["anyOf"]:
                res = branch.get("properties", {}).get("result")
                for r in res.get("anyOf", []) if res else []:
                    n = ref_name(r)
                    if n and "x-method" in self.defs[n]:
                        results[self.defs[n]["x-method"]] = n
        sides: dict[str, set[str]] = {}
        for group, side in (
            ("agentMethods", "agent"),
            ("clientMethods", "client"),
            ("protocolMethods", "protocol"),
        ):
            for wire in self.meta.get(group, {}).values():
                sides.setdefault(wire, set()).add(side)
        protocol_params = []
        for msg in self.schema.get("anyOf", []):
            if msg.get("title") == "ProtocolLevel":
                for p in msg["properties"]["params"]["anyOf"]:
                    for inner in p.get("anyOf", []):
                        n = ref_name(inner)
                        if n:
                            protocol_params.append(n)
        routes = [
            ("ClientRequest", "request"),
            ("AgentRequest", "request"),
            ("ClientNotification", "notification"),
            ("AgentNotification", "notification"),
        ]
        found: dict[tuple[str, str], Method] = {}
        for route, kind in routes:
            for n in self._routing_params(route):
                self._add_method(found, n, kind, sides, results)
        for n in protocol_params:
            self._add_method(found, n, "notification", sides, results)
        missing = set(sides) - {w for w, _ in found}
        if missing:
            raise SystemExit(f"meta names without a params type: {sorted(missing)}")
        self.model.methods = sorted(found.values(), key=lambda m: (m.name, m.kind))

    def _add_method(
        self,
        found: dict[tuple[str, str], Method],
        params: str,
        kind: str,
        sides: dict[str, set[str]],
        results: dict[str, str],
    ) -> None:
        wire = self.defs[params]["x-method"]
        s = sides.get(wire)
        if not s:
            raise SystemExit(f"{wire} is not listed in meta.json")
        handled = "both" if {"agent", "client"} <= s else next(iter(sorted(s)))
        result = results.get(wire) if kind == "request" else None
        if kind == "request" and result is None:
            raise SystemExit(f"no result type for {wire}")
        found[(wire, kind)] = Method(wire, kind, handled, params, result)

    # -- sanity ---------------------------------------------------------------------------

    def _check_names(self) -> None:
        seen: dict[str, str] = {}
        for kind, names in (
            ("alias", self.model.aliases),
            ("class", self.model.classes),
            ("union", self.model.unions),
        ):
            for n in names:
                if n in seen:
                    raise SystemExit(f"name clash: {n} is a {seen[n]} and a {kind}")
                seen[n] = kind
        for c in self.model.classes.values():
            attrs_ = [f.attr for f in c.fields]
            if len(set(attrs_)) != len(attrs_) or EXTRA_ATTR in attrs_:
                raise SystemExit(f"{c.name}: attribute names clash: {attrs_}")


def _common_prefix(names: list[str]) -> str:
    words = [re.findall(r"[A-Z][a-z0-9]*", n) for n in names]
    out = []
    for group in zip(*words, strict=False):
        if len(set(group)) != 1:
            break
        out.append(group[0])
    return "".join(out)


def _common_suffix(names: list[str]) -> str:
    rev = [n[::-1] for n in names]
    words = [[w[::-1] for w in re.findall(r"[a-z0-9]*[A-Z]", r)] for r in rev]
    out = []
    for group in zip(*words, strict=False):
        if len(set(group)) != 1:
            break
        out.append(group[0])
    return "".join(reversed(out))


def analyze(schema: dict[str, Any], meta: dict[str, Any]) -> Model:
    return Analyzer(schema, meta).run()


# ---------------------------------------------------------------------------------------
# Emission helpers
# ---------------------------------------------------------------------------------------


def q(s: str) -> str:
    """A Python string literal (double quotes, as ruff writes them)."""
    return json.dumps(s, ensure_ascii=True)


def py_literal(v: Any) -> str:
    if v is None:
        return "None"
    if v is True or v is False:
        return repr(v)
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return q(v)
    if isinstance(v, list):
        return "[" + ", ".join(py_literal(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{q(k)}: {py_literal(x)}" for k, x in v.items()) + "}"
    raise TypeError(v)


def annotation(t: TExpr, m: Model) -> str:
    if t.ref:
        return t.ref
    if t.kind in ("list", "map"):
        assert t.item is not None
        inner = annotation(t.item, m)
        return f"list[{inner}]" if t.kind == "list" else f"dict[str, {inner}]"
    return {
        "str": "str",
        "int": "int",
        "num": "float",
        "bool": "bool",
        "any": "Any",
        "obj": "dict[str, Any]",
        "null": "None",
    }[t.kind]


def resolve(t: TExpr, m: Model) -> TExpr:
    """Follow aliases down to the checked type (aliases keep their bounds)."""
    if t.ref and t.ref in m.aliases and t.kind not in ("class", "union"):
        return m.aliases[t.ref].type
    return t


def banner(schema_version: str, source: str, what: str, noqa: str = "") -> str:
    """Module docstring: one summary line, how it was made, then any detail."""
    summary, _, detail = what.partition("\n\n")
    return (
        f'"""{summary}\n\n'
        f"Generated by tools/gen_schema.py from ACP schema {schema_version} ({source}).\n"
        "Do not edit: change the generator and run `python tools/gen_schema.py`\n"
        "(or `--schema PATH --meta PATH --schema-version X` for another release).\n"
        + (f"\n{detail}\n" if detail else "")
        + '"""\n\n'
        + (f"# ruff: noqa: {noqa}\n" if noqa else "")
    )


def class_order(m: Model) -> list[ClassDef]:
    """Classes in an order where a base or default-object class comes first."""
    done: list[str] = []
    seen: set[str] = set()

    def deps(c: ClassDef) -> Iterator[str]:
        if c.base:
            yield c.base
        for f in c.fields:
            if f.has_default and f.type.kind == "class" and f.type.ref:
                yield f.type.ref

    def visit(name: str) -> None:
        if name in seen:
            return
        seen.add(name)
        for dep in deps(m.classes[name]):
            visit(dep)
        done.append(name)

    for name in m.classes:
        visit(name)
    return [m.classes[n] for n in done]


def docs_anchor(docs: str, name: str) -> str:
    return f"{docs}#{name.lower()}"


# ---------------------------------------------------------------------------------------
# Emission: types module
# ---------------------------------------------------------------------------------------


class TypesEmitter:
    def __init__(self, m: Model, docs: str) -> None:
        self.m = m
        self.docs = docs
        self.defaults: dict[tuple[str, str], str] = {}

    def field_default(self, c: ClassDef, f: Field) -> str | None:
        """Python default expression of a field, or None if required."""
        if f.flatten or (f.required and not f.has_default):
            return None
        if f.null_clears:
            return "UNSET"
        if f.has_default:
            t = resolve(f.type, self.m)
            if t.kind == "class":
                return self.defaults[(c.name, f.wire)]
            if isinstance(f.default, list):
                return "attrs.field(factory=list)"
            if isinstance(f.default, dict):
                return "attrs.field(factory=dict)"
            return py_literal(f.default)
        return "None"

    def field_annotation(self, f: Field) -> str:
        ann = annotation(f.type, self.m)
        if f.null_clears:
            return f"{ann} | UnsetType | None"
        if f.flatten or f.required or f.has_default:
            return ann
        if ann == "Any":
            return "Any"
        return f"{ann} | None"

    def default_object(self, cls: str, value: dict[str, Any]) -> str:
        c = self.m.classes[cls]
        args = []
        for f in c.fields:
            if f.wire not in value:
                continue
            v = value[f.wire]
            if f.has_default and f.default == v:
                continue
            t = resolve(f.type, self.m)
            if t.kind == "class" and t.ref:
                args.append(f"{f.attr}={self.default_object(t.ref, v)}")
            else:
                args.append(f"{f.attr}={py_literal(v)}")
        return f"{cls}({', '.join(args)})"

    def emit(self, schema_version: str, source: str) -> str:
        out = [
            banner(
                schema_version,
                source,
                "ACP schema types: attrs classes, aliases and unions.\n\n"
                "Classes are frozen, slotted and keyword-only; attributes are the snake_case\n"
                "forms of the wire names, and ``_meta`` is ``meta``. Each class ends with\n"
                "``extra_``: the wire keys its typed fields do not carry (unknown keys, an\n"
                "explicit ``null`` where absent means the same, an explicitly sent default),\n"
                "written back on output and left out of ``==`` and ``repr``. A union alias\n"
                "lists its member classes and its ``Unknown...`` class.",
            )
        ]
        out.append("from __future__ import annotations\n")
        out.append("from collections.abc import Mapping")
        out.append("from typing import Any, Literal, TypeAlias\n")
        out.append("import attrs\n")
        out.append("from acp_trio.schema._runtime import EMPTY, UNSET, UnsetType\n")
        names = sorted(
            list(self.m.aliases) + list(self.m.classes) + list(self.m.unions),
        )
        out.append("__all__ = [" + ", ".join(q(n) for n in names) + "]\n")
        out.append(
            "# -- aliases ----------------------------------------------------------------\n"
        )
        for a in self.m.aliases.values():
            out.append(f"{a.name}: TypeAlias = {a.annotation}")
        out.append(
            "\n# -- classes ----------------------------------------------------------------\n"
        )
        for c in class_order(self.m):
            for f in c.fields:
                t = resolve(f.type, self.m)
                if f.has_default and t.kind == "class" and t.ref:
                    const = f"_DEFAULT_{c.name}_{f.attr}"
                    self.defaults[(c.name, f.wire)] = const
                    out.append(f"{const} = {self.default_object(t.ref, f.default)}")
            out.extend(self.emit_class(c))
        out.append(
            "\n# -- unions -----------------------------------------------------------------\n"
        )
        for u in self.m.unions.values():
            if u.branches:
                ordered = sorted(u.branches, key=lambda b: b.kind == "null")  # None goes last
                members = [annotation(b, self.m) for b in ordered]
            else:
                members = u.members
            out.append(f"{u.name}: TypeAlias = {' | '.join(members)}")
        return "\n".join(out) + "\n"

    def emit_class(self, c: ClassDef) -> list[str]:
        base = f"({c.base})" if c.base else ""
        lines = ["", "", "@attrs.frozen(kw_only=True)", f"class {c.name}{base}:"]
        lines.append(f'    """{self.docstring(c)}"""')
        lines.append("")
        if c.unknown_of:
            lines.append("    raw: dict[str, Any]")
            return lines
        if c.base:
            return lines
        for f in c.fields:
            d = self.field_default(c, f)
            ann = self.field_annotation(f)
            lines.append(f"    {f.attr}: {ann}" + (f" = {d}" if d else ""))
        extra = "attrs.field(default=EMPTY, eq=False, repr=False)"
        lines.append(f"    {EXTRA_ATTR}: Mapping[str, Any] = {extra}")
        return lines

    def docstring(self, c: ClassDef) -> str:
        link = docs_anchor(self.docs, c.def_name or c.name)
        if c.unknown_of:
            u = self.m.unions[c.unknown_of]
            what = f"with an unknown ``{u.key}``" if u.key else "this schema version does not know"
            head = f"A ``{c.unknown_of}`` {what}; ``raw`` is re-sent unchanged."
            return f"{head}\n\n    Schema: {link}\n    "
        parts = list(self.roles.get(c.name, []))
        for union, key, value in c.variant_of:
            parts.append(f"``{key}: {json.dumps(value)}`` in ``{union}``")
        head = f"ACP ``{c.name}``"
        if parts:
            head += ": " + "; ".join(parts)
        return f"{head}.\n\n    Schema: {link}\n    "

    @property
    def roles(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for meth in self.m.methods:
            names = [meth.params]
            u = self.m.unions.get(meth.params)
            if u is not None:
                names += u.members
            for n in names:
                out.setdefault(n, []).append(f"{meth.kind} params of ``{meth.name}``")
            if meth.result:
                out.setdefault(meth.result, []).append(f"result of ``{meth.name}``")
        return out


# ---------------------------------------------------------------------------------------
# Emission: codec module (the fast path)
# ---------------------------------------------------------------------------------------


class CodecEmitter:
    """Specialised structure/unstructure functions; see the module banner it writes."""

    def __init__(self, m: Model, types_module: str) -> None:
        self.m = m
        self.types_module = types_module
        self.helpers: dict[str, list[str]] = {}
        self.helper_names: dict[str, str] = {}
        self.literal_sets: dict[tuple[str, ...], str] = {}

    # -- naming ---------------------------------------------------------------------------

    def lit_set(self, values: tuple[str, ...]) -> str:
        if values not in self.literal_sets:
            self.literal_sets[values] = f"_L{len(self.literal_sets)}"
        return self.literal_sets[values]

    def s_fn(self, t: TExpr) -> str:
        """Name of a one-argument function that structures ``t`` or raises."""
        t = resolve(t, self.m) if t.kind not in ("class", "union") else t
        if t.kind == "class":
            return f"_s_{t.ref}"
        if t.kind == "union":
            return f"_s_{t.ref}"
        name = self._helper_name(repr(t))
        if name not in self.helpers:
            self.helpers[name] = []  # reserve (recursion)
            body = [f"def {name}(v: Any) -> Any:"]
            body += ["    " + x for x in self.check(t, "v")]
            body.append("    return v")
            self.helpers[name] = body
        return name

    def _helper_name(self, key: str) -> str:
        if key not in self.helper_names:
            self.helper_names[key] = f"_c{len(self.helper_names)}"
        return self.helper_names[key]

    # -- checks (strict conversion of one value, raising Invalid) -------------------------

    def check(self, t: TExpr, v: str) -> list[str]:
        t = resolve(t, self.m) if t.kind not in ("class", "union") else t
        k = t.kind
        if k == "str":
            cond = f"type({v}) is not str"
            if t.min_length:
                cond += f" or len({v}) < {t.min_length}"
            return [f"if {cond}:", "    raise Invalid"]
        if k == "int":
            cond = f"type({v}) is not int"
            if t.minimum is not None:
                cond += f" or {v} < {t.minimum}"
            if t.maximum is not None:
                cond += f" or {v} > {t.maximum}"
            return [f"if {cond}:", "    raise Invalid"]
        if k == "num":
            return [f"if type({v}) is not float and type({v}) is not int:", "    raise Invalid"]
        if k == "bool":
            return [f"if {v} is not True and {v} is not False:", "    raise Invalid"]
        if k == "obj":
            return [f"if type({v}) is not dict:", "    raise Invalid"]
        if k == "any":
            return []
        if k == "lit":
            if t.open:
                return [f"if type({v}) is not str:", "    raise Invalid"]
            return [
                f"if type({v}) is not str or {v} not in {self.lit_set(t.values)}:",
                "    raise Invalid",
            ]
        if k == "union" and self.inline_dispatch(t):
            # the hot path of a tagged union, inlined: one call less per message level
            u = self.m.unions[str(t.ref)]
            key, fn = q(str(u.key)), f"{v}_f"
            return [
                f"{fn} = _T_{u.name}.get({v}.get({key})) if type({v}) is dict else None",
                f"{v} = {fn}({v}, {key}) if {fn} is not None else _s_{u.name}({v})",
            ]
        if k in ("class", "union"):
            return [f"{v} = {self.s_fn(t)}({v})"]
        if k == "list":
            assert t.item is not None
            lines = [f"if type({v}) is not list:", "    raise Invalid"]
            if self.is_plain(t.item):
                inner = self.check(t.item, "i")
                if inner:
                    lines += [f"for i in {v}:"] + ["    " + x for x in inner]
            else:
                lines.append(f"{v} = [{self.s_fn(t.item)}(i) for i in {v}]")
            return lines
        if k == "map":
            assert t.item is not None
            lines = [f"if type({v}) is not dict:", "    raise Invalid"]
            if self.is_plain(t.item):
                inner = self.check(t.item, "i")
                if inner:
                    lines += [f"for i in {v}.values():"] + ["    " + x for x in inner]
            else:
                lines.append(f"{v} = {{k: {self.s_fn(t.item)}(i) for k, i in {v}.items()}}")
            return lines
        raise AssertionError(k)

    def inline_dispatch(self, t: TExpr) -> bool:
        """Tagged unions without a default variant: a non-string tag can only be an error."""
        u = self.m.unions[str(t.ref)]
        return u.key is not None and u.fallback is None

    def is_plain(self, t: TExpr) -> bool:
        """True if a value of type ``t`` is kept as is (checked, not converted)."""
        t = resolve(t, self.m) if t.kind not in ("class", "union") else t
        if t.kind in ("class",):
            return False
        if t.kind == "union":
            u = self.m.unions[str(t.ref)]
            return bool(u.branches) and all(
                self.is_plain(b) for b in u.branches if b.kind != "null"
            )
        if t.kind in ("list", "map"):
            assert t.item is not None
            return self.is_plain(t.item)
        return True

    def u_expr(self, t: TExpr, v: str) -> str:
        """Expression unstructuring ``v`` of type ``t``."""
        if self.is_plain(t):
            return v
        t = resolve(t, self.m) if t.kind not in ("class", "union") else t
        if t.kind in ("class", "union"):
            return f"_u_{t.ref}({v})"
        assert t.item is not None
        if t.kind == "list":
            return f"[{self.u_expr(t.item, 'i')} for i in {v}]"
        return f"{{k: {self.u_expr(t.item, 'i')} for k, i in {v}.items()}}"

    # -- classes --------------------------------------------------------------------------

    def residue_spec(self, fields: Iterable[Field]) -> str:
        known = sorted(f.wire for f in fields if not f.flatten)
        nullable = sorted(
            f.wire for f in fields if f.nullable and not f.null_clears and not f.flatten
        )
        defaults = {
            f.wire: f.default
            for f in fields
            if f.has_default and resolve(f.type, self.m).kind != "class"
        }
        return (
            "(frozenset({" + ", ".join(q(k) for k in known) + "}), "
            "frozenset({" + ", ".join(q(k) for k in nullable) + "}), " + py_literal(defaults) + ")"
        )

    def field_block(self, c: ClassDef, f: Field) -> list[str]:
        """Lines that read ``f`` from ``d`` into ``v_<attr>``, counting present keys in ``n``."""
        v = f"v_{f.attr}"
        where = q(f"{c.name}.{f.wire}")
        t = f.type
        if f.flatten:
            return [f"{v}, k = _sf_{t.ref}(d)", "n += k"]
        rt = resolve(t, self.m) if t.kind not in ("class", "union") else t
        check = self.check(t, v)
        default_py = self.default_value_expr(c, f)

        def guarded(body: list[str], fallback: str) -> list[str]:
            """``body`` with the field's leniency applied."""
            if not f.lenient:
                return body
            if f.skip and rt.kind == "list" and rt.item is not None and not self.is_plain(rt.item):
                conv = self.s_fn(rt.item)
                return [
                    f"if type({v}) is not list:",
                    f"    {v} = lenient({where}, {v}, {fallback})",
                    "else:",
                    "    try:",
                    f"        {v} = [{conv}(i) for i in {v}]",
                    "    except ERRORS:",
                    f"        {v} = skip_items({v}, {conv}, {where})",
                ]
            if f.skip and rt.kind == "list" and rt.item is not None:
                conv = self.s_fn(rt.item)
                item_check = self.check(rt.item, "i")
                if not item_check:
                    return [
                        f"if type({v}) is not list:",
                        f"    {v} = lenient({where}, {v}, {fallback})",
                    ]
                return [
                    f"if type({v}) is not list:",
                    f"    {v} = lenient({where}, {v}, {fallback})",
                    "else:",
                    "    try:",
                    f"        for i in {v}:",
                    *["            " + x for x in item_check],
                    "    except ERRORS:",
                    f"        {v} = skip_items({v}, {conv}, {where})",
                ]
            if len(body) == 2 and body[1].strip() == "raise Invalid":
                return [body[0], f"    {v} = lenient({where}, {v}, {fallback})"]
            return (
                ["try:"]
                + ["    " + x for x in body]
                + ["except ERRORS:", f"    {v} = lenient({where}, {v}, {fallback})"]
            )

        if f.required and not f.lenient:
            return [f"{v} = d[{q(f.wire)}]", *check, "n += 1"]
        if f.required:  # required with default-on-error: missing or malformed -> default
            return [
                f"{v} = d.get({q(f.wire)})",
                f"if {v} is None:",
                f"    {v} = lenient({where}, {v}, [])",
                "else:",
                "    n += 1",
                *["    " + x for x in guarded(check, "[]")],
            ]
        if f.null_clears:
            inner = guarded(check, "UNSET")
            head = [f"{v} = d.get({q(f.wire)}, UNSET)", f"if {v} is not UNSET:", "    n += 1"]
            if len(inner) == 2 and inner[0].startswith("if "):  # one test: merge the ifs
                return [
                    *head,
                    f"if {v} is not UNSET and {v} is not None and ({inner[0][3:-1]}):",
                    inner[1],
                ]
            return [*head, f"    if {v} is not None:", *["        " + x for x in inner]]
        if f.has_default:
            if rt.kind == "class":
                return [
                    f"{v} = d.get({q(f.wire)})",
                    f"if {v} is None:",
                    f"    {v} = {default_py}",
                    "else:",
                    "    n += 1",
                    *["    " + x for x in guarded(check, default_py)],
                ]
            counted = (
                f"if {v}:"
                if isinstance(f.default, (list, dict))
                else f"if {self.differs(v, f.default)}:"
            )
            return [
                f"{v} = d.get({q(f.wire)})",
                f"if {v} is None:",
                f"    {v} = {default_py}",
                "else:",
                *["    " + x for x in guarded(check, default_py)],
                f"    {counted}",
                "        n += 1",
            ]
        if rt.kind == "any":
            return [f"{v} = d.get({q(f.wire)})", f"if {v} is not None:", "    n += 1"]
        return [
            f"{v} = d.get({q(f.wire)})",
            f"if {v} is not None:",
            "    n += 1",
            *["    " + x for x in guarded(check, "None")],
        ]

    @staticmethod
    def differs(v: str, default: Any) -> str:
        op = "is not" if default is None or isinstance(default, bool) else "!="
        return f"{v} {op} {py_literal(default)}"

    def default_value_expr(self, c: ClassDef, f: Field) -> str:
        if not f.has_default:
            return "None"
        rt = resolve(f.type, self.m)
        if rt.kind == "class":
            return f"_DEFAULT_{c.name}_{f.attr}"
        if isinstance(f.default, list):
            return "[]"
        if isinstance(f.default, dict):
            return "{}"
        return py_literal(f.default)

    def emit_class(self, c: ClassDef) -> list[str]:
        if c.unknown_of:
            return [
                "",
                "",
                f"def _s_{c.name}(d: Any, t: str | None = None) -> {c.name}:",
                "    if type(d) is not dict:",
                "        raise Invalid",
                f"    return {c.name}(raw=d)",
                "",
                "",
                f"def _u_{c.name}(o: {c.name}) -> dict[str, Any]:",
                "    return dict(o.raw)",
            ]
        lines: list[str] = []
        real = c if not c.base else self.m.classes[c.base]
        fields = real.fields
        # setters
        for f in fields:
            lines.append(f"_set_{c.name}_{f.attr} = setter({c.name}, {q(f.attr)})")
        lines.append(f"_set_{c.name}_extra = setter({c.name}, {q(EXTRA_ATTR)})")
        lines.append(f"_R_{c.name}: ResidueSpec = {self.residue_spec(fields)}")
        flat = [f for f in fields if f.flatten]
        if flat:
            u = self.m.unions[str(flat[0].type.ref)]
            entries = []
            for b in u.branches:
                bc = self.m.classes[str(b.ref)]
                entries.append(f"{bc.name}: {self.residue_spec(list(fields) + bc.fields)}")
            lines.append(f"_RF_{c.name}: dict[type, ResidueSpec] = {{{', '.join(entries)}}}")
        # structure body
        lines += ["", "", f"def _s_{c.name}(d: Any, t: str | None = None) -> {c.name}:"]
        body = ["if type(d) is not dict:", "    raise Invalid", "n = 0 if t is None else 1"]
        for f in fields:
            body += self.field_block(real, f)
        body.append(f"o = _new({c.name})")
        for f in fields:
            body.append(f"_set_{c.name}_{f.attr}(o, v_{f.attr})")
        spec = f"_RF_{c.name}[type(v_{flat[0].attr})]" if flat else f"_R_{c.name}"
        body.append(f"_set_{c.name}_extra(o, EMPTY if len(d) == n else residue(d, t, {spec}))")
        body.append("return o")
        lines += ["    " + x for x in body]
        if c.flatten_branch:
            lines += ["", "", f"def _sk_{c.name}(d: dict[str, Any]) -> tuple[{c.name}, int]:"]
            body = ["n = 0"]
            for f in fields:
                body += self.field_block(real, f)
            body.append(f"o = _new({c.name})")
            for f in fields:
                body.append(f"_set_{c.name}_{f.attr}(o, v_{f.attr})")
            body.append(f"_set_{c.name}_extra(o, EMPTY)")
            body.append("return o, n")
            lines += ["    " + x for x in body]
        if c.tag:
            key, value = c.tag
            lines += [
                "",
                "",
                f"def _h_{c.name}(d: Any) -> {c.name}:",
                f"    if type(d) is dict and {q(key)} in d:",
                f"        if d[{q(key)}] != {q(value)}:",
                "            raise Invalid",
                f"        return _s_{c.name}(d, {q(key)})",
                f"    return _s_{c.name}(d)",
            ]
        # unstructure
        lines += ["", "", f"def _f_{c.name}(o: {c.name}, d: dict[str, Any]) -> dict[str, Any]:"]
        body = []
        for f in fields:
            body += self.emit_out_field(real, f)
        body += [f"x = o.{EXTRA_ATTR}", "if x:", "    merge_extra(d, x)", "return d"]
        lines += ["    " + x for x in body]
        init = f"{{{q(c.tag[0])}: {q(c.tag[1])}}}" if c.tag else "{}"
        lines += [
            "",
            "",
            f"def _u_{c.name}(o: {c.name}) -> dict[str, Any]:",
            f"    return _f_{c.name}(o, {init})",
        ]
        return lines

    def emit_out_field(self, c: ClassDef, f: Field) -> list[str]:
        a = f"o.{f.attr}"
        if f.flatten:
            return [f"_fl_{f.type.ref}({a}, d)"]
        w = q(f.wire)
        if f.required:
            return [f"d[{w}] = {self.u_expr(f.type, a)}"]
        v = f"v_{f.attr}"
        rt = resolve(f.type, self.m) if f.type.kind not in ("class", "union") else f.type
        if f.null_clears:
            return [
                f"{v} = {a}",
                f"if {v} is not UNSET:",
                f"    d[{w}] = None if {v} is None else {self.u_expr(f.type, v)}",
            ]
        if f.has_default:
            if rt.kind == "class":
                cond = f"{v} is not {self.default_value_expr(c, f)}"
            elif isinstance(f.default, (list, dict)):
                cond = v
            else:
                cond = self.differs(v, f.default)
            # typed as Any: a single-value Literal default would make mypy call the test unreachable
            decl = f"{v} = {a}" if rt.kind == "class" else f"{v}: Any = {a}"
            return [decl, f"if {cond}:", f"    d[{w}] = {self.u_expr(f.type, v)}"]
        return [f"{v} = {a}", f"if {v} is not None:", f"    d[{w}] = {self.u_expr(f.type, v)}"]

    # -- unions ---------------------------------------------------------------------------

    def emit_union(self, u: UnionDef) -> list[str]:
        if u.branches:
            return self.emit_structural(u)
        key = q(str(u.key))
        lines = [
            "",
            f"_T_{u.name}: dict[Any, Callable[[Any, str], {u.name}]] = {{"
            + ", ".join(f"{q(tag)}: _s_{cls}" for tag, cls in u.tags.items())
            + "}",
        ]
        body = [
            "if type(d) is not dict:",
            "    raise Invalid",
            f"tag = d.get({key})",
            "if type(tag) is str:",
            f"    f = _T_{u.name}.get(tag)",
            "    if f is not None:",
            f"        return f(d, {key})",
        ]
        if u.other or not u.fallback:
            body.append(f"    return {u.unknown}(raw=d)")
        else:
            body += [
                "    try:",
                f"        return _s_{u.fallback}(d)",
                "    except ERRORS:",
                f"        return {u.unknown}(raw=d)",
            ]
        body.append(f"return _s_{u.fallback}(d)" if u.fallback else "raise Invalid")
        lines += ["", "", f"def _s_{u.name}(d: Any) -> {u.name}:"] + ["    " + x for x in body]
        # unstructure: type -> function (adds the tag for members that do not carry it)
        entries = []
        for tag, cls in u.tags.items():
            c = self.m.classes[cls]
            if c.tag == (u.key, tag):
                entries.append(f"{cls}: _u_{cls}")
            else:
                fn = f"_u_{u.name}_{cls}"
                lines += [
                    "",
                    "",
                    f"def {fn}(o: {cls}) -> dict[str, Any]:",
                    f"    return _f_{cls}(o, {{{key}: {q(tag)}}})",
                ]
                entries.append(f"{cls}: {fn}")
        if u.fallback:
            entries.append(f"{u.fallback}: _u_{u.fallback}")
        entries.append(f"{u.unknown}: _u_{u.unknown}")
        lines += [
            "",
            f"_UT_{u.name}: dict[type, Callable[[Any], dict[str, Any]]] = {{"
            + ", ".join(entries)
            + "}",
            "",
            "",
            f"def _u_{u.name}(o: {u.name}) -> dict[str, Any]:",
            f"    f = _UT_{u.name}.get(type(o))",
            "    if f is None:",
            f"        raise TypeError(f'{{type(o).__name__}} is not a {u.name}')",
            "    return f(o)",
        ]
        return lines

    def predicate(self, t: TExpr, v: str) -> str:
        t = resolve(t, self.m) if t.kind not in ("class", "union", "null") else t
        k = t.kind
        if k == "null":
            return f"{v} is None"
        if k == "int":
            return f"type({v}) is int"
        if k == "num":
            return f"(type({v}) is float or type({v}) is int)"
        if k in ("str", "lit"):
            return f"type({v}) is str"
        if k == "bool":
            return f"({v} is True or {v} is False)"
        if k == "class":
            req = [
                f.wire for f in self.m.classes[str(t.ref)].fields if f.required and not f.flatten
            ]
            return " and ".join([f"type({v}) is dict"] + [f"{q(r)} in {v}" for r in req])
        if k == "list":
            assert t.item is not None
            item = self.predicate(t.item, f"{v}[0]")
            return f"type({v}) is list and (not {v} or ({item}))"
        raise SystemExit(f"no structural predicate for {t}")

    def emit_structural(self, u: UnionDef) -> list[str]:
        lines: list[str] = []
        real = [b for b in u.branches]
        flatten = u.name in {
            f.type.ref for c in self.m.classes.values() for f in c.fields if f.flatten
        }
        body = [f"r: {u.name}"]
        for b in real:
            body.append(f"if {self.predicate(b, 'd')}:")
            if b.kind == "null":
                body.append("    return None")
            elif b.kind in ("class", "union"):
                body += [f"    r = {self.s_fn(b)}(d)", "    return r"]
            else:
                body += ["    " + x for x in self.check(b, "d")]
                body += ["    r = d", "    return r"]
        body.append("raise Invalid")
        lines += ["", "", f"def _s_{u.name}(d: Any) -> {u.name}:"] + ["    " + x for x in body]
        if flatten:
            body = []
            for b in real:
                body.append(f"if {self.predicate(b, 'd')}:")
                body.append(f"    return _sk_{b.ref}(d)")
            body.append("raise Invalid")
            lines += ["", "", f"def _sf_{u.name}(d: dict[str, Any]) -> tuple[{u.name}, int]:"]
            lines += ["    " + x for x in body]
            lines += [
                "",
                "",
                f"def _fl_{u.name}(o: {u.name}, d: dict[str, Any]) -> None:",
                "    d.update(_u_" + u.name + "(o))",
            ]
        # unstructure
        if self.is_plain(TExpr("union", ref=u.name)):
            lines += ["", "", f"def _u_{u.name}(o: {u.name}) -> Any:", "    return o"]
            return lines
        body = []
        for b in real:
            if b.kind == "class":
                body += [f"if type(o) is {b.ref}:", f"    return _u_{b.ref}(o)"]
        items = [b.item for b in real if b.kind == "list" and b.item is not None]
        if items:
            body += ["if type(o) is list:", f"    return [_ui_{u.name}(i) for i in o]"]
            sub = []
            for it in items:
                sub += [f"if type(i) is {it.ref}:", f"    return _u_{it.ref}(i)"]
            sub.append(f"raise TypeError(f'{{type(i).__name__}} is not an item of {u.name}')")
            lines += ["", "", f"def _ui_{u.name}(i: Any) -> Any:"] + ["    " + x for x in sub]
        body.append(f"raise TypeError(f'{{type(o).__name__}} is not a {u.name}')")
        lines += ["", "", f"def _u_{u.name}(o: {u.name}) -> Any:"] + ["    " + x for x in body]
        return lines

    # -- module ---------------------------------------------------------------------------

    def emit(self, schema_version: str, source: str) -> str:
        parts: list[str] = []
        for c in class_order(self.m):
            parts += self.emit_class(c)
        for u in self.m.unions.values():
            parts += self.emit_union(u)
        # literal checkers for Literal aliases and the public registries
        registry_s, registry_u, registry_ua = [], [], []
        for a in self.m.aliases.values():
            if a.type.kind == "lit":
                registry_s.append(f"{a.name}: {self.s_fn(a.type)}")
        for c in self.m.classes.values():
            registry_s.append(f"{c.name}: _h_{c.name}" if c.tag else f"{c.name}: _s_{c.name}")
            registry_u.append(f"{c.name}: _u_{c.name}")
        for u in self.m.unions.values():
            if len(u.members) == 1 and not u.branches:
                continue
            if u.branches and len(u.branches) == 1 and u.branches[0].kind == "class":
                continue
            registry_s.append(f"{u.name}: _s_{u.name}")
            registry_ua.append(f"{u.name}: _u_{u.name}")
        helpers = []
        for body in self.helpers.values():
            helpers += ["", "", *body]
        head = [
            banner(
                schema_version,
                source,
                "ACP schema codec: specialised structure and unstructure functions.\n\n"
                "One ``_s_<Class>(d, t)`` per class reads a decoded JSON object with direct key\n"
                "access and builds the instance through its slot setters; one ``_u_<Class>(o)``\n"
                "writes it back. ``t`` is the discriminator key already checked by a union, so\n"
                "it is not mistaken for an unknown key. Any problem raises at once; the slow\n"
                "validator (``acp_trio.schema._validate``) then explains it.",
                noqa="F403, F405",
            ),
            "from __future__ import annotations\n",
            "from collections.abc import Callable",
            "from typing import Any\n",
            f"from {self.types_module} import *",
            f"from {self.types_module} import {', '.join(sorted(self.private_defaults()))}"
            if self.private_defaults()
            else "",
            "from acp_trio.schema._runtime import ("
            "EMPTY, ERRORS, UNSET, Invalid, ResidueSpec, lenient, merge_extra, residue, setter, "
            "skip_items)\n",
            "_new = object.__new__\n",
        ]
        lits = [
            f"{name} = frozenset({{{', '.join(q(v) for v in values)}}})"
            for values, name in self.literal_sets.items()
        ]
        tail = [
            "",
            "#: Public type -> fast structure function (raises on any problem).",
            "STRUCTURE: dict[Any, Any] = {" + ", ".join(registry_s) + "}",
            "",
            "#: Class -> fast unstructure function.",
            "UNSTRUCTURE: dict[type, Any] = {" + ", ".join(registry_u) + "}",
            "",
            "#: Union alias -> unstructure function (adds the tag a member class may not carry).",
            "UNSTRUCTURE_AS: dict[Any, Any] = {" + ", ".join(registry_ua) + "}",
        ]
        return "\n".join(head + lits + helpers + parts + tail) + "\n"

    def private_defaults(self) -> list[str]:
        out = []
        for c in self.m.classes.values():
            for f in c.fields:
                if f.has_default and resolve(f.type, self.m).kind == "class":
                    out.append(f"_DEFAULT_{c.name}_{f.attr}")
        return out


# ---------------------------------------------------------------------------------------
# Emission: tables module (data) and methods module
# ---------------------------------------------------------------------------------------


def texpr_literal(t: TExpr, m: Model) -> str:
    if t.kind in ("class",):
        return f'("class", {t.ref})'
    if t.kind == "union":
        return f'("union", {q(str(t.ref))})'
    t = resolve(t, m)
    if t.kind == "class":
        return f'("class", {t.ref})'
    if t.kind == "union":
        return f'("union", {q(str(t.ref))})'
    if t.kind == "str":
        return f'("str", {t.min_length})'
    if t.kind == "int":
        return f'("int", {t.minimum}, {t.maximum})'
    if t.kind == "lit":
        if t.open:
            return '("str", None)'
        return '("lit", (' + ", ".join(q(v) for v in t.values) + ",))"
    if t.kind in ("list", "map"):
        assert t.item is not None
        return f'("{t.kind}", {texpr_literal(t.item, m)})'
    if t.kind == "null":
        return '("null",)'
    return f'("{t.kind}",)'


def emit_tables(
    m: Model, codec: CodecEmitter, types_module: str, schema_version: str, source: str
) -> str:
    out = [
        banner(
            schema_version,
            source,
            "ACP schema tables: unions, leniency and per-class field specs (data only).\n\n"
            "The slow validator walks these to explain a failed structure call; they are\n"
            "also public knowledge for tools (which tag maps to which class, which fields\n"
            "fall back to their default when malformed).",
            noqa="F403, F405",
        ),
        "from __future__ import annotations\n",
        "from collections.abc import Mapping",
        "from typing import Any\n",
        f"from {types_module} import *",
        "from acp_trio.schema._runtime import ClassSpec, FieldSpec, UnionSpec\n",
    ]
    flag_names = [
        ("required", "1"),
        ("nullable", "2"),
        ("lenient", "4"),
        ("skip", "8"),
        ("null_clears", "16"),
        ("flatten", "32"),
        ("has_default", "64"),
    ]
    specs = []
    lenient_rows, skip_rows = [], []
    for c in m.classes.values():
        if c.unknown_of:
            continue
        real = c if not c.base else m.classes[c.base]
        fs = []
        for f in real.fields:
            flags = sum(int(v) for n, v in flag_names if getattr(f, n))
            fs.append(f"FieldSpec({q(f.wire)}, {q(f.attr)}, {texpr_literal(f.type, m)}, {flags})")
        tag = f"({q(c.tag[0])}, {q(c.tag[1])})" if c.tag else "None"
        flat = [f for f in real.fields if f.flatten]
        extra = ""
        if flat:
            u = m.unions[str(flat[0].type.ref)]
            entries = []
            for b in u.branches:
                bc = m.classes[str(b.ref)]
                entries.append(f"{bc.name}: {codec.residue_spec(list(real.fields) + bc.fields)}")
            extra = ", flatten_residue={" + ", ".join(entries) + "}"
        specs.append(
            f"    {c.name}: ClassSpec({c.name}, {tag}, ({', '.join(fs)}{',' if fs else ''}), "
            f"{codec.residue_spec(real.fields)}{extra}),"
        )
        len_ = [f.wire for f in real.fields if f.lenient]
        if len_:
            lenient_rows.append(f"    {c.name}: frozenset({{{', '.join(q(x) for x in len_)}}}),")
        sk = [f.wire for f in real.fields if f.skip]
        if sk:
            skip_rows.append(f"    {c.name}: frozenset({{{', '.join(q(x) for x in sk)}}}),")
    unions = []
    for u in m.unions.values():
        if u.branches:
            br = ", ".join(texpr_literal(b, m) for b in u.branches)
            unions.append(f"    {q(u.name)}: UnionSpec({q(u.name)}, branches=({br},)),")
        else:
            tags = ", ".join(f"{q(k)}: {v}" for k, v in u.tags.items())
            unions.append(
                f"    {q(u.name)}: UnionSpec({q(u.name)}, key={q(str(u.key))}, tags={{{tags}}}, "
                f"fallback={u.fallback}, unknown={u.unknown}, other={u.other}),"
            )
    targets = []
    for a in m.aliases.values():
        if a.type.kind == "lit":
            targets.append(f"    {a.name}: {texpr_literal(a.type, m)},")
    for c in m.classes.values():
        targets.append(f'    {c.name}: ("class", {c.name}),')
    for u in m.unions.values():
        if u.branches and len(u.branches) == 1 and u.branches[0].kind == "class":
            continue  # the alias is the class itself
        targets.append(f'    {u.name}: ("union", {q(u.name)}),')
    kinds = [
        f"    {q(k)}: ({q(v[0])}, {q(v[1]) if v[1] else 'None'})," for k, v in m.def_kinds.items()
    ]
    out += [
        "#: Class -> field specs.",
        "CLASSES: Mapping[type, ClassSpec] = {",
        *specs,
        "}\n",
        "#: Union name -> how it is told apart (tag table, default variant, Unknown class).",
        "UNIONS: Mapping[str, UnionSpec] = {",
        *unions,
        "}\n",
        "#: Public type -> its type expression, for explaining a failed structure call.",
        "TARGETS: Mapping[Any, tuple[Any, ...]] = {",
        *targets,
        "}\n",
        "#: Wire names of the fields that fall back to their default when malformed.",
        "LENIENT_FIELDS: Mapping[type, frozenset[str]] = {",
        *lenient_rows,
        "}\n",
        "#: Wire names of the list fields whose malformed items are dropped.",
        "SKIP_INVALID_ITEMS: Mapping[type, frozenset[str]] = {",
        *skip_rows,
        "}\n",
        "#: Every schema def -> (kind, Python name): class, alias, union, merged (into the",
        "#: named union's variant classes) or routing (JSON-RPC envelopes, not generated).",
        "DEFS: Mapping[str, tuple[str, str | None]] = {",
        *kinds,
        "}",
    ]
    return "\n".join(out) + "\n"


def emit_methods(m: Model, types_module: str, schema_version: str, source: str) -> str:
    rows = []
    for meth in m.methods:
        result = meth.result or "None"
        rname = q(meth.result) if meth.result else "None"
        rows.append(
            f"    MethodInfo({q(meth.name)}, {q(meth.kind)}, {q(meth.handled_by)}, "
            f"{meth.params}, {result}, {q(meth.params)}, {rname}),"
        )
    return (
        banner(
            schema_version,
            source,
            "ACP method table: wire name -> params, result, receiving side.",
            noqa="F403, F405",
        )
        + "\n".join(
            [
                "from __future__ import annotations\n",
                "from collections.abc import Mapping",
                "from typing import Final\n",
                f"from {types_module} import *",
                "from acp_trio.schema._runtime import MethodInfo\n",
                f"PROTOCOL_VERSION: Final = {m.protocol_version}",
                f"SCHEMA_VERSION: Final = {q(schema_version)}\n",
                "_ALL: tuple[MethodInfo, ...] = (",
                *rows,
                ")\n",
                "#: Requests by wire name.",
                "REQUESTS: Mapping[str, MethodInfo] = "
                '{m.name: m for m in _ALL if m.kind == "request"}',
                "#: Notifications by wire name.",
                "NOTIFICATIONS: Mapping[str, MethodInfo] = "
                '{m.name: m for m in _ALL if m.kind == "notification"}',
                "#: Every method by wire name; a name that is both (unstable ``mcp/message``) maps",
                "#: to its request entry here and to its notification in ``NOTIFICATIONS``.",
                "METHODS: Mapping[str, MethodInfo] = {**NOTIFICATIONS, **REQUESTS}",
            ]
        )
        + "\n"
    )


# ---------------------------------------------------------------------------------------
# Driver
# ---------------------------------------------------------------------------------------


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


def detect_schema_version(schema_path: Path) -> str | None:
    """The schema release, from the snapshot's README or an upstream checkout's Cargo.toml."""
    readme = schema_path.parent.parent / "README.md"
    if readme.is_file():
        found = re.search(r"v1 schema version: `([^`]+)`", readme.read_text(encoding="utf-8"))
        if found:
            return found.group(1)
    cargo = schema_path.parent / "Cargo.toml"  # upstream keeps schema/v1/Cargo.toml beside it
    if cargo.is_file():
        found = re.search(r'^version\s*=\s*"([^"]+)"', cargo.read_text(encoding="utf-8"), re.M)
        if found:
            return found.group(1)
    return None


def generate(
    schema_path: Path, meta_path: Path, schema_version: str, flavour: str, docs: str
) -> dict[str, str]:
    """Return {file name: formatted source} for one schema flavour."""
    schema = json.loads(schema_path.read_text(encoding="utf-8"))
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    model = analyze(schema, meta)
    prefix = "_generated_" + ("unstable_" if flavour == "unstable" else "")
    types_module = f"acp_trio.schema.{prefix}types"
    source = f"{schema_path.name}, {meta_path.name}"
    te = TypesEmitter(model, docs)
    ce = CodecEmitter(model, types_module)
    files = {
        f"{prefix}types.py": te.emit(schema_version, source),
        f"{prefix}codec.py": ce.emit(schema_version, source),
    }
    files[f"{prefix}tables.py"] = emit_tables(model, ce, types_module, schema_version, source)
    files[f"{prefix}methods.py"] = emit_methods(model, types_module, schema_version, source)
    return {name: ruff_format(src, f"acp_trio/schema/{name}") for name, src in files.items()}


def generate_all(args: argparse.Namespace) -> dict[str, str]:
    schema = Path(args.schema)
    meta = Path(args.meta) if args.meta else schema.with_name("meta.json")
    version = args.schema_version or detect_schema_version(schema) or "unknown"
    out = generate(schema, meta, version, "stable", DOCS_URL)
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
            out.update(generate(unstable, umeta, version, "unstable", UNSTABLE_DOCS_URL))
    return out


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--schema", default=str(SCHEMA_DIR / "schema.json"), help="stable schema.json")
    p.add_argument("--meta", help="meta.json (default: next to --schema)")
    p.add_argument("--unstable-schema", help="default: schema.unstable.json next to --schema")
    p.add_argument("--unstable-meta", help="default: meta.unstable.json next to --schema")
    p.add_argument("--no-unstable", action="store_true", help="skip the unstable module")
    p.add_argument(
        "--schema-version",
        help="default: from the README beside the schema folder, or a Cargo.toml next to it",
    )
    p.add_argument("--out", default=str(OUT_DIR), help="output package directory")
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
            path.write_text(src, encoding="utf-8")
    if args.check and stale:
        print("stale generated files: " + ", ".join(stale), file=sys.stderr)
        return 1
    for name in stale:
        print(f"wrote {out_dir / name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
