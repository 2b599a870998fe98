"""The converter's policy, continued from ``test_policy.py``: what Python
objects write (no nulls of their own, explicit nulls and defaults kept),
strict scalars (no coercion), plain cattrs targets, and the public names."""

from __future__ import annotations

from typing import Any

import pytest

import acp_trio.schema as acp
from acp_trio.schema import SchemaValidationError, converter

from .test_policy import CHUNK, round_trip


def test_python_objects_never_write_null() -> None:
    call = acp.ToolCallUpdate(tool_call_id="t", title=None, content=None)
    assert converter.unstructure(call) == {"toolCallId": "t"}
    diff = acp.Diff(path="/new.py", new_text="x")
    assert converter.unstructure(diff) == {"type": "diff", "path": "/new.py", "newText": "x"}


def test_explicit_nulls_round_trip_exactly() -> None:
    data = {"type": "diff", "path": "/new.py", "oldText": None, "newText": "x", "_meta": None}
    diff = round_trip(data, acp.ToolCallContent)
    assert diff.old_text is None
    assert diff.meta is None


def test_defaults_are_omitted_and_explicit_defaults_kept() -> None:
    assert converter.unstructure(acp.ClientCapabilities()) == {}
    assert converter.unstructure(acp.InitializeResponse(protocol_version=1)) == {
        "protocolVersion": 1
    }
    caps = acp.ClientCapabilities(fs=acp.FileSystemCapabilities(read_text_file=True))
    assert converter.unstructure(caps) == {"fs": {"readTextFile": True}}
    explicit = {"fs": {"readTextFile": False}, "terminal": False, "auth": {}}
    got = round_trip(explicit, acp.ClientCapabilities)
    assert got == acp.ClientCapabilities()
    assert got.fs.read_text_file is False
    assert got.terminal is False
    resp = round_trip({"protocolVersion": 1, "authMethods": []}, acp.InitializeResponse)
    assert resp.auth_methods == []


# -- no coercion -------------------------------------------------------------------------


@pytest.mark.parametrize("bad", ["1", True, 1.0, None, [1]])
def test_integer_fields_do_not_coerce(bad: Any) -> None:
    with pytest.raises(SchemaValidationError):
        converter.structure({"protocolVersion": bad}, acp.InitializeRequest)


def test_number_fields_take_ints_but_not_bools() -> None:
    cost = round_trip({"amount": 3, "currency": "EUR"}, acp.Cost)
    assert type(cost.amount) is int
    with pytest.raises(SchemaValidationError):
        converter.structure({"amount": True, "currency": "EUR"}, acp.Cost)
    with pytest.raises(SchemaValidationError):
        converter.structure({"amount": "3", "currency": "EUR"}, acp.Cost)


@pytest.mark.parametrize(
    ("value", "cls"), [(1, str), ("1", int), (True, int), (1, bool), ("1.5", float), (True, float)]
)
def test_plain_targets_are_strict(value: Any, cls: type) -> None:
    with pytest.raises(SchemaValidationError):
        converter.structure(value, cls)


def test_booleans_are_strict() -> None:
    with pytest.raises(SchemaValidationError):
        converter.structure({"output": "", "truncated": 0}, acp.TerminalOutputResponse)


# -- converter plumbing ------------------------------------------------------------------


def test_make_converter_and_configure_plain_cattrs() -> None:
    import cattrs

    plain = cattrs.Converter()
    acp.configure_converter(plain)
    note = plain.structure(CHUNK, acp.SessionNotification)
    assert plain.unstructure(note) == CHUNK
    with pytest.raises(SchemaValidationError):
        plain.structure({"sessionId": 1}, acp.SessionNotification)
    assert plain.structure("end_turn", acp.StopReason) == "end_turn"
    fresh = acp.make_converter()
    assert fresh is not converter
    assert fresh.structure(CHUNK, acp.SessionNotification) == note


def test_lists_and_nested_generic_targets() -> None:
    blocks = [{"type": "text", "text": "a"}, {"type": "image", "data": "AA", "mimeType": "i/p"}]
    objs = converter.structure(blocks, list[acp.ContentBlock])
    assert [type(o) for o in objs] == [acp.TextContent, acp.ImageContent]
    assert converter.unstructure(objs) == blocks


def test_unstructure_rejects_a_non_member() -> None:
    bad = acp.SessionNotification(
        session_id="s", update=acp.ContentChunk(content=acp.TextContent(text="x"))
    )  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="not a SessionUpdate"):
        converter.unstructure(bad)


def test_public_names() -> None:
    assert acp.PROTOCOL_VERSION == 1
    assert acp.SCHEMA_VERSION == "@agentclientprotocol/sdk@2.4.0"
    for name in ("PromptRequest", "SessionNotification", "ContentBlock", "converter", "METHODS"):
        assert name in acp.__all__
    assert set(acp.__all__) <= set(dir(acp))
