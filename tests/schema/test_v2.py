"""ACP v2 (Preview) types: representative wire messages, separation from v1, the method table.

The generic suites (round trips of every definition, leniency, invalid input,
fuzzing) run over v2 as a flavour too; these are the messages v2 is about.
"""

from __future__ import annotations

from typing import Any

import attrs
import pytest

import acp_trio.schema as v1
import acp_trio.schema.v2 as v2
import acp_trio.schema.v2.unstable as v2_unstable

from ._schema_data import load, load_meta, validator

conv = v2.converter


def round_trip(data: dict[str, Any], target: Any) -> Any:
    obj = conv.structure(data, target)
    assert conv.unstructure(obj) == data
    return obj


def test_prompt_response_requires_the_message_id() -> None:
    obj = round_trip({"messageId": "msg-1"}, v2.PromptResponse)
    assert obj == v2.PromptResponse(message_id="msg-1")
    with pytest.raises(v2.SchemaValidationError, match=r"messageId: missing required field"):
        conv.structure({}, v2.PromptResponse)
    with pytest.raises(TypeError):
        v2.PromptResponse()  # type: ignore[call-arg]


IDLE_WITH_ERROR = {
    "sessionId": "s1",
    "update": {
        "sessionUpdate": "state_update",
        "state": "idle",
        "stopReason": "error",
        "error": {"code": -32603, "message": "handler failed"},
    },
}


def test_state_update_idle_with_an_error_stop_reason() -> None:
    note = round_trip(IDLE_WITH_ERROR, v2.UpdateSessionNotification)
    update = note.update
    assert type(update) is v2.IdleStateUpdate
    assert update.stop_reason == "error"
    assert update.error == v2.Error(code=-32603, message="handler failed")
    assert update.extra_ == {}  # neither tag is kept as an unknown key


def test_state_update_built_in_python_gets_both_tags() -> None:
    note = v2.UpdateSessionNotification(
        session_id="s1",
        update=v2.IdleStateUpdate(
            stop_reason="error", error=v2.Error(code=-32603, message="handler failed")
        ),
    )
    assert conv.unstructure(note) == IDLE_WITH_ERROR
    running = conv.unstructure(v2.RunningStateUpdate(), v2.SessionUpdate)
    assert running == {"sessionUpdate": "state_update", "state": "running"}
    # as a StateUpdate of its own it carries only its own tag
    assert conv.unstructure(v2.RunningStateUpdate(), v2.StateUpdate) == {"state": "running"}


def test_state_update_with_an_unknown_state_survives() -> None:
    data = {"sessionUpdate": "state_update", "state": "_paused", "why": [1]}
    update = conv.structure(data, v2.SessionUpdate)
    assert type(update) is v2.UnknownStateUpdate
    assert update.raw == {"state": "_paused", "why": [1]}
    assert conv.unstructure(update, v2.SessionUpdate) == data


def test_state_update_leniency_and_errors() -> None:
    def update(**fields: Any) -> Any:
        data = {"sessionId": "s", "update": {"sessionUpdate": "state_update", **fields}}
        return conv.structure(data, v2.UpdateSessionNotification).update

    # malformed optional fields mean "not reported" (x-deserialize-default-on-error)
    assert update(state="idle", background=7, stopReason=3) == v2.IdleStateUpdate()
    with pytest.raises(v2.SchemaValidationError, match=r"\$\.update\.state: missing required"):
        update()
    with pytest.raises(v2.SchemaValidationError, match=r"\$\.update\.state: expected a string"):
        update(state=5)


def test_tool_call_and_terminal_cancel() -> None:
    req = round_trip({"sessionId": "s1", "toolCallId": "call-2"}, v2.CancelToolCallRequest)
    assert req == v2.CancelToolCallRequest(session_id="s1", tool_call_id="call-2")
    round_trip({}, v2.CancelToolCallResponse)
    req = round_trip({"sessionId": "s1", "terminalId": "term-1"}, v2.CancelTerminalRequest)
    assert req == v2.CancelTerminalRequest(session_id="s1", terminal_id="term-1")
    round_trip({}, v2.CancelTerminalResponse)
    for wire, params, result in [
        ("tool_call/cancel", v2.CancelToolCallRequest, v2.CancelToolCallResponse),
        ("terminal/cancel", v2.CancelTerminalRequest, v2.CancelTerminalResponse),
    ]:
        info = v2.METHODS[wire]
        assert (info.kind, info.handled_by, info.params, info.result) == (
            "request",
            "agent",
            params,
            result,
        )


def test_unsupported_protocol_version_error_data_is_typed() -> None:
    data = {
        "code": -32022,
        "message": "Unsupported protocol version",
        "data": {"requested": 3, "supported": [1, 2]},
    }
    err = round_trip(data, v2.Error)
    assert err.data == v2.UnsupportedProtocolVersionErrorData(requested=3, supported=[1, 2])
    # any other data is kept as sent, also one that looks almost like the typed shape
    for other in ({"requested": "three", "supported": [1]}, "text", [1, 2], 5):
        assert round_trip({**data, "data": other}, v2.Error).data == other


