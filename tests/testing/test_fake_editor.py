"""``acp_trio.testing.FakeEditor`` driving ``examples/coding_agent.py``'s
agent: in memory (autojump clock) for allowed, refused, cancelled (at the
permission, and while its terminal runs) and failing checks; as a spawned
process once; overrides recorded with no private call."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

import acp_trio
from acp_trio import schema
from acp_trio.testing import (
    Call,
    FakeAgent,
    FakeCommand,
    FakeEditor,
    FakeTerminal,
    FakeTurn,
    ReadFile,
    WriteFile,
    open_memory_pair,
)

from .conftest import LIMIT, REAL_LIMIT

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "coding_agent.py"
_spec = importlib.util.spec_from_file_location("coding_agent_example", EXAMPLE)
assert _spec is not None
assert _spec.loader is not None
coding_agent = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(coding_agent)
CodingAgent: Any = coding_agent.CodingAgent

BROKEN = "prnt('hi')\n"
FIXED = "print('hi')\n"


def methods(editor: FakeEditor) -> list[str]:
    return [method for method, _ in editor.requests]


def the_call(editor: FakeEditor, sid: str) -> Any:
    (call,) = editor.states[sid].tool_calls.values()
    return call


async def test_allowed_the_fix_is_written_and_checked(
    autojump_clock: trio.testing.MockClock,
) -> None:
    editor = FakeEditor({"main.py": BROKEN})
    with trio.fail_after(LIMIT):
        async with open_memory_pair(CodingAgent, editor) as pair:
            sid = await pair.new_session(editor.cwd)
            done = await pair.to_agent.prompt_text(sid, f"fix {editor.path('main.py')}")
    assert done.stop_reason == "end_turn"
    assert editor.files == {"/workspace/main.py": FIXED}
    assert methods(editor) == [
        "fs/read_text_file",
        "session/request_permission",
        "fs/write_text_file",
        "terminal/create",
        "terminal/wait_for_exit",
        "terminal/release",
    ]
    (term,) = editor.terminals.values()
    assert (term.params.command, term.params.args) == (
        "python",
        ["-m", "py_compile", "/workspace/main.py"],
    )
    assert editor.running_terminals == []
    call = the_call(editor, sid)
    assert (call.title, call.kind, call.status) == ("Fix main.py", "edit", "completed")
    assert editor.states[sid].messages[-1].text.endswith("Done.")
    assert editor.states[sid].plan is not None


async def test_refused_nothing_is_written(autojump_clock: trio.testing.MockClock) -> None:
    editor = FakeEditor({"main.py": BROKEN}, permission="reject")
    with trio.fail_after(LIMIT):
        async with open_memory_pair(CodingAgent, editor) as pair:
            sid = await pair.new_session(editor.cwd)
            done = await pair.to_agent.prompt_text(sid, f"fix {editor.path('main.py')}")
    assert done.stop_reason == "end_turn"
    assert editor.files == {"/workspace/main.py": BROKEN}
    assert "fs/write_text_file" not in methods(editor)
    assert the_call(editor, sid).status == "failed"
    assert editor.terminals == {}


async def test_cancel_policy_holds_the_question_until_the_turn_is_cancelled(
    autojump_clock: trio.testing.MockClock,
) -> None:
    editor = FakeEditor({"main.py": BROKEN}, permission="cancel")
    with trio.fail_after(LIMIT):
        async with open_memory_pair(CodingAgent, editor) as pair:
            sid = await pair.new_session(editor.cwd)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(pair.to_agent.prompt_text, sid, f"fix {editor.path('main.py')}")
                await editor.wait_for_requests("session/request_permission")
                assert len(editor.permissions.pending) == 1
                answer = await pair.to_agent.cancel_turn(sid)
    assert answer is not None
    assert answer.stop_reason == "cancelled"
    assert editor.cancelled == ["session/request_permission"]
    assert editor.permissions.pending == []
    assert editor.files == {"/workspace/main.py": BROKEN}
    assert the_call(editor, sid).status == "failed"


async def test_a_failing_check_fails_the_tool_call(autojump_clock: trio.testing.MockClock) -> None:
    editor = FakeEditor(
        {"main.py": BROKEN}, commands=lambda params: FakeCommand("SyntaxError", exit_code=1)
    )
    with trio.fail_after(LIMIT):
        async with open_memory_pair(CodingAgent, editor) as pair:
            sid = await pair.new_session(editor.cwd)
            await pair.to_agent.prompt_text(sid, f"fix {editor.path('main.py')}")
    assert the_call(editor, sid).status == "failed"
    assert editor.running_terminals == []


async def test_a_turn_cancelled_while_its_command_runs_releases_the_terminal(
    autojump_clock: trio.testing.MockClock,
) -> None:
    editor = FakeEditor({"main.py": BROKEN}, commands=lambda params: FakeCommand(duration=3600))
    with trio.fail_after(LIMIT):
        async with open_memory_pair(CodingAgent, editor) as pair:
            sid = await pair.new_session(editor.cwd)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(pair.to_agent.prompt_text, sid, f"fix {editor.path('main.py')}")
                await editor.wait_for_requests("terminal/wait_for_exit")
                await trio.sleep(1)
                answer = await pair.to_agent.cancel_turn(sid)
    assert answer is not None
    assert answer.stop_reason == "cancelled"
    (term,) = editor.terminals.values()
    assert term.released
    assert term.killed
    assert editor.running_terminals == []
    assert trio.current_time() < 3600  # it did not wait for the command
    assert the_call(editor, sid).status == "failed"


async def test_a_command_with_a_duration_exits_after_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    editor = FakeEditor({"main.py": BROKEN}, commands=lambda params: FakeCommand(duration=30))
    with trio.fail_after(LIMIT):
        async with open_memory_pair(CodingAgent, editor) as pair:
            sid = await pair.new_session(editor.cwd)
            start = trio.current_time()
            await pair.to_agent.prompt_text(sid, f"fix {editor.path('main.py')}")
    assert trio.current_time() - start >= 30
    assert the_call(editor, sid).status == "completed"
    (term,) = editor.terminals.values()
    assert term.exit_status == schema.TerminalExitStatus(exit_code=0)
    assert not term.killed


async def test_reads_honour_line_and_limit_and_refuse_what_is_not_there(
    autojump_clock: trio.testing.MockClock,
) -> None:
    editor = FakeEditor({"/w/a.txt": "1\n2\n3\n4\n"}, cwd="/w")
    agent = FakeAgent(
        [
            ReadFile("/w/a.txt"),
            ReadFile("/w/a.txt", line=2, limit=2),
            ReadFile("/w/a.txt", line=4),
            WriteFile("/w/new.txt", "new"),
            ReadFile("/w/new.txt"),
        ]
    )
    with trio.fail_after(LIMIT):
        async with open_memory_pair(agent, editor) as pair:
            sid = await pair.new_session(editor.cwd)
            await pair.to_agent.prompt_text(sid, "go")
            assert agent.turns[0].results == ["1\n2\n3\n4\n", "2\n3\n", "4\n", None, "new"]
            for path, code in (("/w/missing.txt", -32002), ("a.txt", -32602)):
                agent.script = [Call(read_error(path))]
                await pair.to_agent.prompt_text(sid, "go")
                assert agent.turns[-1].results == [code]
                assert editor.received("fs/read_text_file")[-1].path == path
    assert editor.files["/w/new.txt"] == "new"


def read_error(path: str) -> Callable[[FakeTurn], Awaitable[int]]:
    async def read(turn: FakeTurn) -> int:
        request = schema.ReadTextFileRequest(session_id=turn.session_id, path=path)
        with pytest.raises(acp_trio.RequestError) as caught:
            await turn.client.read_text_file(request)
        return caught.value.code

    return read


async def test_capabilities_follow_the_flags(autojump_clock: trio.testing.MockClock) -> None:
    editor = FakeEditor(read=True, write=False, terminal=False)
    with trio.fail_after(LIMIT):
        async with open_memory_pair(FakeAgent(), editor) as pair:
            caps = pair.to_client.capabilities
            assert caps is not None
            assert (caps.fs.read_text_file, caps.fs.write_text_file, caps.terminal) == (
                True,
                False,
                False,
            )
            sid = await pair.new_session(editor.cwd)
            # An agent writing anyway is refused by the SDK before sending.
            pair.agent.script = [WriteFile("/workspace/x", "x")]
            with pytest.raises(acp_trio.RequestError):
                await pair.to_agent.prompt_text(sid, "go")
    assert editor.requests == []


class Customised(FakeEditor):
    """Overrides without calling anything private."""

    async def read_text_file(
        self, params: schema.ReadTextFileRequest
    ) -> schema.ReadTextFileResponse:
        if params.path == "/workspace/slow":
            await self.hold("fs/read_text_file", params)
        return await super().read_text_file(params)

    async def terminal_output(
        self, params: schema.TerminalOutputRequest
    ) -> schema.TerminalOutputResponse:
        return schema.TerminalOutputResponse(output="custom", truncated=False)


async def test_overrides_are_recorded_and_waits_work(
    autojump_clock: trio.testing.MockClock,
) -> None:
    editor = Customised({"a": "A"})

    async def output(turn: FakeTurn) -> str:
        async with turn.client.terminal(turn.session_id, "ls") as term:
            return str((await term.output()).output)

    agent = FakeAgent(lambda params: [ReadFile("/workspace/a"), Call(output)])
    with trio.fail_after(LIMIT):
        async with open_memory_pair(agent, editor) as pair:
            sid = await pair.new_session(editor.cwd)
            await pair.to_agent.prompt_text(sid, "go")
            assert agent.turns[0].results == ["A", "custom"]
            assert methods(editor) == [
                "fs/read_text_file",
                "terminal/create",
                "terminal/output",
                "terminal/release",
            ]
            agent.script = [ReadFile("/workspace/slow")]
            async with trio.open_nursery() as nursery:
                nursery.start_soon(pair.to_agent.prompt_text, sid, "go")
                found = await editor.wait_for_requests("fs/read_text_file", 2)
                assert found[-1].path == "/workspace/slow"
                await pair.to_agent.cancel(sid)
    assert editor.cancelled == ["fs/read_text_file"]
    assert all(isinstance(t, FakeTerminal) for t in editor.terminals.values())


async def test_against_the_coding_agent_as_a_process() -> None:
    editor = FakeEditor({"main.py": BROKEN})
    with trio.fail_after(REAL_LIMIT):
        async with acp_trio.open_spawned_agent(editor, [sys.executable, str(EXAMPLE)]) as agent:
            await agent.initialize(editor.initialize_request())
            new = schema.NewSessionRequest(cwd=editor.cwd, mcp_servers=[])
            sid = (await agent.new_session(new)).session_id
            done = await agent.prompt_text(sid, f"fix {editor.path('main.py')}")
    assert done.stop_reason == "end_turn"
    assert editor.files == {"/workspace/main.py": FIXED}
    assert the_call(editor, sid).status == "completed"
    assert editor.running_terminals == []


async def test_a_read_of_hold_waits_until_it_is_cancelled(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # As the scenario's test client: the scenario agent's `deadline` reads
    # /hold and cancels the read at its own deadline (answered -32800, not
    # a file missing from the workspace).
    from acp_trio.testing import HOLD_PATH, ScenarioAgent

    editor = FakeEditor({"notes.txt": "x"})
    with trio.fail_after(LIMIT):
        async with open_memory_pair(ScenarioAgent, editor) as pair:
            sid = await pair.new_session(editor.cwd)
            with pytest.raises(acp_trio.RequestError) as info:
                await pair.to_agent.prompt_text(sid, "deadline 500")
            assert info.value.code == -32800
            assert [p.path for p in editor.received("fs/read_text_file")] == [HOLD_PATH]
            # The $/cancel_request came before the prompt's answer; the
            # editor's handler runs its cancellation when next scheduled.
            await trio.testing.wait_all_tasks_blocked()
            assert editor.cancelled == ["fs/read_text_file"]
            # Any other path is read from the workspace at once.
            result = await pair.to_agent.prompt_text(sid, f"read 1 {editor.path('notes.txt')}")
            assert result.stop_reason == "end_turn"
            assert editor.texts(sid)[-1] == "read 1 1"
