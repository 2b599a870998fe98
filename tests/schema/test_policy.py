"""The converter's policy, rule by rule (see acp_trio/schema/_converter.py).

These tests use hand-written messages and need no upstream schema files.
Round trips are checked with the suite's equality rule: JSON text with
sorted keys must be identical.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import attrs
import pytest

import acp_trio.schema as acp
from acp_trio.schema import UNSET, SchemaValidationError, converter

SCHEMA_LOGGER = "acp_trio.schema"


def same_json(a: Any, b: Any) -> bool:
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def round_trip(data: Any, cls: Any) -> Any:
    obj = converter.structure(data, cls)
    out = converter.unstructure(obj, unstructure_as=cls)
    assert same_json(out, data), (out, data)
    return obj


def round_trip_to(data: Any, cls: Any, expected: Any) -> Any:
    """Structure ``data``; its output is ``expected`` (a normalised form) and is stable."""
    obj = converter.structure(data, cls)
    out = converter.unstructure(obj, unstructure_as=cls)
    assert same_json(out, expected), (out, expected)
    assert round_trip(out, cls) == obj
    return obj


CHUNK = {
    "sessionId": "sess_1",
    "update": {
        "sessionUpdate": "agent_message_chunk",
        "content": {"type": "text", "text": "Hello"},
    },
}

# -- names and _meta --------------------------------------------------------------------


def test_snake_case_attributes_and_camel_case_wire() -> None:
    note = converter.structure(CHUNK, acp.SessionNotification)
    assert note.session_id == "sess_1"
    assert isinstance(note.update, acp.AgentMessageChunk)
    assert isinstance(note.update, acp.ContentChunk)
    assert note.update.content == acp.TextContent(text="Hello")
    assert converter.unstructure(note) == CHUNK


def test_meta_at_several_levels_is_passed_through() -> None:
    data = {
        "sessionId": "s",
        "update": {
            "sessionUpdate": "tool_call",
            "toolCallId": "t1",
            "title": "Edit",
            "content": [
                {
                    "type": "diff",
                    "path": "/a.py",
                    "newText": "x",
                    "_meta": {"level": 3},
                }
            ],
            "_meta": {"level": 2, "nested": {"deep": [1, None]}},
        },
        "_meta": {"traceparent": "00-1-2-01", "level": 1},
    }
    note = round_trip(data, acp.SessionNotification)
    assert note.meta == {"traceparent": "00-1-2-01", "level": 1}
    assert note.update.meta == {"level": 2, "nested": {"deep": [1, None]}}
    assert note.update.content[0].meta == {"level": 3}


def test_meta_is_never_merged_into_fields() -> None:
    data = {
        "cwd": "/work",
        "mcpServers": [],
        "_meta": {"cwd": "/elsewhere", "additionalDirectories": ["/x"], "sessionId": "s"},
    }
    req = round_trip(data, acp.NewSessionRequest)
    assert req.cwd == "/work"
    assert req.additional_directories is None
    assert req.meta == data["_meta"]
    out = converter.unstructure(acp.NewSessionRequest(cwd="/w", mcp_servers=[], meta={"cwd": 1}))
    assert out == {"cwd": "/w", "mcpServers": [], "_meta": {"cwd": 1}}


def test_malformed_meta_falls_back_to_none(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger=SCHEMA_LOGGER):
        note = converter.structure({**CHUNK, "_meta": "oops"}, acp.SessionNotification)
    assert note.meta is None
    assert "SessionNotification._meta" in caplog.text


# -- unknown keys ------------------------------------------------------------------------


def test_unknown_keys_survive_at_every_level() -> None:
    data = {
        "sessionId": "s",
        "futureTop": {"a": 1},
        "update": {
            "sessionUpdate": "agent_message_chunk",
            "futureUpdate": [1, 2],
            "content": {"type": "text", "text": "x", "futureContent": None},
        },
    }
    note = round_trip(data, acp.SessionNotification)
    assert note.extra_ == {"futureTop": {"a": 1}}
    assert note.update.extra_ == {"futureUpdate": [1, 2]}
    assert note.update.content.extra_ == {"futureContent": None}


def test_extra_is_not_part_of_equality_or_repr() -> None:
    a = converter.structure({"text": "x", "future": 1}, acp.TextContent)
    b = acp.TextContent(text="x")
    assert a == b
    assert "future" not in repr(a)
    assert converter.unstructure(b) == {"type": "text", "text": "x"}


def test_typed_field_wins_over_extra_on_output() -> None:
    obj = converter.structure({"toolCallId": "t", "title": None}, acp.ToolCallUpdate)
    assert obj.title is None
    assert obj.extra_ == {"title": None}
    assert converter.unstructure(obj) == {"toolCallId": "t", "title": None}
    changed = attrs.evolve(obj, title="Now set")
    assert converter.unstructure(changed) == {"toolCallId": "t", "title": "Now set"}


# -- unknown union variants --------------------------------------------------------------

UNKNOWN_VARIANTS = [
    (acp.SessionUpdate, acp.UnknownSessionUpdate, {"sessionUpdate": "future_kind", "x": [1]}),
    (acp.ContentBlock, acp.UnknownContentBlock, {"type": "video", "url": "u"}),
    (acp.ToolCallContent, acp.UnknownToolCallContent, {"type": "hologram"}),
    (acp.RequestPermissionOutcome, acp.UnknownRequestPermissionOutcome, {"outcome": "later"}),
    (acp.SessionConfigOption, acp.UnknownSessionConfigOption, {"type": "slider", "id": "i"}),
    (
        acp.CreateElicitationRequest,
        acp.UnknownCreateElicitationRequest,
        {"mode": "voice", "message": "m", "sessionId": "s"},
    ),
    (acp.CreateElicitationResponse, acp.UnknownCreateElicitationResponse, {"action": "defer"}),
    (acp.ElicitationPropertySchema, acp.UnknownElicitationPropertySchema, {"type": "date"}),
    (acp.MultiSelectItems, acp.UnknownMultiSelectItems, {"type": "number", "enum": [1]}),
    (acp.McpServer, acp.UnknownMcpServer, {"type": "ws", "name": "n", "url": "u"}),
    (acp.AuthMethod, acp.UnknownAuthMethod, {"type": "env_var", "vars": []}),
    (
        acp.SetSessionConfigOptionRequest,
        acp.UnknownSetSessionConfigOptionRequest,
        {"type": "number", "sessionId": "s", "configId": "c", "value": 3},
    ),
]


@pytest.mark.parametrize(("union", "unknown_cls", "data"), UNKNOWN_VARIANTS)
def test_unknown_tag_becomes_unknown_value(union: Any, unknown_cls: type, data: Any) -> None:
    obj = converter.structure(data, union)
    assert type(obj) is unknown_cls
    assert obj.raw == data
    assert converter.unstructure(obj) == data
    assert converter.unstructure(obj, unstructure_as=union) == data


def test_every_tagged_union_has_an_unknown_class() -> None:
    from acp_trio.schema._generated_tables import UNIONS

    tagged = {name for name, spec in UNIONS.items() if spec.key is not None}
    covered = {u.__name__ for u, _, _ in UNKNOWN_VARIANTS if hasattr(u, "__name__")}
    assert all(spec.unknown is not None for spec in UNIONS.values() if spec.key is not None)
    assert {f"Unknown{n}" for n in tagged} == {c.__name__ for _, c, _ in UNKNOWN_VARIANTS}
    assert covered <= tagged


def test_unknown_variant_inside_a_list_is_kept() -> None:
    data = {
        "sessionId": "s",
        "prompt": [{"type": "text", "text": "hi"}, {"type": "video", "url": "u"}],
    }
    req = round_trip(data, acp.PromptRequest)
    assert type(req.prompt[1]) is acp.UnknownContentBlock


def test_untagged_fallback_variants() -> None:
    stdio = {"name": "fs", "command": "mcp-fs", "args": [], "env": []}
    assert type(round_trip(stdio, acp.McpServer)) is acp.McpServerStdio
    # an explicit tag the schema does not list still fits the untagged variant: kept as a key
    tagged_stdio = {**stdio, "type": "stdio"}
    server = round_trip(tagged_stdio, acp.McpServer)
    assert type(server) is acp.McpServerStdio
    assert server.extra_ == {"type": "stdio"}
    agent = round_trip({"id": "a", "name": "Agent login"}, acp.AuthMethod)
    assert type(agent) is acp.AuthMethodAgent
    value = round_trip(
        {"sessionId": "s", "configId": "c", "value": "v"}, acp.SetSessionConfigOptionRequest
    )
    assert type(value) is acp.SetSessionConfigOptionRequestValueId


def test_structural_unions() -> None:
    text = {"uri": "file:///a", "text": "x"}
    blob = {"uri": "file:///a", "blob": "AAAA"}
    assert type(round_trip(text, acp.EmbeddedResourceResource)) is acp.TextResourceContents
    assert type(round_trip(blob, acp.EmbeddedResourceResource)) is acp.BlobResourceContents
    for value in ("x", 3, 2.5, True, ["a", "b"]):
        assert round_trip(value, acp.ElicitationContentValue) == value
    assert type(converter.structure(3, acp.ElicitationContentValue)) is int
    for rid in (None, 0, "0", -1):
        assert round_trip(rid, acp.RequestId) == rid
    with pytest.raises(SchemaValidationError):
        converter.structure(True, acp.RequestId)
    with pytest.raises(SchemaValidationError):
        converter.structure(1.5, acp.RequestId)


def test_elicitation_scope_is_flattened() -> None:
    data = {
        "mode": "form",
        "message": "Name?",
        "requestedSchema": {"properties": {"name": {"type": "string"}}},
        "sessionId": "s",
        "toolCallId": None,
    }
    req = round_trip(data, acp.CreateElicitationRequest)
    assert isinstance(req, acp.ElicitationFormMode)
    assert req.scope == acp.ElicitationSessionScope(session_id="s")
    by_request = {"mode": "url", "message": "m", "elicitationId": "e", "url": "u", "requestId": 4}
    req2 = round_trip(by_request, acp.CreateElicitationRequest)
    assert req2.scope == acp.ElicitationRequestScope(request_id=4)


# -- leniency: x-deserialize-default-on-error and x-deserialize-skip-invalid-items --------


def test_lenient_optional_field_falls_back(caplog: pytest.LogCaptureFixture) -> None:
    data = {"toolCallId": "t", "title": "T", "kind": "teleport", "status": 5, "locations": "x"}
    with caplog.at_level(logging.DEBUG, logger=SCHEMA_LOGGER):
        call = converter.structure(data, acp.ToolCall)
    assert (call.kind, call.status, call.locations) == (None, None, None)
    assert "ToolCall.kind" in caplog.text
    assert "ToolCall.status" in caplog.text
    assert converter.unstructure(call) == {
        "sessionUpdate": "tool_call",
        "toolCallId": "t",
        "title": "T",
    }


def test_lenient_nested_object_falls_back() -> None:
    data = {"type": "text", "text": "x", "annotations": ["not", "an", "object"]}
    assert converter.structure(data, acp.ContentBlock).annotations is None
    # leniency nests: a bad field inside a good object only resets that field
    data = {"type": "text", "text": "x", "annotations": {"priority": "high", "lastModified": "t"}}
    assert converter.structure(data, acp.ContentBlock).annotations == acp.Annotations(
        last_modified="t"
    )


def test_lenient_default_object_falls_back_to_default() -> None:
    req = converter.structure(
        {"protocolVersion": 1, "clientCapabilities": {"fs": "yes", "terminal": "no"}},
        acp.InitializeRequest,
    )
    assert req.client_capabilities.fs == acp.FileSystemCapabilities()
    assert req.client_capabilities.terminal is False
    broken = converter.structure(
        {"protocolVersion": 1, "clientCapabilities": []}, acp.InitializeRequest
    )
    assert broken.client_capabilities == acp.ClientCapabilities()


def test_skip_invalid_items(caplog: pytest.LogCaptureFixture) -> None:
    data = {
        "toolCallId": "t",
        "title": "Read",
        "locations": [{"path": "/a"}, {"line": 1}, "junk"],
        "content": [{"type": "content", "content": {"type": "text", "text": "x"}}, 3],
    }
    with caplog.at_level(logging.DEBUG, logger=SCHEMA_LOGGER):
        call = converter.structure(data, acp.ToolCall)
    assert call.locations == [acp.ToolCallLocation(path="/a")]
    assert call.content == [acp.Content(content=acp.TextContent(text="x"))]
    assert "dropping malformed item 1 of ToolCall.locations" in caplog.text
    notes = converter.structure({"audience": ["user", 3, "assistant"]}, acp.Annotations)
    assert notes.audience == ["user", "assistant"]


def test_required_lenient_list_reads_missing_as_empty() -> None:
    plan = converter.structure({}, acp.Plan)
    assert plan.entries == []
    plan = converter.structure({"entries": None}, acp.Plan)
    assert plan.entries == []
    assert converter.unstructure(plan) == {"sessionUpdate": "plan", "entries": []}


def test_default_on_null_reads_null_as_the_default() -> None:
    """``x-deserialize-default-on-null``: ``null`` in a required list is the empty list."""
    req = round_trip_to(
        {"cwd": "/w", "mcpServers": None}, acp.NewSessionRequest, {"cwd": "/w", "mcpServers": []}
    )
    assert req.mcp_servers == []
    stdio = {"name": "fs", "command": "srv", "args": None, "env": None}
    server = round_trip_to(stdio, acp.McpServer, {**stdio, "args": [], "env": []})
    assert server == acp.McpServerStdio(name="fs", command="srv", args=[], env=[])
    http = {"type": "http", "name": "web", "url": "https://example.com/mcp", "headers": None}
    assert round_trip_to(http, acp.McpServer, {**http, "headers": []}) == acp.McpServerHttp(
        name="web", url="https://example.com/mcp", headers=[]
    )
    # optional fields with the mark: null is absent, as for every optional field
    term = converter.structure(
        {"sessionId": "s", "command": "ls", "args": None}, acp.CreateTerminalRequest
    )
    assert term.args is None
    assert converter.unstructure(term) == {"sessionId": "s", "command": "ls"}


def test_default_on_null_is_only_for_null() -> None:
    """A missing key or a wrong type is still an error, and so is ``null`` without the mark."""
    with pytest.raises(SchemaValidationError) as info:
        converter.structure({"cwd": "/w"}, acp.NewSessionRequest)
    assert info.value.errors == ["$.mcpServers: missing required field"]
    with pytest.raises(SchemaValidationError) as info:
        converter.structure({"cwd": "/w", "mcpServers": 3}, acp.NewSessionRequest)
    assert info.value.errors == ["$.mcpServers: expected an array of McpServer items, got integer"]
    stdio = {"name": None, "command": "srv", "args": None, "env": []}
    with pytest.raises(SchemaValidationError) as info:
        converter.structure(stdio, acp.McpServerStdio)
    assert info.value.errors == ["$.name: expected a string, got null"]
    with pytest.raises(SchemaValidationError) as info:
        converter.structure({**stdio, "name": "fs", "env": [None]}, acp.McpServerStdio)
    assert info.value.errors == ["$.env[0]: expected a EnvVariable object, got null"]


def test_non_lenient_field_is_an_error() -> None:
    with pytest.raises(SchemaValidationError) as info:
        converter.structure({"cwd": 5}, acp.ListSessionsRequest)
    assert info.value.errors == ["$.cwd: expected a string, got integer"]


# -- null, absent, UNSET and defaults ----------------------------------------------------


def test_session_info_update_null_clears_and_absent_is_unchanged() -> None:
    absent = converter.structure({"sessionUpdate": "session_info_update"}, acp.SessionUpdate)
    assert isinstance(absent, acp.SessionInfoUpdate)
    assert absent.title is UNSET
    assert absent.updated_at is UNSET
    cleared = round_trip({"sessionUpdate": "session_info_update", "title": None}, acp.SessionUpdate)
    assert cleared.title is None
    assert cleared.updated_at is UNSET
    assert cleared.extra_ == {}
    set_ = round_trip(
        {"sessionUpdate": "session_info_update", "title": "T", "updatedAt": None},
        acp.SessionUpdate,
    )
    assert (set_.title, set_.updated_at) == ("T", None)
    assert converter.unstructure(acp.SessionInfoUpdate(title=None)) == {
        "sessionUpdate": "session_info_update",
        "title": None,
    }
    assert converter.unstructure(acp.SessionInfoUpdate()) == {
        "sessionUpdate": "session_info_update"
    }
    assert not UNSET
    assert repr(UNSET) == "UNSET"


def test_compaction_update_patch_fields() -> None:
    data = {"compactionId": "c", "status": "failed", "summary": None, "error": "boom"}
    obj = converter.structure(data, acp.CompactionUpdate)
    assert obj.summary is None
    assert obj.error == "boom"
    assert obj.meta is UNSET
    assert converter.unstructure(obj) == {"sessionUpdate": "compaction_update", **data}


# -- session updates and capabilities new in the refreshed schema -------------------------


def test_notice_session_update_round_trips() -> None:
    data = {
        "sessionId": "s",
        "update": {
            "sessionUpdate": "notice",
            "severity": "warning",
            "title": "Rate limited",
            "description": "Retrying in 5 s",
            "_meta": {"vendor": 1},
        },
    }
    note = round_trip(data, acp.SessionNotification)
    assert note.update == acp.Notice(
        severity="warning", title="Rate limited", description="Retrying in 5 s", meta={"vendor": 1}
    )
    custom = round_trip(
        {"sessionUpdate": "notice", "severity": "_acme_hint", "title": "T"}, acp.SessionUpdate
    )
    assert custom.severity == "_acme_hint"  # an open enum: custom severities are kept
    assert converter.unstructure(acp.Notice(severity="info", title="Hi")) == {
        "sessionUpdate": "notice",
        "severity": "info",
        "title": "Hi",
    }
    with pytest.raises(SchemaValidationError) as info:
        converter.structure(
            {"sessionUpdate": "notice", "severity": "info", "title": ""}, acp.Notice
        )
    assert info.value.errors == ['$.title: expected a non-empty string, got ""']


def test_compaction_session_updates_round_trip() -> None:
    started = round_trip(
        {"sessionUpdate": "compaction_update", "compactionId": "c1", "status": "in_progress"},
        acp.SessionUpdate,
    )
    assert started == acp.CompactionUpdate(compaction_id="c1", status="in_progress")
    assert started.summary is UNSET
    chunk = round_trip(
        {
            "sessionUpdate": "compaction_summary_chunk",
            "compactionId": "c1",
            "content": {"type": "text", "text": "Summary so far"},
        },
        acp.SessionUpdate,
    )
    assert chunk == acp.CompactionSummaryChunk(
        compaction_id="c1", content=acp.TextContent(text="Summary so far")
    )
    done = round_trip(
        {
            "sessionUpdate": "compaction_update",
            "compactionId": "c1",
            "status": "completed",
            "summary": [{"type": "text", "text": "All of it"}],
            "_meta": None,
        },
        acp.SessionUpdate,
    )
    assert done.summary == [acp.TextContent(text="All of it")]
    assert done.meta is None  # null clears the metadata; absent would leave it
    caps = round_trip({"session": {"notices": {}, "compaction": {}}}, acp.ClientCapabilities)
    assert caps.session == acp.ClientSessionCapabilities(
        notices=acp.NoticeCapabilities(), compaction=acp.CompactionCapabilities()
    )


def test_unstable_state_update_variants() -> None:
    from acp_trio.schema import unstable

    conv = unstable.converter
    base = {"sessionUpdate": "subagent_update", "sessionId": "child"}
    failed = conv.structure(
        {
            **base,
            "state": {"state": "idle", "stopReason": "error", "error": {"code": 1, "message": "x"}},
        },
        unstable.SessionUpdate,
    )
    assert failed.state == unstable.IdleStateUpdate(
        stop_reason="error", error=unstable.Error(code=1, message="x")
    )
    assert failed.title is UNSET  # a patch: absent leaves it unchanged
    # "unknown" is a state of its own; an unknown state value is kept raw
    assert conv.structure({"state": "unknown"}, unstable.StateUpdate) == (
        unstable.UnknownStateUpdate()
    )
    later = {"state": "paused_by_user", "since": 3}
    other = conv.structure(later, unstable.StateUpdate)
    assert other == unstable.OtherStateUpdate(raw=later)
    assert conv.unstructure(other, unstructure_as=unstable.StateUpdate) == later
    # a malformed stop reason means "not reported"
    idle = conv.structure({"state": "idle", "stopReason": 7}, unstable.StateUpdate)
    assert idle == unstable.IdleStateUpdate()
    cleared = conv.structure({**base, "state": None}, unstable.SessionUpdate)
    assert cleared.state is None
    assert conv.unstructure(cleared) == {**base, "state": None}


def test_unstable_mcp_message_response_branches() -> None:
    from acp_trio.schema import unstable

    conv = unstable.converter
    result = conv.structure({"result": None}, unstable.MessageMcpResponse)
    assert result == unstable.MessageMcpResponseResult(result=None)
    assert conv.unstructure(result, unstructure_as=unstable.MessageMcpResponse) == {"result": None}
    error = conv.structure({"error": {"code": -1, "message": "m"}}, unstable.MessageMcpResponse)
    assert error == unstable.MessageMcpResponseError(error=unstable.McpError(code=-1, message="m"))
    assert unstable.REQUESTS["mcp/message"].result is unstable.MessageMcpResponse
    with pytest.raises(SchemaValidationError):
        conv.structure({"error": None}, unstable.MessageMcpResponse)
