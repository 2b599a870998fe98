"""The cattrs converter for ACP schema types, and the policy it implements.

Policy (what ``converter.structure`` / ``converter.unstructure`` do):

- **Names.** Attributes are snake_case, wire keys camelCase. ``_meta`` is
  the attribute ``meta``: its dict is passed through untouched and never
  merged into, or filled from, other fields.
- **Unknown keys survive.** Keys a class does not know are kept in its
  ``extra_`` mapping and written back on output (forward compatibility;
  ``extra_`` is left out of ``==`` and ``repr``).
- **Unknown union variants survive.** An unknown discriminator value (a new
  ``sessionUpdate``, a new content ``type``) becomes the union's
  ``Unknown...`` class (``UnknownSessionUpdate``, ``UnknownContentBlock``...),
  which keeps the raw dict and writes it back unchanged; never an exception.
  (The unstable ``StateUpdate``'s is ``OtherStateUpdate``: there
  ``UnknownStateUpdate`` is the schema's own ``state: "unknown"`` variant.)
  Where the schema has a default variant for a missing tag (``McpServer``
  stdio, ``AuthMethod`` agent, the value-id form of
  ``SetSessionConfigOptionRequest``), an unknown tag is first tried as that
  variant, as the schema allows, and becomes ``Unknown...`` if that fails.
- **Leniency, exactly where the schema asks for it.** A malformed field
  marked ``x-deserialize-default-on-error`` falls back to its default, and a
  malformed item of a list marked ``x-deserialize-skip-invalid-items`` is
  dropped (a few required lists with that mark also read a missing or null
  list as empty). Each case is logged at debug level on the
  ``acp_trio.schema`` logger.
- **Everything else that is malformed raises one** :class:`SchemaValidationError`
  (a ``ValueError``) whose ``errors`` list every problem as
  ``$.path: reason``; its text is fit for a ``-32602`` error's ``data``.
- **No silent coercion.** ``"1"`` is not ``1``, ``true`` is not ``1``, ``1``
  is not ``"1"``. An integer is accepted where the schema says ``number``
  (JSON has one number type) and kept as an ``int``; a boolean never counts
  as a number. This also applies to plain ``str``/``int``/``float``/``bool``
  targets on this converter.
- **Absent, null and defaults.** On input, absent and ``null`` mean the same
  for optional fields, except where ``null`` is meaningful
  (``SessionInfoUpdate.title``/``updatedAt``, the patch fields of
  ``CompactionUpdate`` and of the unstable ``SubagentUpdate`` and
  ``SessionMessage``: there ``null`` is ``None`` and absent is
  :data:`UNSET`). Fields with a schema default (capabilities,
  ``authMethods``) read an absent key as that default. A required field
  marked ``x-deserialize-default-on-null`` (``McpServerStdio.args``/``env``,
  the ``headers`` of HTTP and SSE servers, ``mcpServers`` of ``session/new``
  and ``session/load``) reads ``null`` as its default, the empty list, and
  writes that list back; without the mark, ``null`` in a required field is
  an error. On output, ``None``, ``UNSET`` and default values are omitted;
  ``null`` is written only for a ``None`` in a null-means-clear field.
- **Round trips are exact.** Structuring valid JSON and unstructuring the
  result gives back a dict equal to the input: key for key, including
  unknown keys, explicit ``null``s on optional fields and explicitly sent
  default values (the last two are recorded in ``extra_`` so they can be
  written back). The tests assert plain ``==`` on the JSON values.

Speed: hooks are built at import time from generated code (no per-call
introspection). The careful, error-collecting walker in
:mod:`acp_trio.schema._validate` runs only after the fast path has failed.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple, Protocol, TypeVar, overload

import cattrs

from acp_trio.schema import _generated_codec as _codec
from acp_trio.schema import _generated_tables as _tables
from acp_trio.schema import _generated_types as _types
from acp_trio.schema._errors import SchemaValidationError
from acp_trio.schema._runtime import ClassSpec, TypeExpr, UnionSpec
from acp_trio.schema._validate import FAIL, json_type, walk

__all__ = ["SchemaConverter", "configure_converter", "make_converter"]

T = TypeVar("T")


class Flavour:
    """One generated set (stable or unstable): fast functions and tables."""

    def __init__(
        self, types_module: types.ModuleType, codec: types.ModuleType, tables: types.ModuleType
    ) -> None:
        self.names: dict[Any, str] = {}
        for name in reversed(types_module.__all__):
            value = getattr(types_module, name)
            self.names[value] = value.__name__ if isinstance(value, type) else name
        self.structure: Mapping[Any, Callable[[Any], Any]] = codec.STRUCTURE
        self.unstructure: Mapping[type, Callable[[Any], Any]] = codec.UNSTRUCTURE
        self.unstructure_as: Mapping[Any, Callable[[Any], Any]] = codec.UNSTRUCTURE_AS
        self.classes: Mapping[type, ClassSpec] = tables.CLASSES
        self.unions: Mapping[str, UnionSpec] = tables.UNIONS
        self.targets: Mapping[Any, TypeExpr] = tables.TARGETS

    def explain(self, data: Any, target: Any, exc: Exception) -> SchemaValidationError:
        """Run the slow walker over input the fast path rejected."""
        tx = self.targets[target]
        value, errors = walk(self.classes, self.unions, data, tx)
        if not errors or value is not FAIL:
            # The two paths disagree: a bug, not bad input. Do not hide it.
            raise exc
        return SchemaValidationError(self.names.get(target, str(target)), errors)

    def checked(self, target: Any) -> Callable[[Any, Any], Any]:
        fast = self.structure[target]

        def structure_hook(data: Any, _cl: Any) -> Any:
            try:
                return fast(data)
            except Exception as exc:
                raise self.explain(data, target, exc) from None

        return structure_hook


#: The stable schema set.
STABLE = Flavour(_types, _codec, _tables)


class SchemaConverter(cattrs.Converter):
    """A ``cattrs.Converter`` with the ACP hooks and a shortcut for them.

    ``structure``/``unstructure`` look the target up in a plain dict first, so
    an ACP type skips cattrs' dispatch; anything else goes through cattrs as
    usual, with every hook registered by :func:`configure_converter`.
    """

    def __init__(self) -> None:
        super().__init__()
        self._acp_structure: dict[Any, tuple[Flavour, Callable[[Any], Any]]] = {}
        self._acp_unstructure: dict[Any, Callable[[Any], Any]] = {}

    @overload
    def structure(self, obj: Any, cl: type[T]) -> T: ...

    @overload
    def structure(self, obj: Any, cl: Any) -> Any: ...

    def structure(self, obj: Any, cl: Any) -> Any:
        """Structure ``obj`` as ``cl``: a class, or a union or ``Literal`` alias.

        For an alias (``ContentBlock``, ``StopReason``) the static type is
        ``Any``: annotate the result, e.g. ``block: ContentBlock = ...``.
        """
        entry = self._acp_structure.get(cl)
        if entry is None:
            return super().structure(obj, cl)
        flavour, fast = entry
        try:
            return fast(obj)
        except Exception as exc:
            raise flavour.explain(obj, cl, exc) from None

    def unstructure(self, obj: Any, unstructure_as: Any = None) -> Any:
        fast = self._acp_unstructure.get(
            obj.__class__ if unstructure_as is None else unstructure_as
        )
        if fast is not None:
            return fast(obj)
        return super().unstructure(obj, unstructure_as)


def _equals(target: Any) -> Callable[[Any], bool]:
    return lambda t: bool(t == target)


def _strict(kind: type, accept: tuple[type, ...]) -> Callable[[Any, Any], Any]:
    name = {str: "a string", int: "an integer", float: "a number", bool: "a boolean"}[kind]

    def hook(value: Any, _cl: Any) -> Any:
        if type(value) not in accept:
            got = json_type(value)
            raise SchemaValidationError(kind.__name__, [f"$: expected {name}, got {got}"])
        return value

    return hook


def configure_flavour(converter: cattrs.Converter, flavour: Flavour) -> None:
    """Register one schema set's hooks and the strict primitives on ``converter``."""
    for target in flavour.structure:
        hook = flavour.checked(target)
        if isinstance(target, (type, types.UnionType)):
            converter.register_structure_hook(target, hook)
        else:  # a Literal alias: cattrs only registers those by predicate
            converter.register_structure_hook_func(_equals(target), hook)
    for cls, fast in flavour.unstructure.items():
        converter.register_unstructure_hook(cls, fast)
    for union, fast in flavour.unstructure_as.items():
        converter.register_unstructure_hook(union, fast)
    converter.register_structure_hook(str, _strict(str, (str,)))
    converter.register_structure_hook(int, _strict(int, (int,)))
    converter.register_structure_hook(float, _strict(float, (float, int)))
    converter.register_structure_hook(bool, _strict(bool, (bool,)))
    if isinstance(converter, SchemaConverter):
        for target, fast_s in flavour.structure.items():
            converter._acp_structure[target] = (flavour, fast_s)
        converter._acp_unstructure.update(flavour.unstructure)
        converter._acp_unstructure.update(flavour.unstructure_as)


