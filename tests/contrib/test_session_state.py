"""``acp_trio.contrib.SessionAccumulator`` against a recorded stream of
every update kind (as JSON on the wire), unknown future kinds included."""

from __future__ import annotations

from typing import Any

import pytest

from acp_trio.contrib import SessionAccumulator, SessionStates
from acp_trio.schema import (
    Notice,
    SessionNotification,
    SessionUpdate,
    TextContent,
    UnknownSessionUpdate,
    converter,
)


def text(t: str) -> dict[str, Any]:
    return {"type": "text", "text": t}


#: One session's updates as an agent sent them.
STREAM: list[dict[str, Any]] = [
    {"sessionUpdate": "user_message_chunk", "content": text("fix "), "messageId": "u1"},
    {"sessionUpdate": "user_message_chunk", "content": text("the bug"), "messageId": "u1"},
    {"sessionUpdate": "available_commands_update", "availableCommands": [
        {"name": "test", "description": "Run the tests"}]},
    {"sessionUpdate": "current_mode_update", "currentModeId": "code"},
    {"sessionUpdate": "agent_thought_chunk", "content": text("Looking at main.py")},
    {"sessionUpdate": "plan", "entries": [
        {"content": "read", "priority": "high", "status": "in_progress"},
        {"content": "edit", "priority": "medium", "status": "pending"}]},
    {"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "Read main.py", "kind": "read",
     "status": "in_progress", "locations": [{"path": "/w/main.py"}]},
    {"sessionUpdate": "tool_call_update", "toolCallId": "t1", "status": "completed",
     "content": [{"type": "content", "content": text("print(1)")}], "rawOutput": {"lines": 1}},
    {"sessionUpdate": "tool_call", "toolCallId": "t2", "title": "Edit main.py", "kind": "edit"},
    {"sessionUpdate": "tool_call_update", "toolCallId": "t2", "content": [
        {"type": "diff", "path": "/w/main.py", "oldText": "print(1)", "newText": "print(2)"}]},
    {"sessionUpdate": "tool_call_update", "toolCallId": "t9", "status": "in_progress"},
    {"sessionUpdate": "agent_message_chunk", "content": text("Fixed "), "messageId": "a1"},
    {"sessionUpdate": "agent_message_chunk", "content": text("it."), "messageId": "a1"},
    {"sessionUpdate": "agent_message_chunk", "content": text("Anything else?"), "messageId": "a2"},
    {"sessionUpdate": "config_option_update", "configOptions": []},
    {"sessionUpdate": "session_info_update", "title": "Fix the bug", "updatedAt": "2026-12-03"},
    {"sessionUpdate": "session_info_update", "title": None},
    {"sessionUpdate": "usage_update", "used": 1200, "size": 200000,
     "cost": {"amount": 0.01, "currency": "USD"}},
    {"sessionUpdate": "notice", "severity": "warning", "title": "Rate limited"},
    {"sessionUpdate": "compaction_update", "compactionId": "c1", "status": "in_progress"},
    {"sessionUpdate": "compaction_summary_chunk", "compactionId": "c1", "content": text("sum")},
    {"sessionUpdate": "compaction_update", "compactionId": "c1", "status": "completed"},
    {"sessionUpdate": "future_kind_from_v9", "payload": [1, 2, 3]},
]  # fmt: skip


def notifications(session_id: str = "s1") -> list[SessionNotification]:
    return [
        converter.structure({"sessionId": session_id, "update": u}, SessionNotification)
        for u in STREAM
    ]


