"""Emit the types module: attrs classes, aliases and union aliases.

The public surface of the generated schema; its banner (written below) says
what a class looks like. Class docstrings carry only the name, the role (method
params/result, union variant) and a link to the upstream schema page.
"""

from __future__ import annotations

import json
from typing import Any

from .delta import Delta
from .emit_common import banner, class_order, py_literal, q
from .model import AliasDef, ClassDef, Field, Model, TExpr, resolve
from .naming import EXTRA_ATTR


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


def docs_anchor(docs: str, name: str) -> str:
    return f"{docs}#{name.lower()}"


class TypesEmitter:
    def __init__(self, m: Model, docs: str, delta: Delta | None = None) -> None:
        self.m = m
        self.docs = docs
        self.defaults: dict[tuple[str, str], str] = {}
        self.delta = delta
        self.reused = delta.reused if delta else frozenset()

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
                "lists its member classes and its ``Unknown...`` class."
                + (
                    f"\n\nA delta over ``{self.delta.types_module}``: the definitions that\n"
                    "are the same there, and so is all they refer to, are imported from it\n"
                    "(``_REUSED_NAMES``), with their codec functions and table rows."
                    if self.delta
                    else ""
                ),
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
        reused = sorted(self.reused)
        if reused:
            imports = ", ".join(reused)
            out.append(f"from {self.delta.types_module} import ({imports})\n")
        out.append("__all__ = [" + ", ".join(q(n) for n in names) + "]\n")
        if self.delta:
            out += [
                "#: The stable definitions this module reuses: the same, and so is all they",
                "#: refer to (the stable classes themselves, their codec and their tables).",
                "_REUSED_NAMES: frozenset[str] = frozenset(("
                + "".join(q(n) + ", " for n in reused)
                + "))",
                "_REUSED: frozenset[Any] = frozenset(globals()[n] for n in _REUSED_NAMES)\n",
            ]
        out.append(
            "# -- aliases ----------------------------------------------------------------\n"
        )
        for a in self.m.aliases.values():
            if a.name in self.reused:
                continue
            if not self.names_a_class(a):
                out.append(f"{a.name}: TypeAlias = {a.annotation}")
        out.append(
            "\n# -- classes ----------------------------------------------------------------\n"
        )
        for c in class_order(self.m):
            if c.name in self.reused:
                continue
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
            if u.name in self.reused:
                continue
            if u.branches:
                ordered = sorted(u.branches, key=lambda b: b.kind == "null")  # None goes last
                members = [annotation(b, self.m) for b in ordered]
            else:
                members = u.members
            out.append(f"{u.name}: TypeAlias = {' | '.join(members)}")
        # other names of a class or union (the unstable InitializeProxyRequest), once it exists
        for a in self.m.aliases.values():
            if self.names_a_class(a) and a.name not in self.reused:
                out.append(f"{a.name}: TypeAlias = {a.annotation}")
        return "\n".join(out) + "\n"

    @staticmethod
    def names_a_class(a: AliasDef) -> bool:
        return a.type.kind in ("class", "union")

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
