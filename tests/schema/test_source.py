"""The generator's input: the method tables derived from ``x-method`` and
``x-side`` (the package ships no ``meta.json``), and the structural copy."""

from __future__ import annotations

from typing import Any

import pytest

from ._schema_data import generator, load, load_meta


def source() -> Any:
    generator()
    import schemagen.source  # type: ignore[import-not-found]

    return schemagen.source


def method(wire: str, side: str) -> dict[str, Any]:
    return {"type": "object", "x-method": wire, "x-side": side}


def test_method_tables_follow_the_sides_in_definition_order() -> None:
    schema = {
        "$defs": {
            "PromptRequest": method("session/prompt", "agent"),
            "PromptResponse": method("session/prompt", "agent"),  # a result: same entry
            "ReadRequest": method("fs/read_text_file", "client"),
            "CancelRequest": method("$/cancel_request", "protocol"),
            "Message": method("mcp/message", "both"),
            "InitializeRequest": method("initialize", "agent"),
            "Plain": {"type": "string"},
        }
    }
    assert source().method_tables(schema, 1) == {
        "version": 1,
        "agentMethods": {
            "session_prompt": "session/prompt",
            "mcp_message": "mcp/message",
            "initialize": "initialize",
        },
        "clientMethods": {"fs_read_text_file": "fs/read_text_file", "mcp_message": "mcp/message"},
        "protocolMethods": {"cancel_request": "$/cancel_request"},
    }


def test_an_unknown_side_or_a_key_clash_stops_the_generator() -> None:
    src = source()
    with pytest.raises(SystemExit, match="x-side 'editor'"):
        src.method_tables({"$defs": {"A": method("a/b", "editor")}}, 1)
    with pytest.raises(SystemExit, match="same key a_b"):
        src.method_tables({"$defs": {"A": method("a/b", "agent"), "B": method("a_b", "agent")}}, 1)


def test_the_real_tables() -> None:
    # What upstream's meta.json of this release said, a few entries of each kind.
    stable = load_meta("stable")
    assert stable["agentMethods"]["session_prompt"] == "session/prompt"
    assert stable["clientMethods"]["fs_read_text_file"] == "fs/read_text_file"
    assert stable["protocolMethods"] == {"cancel_request": "$/cancel_request"}
    assert "proxyMethods" not in stable
    unstable = load_meta("unstable")
    assert unstable["proxyMethods"]["proxy_successor"] == "proxy/successor"
    assert "mcp_message" in unstable["agentMethods"]
    assert "mcp_message" in unstable["clientMethods"]  # handled by both sides
    assert load_meta("v2")["version"] == 2


def test_the_structural_copy_keeps_properties_named_like_annotations() -> None:
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "description": "prose",
        "$defs": {
            "A": {
                "description": "more prose",
                "title": "A",
                "type": "object",
                "properties": {
                    "description": {"type": "string", "description": "prose again"},
                    "examples": {"type": "array", "examples": [[1]]},
                },
                "required": ["description"],
                "x-side": "agent",
            }
        },
    }
    out = source().structural(schema, "@agentclientprotocol/sdk@1.0.0", "v1/schema.json")
    assert list(out)[:3] == ["$schema", "$comment", "x-source"]
    assert out["x-source"] == "@agentclientprotocol/sdk@1.0.0"
    assert "description" not in out
    assert out["$defs"]["A"] == {
        "title": "A",
        "type": "object",
        "properties": {"description": {"type": "string"}, "examples": {"type": "array"}},
        "required": ["description"],
        "x-side": "agent",
    }
    # Made again from itself, it is the same (the modules can be made from it).
    again = source().structural(out, "@agentclientprotocol/sdk@1.0.0", "v1/schema.json")
    assert again == out


def test_the_shipped_schemas_name_one_source() -> None:
    label, schemas = source().read_shipped()
    assert label.startswith("@agentclientprotocol/sdk@")
    assert schemas["v1"] == load("stable")
