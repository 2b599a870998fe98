"""``acp_trio.testing.FakeAgent`` driving a client written as an
application would (a permission broker, session state, files in memory):
scripted turns, configured capabilities, cancellation, errors. In memory,
autojump clock."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import trio
import trio.testing

import acp_trio
from acp_trio import build, schema
from acp_trio.contrib import (
    PendingPermission,
    PermissionBroker,
    PermissionBrokerMixin,
    SessionStates,
    yes_no,
)
from acp_trio.testing import (
    AskPermission,
    Call,
    EndTurn,
    Fail,
    FakeAgent,
    FakeTurn,
    ReadFile,
    SendText,
    SendThought,
    SendUpdate,
    Sleep,
    StartToolCall,
    Step,
    UpdateToolCall,
    WaitForCancel,
    WriteFile,
    open_memory_pair,
)

from .conftest import LIMIT

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "typed_usage"))

import kit_usage


class App(PermissionBrokerMixin, acp_trio.Client):
    """The client under test: asks a (scripted) user, keeps the state."""

    def __init__(self, *, answers: list[bool] | None = None) -> None:
        self.files = {"/w/main.py": "prnt(1)\n"}
        self.states = SessionStates()
        self.answers = answers
        self.asked: list[str] = []
        self.question = trio.Event()
        self.permissions = PermissionBroker(yes_no(self.ask), states=self.states)

    async def ask(self, request: PendingPermission) -> bool:
        self.asked.append(request.title)
        self.question.set()
        if self.answers is None:
            await trio.sleep_forever()  # the user never answers
        return self.answers.pop(0)

    async def session_update(self, params: schema.SessionNotification) -> None:
        self.states.apply(params)

    async def read_text_file(
        self, params: schema.ReadTextFileRequest
    ) -> schema.ReadTextFileResponse:
        return schema.ReadTextFileResponse(content=self.files[params.path])

    async def write_text_file(
        self, params: schema.WriteTextFileRequest
    ) -> schema.WriteTextFileResponse:
        self.files[params.path] = params.content
        return schema.WriteTextFileResponse()


EDIT: list[Step] = [
    SendThought("Reading main.py"),
    StartToolCall("call-1", "Edit main.py", kind="edit"),
    ReadFile("/w/main.py"),
    AskPermission("call-1"),
    WriteFile("/w/main.py", "print(1)\n"),
    UpdateToolCall("call-1", status="completed"),
    SendText("Fixed."),
    EndTurn("max_tokens"),
    SendText("never sent"),
]


async def test_a_scripted_turn_drives_the_client(autojump_clock: trio.testing.MockClock) -> None:
    agent = FakeAgent(EDIT)
    client = App(answers=[True])
    with trio.fail_after(LIMIT):
        async with open_memory_pair(agent, client) as pair:
            sid = await pair.new_session("/w")
            done = await pair.to_agent.prompt_text(sid, "fix main.py")
    assert done.stop_reason == "max_tokens"
    assert client.files["/w/main.py"] == "print(1)\n"
    assert client.asked == ["Edit main.py"]  # from the tool call, by id
    state = client.states[sid]
    assert [(m.kind, m.text) for m in state.messages] == [
        ("thought", "Reading main.py"),
        ("agent", "Fixed."),
    ]
    assert state.tool_calls["call-1"].status == "completed"
    (turn,) = agent.turns
    assert turn.results[2] == "prnt(1)\n"
    assert turn.results[3] == build.ALLOW_ONCE
    assert turn.results[-1] == "max_tokens"
    assert len(turn.results) == 8  # nothing after EndTurn
    assert (turn.stop_reason, turn.cancelled) == ("max_tokens", False)
    assert [method for method, _ in agent.received] == [
        "initialize",
        "session/new",
        "session/prompt",
    ]
    init = agent.received[0][1]
    assert init.client_capabilities.fs.read_text_file
    assert agent.sessions == [sid] == ["fake-1"]


async def test_a_refusal_reaches_the_script(autojump_clock: trio.testing.MockClock) -> None:
    agent = FakeAgent(EDIT)
    client = App(answers=[False])
    with trio.fail_after(LIMIT):
        async with open_memory_pair(agent, client) as pair:
            sid = await pair.new_session("/w")
            await pair.to_agent.prompt_text(sid, "fix main.py")
    assert agent.turns[0].results[3] == build.REJECT_ONCE


async def test_initialize_answers_the_capabilities_given(
    autojump_clock: trio.testing.MockClock,
) -> None:
    agent = FakeAgent(
        capabilities=schema.AgentCapabilities(load_session=True),
        auth_methods=[schema.AuthMethodAgent(id="key", name="API key")],
        info=schema.Implementation(name="pretend", version="9"),
    )
    with trio.fail_after(LIMIT):
        async with open_memory_pair(agent, App()) as pair:
            init = pair.initialized
            assert init is not None
            assert init.agent_capabilities.load_session
            assert init.auth_methods == [schema.AuthMethodAgent(id="key", name="API key")]
            assert init.agent_info == schema.Implementation(name="pretend", version="9")
            assert pair.to_agent.capabilities == init.agent_capabilities


async def test_a_cancelled_turn_is_marked_and_answered_cancelled(
    autojump_clock: trio.testing.MockClock,
) -> None:
    working = trio.Event()

    async def started(turn: FakeTurn) -> None:
        working.set()

    agent = FakeAgent([SendText("working"), Call(started), WaitForCancel()])
    with trio.fail_after(LIMIT):
        async with open_memory_pair(agent, App()) as pair:
            sid = await pair.new_session("/w")
            async with trio.open_nursery() as nursery:
                nursery.start_soon(pair.to_agent.prompt_text, sid, "go")
                await working.wait()
                answer = await pair.to_agent.cancel_turn(sid)
    assert answer is not None
    assert answer.stop_reason == "cancelled"
    assert agent.turns[0].cancelled
    assert agent.turns[0].stop_reason is None
    assert [m for m, _ in agent.received][-1] == "session/cancel"


async def test_cancelling_while_the_user_is_asked(autojump_clock: trio.testing.MockClock) -> None:
    agent = FakeAgent([StartToolCall("c", "Run rm"), AskPermission("c"), SendText("after")])
    client = App()  # never answers
    with trio.fail_after(LIMIT):
        async with open_memory_pair(agent, client) as pair:
            sid = await pair.new_session("/w")
            async with trio.open_nursery() as nursery:
                nursery.start_soon(pair.to_agent.prompt_text, sid, "go")
                await client.question.wait()
                assert len(client.permissions.pending) == 1
                answer = await pair.to_agent.cancel_turn(sid)
    assert answer is not None
    assert answer.stop_reason == "cancelled"
    assert client.asked == ["Run rm"]
    assert client.permissions.pending == []
    assert agent.turns[0].cancelled
    assert client.states[sid].messages == []  # "after" never came


async def test_fail_answers_the_prompt_with_the_error(
    autojump_clock: trio.testing.MockClock,
) -> None:
    agent = FakeAgent([SendText("oops"), Fail(-32001, "quota exceeded")])
    with trio.fail_after(LIMIT):
        async with open_memory_pair(agent, App()) as pair:
            sid = await pair.new_session("/w")
            with pytest.raises(acp_trio.RequestError) as caught:
                await pair.to_agent.prompt_text(sid, "go")
    assert (caught.value.code, caught.value.message) == (-32001, "quota exceeded")
    assert agent.turns[0].stop_reason is None


async def test_a_script_per_prompt(autojump_clock: trio.testing.MockClock) -> None:
    def script(params: schema.PromptRequest) -> list[Step]:
        block = params.prompt[0]
        assert isinstance(block, schema.TextContent)
        if block.text == "slow":
            return [Sleep(30), SendText("slept")]
        return [SendUpdate(build.plan(["one"])), EndTurn("refusal")]

    agent = FakeAgent(script)
    client = App()
    with trio.fail_after(LIMIT):
        async with open_memory_pair(agent, client) as pair:
            sid = await pair.new_session("/w")
            start = trio.current_time()
            first = await pair.to_agent.prompt_text(sid, "slow")
            assert trio.current_time() - start >= 30
            second = await pair.to_agent.prompt_text(sid, "plan")
    assert (first.stop_reason, second.stop_reason) == ("end_turn", "refusal")
    state = client.states[sid]
    assert state.messages[-1].text == "slept"
    assert state.plan is not None
    assert [e.content for e in state.plan] == ["one"]


async def test_the_typed_usage_kit_runs(autojump_clock: trio.testing.MockClock) -> None:
    """``tests/typed_usage/kit_usage.py`` (checked by ``mypy --strict``)
    works as written: its fake agent against its fake editor, and its
    broker clients."""
    editor, agent = kit_usage.fakes()
    with trio.fail_after(LIMIT):
        async with open_memory_pair(agent, editor) as pair:
            sid = await pair.new_session(editor.cwd)
            done = await pair.to_agent.prompt_text(sid, "go")
        assert done.stop_reason == "end_turn"
        assert agent.turns[0].results == [None, build.ALLOW_ONCE, 1, None, "end_turn"]
        assert editor.states[sid].messages[-1].text == "done"
        for client, answer in (
            (kit_usage.Editor(yes=True), "allow"),
            (kit_usage.Delegating(), "allow"),
        ):
            async with open_memory_pair(FakeAgent([AskPermission("c")]), client) as pair:
                sid = await pair.new_session("/w")
                await pair.to_agent.prompt_text(sid, "go")
                option = pair.agent.turns[0].results[0]
                assert option is not None
                assert option.option_id == answer
        # The policy asks the user about an edit: ask_the_user says no.
        client = kit_usage.Editor(yes=False)
        script = [StartToolCall("c", "Edit", kind="edit"), AskPermission("c")]
        async with open_memory_pair(FakeAgent(script), client) as pair:
            sid = await pair.new_session("/w")
            await pair.to_agent.prompt_text(sid, "go")
            assert pair.agent.turns[0].results[1] == build.REJECT_ONCE
