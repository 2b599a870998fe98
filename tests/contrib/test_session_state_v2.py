"""``acp_trio.contrib.v2.SessionAccumulator`` against a recorded stream of
every v2 update kind (as JSON on the wire, structured by the v2 converter):
upserts with three-state patches, chunks appended, the turn's state and
background work, unknown future kinds kept."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from acp_trio.contrib import SessionAccumulator as V1Accumulator
from acp_trio.contrib.v2 import SessionAccumulator, SessionStates, patch_meta
from acp_trio.schema import v2


def text(t: str) -> dict[str, Any]:
    return {"type": "text", "text": t}


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


#: One v2 session's updates as an agent sent them.
STREAM: list[dict[str, Any]] = [
    {"sessionUpdate": "user_message", "messageId": "u1", "content": [text("fix the bug")]},
    {"sessionUpdate": "state_update", "state": "running"},
    {"sessionUpdate": "agent_thought_chunk", "messageId": "th1", "content": text("Looking")},
    {"sessionUpdate": "plan_update", "plan": {"type": "items", "planId": "p1", "entries": [
        {"content": "read", "priority": "high", "status": "in_progress"}]}},
    # A tool call made by its first update, then patched field by field.
    {"sessionUpdate": "tool_call_update", "toolCallId": "t1", "title": "Read main.py",
     "kind": "read", "status": "in_progress", "locations": [{"path": "/w/main.py"}],
     "_meta": {"a": 1, "b": 2}},
    {"sessionUpdate": "tool_call_content_chunk", "toolCallId": "t1",
     "content": {"type": "content", "content": text("print(1)")}},
    {"sessionUpdate": "tool_call_content_chunk", "toolCallId": "t1",
     "content": {"type": "content", "content": text("print(2)")}},
    {"sessionUpdate": "tool_call_update", "toolCallId": "t1", "status": "completed",
     "title": None, "locations": [], "rawOutput": {"lines": 2}, "_meta": {"a": None, "c": 3}},
    # Status null resets to pending, kind null to other.
    {"sessionUpdate": "tool_call_update", "toolCallId": "t2", "kind": "edit",
     "status": "in_progress"},
    {"sessionUpdate": "tool_call_update", "toolCallId": "t2", "kind": None, "status": None},
    {"sessionUpdate": "state_update", "state": "requires_action"},
    # A terminal: snapshot, chunks, exit, then a new snapshot replaces the output.
    {"sessionUpdate": "terminal_update", "terminalId": "x1", "command": "pytest",
     "cwd": "/w", "output": {"data": b64(b"collecting")}},
    {"sessionUpdate": "terminal_output_chunk", "terminalId": "x1", "data": b64(b" ok\n")},
    {"sessionUpdate": "terminal_update", "terminalId": "x1", "exitStatus": {"exitCode": 0}},
    {"sessionUpdate": "terminal_update", "terminalId": "x2", "output": {"data": b64(b"a")}},
    {"sessionUpdate": "terminal_update", "terminalId": "x2", "output": None},
    {"sessionUpdate": "state_update", "state": "running",
     "background": [{"type": "terminal", "terminalId": "x1"}]},
    # Messages: chunks append; a full upsert replaces; a later chunk appends again.
    {"sessionUpdate": "agent_message_chunk", "messageId": "a1", "content": text("Fixed ")},
    {"sessionUpdate": "agent_message_chunk", "messageId": "a1", "content": text("it?")},
    {"sessionUpdate": "agent_message", "messageId": "a1", "content": [text("Fixed it.")]},
    {"sessionUpdate": "agent_message_chunk", "messageId": "a1", "content": text(" Done.")},
    {"sessionUpdate": "agent_message", "messageId": "a2", "content": [text("drop me")]},
    {"sessionUpdate": "agent_message", "messageId": "a2", "content": None},
    {"sessionUpdate": "agent_message", "messageId": "a3"},
    {"sessionUpdate": "available_commands_update", "availableCommands": [
        {"type": "command", "name": "test", "description": "Run the tests"}]},
    {"sessionUpdate": "config_option_update", "configOptions": []},
    {"sessionUpdate": "session_info_update", "title": "Fix the bug", "updatedAt": "2026-12-04"},
    {"sessionUpdate": "session_info_update", "title": None},
    {"sessionUpdate": "usage_update", "used": 1200, "size": 200000},
    {"sessionUpdate": "notice", "severity": "warning", "title": "Rate limited"},
    {"sessionUpdate": "compaction_update", "compactionId": "c1", "status": "in_progress"},
    {"sessionUpdate": "compaction_summary_chunk", "compactionId": "c1", "content": text("sum")},
    {"sessionUpdate": "compaction_update", "compactionId": "c1", "status": "completed",
     "error": "partial"},
    {"sessionUpdate": "compaction_update", "compactionId": "c1", "status": "completed",
     "summary": [], "error": None},
    {"sessionUpdate": "state_update", "state": "idle", "stopReason": "end_turn",
     "background": []},
    {"sessionUpdate": "state_update", "state": "paused_by_v9", "background": []},
    {"sessionUpdate": "future_kind_from_v9", "payload": [1, 2, 3]},
]  # fmt: skip


def notifications(session_id: str = "s1") -> list[v2.UpdateSessionNotification]:
    return [
        v2.converter.structure(
            {"sessionId": session_id, "update": update}, v2.UpdateSessionNotification
        )
        for update in STREAM
    ]


def folded() -> SessionAccumulator:
    state = SessionAccumulator()
    for notification in notifications():
        state.apply(notification)
    return state


def test_every_update_kind_is_folded() -> None:
    state = folded()
    assert state.session_id == "s1"
    assert state.updates == len(STREAM)
    assert [(m.kind, m.message_id, m.text) for m in state.messages.values()] == [
        ("user", "u1", "fix the bug"),
        ("thought", "th1", "Looking"),
        ("agent", "a1", "Fixed it. Done."),
        ("agent", "a2", ""),
        ("agent", "a3", ""),
    ]
    assert state.agent_text() == "Fixed it. Done."
    assert [e.content for e in state.plans["p1"]] == ["read"]
    assert [c.name for c in state.available_commands if isinstance(c, v2.Command)] == ["test"]
    assert state.config_options == []
    assert state.usage is not None
    assert state.usage.used == 1200
    assert [n.title for n in state.notices] == ["Rate limited"]


def test_tool_call_patches() -> None:
    t1, t2 = folded().tool_calls.values()
    assert t1.kind == "read"
    assert t1.status == "completed"
    assert t1.title is None  # null cleared it
    assert t1.locations == []  # [] cleared them
    assert [c.content.text for c in t1.content if isinstance(c, v2.Content)] == [
        "print(1)",
        "print(2)",
    ]  # chunks appended, untouched by the later update that carried no content
    assert t1.raw_output == {"lines": 2}
    assert t1.meta == {"b": 2, "c": 3}  # patched by key, "a" removed
    assert (t2.kind, t2.status) == ("other", "pending")  # null resets to the defaults


def test_terminals_snapshot_chunks_and_exit() -> None:
    state = folded()
    x1, x2 = state.terminals.values()
    assert (x1.command, x1.cwd, x1.output) == ("pytest", "/w", b"collecting ok\n")
    assert x1.exited
    assert x1.exit_status is not None
    assert x1.exit_status.exit_code == 0
    assert x2.output == b""
    assert not x2.exited


def test_session_info_and_compaction_patches() -> None:
    state = folded()
    assert state.title is None  # set, then cleared
    assert state.updated_at == "2026-12-04"  # absent in the second update: unchanged
    compaction = state.compactions["c1"]
    assert compaction.status == "completed"
    assert compaction.summary == []
    assert compaction.error is None


def test_turn_state_and_background_work() -> None:
    state = SessionAccumulator()
    seen: list[tuple[str | None, int | None]] = []
    state.on_change(
        lambda s, u: (
            seen.append((s.state, None if s.background is None else len(s.background)))
            if isinstance(u, (v2.RunningStateUpdate, v2.IdleStateUpdate, v2.UnknownStateUpdate))
            else None
        )
    )
    for notification in notifications():
        state.apply(notification)
    assert seen == [("running", None), ("running", 1), ("idle", 0), ("paused_by_v9", 0)]
    assert state.stop_reason == "end_turn"
    assert state.error is None


def test_an_error_stop_reason_is_kept() -> None:
    state = SessionAccumulator("s")
    state.apply(
        v2.converter.structure(
            {
                "sessionId": "s",
                "update": {
                    "sessionUpdate": "state_update",
                    "state": "idle",
                    "stopReason": "error",
                    "error": {"code": -32603, "message": "model crashed"},
                },
            },
            v2.UpdateSessionNotification,
        )
    )
    assert state.state == "idle"
    assert state.stop_reason == "error"
    assert state.error is not None
    assert state.error.message == "model crashed"


def test_unknown_kinds_are_kept_not_dropped() -> None:
    unknown = folded().unknown
    assert [type(u).__name__ for u in unknown] == ["UnknownStateUpdate", "UnknownSessionUpdate"]
    assert unknown[-1].raw["payload"] == [1, 2, 3]


def test_unfinished_tool_calls() -> None:
    assert [c.tool_call_id for c in folded().unfinished_tool_calls()] == ["t2"]


def test_another_sessions_update_is_refused() -> None:
    state = SessionAccumulator("s1")
    with pytest.raises(ValueError, match="session 's2'"):
        state.apply(notifications("s2")[0])


def test_session_states_keep_one_state_per_session() -> None:
    states = SessionStates()
    changes: list[str | None] = []
    states.on_change(lambda s, u: changes.append(s.session_id))
    for notification in notifications("a")[:2] + notifications("b")[:1]:
        states.apply(notification)
    assert sorted(states) == ["a", "b"]
    assert len(states) == 2
    assert states["a"].updates == 2
    assert changes == ["a", "a", "b"]
    states.forget("a")
    assert "a" not in states


def test_patch_meta_rules() -> None:
    assert patch_meta({"a": 1}, v2.UNSET) == {"a": 1}
    assert patch_meta({"a": 1}, None) is None
    assert patch_meta(None, {"a": 1, "b": None}) == {"a": 1}


def test_v1_and_v2_accumulators_are_separate() -> None:
    assert SessionAccumulator is not V1Accumulator
