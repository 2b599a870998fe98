"""Analysis: turn the schema's ``$defs`` (and its method tables) into a :class:`Model`.

It knows the schema's shapes (JSON Schema 2020-12; tagged variants as a
const tag beside an ``allOf`` payload; ``anyOf`` unions without a
``discriminator``; catch-all "other" branches; nullable optionals): which
defs are aliases, classes, tagged or structural unions, how a union's common
fields merge into its variants, which defs are routing envelopes, and which
params/result types make up the method table. Anything it cannot model exits
with a message rather than guessing.
"""

from __future__ import annotations

import json
from typing import Any

from .analysis_unions import UnionAnalysis
from .model import AliasDef, ClassDef, Field, Method, Model, TExpr, UnionDef
from .naming import (
    EXTRA_ATTR,
    common_prefix,
    common_suffix,
    snake,
)

# Fields where JSON ``null`` means "clear" and absence means "unchanged". The
# schema cannot say this (only its prose does); these get an UNSET default.
NULL_CLEARS: frozenset[tuple[str, str]] = frozenset(
    {
        ("SessionInfoUpdate", "title"),
        ("SessionInfoUpdate", "updatedAt"),
        ("CompactionUpdate", "summary"),
        ("CompactionUpdate", "error"),
        ("CompactionUpdate", "_meta"),
        # unstable: patch fields of a child session and of a cross-session message
        ("SubagentUpdate", "title"),
        ("SubagentUpdate", "description"),
        ("SubagentUpdate", "capabilities"),
        ("SubagentUpdate", "state"),
        ("SubagentUpdate", "cwd"),
        ("SubagentUpdate", "additionalDirectories"),
        ("SubagentUpdate", "_meta"),
        ("SessionMessage", "senderSessionId"),
        ("SessionMessage", "recipientSessionId"),
        ("SessionMessage", "senderMessageId"),
        ("SessionMessage", "recipientMessageId"),
        ("SessionMessage", "content"),
        ("SessionMessage", "_meta"),
    }
)

# v2 session updates that are upserts: every optional field has patch
# semantics (omitted: unchanged, ``null``: cleared, a value: replaced), as
# their descriptions say; all of them get an UNSET default (v2 only: the v1
# defs of the same names treat absent and ``null`` alike).
V2_UPSERTS: frozenset[str] = frozenset(
    {
        "ToolCallUpdate",
        "UserMessage",
        "AgentMessage",
        "AgentThought",
        "TerminalUpdate",
        "SessionInfoUpdate",
        "CompactionUpdate",
        "SubagentUpdate",
        "SessionMessage",
    }
)


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


class Analyzer(UnionAnalysis):
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
        self._nest_members()
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
            # common fields + tagged variants; else a flattened field, or a class whose
            # variants only refine one of its own fields
            return self._tagged(b) and self._refined_tag(d) is None
        return True

    def _refined_tag(self, d: dict[str, Any]) -> str | None:
        """The tag of a def whose tagged variants refine one of its own properties.

        The unstable ``IdleStateUpdate`` declares ``stopReason`` as an optional,
        lenient field, and ``stopReason: "error"`` adds an ``error``. Such a def is a
        class, not a union: the tag stays a plain field (absent, ``null`` or malformed
        all mean "not reported") and the variants' own fields become optional fields.
        """
        b = self._branches(d)
        if "properties" not in d or not b:
            return None
        keys = {tag[0] for tag in map(self._tag_of, b) if tag}
        if len(keys) == 1 and keys <= set(d["properties"]):
            return next(iter(keys))
        return None

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
        same = ref_name(d) if _schema_keys(d) == {"allOf"} else None
        if same is not None:
            target = self.def_texpr(same)
            if target.kind in ("class", "union"):
                return target  # another name for that type (InitializeProxyRequest)
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
        if t.kind in ("class", "union") and t.ref != name:
            self.model.def_kinds[name] = ("alias", name)
            self.model.aliases[name] = AliasDef(name, t, str(t.ref))
            return
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
                null_clears=(owner, wire) in NULL_CLEARS
                or (
                    self.model.protocol_version >= 2
                    and owner in V2_UPSERTS
                    and wire not in required
                ),
                null_default=bool(p.get("x-deserialize-default-on-null")) and not nullable,
            )
            if "default" in p:
                f.has_default, f.default = True, p["default"]
            if f.required and f.nullable:
                if t.kind != "any":
                    raise SystemExit(f"{owner}.{wire}: required and nullable is not supported")
                f.nullable = False  # any JSON value, null among them (MessageMcpResponse.result)
            out.append(f)
        flat = self._flatten_branches(d)
        if flat:
            out.append(self._flatten_field(flat))
        key = self._refined_tag(d)
        if key is not None:
            out = self._merge(out, self._refinement_fields(owner, d, key))
        return out

    def _refinement_fields(self, owner: str, d: dict[str, Any], key: str) -> list[Field]:
        """The fields the variants of a refining def add (see :meth:`_refined_tag`)."""
        out: list[Field] = []
        for b in self._branches(d) or []:
            payload = self._payload(b)
            inline = {k: v for k, v in b.get("properties", {}).items() if k != key}
            fields = self._fields(payload, self.defs[payload]) if payload else []
            fields += self._fields(owner, {"properties": inline})
            for f in fields:
                if f.required or f.flatten:
                    raise SystemExit(f"{owner}: variant field {f.wire} must be optional")
            out += fields
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
        prefix = common_prefix(branches)
        suffix = common_suffix(branches)
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

    # -- methods -------------------------------------------------------------------------

    def _routing_params(self, route: str) -> list[str]:
        params = self.defs[route]["properties"]["params"]["anyOf"][0]["anyOf"]
        return [n for n in (ref_name(p) for p in params) if n and "x-method" in self.defs[n]]

    def _methods(self) -> None:
        results: dict[str, str] = {}
        for route in ("AgentResponse", "ClientResponse", "ProxyResponse"):
            for branch in self.defs.get(route, {}).get("anyOf", []):
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
            ("proxyMethods", "proxy"),
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
            ("ProxyRequest", "request"),  # unstable: proxy chains
            ("ProxyNotification", "notification"),
        ]
        found: dict[tuple[str, str], Method] = {}
        for route, kind in routes:
            if route not in self.defs:
                continue
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
            raise SystemExit(f"{wire} is in no method table (x-method, x-side)")
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


def analyze(schema: dict[str, Any], meta: dict[str, Any]) -> Model:
    return Analyzer(schema, meta).run()
