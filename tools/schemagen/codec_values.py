"""Codec building blocks at the level of one value: checks, converters, predicates.

The codec emitter writes one function per class and union; inside them each
field value is checked (or converted) by the code built here: inline checks
for plain values, shared ``_c<N>`` helper functions for nested ones, and the
type predicates that tell a structural union's branches apart.
"""

from __future__ import annotations

from .emit_common import q
from .model import Model, TExpr, resolve


class ValueCodec:
    """Code that checks, structures or unstructures one value of a given type."""

    def __init__(self, m: Model) -> None:
        self.m = m
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

    # -- structural unions: which branch a value belongs to ------------------------------

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
        if k == "any":
            return "True"  # a catch-all branch (v2's "Other" value): keep it last
        raise SystemExit(f"no structural predicate for {t}")
