"""Malformed input: one clear SchemaValidationError naming the path, for every class.

For each generated class we take a valid instance and break one required
field at a time: remove it, give it a value of the wrong JSON type, or make
it ``null``. The result must be a SchemaValidationError whose ``errors`` name
that field, except for the required lists the schema marks default-on-error,
which read a missing, ``null`` or malformed value as empty, and the required
fields marked default-on-null, which read ``null`` (only) as their default.
A field that takes any JSON value has no wrong type, and ``null`` is one (as
it is of a ``RequestId``).
"""

from __future__ import annotations

import functools
import types
from typing import Any

import pytest

import acp_trio.schema as stable
import acp_trio.schema.unstable as unstable
import acp_trio.schema.v2 as v2
import acp_trio.schema.v2.unstable as v2_unstable
from acp_trio.schema import SchemaValidationError, _generated_tables, _generated_unstable_tables
from acp_trio.schema._runtime import FLATTEN, LENIENT, NULL_DEFAULT, REQUIRED
from acp_trio.schema._validate import child
from acp_trio.schema.v2 import _generated_tables as v2_tables
from acp_trio.schema.v2 import _generated_unstable_tables as v2_unstable_tables

from ._schema_data import FLAVOURS, Builder

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


@functools.cache
def sample_per_class(flavour: str) -> dict[type, dict[str, Any]]:
    """A valid "full" JSON object for every generated class, found by structuring."""
    mod, table = MODULES[flavour], TABLES[flavour]
    builder = Builder(flavour)
    found: dict[type, dict[str, Any]] = {}
    for name, (kind, py_name) in table.DEFS.items():
        if kind not in ("class", "union"):
            continue
        target = getattr(mod, str(py_name))
        for inst in builder.instances(name):
            obj = mod.converter.structure(inst, target)
            if isinstance(inst, dict):
                found.setdefault(type(obj), inst)
    return found


def wrong_value(value: Any) -> Any:
    """A JSON value of another type (a nested list fits no ACP scalar, object or id)."""
    return 12345 if isinstance(value, list) else [[12345]]


def cases() -> list[Any]:
    out = []
    for flavour in FLAVOURS:
        for cls, spec in TABLES[flavour].CLASSES.items():
            for f in spec.fields:
                if f.flags & REQUIRED and not f.flags & FLATTEN:
                    out.append(
                        pytest.param(flavour, cls, f, id=f"{flavour}-{cls.__name__}-{f.wire}")
                    )
    return out


@pytest.mark.parametrize(("flavour", "cls", "field"), cases())
def test_broken_required_field(flavour: str, cls: type, field: Any) -> None:
    sample = sample_per_class(flavour).get(cls)
    assert sample is not None, f"no sample for {cls.__name__}"
    conv = MODULES[flavour].converter
    path = child("$", field.wire)
    lenient = field.flags & LENIENT
    anything = field.type[0] == "any"
    union = TABLES[flavour].UNIONS.get(field.type[1]) if field.type[0] == "union" else None
    null_ok = anything or (union is not None and ("null",) in union.branches)  # a RequestId

    missing = {k: v for k, v in sample.items() if k != field.wire}
    wrong = {**sample, field.wire: wrong_value(sample[field.wire])}
    null = {**sample, field.wire: None}
    for broken in (missing, wrong, null):
        if (anything and broken is not missing) or (null_ok and broken is null):
            assert getattr(conv.structure(broken, cls), field.attr) == broken[field.wire]
            continue
        if lenient or (broken is null and field.flags & NULL_DEFAULT):
            obj = conv.structure(broken, cls)
            assert getattr(obj, field.attr) == []
            continue
        with pytest.raises(SchemaValidationError) as info:
            conv.structure(broken, cls)
        assert any(e.startswith(path) for e in info.value.errors), info.value.errors
        assert str(info.value).startswith(f"invalid {cls.__name__}: ")


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_every_class_has_a_sample(flavour: str) -> None:
    missing = set(TABLES[flavour].CLASSES) - set(sample_per_class(flavour))
    assert not missing, sorted(c.__name__ for c in missing)


def test_error_text_and_paths() -> None:
    msg = {
        "sessionId": 7,
        "update": {
            "sessionUpdate": "agent_message_chunk",
            "content": {"type": "text", "text": 5},
        },
    }
    with pytest.raises(SchemaValidationError) as info:
        stable.converter.structure(msg, stable.SessionNotification)
    err = info.value
    assert isinstance(err, ValueError)
    assert err.type_name == "SessionNotification"
    assert err.errors == [
        "$.sessionId: expected a string, got integer",
        "$.update.content.text: expected a string, got integer",
    ]


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({}, "$.sessionId: missing required field"),
        ([], "$: expected a PromptRequest object, got array"),
        ({"sessionId": "s", "prompt": "hi"}, "$.prompt: expected an array of ContentBlock items"),
        (
            {"sessionId": "s", "prompt": [{"text": "no tag"}]},
            "$.prompt[0].type: missing required field",
        ),
        (
            {"sessionId": "s", "prompt": [{"type": 3}]},
            "$.prompt[0].type: expected a string, got integer",
        ),
        (
            {"sessionId": "s", "prompt": [{"type": "resource", "resource": {"uri": "u"}}]},
            "$.prompt[0].resource: expected one of: TextResourceContents (with 'text', 'uri')",
        ),
    ],
)
def test_error_wording(data: Any, expected: str) -> None:
    with pytest.raises(SchemaValidationError) as info:
        stable.converter.structure(data, stable.PromptRequest)
    assert any(e.startswith(expected) for e in info.value.errors), info.value.errors


def test_enum_and_bounds_wording() -> None:
    with pytest.raises(SchemaValidationError) as info:
        stable.converter.structure({"stopReason": "done"}, stable.PromptResponse)
    assert info.value.errors == [
        '$.stopReason: expected one of "end_turn", "max_tokens", "max_turn_requests", '
        '"refusal", "cancelled", got "done"'
    ]
    with pytest.raises(SchemaValidationError) as info:
        stable.converter.structure({"protocolVersion": 70000}, stable.InitializeRequest)
    assert info.value.errors == [
        "$.protocolVersion: expected an integer >= 0 and <= 65535, got 70000"
    ]