class ConfigureConverter(Protocol):
    def __call__(self, converter: cattrs.Converter) -> None: ...


class MakeConverter(Protocol):
    def __call__(self) -> SchemaConverter: ...


class SchemaSet(NamedTuple):
    """One generated schema module's converter set-up (see :func:`schema_set`)."""

    flavour: Flavour
    configure_converter: ConfigureConverter
    make_converter: MakeConverter


def schema_set(
    types_module: types.ModuleType,
    codec: types.ModuleType,
    tables: types.ModuleType,
    what: str,
    module: str,
) -> SchemaSet:
    """The :class:`Flavour` of one generated set and its ``configure_converter`` and
    ``make_converter`` functions, as the public module ``module`` offers them.

    ``what`` names the types in the functions' docstrings (``"unstable ACP v2"``).
    """
    flavour = Flavour(types_module, codec, tables)

    def configure_converter(converter: cattrs.Converter) -> None:
        configure_flavour(converter, flavour)

    def make_converter() -> SchemaConverter:
        converter = SchemaConverter()
        configure_converter(converter)
        return converter

    configure_converter.__doc__ = (
        f"Register the {what} hooks (and the strict primitives) on ``converter``."
    )
    make_converter.__doc__ = f"A new converter for the {what} schema types."
    for fn in (configure_converter, make_converter):
        fn.__module__ = module
        fn.__qualname__ = fn.__name__
    return SchemaSet(flavour, configure_converter, make_converter)


def configure_converter(converter: cattrs.Converter) -> None:
    """Register the ACP (stable) hooks and the policy above on ``converter``.

    This also makes ``str``, ``int``, ``float`` and ``bool`` strict on that
    converter (no coercion).
    """
    configure_flavour(converter, STABLE)


def make_converter() -> SchemaConverter:
    """A new converter for the stable ACP schema types."""
    converter = SchemaConverter()
    configure_converter(converter)
    return converter
