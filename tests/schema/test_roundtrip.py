"""Every schema definition: valid instances structure and come back unchanged.

Equality rule (the converter's promise): ``unstructure(structure(x))`` is
equal to ``x`` as JSON text with sorted keys, so ``1`` vs ``1.0``, ``true``
vs ``1`` and ``null`` vs absent all count as differences. The output must
also validate against the schema, and the slow (explaining) path must build
the same value as the fast path.
"""

from __future__ import annotations

import json
import types
from typing import Any

import pytest

import acp_trio.schema as stable
import acp_trio.schema.unstable as unstable
import acp_trio.schema.v2 as v2
import acp_trio.schema.v2.unstable as v2_unstable
from acp_trio.schema import _generated_tables, _generated_unstable_tables
from acp_trio.schema._validate import walk
from acp_trio.schema.v2 import _generated_tables as v2_tables
from acp_trio.schema.v2 import _generated_unstable_tables as v2_unstable_tables

from ._schema_data import FLAVOURS, Builder, def_cases, validator

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


def target_for(flavour: str, def_name: str) -> Any:
    kind, py_name = TABLES[flavour].DEFS[def_name]
    assert kind in ("class", "union", "alias"), kind
    return getattr(MODULES[flavour], str(py_name))


def with_own_tag(flavour: str, target: Any, instance: Any) -> Any:
    """A class that only ever appears as one tagged variant writes its tag even standalone."""
    spec = TABLES[flavour].CLASSES.get(target) if isinstance(target, type) else None
    if spec is None or spec.tag is None or spec.tag[0] in instance:
        return instance
    return {spec.tag[0]: spec.tag[1], **instance}


def as_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


CASES = [
    pytest.param(f, name, inst, id=f"{f}-{name}-{i}")
    for flavour in FLAVOURS
    for f, name, i, inst in def_cases(flavour)
    if TABLES[f].DEFS[name][0] != "merged"
]


@pytest.mark.parametrize(("flavour", "def_name", "instance"), CASES)
def test_valid_instance_round_trips(flavour: str, def_name: str, instance: Any) -> None:
    schema_check = validator(flavour, def_name)
    problems = [e.message for e in schema_check.iter_errors(instance)]
    assert not problems, f"test builder made an invalid {def_name}: {problems}"

    mod = MODULES[flavour]
    target = target_for(flavour, def_name)
    obj = mod.converter.structure(instance, target)
    out = mod.converter.unstructure(obj, unstructure_as=target)
    assert as_json(out) == as_json(with_own_tag(flavour, target, instance))
    schema_check.validate(out)

    tables = TABLES[flavour]
    if target in tables.TARGETS:  # plain aliases (str, int, Any) have no walker entry
        slow, errors = walk(tables.CLASSES, tables.UNIONS, instance, tables.TARGETS[target])
        assert not errors
        assert slow == obj
        again = mod.converter.unstructure(slow, unstructure_as=target)
        assert as_json(again) == as_json(out)


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_every_definition_is_covered(flavour: str) -> None:
    """Each def maps to generated code; merged payloads are reached through their union."""
    defs = Builder(flavour).defs
    table = TABLES[flavour].DEFS
    assert set(table) == set(defs)
    for name, (kind, py_name) in table.items():
        if kind == "routing":
            assert defs[name].get("x-docs-ignore")
        elif kind == "merged":
            union = defs[str(py_name)]
            refs = json.dumps(union.get("oneOf") or union.get("anyOf"))
            assert f'"#/$defs/{name}"' in refs
            assert hasattr(MODULES[flavour], name), f"{name} has no variant class"
        else:
            assert hasattr(MODULES[flavour], str(py_name))


def test_every_flavour_has_cases() -> None:
    """The cases come from the schema the package ships: never none."""
    assert {case.values[0] for case in CASES} == set(FLAVOURS)
