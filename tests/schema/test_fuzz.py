"""Mutated messages: the fast path and the slow (explaining) path always agree.

Hypothesis takes valid instances of random definitions and breaks them in
random places (drop a key, swap in a random JSON value, add an unknown key,
null a value). For every result:

- ``structure`` either returns a value or raises SchemaValidationError,
  nothing else;
- the slow walker builds an equal value (same ``extra_`` residue too) or
  reports errors exactly when the fast path fails;
- a structured value unstructures to JSON that structures back to an equal
  value with an equal unstructured form (a fixed point after one pass).
"""

from __future__ import annotations

import json
import types
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import acp_trio.schema as stable
import acp_trio.schema.unstable as unstable
import acp_trio.schema.v2 as v2
import acp_trio.schema.v2.unstable as v2_unstable
from acp_trio.schema import SchemaValidationError, _generated_tables, _generated_unstable_tables
from acp_trio.schema._validate import FAIL, walk
from acp_trio.schema.v2 import _generated_tables as v2_tables
from acp_trio.schema.v2 import _generated_unstable_tables as v2_unstable_tables

from ._schema_data import FLAVOURS, def_cases

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

SEEDS = [
    (flavour, name, inst)
    for flavour in FLAVOURS
    for flavour, name, _, inst in def_cases(flavour)
    if TABLES[flavour].DEFS[name][0] in ("class", "union")
]

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**40), max_value=2**40),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=6,
)


def containers(node: Any) -> list[Any]:
    """Every dict and list inside ``node`` (``node`` included)."""
    out = []
    if isinstance(node, (dict, list)):
        out.append(node)
        for child in node.values() if isinstance(node, dict) else node:
            out.extend(containers(child))
    return out


@st.composite
def mutated(draw: st.DrawFn) -> tuple[str, str, Any]:
    flavour, name, inst = draw(st.sampled_from(SEEDS))
    data = json.loads(json.dumps(inst))
    if not isinstance(data, (dict, list)):
        return flavour, name, draw(st.one_of(st.just(data), json_values))
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        target = draw(st.sampled_from(containers(data)))
        op = draw(st.sampled_from(["drop", "replace", "add", "null"]))
        if isinstance(target, dict):
            keys = sorted(target)
            if op == "add" or not keys:
                target[draw(st.sampled_from(["zz_future", "type", "_meta", "x"]))] = draw(
                    json_values
                )
                continue
            key = draw(st.sampled_from(keys))
            if op == "drop":
                del target[key]
            elif op == "null":
                target[key] = None
            else:
                target[key] = draw(json_values)
        elif target:
            i = draw(st.integers(min_value=0, max_value=len(target) - 1))
            target[i] = None if op == "null" else draw(json_values)
        else:
            target.append(draw(json_values))
    return flavour, name, data


def canon(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=mutated())
def test_fast_and_slow_paths_agree(case: tuple[str, str, Any]) -> None:
    flavour, name, data = case
    mod, tables = MODULES[flavour], TABLES[flavour]
    target = getattr(mod, str(tables.DEFS[name][1]))
    slow, errors = walk(tables.CLASSES, tables.UNIONS, data, tables.TARGETS[target])
    if errors:
        with pytest.raises(SchemaValidationError) as info:
            mod.converter.structure(data, target)
        assert info.value.errors == errors
        assert slow is FAIL
        return
    obj = mod.converter.structure(data, target)
    assert slow == obj
    out = mod.converter.unstructure(obj, unstructure_as=target)
    assert canon(mod.converter.unstructure(slow, unstructure_as=target)) == canon(out)
    again = mod.converter.structure(json.loads(canon(out)), target)
    assert again == obj
    assert canon(mod.converter.unstructure(again, unstructure_as=target)) == canon(out)


def test_seeds_exist() -> None:
    assert len(SEEDS) > 500