@pytest.mark.parametrize(
    ("def_name", "data"),
    [
        ("PromptResponse", {"messageId": "msg-1"}),
        ("SessionNotification", IDLE_WITH_ERROR),
        ("CancelToolCallRequest", {"sessionId": "s1", "toolCallId": "call-2"}),
    ],
)
def test_examples_are_valid_v2(def_name: str, data: dict[str, Any]) -> None:
    """The hand-written examples above follow the v2 schema (its own def names)."""
    defs = load("v2")["$defs"]
    name = def_name if def_name in defs else "UpdateSessionNotification"
    assert name in defs
    errors = [e.message for e in validator("v2", name).iter_errors(data)]
    assert not errors


def test_v1_and_v2_classes_are_distinct() -> None:
    shared = [n for n in v2._types.__all__ if n in v1.__all__]
    checked = 0
    for name in shared:
        a, b = getattr(v1, name), getattr(v2, name)
        if attrs.has(a):
            assert a is not b, name
            checked += 1
    assert checked > 100
    assert v2.converter is not v1.converter
    assert v2.PROTOCOL_VERSION == 2
    assert v1.PROTOCOL_VERSION == 1
    # neither codec knows the other's classes
    assert v2.PromptResponse not in v1._converter.STABLE.structure
    assert v1.PromptResponse not in v2.V2.structure
    assert v2.PromptResponse in v2.V2.structure


def test_v2_prompt_response_differs_from_v1() -> None:
    assert "message_id" in attrs.fields_dict(v2.PromptResponse)
    assert "stop_reason" in attrs.fields_dict(v1.PromptResponse)


def test_method_table_matches_meta() -> None:
    meta = load_meta("v2")
    sides = {"agentMethods": "agent", "clientMethods": "client", "protocolMethods": "protocol"}
    expected = {wire: sides[table] for table in sides for wire in meta[table].values()}
    assert {name: info.handled_by for name, info in v2.METHODS.items()} == expected
    assert set(v2.REQUESTS) | set(v2.NOTIFICATIONS) == set(v2.METHODS)
    assert "session/load" not in v2.METHODS  # gone in v2
    assert v2.NOTIFICATIONS["session/update"].params is v2.UpdateSessionNotification
    assert v2.REQUESTS["session/prompt"].result is v2.PromptResponse


def test_unstable_v2_is_its_own_set() -> None:
    meta = load_meta("v2-unstable")
    wires = {w for table in meta.values() if isinstance(table, dict) for w in table.values()}
    assert set(v2_unstable.METHODS) == wires
    assert set(v2.METHODS) < set(v2_unstable.METHODS)
    assert v2_unstable.NewSessionRequest is not v2.NewSessionRequest  # it differs
    assert v2_unstable.PromptResponse is v2.PromptResponse  # the same: reused
    assert v2_unstable.converter is not v2.converter


def test_unstable_v2_state_update_as_a_field_and_as_a_session_update() -> None:
    conv_u = v2_unstable.converter
    status = {"status": "open", "state": {"state": "idle", "stopReason": "end_turn"}}
    obj = conv_u.structure(status, v2_unstable.SessionStatusResponse)
    assert obj.state == v2_unstable.IdleStateUpdate(stop_reason="end_turn")
    assert conv_u.unstructure(obj) == status  # no sessionUpdate tag in a plain field
    note = {"sessionId": "s", "update": {"sessionUpdate": "state_update", **status["state"]}}
    obj = conv_u.structure(note, v2_unstable.UpdateSessionNotification)
    assert type(obj.update) is v2_unstable.IdleStateUpdate
    assert conv_u.unstructure(obj) == note


UPSERTS = [
    ("ToolCallUpdate", {"toolCallId": "t"}, "title"),
    ("TerminalUpdate", {"terminalId": "x"}, "command"),
    ("AgentMessage", {"messageId": "m"}, "content"),
    ("UserMessage", {"messageId": "m"}, "content"),
    ("AgentThought", {"messageId": "m"}, "content"),
    ("SessionInfoUpdate", {}, "title"),
    ("CompactionUpdate", {"compactionId": "c", "status": "completed"}, "summary"),
]


@pytest.mark.parametrize(("name", "base", "wire"), UPSERTS)
def test_v2_upserts_keep_omitted_null_and_value_apart(
    name: str, base: dict[str, Any], wire: str
) -> None:
    cls = getattr(v2, name)
    omitted = v2.converter.structure(dict(base), cls)
    cleared = v2.converter.structure({**base, wire: None}, cls)
    assert getattr(omitted, _attr(wire)) is v2.UNSET
    assert getattr(cleared, _attr(wire)) is None
    # Each comes back out as it came in: absent stays absent, null stays null.
    assert wire not in v2.converter.unstructure(omitted)
    assert v2.converter.unstructure(cleared)[wire] is None


def _attr(wire: str) -> str:
    return "".join("_" + c.lower() if c.isupper() else c for c in wire)


def test_v1_tool_call_update_still_treats_null_as_absent() -> None:
    update = v1.converter.structure({"toolCallId": "t", "title": None}, v1.ToolCallUpdate)
    assert update.title is None
    assert v1.converter.structure({"toolCallId": "t"}, v1.ToolCallUpdate).title is None