def test_every_update_kind_is_folded_in() -> None:
    state = SessionAccumulator()
    seen: list[str] = []
    state.on_change(lambda s, u: seen.append(type(u).__name__))
    for note in notifications():
        state.apply(note)
    assert state.session_id == "s1"
    assert state.updates == len(STREAM) == len(seen)
    assert [(m.kind, m.text, m.message_id) for m in state.messages] == [
        ("user", "fix the bug", "u1"),
        ("thought", "Looking at main.py", None),
        ("agent", "Fixed it.", "a1"),
        ("agent", "Anything else?", "a2"),
    ]
    assert state.agent_text == "Anything else?"
    assert [c.name for c in state.available_commands] == ["test"]
    assert state.current_mode_id == "code"
    assert [(e.content, e.status) for e in state.plan] == [
        ("read", "in_progress"),
        ("edit", "pending"),
    ]
    t1, t2, t9 = state.tool_calls.values()
    assert (t1.title, t1.kind, t1.status, t1.raw_output) == (
        "Read main.py",
        "read",
        "completed",
        {"lines": 1},
    )
    assert [loc.path for loc in t1.locations] == ["/w/main.py"]
    assert [type(c).__name__ for c in t1.content] == ["Content"]
    assert (t2.title, t2.status, len(t2.content)) == ("Edit main.py", "pending", 1)
    assert getattr(t2.content[0], "new_text", None) == "print(2)"
    # An update for a call never announced makes it, untitled.
    assert (t9.id, t9.title, t9.status) == ("t9", "", "in_progress")
    assert [c.id for c in state.unfinished_tool_calls()] == ["t2", "t9"]
    assert state.config_options == []
    assert (state.title, state.updated_at) == (None, "2026-12-03")  # null cleared the title
    assert state.usage is not None
    assert (state.usage.used, state.usage.size) == (1200, 200000)
    assert [(n.severity, n.title) for n in state.notices] == [("warning", "Rate limited")]
    (compaction,) = state.compactions.values()
    assert (compaction.id, compaction.status) == ("c1", "completed")
    assert compaction.summary == [TextContent(text="sum")]
    # The unknown kind is kept as it came, not dropped.
    (unknown,) = state.unknown
    assert isinstance(unknown, UnknownSessionUpdate)
    assert unknown.raw == {"sessionUpdate": "future_kind_from_v9", "payload": [1, 2, 3]}
    assert seen[-1] == "UnknownSessionUpdate"


def test_a_new_kind_or_tool_call_between_chunks_starts_a_new_message() -> None:
    state = SessionAccumulator("s")
    for update in [
        {"sessionUpdate": "agent_message_chunk", "content": text("a")},
        {"sessionUpdate": "agent_thought_chunk", "content": text("hm")},
        {"sessionUpdate": "agent_message_chunk", "content": text("b")},
        {"sessionUpdate": "plan", "entries": []},
        {"sessionUpdate": "agent_message_chunk", "content": text("c")},
        {"sessionUpdate": "tool_call", "toolCallId": "t", "title": "T"},
        {"sessionUpdate": "agent_message_chunk", "content": text("d")},
    ]:
        state.apply(converter.structure({"sessionId": "s", "update": update}, SessionNotification))
    assert [(m.kind, m.text) for m in state.messages] == [
        ("agent", "a"),
        ("thought", "hm"),
        ("agent", "bc"),
        ("agent", "d"),
    ]


def test_another_sessions_update_is_refused() -> None:
    state = SessionAccumulator("s1")
    (note,) = notifications("s2")[:1]
    with pytest.raises(ValueError, match="s2"):
        state.apply(note)


def test_session_states_keeps_one_state_per_session() -> None:
    states = SessionStates()
    changes: list[tuple[str | None, str]] = []
    states.on_change(lambda s, u: changes.append((s.session_id, type(u).__name__)))
    for a, b in zip(notifications("s1"), notifications("s2"), strict=True):
        states.apply(a)
        states.apply(b)
    assert sorted(states) == ["s1", "s2"]
    assert len(states) == 2
    assert states["s1"].updates == states["s2"].updates == len(STREAM)
    assert len(changes) == 2 * len(STREAM)
    states.forget("s1")
    assert "s1" not in states
    update: SessionUpdate = Notice(severity="info", title="x")
    states.apply(SessionNotification(session_id="s3", update=update))
    assert states["s3"].notices[0].title == "x"
    # Unregistering a callback of one accumulator.
    only = SessionAccumulator()
    calls: list[int] = []
    stop = only.on_change(lambda s, u: calls.append(1))
    only.apply(SessionNotification(session_id="s", update=update))
    stop()
    only.apply(SessionNotification(session_id="s", update=update))
    assert calls == [1]
