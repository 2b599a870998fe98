"""The model the analysis builds and the emitters read.

A schema def becomes an alias, a class or a union (or a method of the method
table); a property's type is a :class:`TExpr`. Kept apart from the analysis so
that the emitters depend only on this small vocabulary, never on the raw schema.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


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
    null_default: bool = False  # x-deserialize-default-on-null on a non-nullable field
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
    # tag -> inner tagged union whose variants this tag's payload is (v2 ``state_update``)
    nested: dict[str, str] = field(default_factory=dict)


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


def resolve(t: TExpr, m: Model) -> TExpr:
    """Follow aliases down to the checked type (aliases keep their bounds)."""
    if t.ref and t.ref in m.aliases and t.kind not in ("class", "union"):
        return m.aliases[t.ref].type
    return t
