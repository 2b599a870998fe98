"""The v2 agent side through the v2 client, in memory: the prompt
lifecycle, held prompts, per-entity cancel, errors, background work and
close."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from acp_trio import RequestError
from acp_trio.contrib.v2 import SessionAccumulator
from acp_trio.schema import v2 as s2

from .conftest import LIMIT, RecordingClient, memory_pair, text


async def test_turn_lifecycle_user_message_running_output_idle(
    autojump_clock: trio.testing.MockClock,
) -> None:
    client = RecordingClient()
    with trio.fail_after(LIMIT):
        async with memory_pair(client) as agent:
            session = await agent.new_session("/tmp")
            result = await agent.prompt(session.session_id, text("hello"))
    assert result.stop_reason == "end_turn"
    assert result.error is None
    kinds = [u["sessionUpdate"] for u in client.updates]
    assert kinds == ["user_message", "state_update", "agent_message_chunk", "state_update"]
    assert client.updates[0]["messageId"] == result.message_id
    assert client.updates[0]["content"] == [{"type": "text", "text": "hello"}]
    assert client.states() == [("running", None), ("idle", "end_turn")]


async def test_updates_fold_in_the_session_accumulator(
    autojump_clock: trio.testing.MockClock,
) -> None:
    client = RecordingClient()
    with trio.fail_after(LIMIT):
        async with memory_pair(client) as agent:
            session = await agent.new_session("/tmp")
            await agent.prompt(session.session_id, text("hello"))
    acc = SessionAccumulator(session.session_id)
    for update in client.updates:
        acc.apply(
            s2.converter.structure(
                {"sessionId": session.session_id, "update": update}, s2.UpdateSessionNotification
            )
        )
    assert acc.agent_text() == "hi"


async def test_handler_exception_is_idle_error_with_the_error(
    autojump_clock: trio.testing.MockClock,
) -> None:
    client = RecordingClient()
    with trio.fail_after(LIMIT):
        async with memory_pair(client) as agent:
            session = await agent.new_session("/tmp")
            result = await agent.prompt(session.session_id, text("raise"))
            # The session goes on: the next turn runs.
            again = await agent.prompt(session.session_id, text("hello"))
    assert result.stop_reason == "error"
    assert result.error is not None
    assert "boom" in result.error.message
    assert again.stop_reason == "end_turn"
    idles = [s for s in client.states() if s[0] == "idle"]
    assert idles == [("idle", "error"), ("idle", "end_turn")]


async def test_session_cancel_cancels_the_turn_and_answers_held_prompts(
    autojump_clock: trio.testing.MockClock,
) -> None:
    client = RecordingClient()
    held_errors: list[int] = []
    with trio.fail_after(LIMIT):
        async with memory_pair(client) as agent:
            sid = (await agent.new_session("/tmp")).session_id
            accepted = await agent.send_prompt(sid, text("wait"))
            await client.wait_for(lambda u: u.get("state") == "running")

            async def held() -> None:
                with pytest.raises(RequestError) as info:
                    await agent.send_prompt(sid, text("hello"))
                held_errors.append(info.value.code)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(held)
                nursery.start_soon(held)
                await trio.sleep(1)  # both read and held
                await agent.cancel(sid)
            idle = await agent.turns.wait(sid, accepted.message_id)
    assert idle.stop_reason == "cancelled"
    assert held_errors == [-32800, -32800]
    # The held prompts were never inserted: one user message, one turn.
    assert [u["sessionUpdate"] for u in client.updates].count("user_message") == 1
    assert client.states() == [("running", None), ("idle", "cancelled")]


async def test_a_held_prompt_runs_after_the_turn_before_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    client = RecordingClient()
    with trio.fail_after(LIMIT):
        async with memory_pair(client) as agent:
            sid = (await agent.new_session("/tmp")).session_id
            results = []

            async def run(words: str) -> None:
                results.append((words, await agent.prompt(sid, text(words))))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(run, "permission")
                await client.wait_for(lambda u: u.get("state") == "requires_action")
                nursery.start_soon(run, "hello")
    assert [(w, r.stop_reason) for w, r in results] == [
        ("permission", "end_turn"),
        ("hello", "end_turn"),
    ]
    assert client.states() == [
        ("running", None),
        ("requires_action", None),
        ("running", None),
        ("idle", "end_turn"),
        ("running", None),
        ("idle", "end_turn"),
    ]


async def test_tool_call_cancel_cancels_one_of_two_parallel_calls(
    autojump_clock: trio.testing.MockClock,
) -> None:
    client = RecordingClient()
    with trio.fail_after(LIMIT):
        async with memory_pair(client) as agent:
            sid = (await agent.new_session("/tmp")).session_id
            async with trio.open_nursery() as nursery:
                results = []

                async def run() -> None:
                    results.append(await agent.prompt(sid, text("tools")))

                nursery.start_soon(run)
                for name in ("slow", "fast"):
                    first = await client.wait_for(lambda u, n=name: u.get("toolCallId") == n)
                    assert first["capabilities"] == {"cancel": {}}
                    assert first["status"] == "in_progress"
                await agent.cancel_tool_call(sid, "slow")
    assert results[0].stop_reason == "end_turn"
    finals = {
        u["toolCallId"]: u["status"]
        for u in client.updates
        if u["sessionUpdate"] == "tool_call_update" and u.get("status") not in ("in_progress", None)
    }
    assert finals == {"slow": "cancelled", "fast": "completed"}


async def test_tool_call_cancel_refuses_unknown_finished_and_fixed_calls(
    autojump_clock: trio.testing.MockClock,
) -> None:
    client = RecordingClient()
    with trio.fail_after(LIMIT):
        async with memory_pair(client) as agent:
            sid = (await agent.new_session("/tmp")).session_id
            with pytest.raises(RequestError) as unknown:
                await agent.cancel_tool_call(sid, "nope")
            async with trio.open_nursery() as nursery:
                nursery.start_soon(agent.send_prompt, sid, text("fixed"))
                await client.wait_for(lambda u: u.get("toolCallId") == "fixed")
                with pytest.raises(RequestError) as fixed:
                    await agent.cancel_tool_call(sid, "fixed")
                await agent.cancel(sid)
            await client.wait_for(lambda u: u.get("stopReason") == "cancelled")
            with pytest.raises(RequestError) as finished:
                await agent.cancel_tool_call(sid, "fixed")
    assert unknown.value.code == fixed.value.code == finished.value.code == -32602
    first = next(u for u in client.updates if u.get("toolCallId") == "fixed")
    assert "capabilities" not in first
    assert client.updates[-2] == {
        "sessionUpdate": "tool_call_update",
        "toolCallId": "fixed",
        "status": "cancelled",
    }


async def test_terminal_cancel_ends_the_terminal_with_an_exit_status(
    autojump_clock: trio.testing.MockClock,
) -> None:
    client = RecordingClient()
    with trio.fail_after(LIMIT):
        async with memory_pair(client) as agent:
            sid = (await agent.new_session("/tmp")).session_id
            async with trio.open_nursery() as nursery:
                results = []

                async def run() -> None:
                    results.append(await agent.prompt(sid, text("terminal")))

                nursery.start_soon(run)
                await client.wait_for(lambda u: u.get("terminalId") == "t1")
                await agent.cancel_terminal(sid, "t1")
            with pytest.raises(RequestError) as again:
                await agent.cancel_terminal(sid, "t1")
    assert results[0].stop_reason == "end_turn"
    assert again.value.code == -32602
    final = [u for u in client.updates if u.get("terminalId") == "t1"][-1]
    assert final["exitStatus"] == {"signal": "SIGTERM"}
    assert final["capabilities"] is None


async def test_cancelling_the_prompt_call_sends_session_cancel(
    autojump_clock: trio.testing.MockClock,
) -> None:
    client = RecordingClient()
    with trio.fail_after(LIMIT):
        async with memory_pair(client) as agent:
            sid = (await agent.new_session("/tmp")).session_id
            with trio.move_on_after(5):
                await agent.prompt(sid, text("wait"))
            await client.wait_for(lambda u: u.get("stopReason") == "cancelled")
    assert client.states() == [("running", None), ("idle", "cancelled")]


async def test_cancel_during_permission_cancels_the_request_and_ends_cancelled(
    autojump_clock: trio.testing.MockClock,
) -> None:
    client = RecordingClient(answer=None)
    with trio.fail_after(LIMIT):
        async with memory_pair(client) as agent:
            sid = (await agent.new_session("/tmp")).session_id
            accepted = await agent.send_prompt(sid, text("permission"))
            await client.wait_for(lambda u: u.get("state") == "requires_action")
            await agent.cancel(sid)
            idle = await agent.turns.wait(sid, accepted.message_id)
    assert idle.stop_reason == "cancelled"
    assert client.permissions == 1
    # requires_action is left by the idle, not by a "running" in between.
    assert client.states() == [("running", None), ("requires_action", None), ("idle", "cancelled")]


async def test_background_work_is_listed_then_close_stops_it_and_sends_nothing_after(
    autojump_clock: trio.testing.MockClock,
) -> None:
    client = RecordingClient()
    with trio.fail_after(LIMIT):
        async with memory_pair(client) as agent:
            sid = (await agent.new_session("/tmp")).session_id
            first = await agent.prompt(sid, text("background"))
            second = await agent.prompt(sid, text("hello"))
            await agent.close_session(sid)
            count = len(client.updates)
            await trio.sleep(10)
            assert len(client.updates) == count
    assert first.stop_reason == second.stop_reason == "end_turn"
    states = [u for u in client.updates if u["sessionUpdate"] == "state_update"]
    # Before any background work, no list; from then on, on every state update.
    assert "background" not in states[0]
    bg = [{"type": "tool_call", "toolCallId": "bg"}]
    assert [s.get("background") for s in states[1:4]] == [bg, bg, bg]
    # Close: the final tool call update, then a snapshot without it.
    assert client.updates[-2] == {
        "sessionUpdate": "tool_call_update",
        "toolCallId": "bg",
        "status": "cancelled",
        "capabilities": None,
    }
    assert client.updates[-1]["background"] == []


async def test_close_cancels_a_running_turn_and_held_prompts_before_answering(
    autojump_clock: trio.testing.MockClock,
) -> None:
    client = RecordingClient()
    with trio.fail_after(LIMIT):
        async with memory_pair(client) as agent:
            sid = (await agent.new_session("/tmp")).session_id
            await agent.send_prompt(sid, text("wait"))
            await client.wait_for(lambda u: u.get("state") == "running")
            errors = []

            async def held() -> None:
                try:
                    await agent.send_prompt(sid, text("hello"))
                except RequestError as exc:
                    errors.append(exc.code)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(held)
                await trio.sleep(1)
                await agent.close_session(sid)
                assert client.states()[-1] == ("idle", "cancelled")
    assert errors == [-32800]


async def test_the_session_baseline_defaults_list_nothing_and_resume_not_found(
    autojump_clock: trio.testing.MockClock,
) -> None:
    client = RecordingClient()
    with trio.fail_after(LIMIT):
        async with memory_pair(client) as agent:
            assert agent.initialized is not None
            assert agent.initialized.capabilities.session is not None
            listed = await agent.list_sessions()
            with pytest.raises(RequestError) as info:
                await agent.resume_session("gone", "/tmp")
    assert listed.sessions == []
    assert info.value.code == -32002
    assert info.value.data == {"sessionId": "gone"}
