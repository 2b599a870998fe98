"""Runtime pieces shared by the generated schema modules (stable and unstable).

The generated code is plain Python that calls into this module for the few
things that are the same everywhere: the ``UNSET`` sentinel, the shared empty
"extra keys" mapping, the internal failure signal of the fast path, the helpers
that keep unknown keys (the *residue*) and that apply the schema's leniency
rules, and the small spec classes the slow validator walks.

Nothing here imports the generated modules, so both the stable and the
unstable set can use it.
"""

from __future__ import annotations

import enum
import logging
import types
from collections.abc import Callable, Mapping
from typing import Any, Final, Literal, TypeAlias

import attrs

__all__ = [
    "EMPTY",
    "ERRORS",
    "UNSET",
    "ClassSpec",
    "FieldSpec",
    "Invalid",
    "MethodInfo",
    "UnionSpec",
    "UnsetType",
    "build_params",
    "lenient",
    "logger",
    "merge_extra",
    "residue",
    "setter",
    "skip_items",
]

logger = logging.getLogger("acp_trio.schema")


class UnsetType(enum.Enum):
    """Type of :data:`UNSET`: "this key was absent", distinct from ``None`` (JSON ``null``).

    Only the few fields where the protocol gives ``null`` its own meaning
    ("clear this value") use it, e.g. ``SessionInfoUpdate.title``.
    """

    UNSET = "UNSET"

    def __repr__(self) -> str:
        return "UNSET"

    def __bool__(self) -> Literal[False]:
        return False


UNSET: Final = UnsetType.UNSET

#: The default of every ``extra_`` field: shared, read-only, empty.
EMPTY: Mapping[str, Any] = types.MappingProxyType({})


class Invalid(Exception):
    """Raised by the fast path on the first problem; the slow path explains it."""


#: What a malformed value can raise inside the fast path. Leniency catches
#: exactly these, so a real bug (say an ``AttributeError`` in a hook) is not
#: silently turned into "use the default".
ERRORS: Final = (Invalid, KeyError, TypeError, ValueError, IndexError)

#: (known wire keys, nullable keys, scalar defaults) of one class; see :func:`residue`.
ResidueSpec: TypeAlias = tuple[frozenset[str], frozenset[str], Mapping[str, Any]]


def residue(d: dict[str, Any], tag: str | None, spec: ResidueSpec) -> Mapping[str, Any]:
    """Collect the wire keys of ``d`` that the typed fields do not carry.

    These are unknown keys (forward compatibility), explicit ``null`` on a
    nullable optional field (typed as ``None``, the same as absent) and an
    explicitly sent default value (``"terminal": false``, typed as the
    default, which is omitted on output). Keeping them makes a decode/encode
    round trip reproduce the input exactly. Only called when a quick key count
    shows there is something to keep.
    """
    known, nullable, defaults = spec
    out: dict[str, Any] = {}
    for k, v in d.items():
        if k == tag:
            continue
        if k not in known:
            out[k] = v
        elif v is None:
            if k in nullable:
                out[k] = None
        elif k in defaults:
            dv = defaults[k]
            if type(v) is type(dv) and v == dv:
                out[k] = v
    return out or EMPTY


