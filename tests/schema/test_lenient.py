"""Every leniency rule in the generated tables, one test per field.

``LENIENT_FIELDS`` (``x-deserialize-default-on-error``): a malformed value
gives the field's default and a debug log line. ``SKIP_INVALID_ITEMS``
(``x-deserialize-skip-invalid-items``): a malformed item is dropped, the
rest is kept. Either way the output is the input minus what was dropped.
``DEFAULT_ON_NULL_FIELDS`` (``x-deserialize-default-on-null``): ``null`` gives
the field's default, which is written back (a required list) or omitted.
"""

from __future__ import annotations

import logging
import types
from typing import Any

import attrs
import pytest

import acp_trio.schema as stable
import acp_trio.schema.unstable as unstable
import acp_trio.schema.v2 as v2
import acp_trio.schema.v2.unstable as v2_unstable
from acp_trio.schema import _generated_tables, _generated_unstable_tables
from acp_trio.schema._runtime import REQUIRED, FieldSpec
from acp_trio.schema._validate import walk
from acp_trio.schema.v2 import _generated_tables as v2_tables
from acp_trio.schema.v2 import _generated_unstable_tables as v2_unstable_tables

from ._schema_data import FLAVOURS
from .test_invalid import sample_per_class

MODULES: dict[str, types.ModuleType] = {
    "stable": stable,
    "unstable": unstable,
    "v2": v2,
    "v2-unstable": v2_unstable,
}
TABLES: dict[str, types.ModuleType] = {
    "stable": _generated_tables,
    "unstable": _generated_unstable_tables,
    "v2": v2_tables,
    "v2-unstable": v2_unstable_tables,
}


def field_spec(flavour: str, cls: type, wire: str) -> FieldSpec:
    return next(f for f in TABLES[flavour].CLASSES[cls].fields if f.wire == wire)


def malformed(spec: FieldSpec) -> Any:
    return "malformed" if spec.type[0] in ("int", "num") else 12345


def default_of(cls: type, attr: str) -> Any:
    a = attrs.fields_dict(cls)[attr]
    if a.default is attrs.NOTHING:
        return []  # a required list with default-on-error
    if isinstance(a.default, attrs.Factory):  # type: ignore[arg-type]
        return a.default.factory()
    return a.default


def accepts_anything(flavour: str, tx: Any) -> bool:
    """A union with a catch-all branch (v2's ``ErrorData``: known shapes, else any value)."""
    if tx[0] != "union":
        return False
    return any(b[0] == "any" for b in TABLES[flavour].UNIONS[tx[1]].branches)


def cases(table_name: str) -> list[Any]:
    out: list[Any] = []
    for flavour in FLAVOURS:
        for cls, wires in getattr(TABLES[flavour], table_name).items():
            for wire in sorted(wires):
                spec = field_spec(flavour, cls, wire)
                if spec.type[0] == "any" or accepts_anything(flavour, spec.type):
                    continue  # any JSON value is valid: nothing to fall back from
                out.append(pytest.param(flavour, cls, wire, id=f"{flavour}-{cls.__name__}-{wire}"))
    return out


@pytest.mark.parametrize(("flavour", "cls", "wire"), cases("LENIENT_FIELDS"))
def test_default_on_error(
    flavour: str, cls: type, wire: str, caplog: pytest.LogCaptureFixture
) -> None:
    conv = MODULES[flavour].converter
    spec = field_spec(flavour, cls, wire)
    sample = sample_per_class(flavour)[cls]
    broken = {**sample, wire: malformed(spec)}
    with caplog.at_level(logging.DEBUG, logger="acp_trio.schema"):
        obj = conv.structure(broken, cls)
    assert getattr(obj, spec.attr) == default_of(cls, spec.attr)
    assert f".{wire} (" in caplog.text
    expected = {k: v for k, v in broken.items() if k != wire}
    if spec.flags & REQUIRED:
        expected[wire] = []
    assert conv.unstructure(obj) == expected


@pytest.mark.parametrize(("flavour", "cls", "wire"), cases("SKIP_INVALID_ITEMS"))
def test_skip_invalid_items(
    flavour: str, cls: type, wire: str, caplog: pytest.LogCaptureFixture
) -> None:
    conv = MODULES[flavour].converter
    spec = field_spec(flavour, cls, wire)
    sample = sample_per_class(flavour)[cls]
    good = sample[wire]
    assert isinstance(good, list)
    assert good, "the full sample has one item"
    bad_item = "malformed" if spec.type[1][0] in ("int", "num") else 12345
    broken = {**sample, wire: [good[0], bad_item, good[0]]}
    with caplog.at_level(logging.DEBUG, logger="acp_trio.schema"):
        obj = conv.structure(broken, cls)
    assert len(getattr(obj, spec.attr)) == 2
    assert "dropping malformed item 1 of" in caplog.text
    assert conv.unstructure(obj) == {**sample, wire: [good[0], good[0]]}


@pytest.mark.parametrize(("flavour", "cls", "wire"), cases("DEFAULT_ON_NULL_FIELDS"))
def test_default_on_null(flavour: str, cls: type, wire: str) -> None:
    conv = MODULES[flavour].converter
    spec = field_spec(flavour, cls, wire)
    sample = sample_per_class(flavour)[cls]
    obj = conv.structure({**sample, wire: None}, cls)
    assert getattr(obj, spec.attr) == default_of(cls, spec.attr)
    tables = TABLES[flavour]
    assert walk(tables.CLASSES, tables.UNIONS, {**sample, wire: None}, ("class", cls)) == (obj, [])
    expected = {k: v for k, v in sample.items() if k != wire}
    if spec.flags & REQUIRED:
        expected[wire] = []
    assert conv.unstructure(obj) == expected
