"""Emit the codec module: the fast, specialised structure/unstructure functions.

Per class a structure function (direct key access, slot setters, a residue
for unknown keys) and an unstructure function; per union a dispatch on its
tag or, for structural unions, on the value's shape; then the public
``STRUCTURE``/``UNSTRUCTURE``/``UNSTRUCTURE_AS`` registries. Value-level
checks come from :mod:`.codec_values`.
"""

from __future__ import annotations

from typing import Any

from .codec_values import ValueCodec
from .delta import Delta, codec_import_lines
from .emit_common import banner, class_order, flatten_residues, py_literal, q, residue_spec
from .model import ClassDef, Field, Model, TExpr, UnionDef, resolve
from .naming import EXTRA_ATTR


class CodecEmitter(ValueCodec):
    """Specialised structure/unstructure functions; see the module banner it writes."""

    def __init__(self, m: Model, types_module: str, delta: Delta | None = None) -> None:
        super().__init__(m)
        self.types_module = types_module
        self.delta = delta
        self.reused = delta.reused if delta else frozenset()

    # -- classes --------------------------------------------------------------------------

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
            if not body and not f.skip:
                return []  # nothing to check (any JSON value): nothing to fall back from
            if not f.lenient and f.skip and rt.kind == "list" and rt.item is not None:
                # skip-invalid-items alone (v2): the list itself must still be a list
                conv = self.s_fn(rt.item)
                if self.is_plain(rt.item) and not self.check(rt.item, "i"):
                    return [f"if type({v}) is not list:", "    raise Invalid"]
                if self.is_plain(rt.item):
                    convert = ["    for i in " + v + ":"]
                    convert += ["        " + x for x in self.check(rt.item, "i")]
                else:
                    convert = [f"    {v} = [{conv}(i) for i in {v}]"]
                return [
                    f"if type({v}) is not list:",
                    "    raise Invalid",
                    "try:",
                    *convert,
                    "except ERRORS:",
                    f"    {v} = skip_items({v}, {conv}, {where})",
                ]
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
            if f.skip:
                check = guarded(check, "[]")
            if f.null_default:
                check = self.null_to_default(check, v, self.null_default_expr(c, f))
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
            if not inner:
                return head
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
    def null_to_default(check: list[str], v: str, default: str) -> list[str]:
        """``check`` of a required field where ``null`` means the default
        (``x-deserialize-default-on-null``).

        Where the check opens with a type test that raises, the ``null`` test goes
        inside it, so a valid value costs nothing more than without the keyword.
        """
        if len(check) >= 2 and check[0].startswith("if ") and check[1] == "    raise Invalid":
            out = [check[0], f"    if {v} is not None:", "        raise Invalid"]
            out.append(f"    {v} = {default}")
            if len(check) > 2:
                out += ["else:", *["    " + x for x in check[2:]]]
            return out
        return [f"if {v} is None:", f"    {v} = {default}", "else:", *["    " + x for x in check]]

    def null_default_expr(self, c: ClassDef, f: Field) -> str:
        """What ``null`` decodes to in a required field marked default-on-null."""
        if f.has_default:
            return self.default_value_expr(c, f)
        kind = resolve(f.type, self.m).kind
        if kind == "list":
            return "[]"
        if kind in ("map", "obj"):
            return "{}"
        raise SystemExit(f"{c.name}.{f.wire}: no default for x-deserialize-default-on-null")

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
        lines.append(f"_R_{c.name}: ResidueSpec = {residue_spec(self.m, fields)}")
        flat = [f for f in fields if f.flatten]
        if flat:
            entries = flatten_residues(self.m, fields, flat[0])
            lines.append(f"_RF_{c.name}: dict[type, ResidueSpec] = {{{', '.join(entries)}}}")
        # structure body
        lines += ["", "", f"def _s_{c.name}(d: Any, t: str | None = None) -> {c.name}:"]
        body = ["if type(d) is not dict:", "    raise Invalid", "n = 0 if t is None else 1"]
        body += self.exact_block(c, real, fields)
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

    def exact_block(self, c: ClassDef, real: ClassDef, fields: list[Field]) -> list[str]:
        """A shortcut for the usual input, which has exactly the required keys
        (and the tag): no optional field is read and no residue can exist.

        Only for classes with optional fields (else it gains nothing) whose
        required keys must all be present (none lenient) and without a
        flattened field. Whatever it raises, the full path would raise too.
        """
        required = [f for f in fields if f.required]
        if (
            len(required) == len(fields)
            or any(f.flatten or f.lenient or f.skip for f in required)
            or any(f.flatten for f in fields)
        ):
            return []
        body = [f"if len(d) == n + {len(required)}:" if required else "if len(d) == n:"]
        for f in required:
            v = f"v_{f.attr}"
            check = self.check(f.type, v)
            if f.null_default:
                check = self.null_to_default(check, v, self.null_default_expr(real, f))
            body += ["    " + x for x in [f"{v} = d[{q(f.wire)}]", *check]]
        body.append(f"    o = _new({c.name})")
        for f in fields:
            if f.required:
                value = f"v_{f.attr}"
            elif f.null_clears:
                value = "UNSET"
            else:
                value = self.default_value_expr(real, f)
            body.append(f"    _set_{c.name}_{f.attr}(o, {value})")
        body += [f"    _set_{c.name}_extra(o, EMPTY)", "    return o"]
        return body

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
        lines = []
        dispatch = [f"{q(tag)}: _s_{cls}" for tag, cls in u.tags.items()]
        for tag, inner in u.nested.items():
            # the outer tag is not part of the inner variant: drop it, then dispatch again
            fn = f"_sn_{u.name}_{inner}"
            lines += [
                "",
                "",
                f"def {fn}(d: dict[str, Any], t: str) -> {u.name}:",
                "    d = dict(d)",
                "    del d[t]",
                f"    return _s_{inner}(d)",
            ]
            dispatch.append(f"{q(tag)}: {fn}")
        lines += [
            "",
            f"_T_{u.name}: dict[Any, Callable[[Any, str], {u.name}]] = {{"
            + ", ".join(dispatch)
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
        for tag, inner in u.nested.items():
            fn = f"_un_{u.name}_{inner}"
            lines += [
                "",
                "",
                f"def {fn}(o: {inner}) -> dict[str, Any]:",
                f"    d: dict[str, Any] = {{{key}: {q(tag)}}}",
                f"    d.update(_u_{inner}(o))",
                "    return d",
            ]
            entries += [f"{cls}: {fn}" for cls in self.m.unions[inner].members]
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

    def emit_structural(self, u: UnionDef) -> list[str]:
        lines: list[str] = []
        real = [b for b in u.branches]
        flatten = u.name in {
            f.type.ref for c in self.m.classes.values() for f in c.fields if f.flatten
        }
        catch_all = any(b.kind == "any" for b in real)
        body = [f"r: {u.name}"]
        for b in real:
            body.append(f"if {self.predicate(b, 'd')}:")
            if b.kind == "null":
                body.append("    return None")
            elif b.kind in ("class", "union") and catch_all:
                # a value that is not this branch is still the catch-all's (untagged order)
                body += ["    try:", f"        r = {self.s_fn(b)}(d)", "        return r"]
                body += ["    except ERRORS:", "        pass"]
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
        if any(b.kind == "any" for b in real):
            body.append("return o")  # the catch-all: any other JSON value, re-sent as is
        else:
            body.append(f"raise TypeError(f'{{type(o).__name__}} is not a {u.name}')")
        lines += ["", "", f"def _u_{u.name}(o: {u.name}) -> Any:"] + ["    " + x for x in body]
        return lines

    # -- module ---------------------------------------------------------------------------

    def emit(self, schema_version: str, source: str) -> str:
        parts: list[str] = []
        for c in class_order(self.m):
            if c.name not in self.reused:
                parts += self.emit_class(c)
        for u in self.m.unions.values():
            if u.name not in self.reused:
                parts += self.emit_union(u)
        # literal checkers for Literal aliases and the public registries
        registry_s, registry_u, registry_ua = [], [], []
        if self.reused:  # the reused definitions' rows: the stable registries' own
            registry_s.append("**{k: f for k, f in _base.STRUCTURE.items() if k in _REUSED}")
            registry_u.append("**{k: f for k, f in _base.UNSTRUCTURE.items() if k in _REUSED}")
            registry_ua.append("**{k: f for k, f in _base.UNSTRUCTURE_AS.items() if k in _REUSED}")
        for a in self.m.aliases.values():
            if a.type.kind == "lit" and a.name not in self.reused:
                registry_s.append(f"{a.name}: {self.s_fn(a.type)}")
        for c in self.m.classes.values():
            if c.name in self.reused:
                continue
            registry_s.append(f"{c.name}: _h_{c.name}" if c.tag else f"{c.name}: _s_{c.name}")
            registry_u.append(f"{c.name}: _u_{c.name}")
        for u in self.m.unions.values():
            if u.name in self.reused:
                continue
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
            *self.delta_imports(helpers + parts),
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

    def delta_imports(self, own: list[str]) -> list[str]:
        """An unstable codec's imports from the stable one (none for a stable codec)."""
        if self.delta is None:
            return []
        return codec_import_lines("\n".join(own), self.delta, self.types_module)

    def private_defaults(self) -> list[str]:
        out = []
        for c in self.m.classes.values():
            if c.name in self.reused:
                continue
            for f in c.fields:
                if f.has_default and resolve(f.type, self.m).kind == "class":
                    out.append(f"_DEFAULT_{c.name}_{f.attr}")
        return out
