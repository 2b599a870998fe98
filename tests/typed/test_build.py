"""``acp_trio.build``: each builder makes the wire JSON the protocol
defines, valid against the v1 schema, with the protocol's defaults."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from acp_trio import build
from acp_trio.schema import SessionNotification, converter
from acp_trio.testing._schema_check import MessageValidator

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "typed_usage"))

import builders_usage


@pytest.fixture(scope="module")
def validator() -> MessageValidator:
    loaded = MessageValidator.load()
    if isinstance(loaded, str):
        pytest.skip(loaded)
    return loaded


def wire(value: Any) -> Any:
    return converter.unstructure(value)


def check_update(validator: MessageValidator, update: Any) -> dict[str, Any]:
    """The update's JSON, after validating it as a session/update."""
    params = wire(SessionNotification(session_id="s", update=update))
    message = {"jsonrpc": "2.0", "method": "session/update", "params": params}
    assert validator.check(message) is None
    result: dict[str, Any] = params["update"]
    return result


def test_content_blocks() -> None:
    assert wire(build.text("hi")) == {"type": "text", "text": "hi"}
    assert wire(build.image(b"\x00\x01", "image/png")) == {
        "type": "image",
        "data": "AAE=",
        "mimeType": "image/png",
    }
    assert wire(build.image("AAE=", "image/png", uri="file:///a.png"))["uri"] == "file:///a.png"
    assert wire(build.audio(b"x", "audio/wav")) == {
        "type": "audio",
        "data": "eA==",
        "mimeType": "audio/wav",
    }
    assert wire(build.resource_link("file:///a", "a", size=3)) == {
        "type": "resource_link",
        "uri": "file:///a",
        "name": "a",
        "size": 3,
    }
    assert wire(build.text_resource("file:///a", "body", mime_type="text/plain")) == {
        "type": "resource",
        "resource": {"uri": "file:///a", "text": "body", "mimeType": "text/plain"},
    }
    assert wire(build.blob_resource("file:///b", b"\xff")) == {
        "type": "resource",
        "resource": {"uri": "file:///b", "blob": "/w=="},
    }


def test_message_chunks(validator: MessageValidator) -> None:
    assert check_update(validator, build.agent_message("hello")) == {
        "sessionUpdate": "agent_message_chunk",
        "content": {"type": "text", "text": "hello"},
    }
    thought = check_update(validator, build.agent_thought(build.text("hmm"), message_id="m1"))
    assert thought == {
        "sessionUpdate": "agent_thought_chunk",
        "content": {"type": "text", "text": "hmm"},
        "messageId": "m1",
    }
    user = check_update(validator, build.user_message(build.resource_link("file:///x", "x")))
    assert user["sessionUpdate"] == "user_message_chunk"
    assert user["content"]["type"] == "resource_link"


def test_tool_calls(validator: MessageValidator) -> None:
    start, update = builders_usage.edit_call("old", "new")
    assert check_update(validator, start) == {
        "sessionUpdate": "tool_call",
        "toolCallId": "call-1",
        "title": "Edit main.py",
        "kind": "edit",
        "status": "pending",
        "content": [{"type": "diff", "path": "/work/main.py", "oldText": "old", "newText": "new"}],
    }
    assert check_update(validator, update) == {
        "sessionUpdate": "tool_call_update",
        "toolCallId": "call-1",
        "status": "completed",
        "content": [
            {"type": "content", "content": {"type": "text", "text": "done"}},
            {"type": "diff", "path": "/work/main.py", "oldText": "old", "newText": "new"},
        ],
    }
    located = build.tool_call_start(
        "c2",
        "Run tests",
        kind="execute",
        status="in_progress",
        content=[build.terminal("term-1")],
        locations=[build.location("/work/t.py", line=4)],
        raw_input={"cmd": "pytest"},
    )
    assert check_update(validator, located)["locations"] == [{"path": "/work/t.py", "line": 4}]
    assert check_update(validator, located)["content"] == [
        {"type": "terminal", "terminalId": "term-1"}
    ]
    # Only what is given goes out; an empty content list clears the content.
    assert check_update(validator, build.tool_call_update("c2", title="Ran tests")) == {
        "sessionUpdate": "tool_call_update",
        "toolCallId": "c2",
        "title": "Ran tests",
    }
    assert check_update(validator, build.tool_call_update("c2", content=[]))["content"] == []
    # A new file: no oldText (null would also be valid; absent is what's sent).
    assert wire(build.diff("/work/new.py", "x")) == {
        "type": "diff",
        "path": "/work/new.py",
        "newText": "x",
    }


def test_plan_commands_modes(validator: MessageValidator) -> None:
    entries = builders_usage.steps()
    assert [(e.content, e.status, e.priority) for e in entries] == [
        ("read", "completed", "medium"),
        ("edit", "pending", "medium"),
        ("test", "pending", "medium"),
    ]
    plan = check_update(validator, build.plan(["a", build.plan_entry("b", priority="high")]))
    assert plan == {
        "sessionUpdate": "plan",
        "entries": [
            {"content": "a", "priority": "medium", "status": "pending"},
            {"content": "b", "priority": "high", "status": "pending"},
        ],
    }
    commands = build.available_commands([build.command("test", "Run the tests")])
    assert check_update(validator, commands) == {
        "sessionUpdate": "available_commands_update",
        "availableCommands": [{"name": "test", "description": "Run the tests"}],
    }
    assert check_update(validator, build.current_mode("code")) == {
        "sessionUpdate": "current_mode_update",
        "currentModeId": "code",
    }
    assert check_update(validator, build.config_options([])) == {
        "sessionUpdate": "config_option_update",
        "configOptions": [],
    }


def test_permission_options() -> None:
    assert [wire(o) for o in build.ALLOW_OR_REJECT] == [
        {"optionId": "allow", "name": "Allow", "kind": "allow_once"},
        {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
    ]
    always = build.permission_option("always", "Always allow", "allow_always")
    assert wire(always)["kind"] == "allow_always"
    with pytest.raises(ValueError, match="allow_once"):
        build.permission_option("x", "X", "maybe")  # type: ignore[arg-type]
