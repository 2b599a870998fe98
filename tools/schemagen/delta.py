"""The unstable modules as a delta over the stable ones: which definitions they reuse.

An unstable schema repeats most of the stable one. A definition is *reused*
(imported from the stable modules instead of generated again) when its model
is the same in both schemas and so is everything it refers to, transitively:
then the stable class, its codec functions and its table rows are exactly what
the unstable generation would write, and one copy serves both converters.
Only the documentation differs (the link, the "params of" roles), and the
stable one is kept.

The unstable codec imports the stable codec functions its own code calls
(:func:`codec_imports`); its registries and tables take the reused rows from
the stable module's (filtered by :data:`_REUSED` of the unstable types module),
so a converter registers the same hooks as before, from the same fast functions.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from dataclasses import dataclass

from .model import AliasDef, ClassDef, Model, TExpr, UnionDef


@dataclass(frozen=True)
class Base:
    """What an unstable generation reuses from its stable one."""

    model: Model
    package: str  # "acp_trio.schema" or "acp_trio.schema.v2"
    codec_defs: frozenset[str]  # names the stable codec module defines


@dataclass(frozen=True)
class Delta:
    """The stable base of an unstable generation, and the definitions it reuses."""

    base: Base
    reused: frozenset[str]

    @property
    def types_module(self) -> str:
        return f"{self.base.package}._generated_types"

    @property
    def codec_module(self) -> str:
        return f"{self.base.package}._generated_codec"

    @property
    def tables_module(self) -> str:
        return f"{self.base.package}._generated_tables"


Def = AliasDef | ClassDef | UnionDef


def definition(m: Model, name: str) -> Def | None:
    return m.aliases.get(name) or m.classes.get(name) or m.unions.get(name)


def comparable(d: Def) -> Def:
    """The parts of a definition that decide the generated code (not the docs)."""
    if isinstance(d, ClassDef):
        return dataclasses.replace(d, def_name=None, variant_of=[])
    if isinstance(d, UnionDef):
        return dataclasses.replace(d, def_name=None)
    return d


def texpr_refs(t: TExpr) -> Iterator[str]:
    if t.ref:
        yield t.ref
    if t.item is not None:
        yield from texpr_refs(t.item)


def references(d: Def) -> Iterator[str]:
    """Every definition name ``d``'s generated code uses."""
    if isinstance(d, AliasDef):
        yield from texpr_refs(d.type)
    elif isinstance(d, ClassDef):
        for f in d.fields:
            yield from texpr_refs(f.type)
        if d.base:
            yield d.base
        if d.unknown_of:
            yield d.unknown_of
    else:
        if d.branches:
            for b in d.branches:
                yield from texpr_refs(b)
        else:
            yield from d.members
        yield from d.tags.values()
        yield from d.nested.values()
        if d.fallback:
            yield d.fallback
        if d.unknown:
            yield d.unknown


def reused_definitions(stable: Model, unstable: Model) -> frozenset[str]:
    """Names whose definition, and all it refers to transitively, is the same in both."""
    names = {*unstable.aliases, *unstable.classes, *unstable.unions}
    same = set()
    for name in names:
        s, u = definition(stable, name), definition(unstable, name)
        if s is not None and u is not None and comparable(s) == comparable(u):
            same.add(name)
    changed = True
    while changed:  # drop what refers to a definition that is not reused
        changed = False
        for name in sorted(same):
            d = definition(unstable, name)
            assert d is not None
            if any(r in names and r not in same for r in references(d)):
                same.discard(name)
                changed = True
    return frozenset(same)


_CODEC_NAME = re.compile(r"\b(_(?:s|u|h|f|sk|sf|fl|sn|un|ui|T|UT)_\w+)\b")
_DEFINED = re.compile(r"^(?:def (\w+)\(|(\w+)(?::| =))", re.M)


def defined_names(source: str) -> frozenset[str]:
    """Module-level names a generated module defines (functions and assignments)."""
    return frozenset(a or b for a, b in _DEFINED.findall(source))


def codec_imports(own: str, delta: Delta) -> list[str]:
    """The stable codec functions (and dispatch tables) the unstable codec's own code calls."""
    mine = defined_names(own)
    wanted = sorted({n for n in _CODEC_NAME.findall(own) if n not in mine})
    missing = [n for n in wanted if n not in delta.base.codec_defs]
    if missing:
        raise SystemExit(f"unstable codec calls what neither codec defines: {missing}")
    return wanted


def codec_import_lines(own: str, delta: Delta, types_module: str) -> list[str]:
    """The import lines of an unstable codec whose own code is ``own``: the stable codec
    module (its registries), the reused set, and the stable functions ``own`` calls."""
    out = []
    package, _, module = delta.codec_module.rpartition(".")
    if delta.reused:
        out.append(f"from {package} import {module} as _base")
        out.append(f"from {types_module} import _REUSED")
    called = codec_imports(own, delta)
    if called:
        out.append(f"from {delta.codec_module} import ({', '.join(called)})")
    return [*out, ""]
