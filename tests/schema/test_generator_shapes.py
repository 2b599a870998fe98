"""Schema shapes the generator must accept beyond the v1 schema (found in ACP v2).

Small hand-made schemas, not the real one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ._schema_data import generator

PATH_CHANGE = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}


def variant(op: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"op": {"type": "string", "const": op}},
        "required": ["op"],
        "allOf": [{"$ref": "#/$defs/PathChange"}],
    }


SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$defs": {
        "PathChange": PATH_CHANGE,
        # two tags share one payload, and the union has common fields (v2 DiffChange)
        "Change": {
            "type": "object",
            "properties": {"mime": {"type": ["string", "null"]}},
            "anyOf": [variant("add"), variant("delete")],
        },
        # a structural union whose last branch accepts any value (v2 elicitation values)
        "Value": {"anyOf": [{"title": "Text", "type": "string"}, {"title": "Other"}]},
        "Holder": {
            "type": "object",
            "properties": {
                "change": {"$ref": "#/$defs/Change"},
                "value": {"$ref": "#/$defs/Value"},
            },
            "required": ["change", "value"],
        },
    },
}


def generate(tmp_path: Path) -> dict[str, str]:
    gen = generator()
    meta = {"agentMethods": {}, "clientMethods": {}, "version": 1}
    files: dict[str, str] = gen.generate(SCHEMA, meta, "0.0.0", "stable", "https://x")
    return files


def test_shared_payload_with_common_fields(tmp_path: Path) -> None:
    types = generate(tmp_path)["_generated_types.py"]
    for name in ("Add", "Delete"):
        body = types.split(f"class {name}:")[1].split("@attrs.frozen")[0]
        assert "mime: str | None = None" in body
        assert "path: str" in body
    assert "Change: TypeAlias = Add | Delete | UnknownChange" in types


def test_catch_all_branch_of_a_structural_union(tmp_path: Path) -> None:
    codec = generate(tmp_path)["_generated_codec.py"]
    body = codec.split("def _s_Value(d: Any) -> Value:")[1].split("\ndef ")[0]
    assert "type(d) is str" in body
    assert "if True:" in body
    assert body.index("type(d) is str") < body.index("if True:")