def merge_extra(d: dict[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    """Re-emit residue keys; a typed field that is set always wins."""
    for k, v in extra.items():
        if k not in d:
            d[k] = v
    return d


def lenient(where: str, value: Any, default: Any) -> Any:
    """Apply ``x-deserialize-default-on-error``: log, then use the default."""
    logger.debug("ignoring malformed %s (%.80r); using its default", where, value)
    return default


def skip_items(items: list[Any], convert: Callable[[Any], Any], where: str) -> list[Any]:
    """Apply ``x-deserialize-skip-invalid-items``: keep the items that convert."""
    out = []
    for i, item in enumerate(items):
        try:
            out.append(convert(item))
        except ERRORS:
            logger.debug("dropping malformed item %d of %s (%.80r)", i, where, item)
    return out


def setter(cls: type, name: str) -> Callable[[Any, Any], None]:
    """The slot setter of ``cls.name``.

    The generated fast path builds instances with ``object.__new__`` and these
    setters, which costs half of what a frozen attrs ``__init__`` does (it goes
    through ``object.__setattr__`` per field). The result is identical: these
    classes have no validators, converters or post-init hooks.
    """
    descriptor = getattr(cls, name)
    if not isinstance(descriptor, types.MemberDescriptorType):  # pragma: no cover
        raise TypeError(f"{cls.__name__}.{name} is not a slot")
    fn: Callable[[Any, Any], None] = descriptor.__set__
    return fn


# -- spec classes walked by the slow validator (acp_trio.schema._validate) ----------

#: A type expression, as nested tuples: ("str", min_length), ("int", minimum,
#: maximum), ("num",), ("bool",), ("any",), ("obj",), ("lit", values),
#: ("list", item), ("map", value), ("class", cls), ("union", name).
TypeExpr: TypeAlias = tuple[Any, ...]

REQUIRED: Final = 1
NULLABLE: Final = 2
LENIENT: Final = 4
SKIP_ITEMS: Final = 8
NULL_CLEARS: Final = 16
FLATTEN: Final = 32
DEFAULTED: Final = 64
#: ``x-deserialize-default-on-null`` on a field that is not nullable: ``null`` is its default.
NULL_DEFAULT: Final = 128


@attrs.frozen
class FieldSpec:
    """One property of a generated class, as the slow validator needs it."""

    wire: str
    attr: str
    type: TypeExpr
    flags: int


@attrs.frozen
class ClassSpec:
    """One generated class: its fields, its own tag (if it always carries one) and residue."""

    cls: type
    tag: tuple[str, str] | None
    fields: tuple[FieldSpec, ...]
    residue: ResidueSpec
    #: For classes with a flattened untagged union field: residue per branch class.
    flatten_residue: Mapping[type, ResidueSpec] = attrs.field(factory=dict)


@attrs.frozen
class UnionSpec:
    """How one union is told apart.

    Tagged unions: ``key`` names the discriminator, ``tags`` maps each known
    value to its class, ``fallback`` is the variant used when the key is absent
    (``None`` if there is none), ``unknown`` the class that keeps an unknown
    variant's raw dict and ``other`` whether the schema has an explicit
    catch-all branch. Untagged unions: ``key`` is ``None`` and ``branches``
    lists the member types; the first whose JSON shape matches (JSON type;
    for objects, all required keys present; for arrays, the first item) wins.
    ``nested`` maps a tag whose payload is another tagged union (ACP v2's
    ``sessionUpdate: "state_update"`` over ``StateUpdate``) to that union's name.
    """

    name: str
    key: str | None = None
    tags: Mapping[str, type] = attrs.field(factory=dict)
    fallback: type | None = None
    unknown: type | None = None
    other: bool = False
    branches: tuple[TypeExpr, ...] = ()
    nested: Mapping[str, str] = attrs.field(factory=dict)


@attrs.frozen
class MethodInfo:
    """One wire method of the protocol.

    ``params`` and ``result`` are schema types (a class, or a union alias
    such as ``SetSessionConfigOptionRequest``) to pass to
    ``converter.structure``; ``result`` is ``None`` for notifications.
    ``handled_by`` is the side that receives the message: ``"agent"``,
    ``"client"``, ``"protocol"`` (either side), ``"both"`` or, for the
    unstable proxy-chain methods, ``"proxy"``.
    """

    name: str
    kind: Literal["request", "notification"]
    handled_by: Literal["agent", "client", "protocol", "both", "proxy"]
    params: Any
    result: Any
    params_name: str
    result_name: str | None


def build_params(
    cls: type[Any],
    method: str,
    positional: tuple[str, ...],
    lists: tuple[str, ...],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    defaults: dict[str, Any] | None,
) -> Any:
    """The params of a proxy call made in either form (the generated proxies'
    one runtime helper): ``args[0]`` itself if it is a ``cls`` (and nothing
    else was passed), else ``cls`` built from the fields given, positional
    ones named by ``positional``, with ``defaults`` for those left out and
    any sequence passed for a field in ``lists`` made a list. Raises
    ``TypeError`` naming ``method`` for arguments that do not fit."""
    if args and isinstance(args[0], cls):
        if len(args) > 1 or kwargs:
            raise TypeError(f"{method}() takes a {cls.__name__} or its fields, not both")
        return args[0]
    if not positional and len(args) == 1 and args[0] is None and not kwargs:
        args = ()  # the old optional-params form: method(None)
    if len(args) > len(positional):
        takes = ", ".join(positional) or "no fields"
        raise TypeError(
            f"{method}() takes a {cls.__name__} or its fields ({takes} positionally),"
            f" got {len(args)} positional arguments"
        )
    fields = dict(zip(positional, args, strict=False))
    for name, value in kwargs.items():
        if name in fields:
            raise TypeError(f"{method}() got multiple values for {name!r}")
        fields[name] = value
    missing = [name for name in positional if name not in fields]
    if missing:
        raise TypeError(f"{method}() missing {', '.join(repr(n) for n in missing)}")
    if defaults:
        for name, value in defaults.items():
            fields.setdefault(name, value)
    for name in lists:
        value = fields.get(name)
        if value is None or type(value) is list:
            continue
        if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
            raise TypeError(f"{method}(): {name} takes a sequence, not {type(value).__name__}")
        fields[name] = list(value)
    try:
        return cls(**fields)
    except TypeError as exc:
        raise TypeError(f"{method}(): {exc}") from None
