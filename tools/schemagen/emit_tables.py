"""Emit the tables module (union, leniency and field tables) and the methods module.

Data only: the slow validator walks the tables to explain a failed structure
call, and tools read them; the methods module is the method table (wire name ->
params, result, receiving side) plus the protocol and schema versions.
"""

from __future__ import annotations

from .delta import Delta
from .emit_common import banner, flatten_residues, q, residue_spec
from .model import Model, TExpr, resolve


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
    m: Model, types_module: str, schema_version: str, source: str, delta: Delta | None = None
) -> str:
    reused = delta.reused if delta else frozenset()
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
    if reused and delta:  # an unstable module's reused rows: the stable tables' own
        package, _, module = delta.tables_module.rpartition(".")
        out += [
            f"from {package} import {module} as _base",
            f"from {types_module} import _REUSED, _REUSED_NAMES\n",
        ]

    def picked(table: str, key: str = "_REUSED") -> list[str]:
        if not reused:
            return []
        return [f"    **{{k: v for k, v in _base.{table}.items() if k in {key}}},"]

    flag_names = [
        ("required", "1"),
        ("nullable", "2"),
        ("lenient", "4"),
        ("skip", "8"),
        ("null_clears", "16"),
        ("flatten", "32"),
        ("has_default", "64"),
        ("null_default", "128"),
    ]
    specs = []
    lenient_rows, skip_rows, null_rows = [], [], []
    for c in m.classes.values():
        if c.unknown_of or c.name in reused:
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
            entries = flatten_residues(m, real.fields, flat[0])
            extra = ", flatten_residue={" + ", ".join(entries) + "}"
        specs.append(
            f"    {c.name}: ClassSpec({c.name}, {tag}, ({', '.join(fs)}{',' if fs else ''}), "
            f"{residue_spec(m, real.fields)}{extra}),"
        )
        len_ = [f.wire for f in real.fields if f.lenient]
        if len_:
            lenient_rows.append(f"    {c.name}: frozenset({{{', '.join(q(x) for x in len_)}}}),")
        sk = [f.wire for f in real.fields if f.skip]
        if sk:
            skip_rows.append(f"    {c.name}: frozenset({{{', '.join(q(x) for x in sk)}}}),")
        nd = [f.wire for f in real.fields if f.null_default]
        if nd:
            null_rows.append(f"    {c.name}: frozenset({{{', '.join(q(x) for x in nd)}}}),")
    unions = []
    for u in m.unions.values():
        if u.name in reused:
            continue
        if u.branches:
            br = ", ".join(texpr_literal(b, m) for b in u.branches)
            unions.append(f"    {q(u.name)}: UnionSpec({q(u.name)}, branches=({br},)),")
        else:
            tags = ", ".join(f"{q(k)}: {v}" for k, v in u.tags.items())
            nested = ", ".join(f"{q(k)}: {q(v)}" for k, v in u.nested.items())
            unions.append(
                f"    {q(u.name)}: UnionSpec({q(u.name)}, key={q(str(u.key))}, tags={{{tags}}}, "
                f"fallback={u.fallback}, unknown={u.unknown}, other={u.other}"
                + (f", nested={{{nested}}}" if nested else "")
                + "),"
            )
    targets = []
    for a in m.aliases.values():
        if a.type.kind == "lit" and a.name not in reused:
            targets.append(f"    {a.name}: {texpr_literal(a.type, m)},")
    for c in m.classes.values():
        if c.name not in reused:
            targets.append(f'    {c.name}: ("class", {c.name}),')
    for u in m.unions.values():
        if u.name in reused:
            continue
        if u.branches and len(u.branches) == 1 and u.branches[0].kind == "class":
            continue  # the alias is the class itself
        targets.append(f'    {u.name}: ("union", {q(u.name)}),')
    kinds = [
        f"    {q(k)}: ({q(v[0])}, {q(v[1]) if v[1] else 'None'})," for k, v in m.def_kinds.items()
    ]
    out += [
        "#: Class -> field specs.",
        "CLASSES: Mapping[type, ClassSpec] = {",
        *picked("CLASSES"),
        *specs,
        "}\n",
        "#: Union name -> how it is told apart (tag table, default variant, Unknown class).",
        "UNIONS: Mapping[str, UnionSpec] = {",
        *picked("UNIONS", "_REUSED_NAMES"),
        *unions,
        "}\n",
        "#: Public type -> its type expression, for explaining a failed structure call.",
        "TARGETS: Mapping[Any, tuple[Any, ...]] = {",
        *picked("TARGETS"),
        *targets,
        "}\n",
        "#: Wire names of the fields that fall back to their default when malformed.",
        "LENIENT_FIELDS: Mapping[type, frozenset[str]] = {",
        *picked("LENIENT_FIELDS"),
        *lenient_rows,
        "}\n",
        "#: Wire names of the list fields whose malformed items are dropped.",
        "SKIP_INVALID_ITEMS: Mapping[type, frozenset[str]] = {",
        *picked("SKIP_INVALID_ITEMS"),
        *skip_rows,
        "}\n",
        "#: Wire names of the fields where ``null`` means their default (not nullable ones).",
        "DEFAULT_ON_NULL_FIELDS: Mapping[type, frozenset[str]] = {",
        *picked("DEFAULT_ON_NULL_FIELDS"),
        *null_rows,
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
