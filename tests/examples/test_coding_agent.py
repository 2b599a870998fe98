"""``examples/coding_agent.py`` as its own process, driven by a client
that serves a workspace and terminals: the fix is written and checked
when allowed, nothing is written when refused, and a cancelled turn leaves
its tool call failed and no terminal behind."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

import acp_trio
from acp_trio import schema
from acp_trio.contrib import SessionStates, TerminalsMixin, WorkspaceFiles, WorkspaceFilesMixin

ROOT = Path(__file__).resolve().parents[2]
PEERS = ROOT / "benchmarks" / "peers"
# The official Python SDK's release candidate lives in its own virtualenv.
OFFICIAL_RC_VENV = ROOT / "tests" / "interop" / ".venv-official-rc"
AGENTS = {
    "acp_trio": [sys.executable, str(ROOT / "examples" / "coding_agent.py")],
    # The same agent written with the official Python SDK, for comparison:
    # 0.12.1 (in this environment) and 1.0.0rc3 (in its own).
    "official": [sys.executable, str(PEERS / "official_coding_agent.py")],
    "official-rc3": [
        str(OFFICIAL_RC_VENV / "bin" / "python"),
        str(PEERS / "official_rc_coding_agent.py"),
    ],
}
HAVE_OFFICIAL_SDK = importlib.util.find_spec("acp") is not None
HAVE_OFFICIAL_RC = (OFFICIAL_RC_VENV / ".installed").is_file()
WHICH = pytest.mark.parametrize(
    "which",
    [
        "acp_trio",
        pytest.param(
            "official",
            marks=pytest.mark.skipif(not HAVE_OFFICIAL_SDK, reason="agent-client-protocol missing"),
        ),
        pytest.param(
            "official-rc3",
            marks=pytest.mark.skipif(
                not HAVE_OFFICIAL_RC,
                reason="needs agent-client-protocol 1.0.0rc3 in tests/interop/.venv-official-rc "
                "(make tests/interop/.venv-official-rc/.installed)",
            ),
        ),
    ],
)
LIMIT = 60  # real seconds: a real process and pipes


class Editor(WorkspaceFilesMixin, TerminalsMixin, acp_trio.Client):
    def __init__(
        self, root: Path, terminals: acp_trio.contrib.TerminalManager, answer: str
    ) -> None:
        self.files = WorkspaceFiles([root])
        self.terminals = terminals
        self.answer = answer
        self.states = SessionStates()
        self.streaming = trio.Event()
        self.seen: list[str] = []  # what came, in order (see `describe`)

    async def session_update(self, params: schema.SessionNotification) -> None:
        self.states.apply(params)
        self.seen.append(describe(params.update))
        if isinstance(params.update, schema.AgentMessageChunk):
            self.streaming.set()

    async def request_permission(
        self, params: schema.RequestPermissionRequest
    ) -> schema.RequestPermissionResponse:
        self.seen.append("permission " + describe(attrs.evolve(params.tool_call, status=None)))
        outcome = schema.SelectedPermissionOutcome(option_id=self.answer)
        return schema.RequestPermissionResponse(outcome=outcome)


def describe(update: Any) -> str:
    """An update (or a permission request's tool call) without its ids and paths."""
    words = [type(update).__name__]
    if isinstance(update, (schema.AgentMessageChunk, schema.AgentThoughtChunk)):
        assert isinstance(update.content, schema.TextContent)
        words.append(repr(update.content.text.split("/")[0]))
    for field in ("title", "kind", "status", "raw_output"):
        if getattr(update, field, None) is not None:
            words.append(f"{field}={getattr(update, field)!r}")
    if isinstance(getattr(update, "content", None), list):
        words.append(f"content={[type(c).__name__ for c in update.content]}")
    return " ".join(words)


WORDS = ["I ", "found ", "a ", "misspelt ", "print ", "and ", "will ", "fix ", "it. "]
CALL = "title='Fix main.py' kind='edit' status='in_progress'"
#: What every version of the agent sends, in order, when allowed or refused.
SEEN = [
    "Plan",
    "AgentThoughtChunk 'Reading '",
    f"ToolCall {CALL}",
    *(f"AgentMessageChunk {word!r}" for word in WORDS),
    "ToolCallUpdate content=['Diff']",
    # The permission request says what the call is about; a status there is
    # no change of state (acp_trio sends none), so it is not compared.
    "permission ToolCallUpdate title='Fix main.py' kind='edit' content=['Diff']",
]
SEEN_WHEN = {
    "allow": [
        *SEEN,
        "ToolCallUpdate content=['Diff', 'Terminal']",
        "ToolCallUpdate status='completed'",
        "AgentMessageChunk 'Done.'",
    ],
    "reject": [*SEEN, "ToolCallUpdate status='failed' raw_output={'reason': 'not allowed'}"],
}


async def approve(params: schema.CreateTerminalRequest) -> bool:
    return True


async def run_turn(
    tmp_path: Path, answer: str, cancel: bool = False, which: str = "acp_trio"
) -> tuple[Any, Editor]:
    target = tmp_path / "main.py"
    target.write_text("prnt('hi')\n")
    with trio.fail_after(LIMIT):
        async with acp_trio.contrib.open_terminal_manager(approve, cwd=tmp_path) as terminals:
            editor = Editor(tmp_path, terminals, answer)
            async with acp_trio.open_spawned_agent(editor, AGENTS[which]) as agent:
                await agent.initialize()
                new = schema.NewSessionRequest(cwd=str(tmp_path), mcp_servers=[])
                sid = (await agent.new_session(new)).session_id
                results: list[Any] = []
                async with trio.open_nursery() as nursery:

                    async def turn() -> None:
                        results.append(await agent.prompt_text(sid, f"fix {target}"))

                    nursery.start_soon(turn)
                    if cancel:
                        await editor.streaming.wait()
                        results.append(await agent.cancel_turn(sid))
                # Every terminal the agent opened was released by it.
                assert terminals.terminal_ids() == []
    return results[-1], editor


@WHICH
@pytest.mark.parametrize("answer", ["allow", "reject"])
async def test_a_turn_fixes_the_file_when_allowed(tmp_path: Path, answer: str, which: str) -> None:
    result, editor = await run_turn(tmp_path, answer, which=which)
    assert result.stop_reason == "end_turn"
    assert editor.seen == SEEN_WHEN[answer]  # the same messages, whichever SDK
    (state,) = (editor.states[sid] for sid in editor.states)
    assert [e.content for e in state.plan] == ["read the file", "fix it", "check it"]
    (call,) = state.tool_calls.values()
    kinds = [type(c).__name__ for c in call.content]
    fixed = (tmp_path / "main.py").read_text()
    if answer == "allow":
        assert fixed == "print('hi')\n"
        assert (call.status, kinds) == ("completed", ["Diff", "Terminal"])
        assert state.agent_text == "I found a misspelt print and will fix it. Done."
    else:
        assert fixed == "prnt('hi')\n"
        assert (call.status, kinds, call.raw_output) == (
            "failed",
            ["Diff"],
            {"reason": "not allowed"},
        )


@WHICH
async def test_a_cancelled_turn_fails_its_tool_call(tmp_path: Path, which: str) -> None:
    result, editor = await run_turn(tmp_path, "allow", cancel=True, which=which)
    assert result is not None
    assert result.stop_reason == "cancelled"
    (state,) = (editor.states[sid] for sid in editor.states)
    (call,) = state.tool_calls.values()
    assert call.status == "failed"
    assert (tmp_path / "main.py").read_text() == "prnt('hi')\n"


HELD = ["nested-session-cancel", "nested-cancel-request", "deadline"]
#: The recommended framing checks neither official SDK passes: no error reply
#: to a line that is not JSON, to a batch array or to a JSON scalar.
FRAMING = ["parse-error", "batch-array", "scalar-message"]


async def check_with_a_turn_limit(which: str) -> Any:
    """``check-agent --strict --hold-prompt "fix /nowhere/x.py"
    --hold-deadline 1.5 -- AGENT --turn-limit 1.5``, as in docs/agent-kit.md."""
    from acp_trio.testing import check_agent

    with trio.fail_after(LIMIT):
        return await check_agent(
            [*AGENTS[which], "--turn-limit", "1.5"],
            hold_prompt="fix /nowhere/x.py",
            hold_deadline=1.5,
            strict=True,
            timeout=2.0,
        )


@pytest.mark.skipif(not HAVE_OFFICIAL_RC, reason="needs tests/interop/.venv-official-rc")
async def test_the_official_rc3_agent_cancels_nested_requests_on_the_wire() -> None:
    # 1.0.0rc3 sends $/cancel_request for a cancelled outgoing request and
    # cancels a handler on one: every cancellation check passes, `deadline`
    # included; strictly it fails only the SDK's framing checks.
    report = await check_with_a_turn_limit("official-rc3")
    for name in HELD:
        assert report[name].passed, report[name].reason
    assert "cancelled on the wire (fs/read_text_file)" in report["deadline"].reason
    assert sorted(r.name for r in report.failures()) == sorted(FRAMING), report.format_table()
    assert not report.ok


@pytest.mark.skipif(not HAVE_OFFICIAL_SDK, reason="agent-client-protocol missing")
async def test_the_official_0_12_1_agent_cancels_nothing_on_the_wire() -> None:
    # 0.12.1 cannot cancel an outgoing request on the wire: the held read
    # is left waiting after session/cancel, $/cancel_request and the deadline.
    report = await check_with_a_turn_limit("official")
    for name in HELD:
        assert not report[name].passed
        assert "never cancelled on the wire" in report[name].reason, report[name].reason


@WHICH
async def test_another_prompt_gets_the_usage(tmp_path: Path, which: str) -> None:
    with trio.fail_after(LIMIT):
        async with acp_trio.contrib.open_terminal_manager(approve, cwd=tmp_path) as terminals:
            editor = Editor(tmp_path, terminals, "allow")
            async with acp_trio.open_spawned_agent(editor, AGENTS[which]) as agent:
                await agent.initialize()
                new = schema.NewSessionRequest(cwd=str(tmp_path), mcp_servers=[])
                sid = (await agent.new_session(new)).session_id
                result = await agent.prompt_text(sid, "hello")
    assert result.stop_reason == "end_turn"
    assert editor.seen == ["AgentMessageChunk 'Say: fix '"]
