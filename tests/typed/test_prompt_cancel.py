"""A cancelled ``AgentProxy.prompt()`` ends the turn the protocol's way:
``session/cancel`` for its session (``$/cancel_request`` only if that is not
answered within ``cancel_grace``), the call raises at once, the late reply
is consumed, and the next prompt on the session is sent only once the
cancelled turn has ended. And the explicit form, ``cancel_turn()``. (The
ladder's rungs against agents that ignore cancels: ``test_cancel_ladder``.)

Over memory streams with the autojump clock (virtual seconds)."""

from __future__ import annotations

import logging
from typing import Any

import pytest
import trio

from acp_trio import CancelOutcome, PromptNotSent
from acp_trio.schema import PromptRequest, PromptResponse

from .conftest import (
    LIMIT,
    NEW_SESSION,
    RecordingClient,
    ScriptedAgent,
    Wire,
    assert_one_response_each,
    open_pair,
    settle,
    start_session,
)
from .test_session_cancel import waiting_on


async def _echo(agent: ScriptedAgent, params: PromptRequest) -> PromptResponse:
    text = params.prompt[0].text  # type: ignore[union-attr]
    await agent.client.send_text(params.session_id, f"echo {text}")
    return PromptResponse(stop_reason="end_turn")


def _deaf_for(seconds: float) -> Any:
    """A prompt script that ignores session/cancel for ``seconds`` (an agent
    that does not honour it), then ends the turn."""

    async def script(agent: ScriptedAgent, params: PromptRequest) -> PromptResponse:
        with trio.CancelScope(shield=True):
            await trio.sleep(seconds)
        agent.log.append(("deaf turn answered", trio.current_time()))
        return PromptResponse(stop_reason="end_turn")  # sent as "cancelled" by the SDK

    return script


def _cancel_params(cwire: Wire) -> list[Any]:
    return [m["params"] for m in cwire.sent_notifications("session/cancel")]


async def test_a_deadline_sends_session_cancel_and_the_late_reply_is_consumed(
    autojump_clock: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="acp_trio")
    agent = ScriptedAgent(waiting_on("read"))
    client = RecordingClient()
    with trio.fail_after(LIMIT):
        async with open_pair(agent, client) as (to_agent, _, awire, cwire):
            sid = await start_session(to_agent)
            start = trio.current_time()
            with trio.move_on_after(5) as scope:
                await to_agent.prompt_text(sid, "go")
            assert scope.cancelled_caught
            assert trio.current_time() - start == 5  # no wait for the agent
            # Sent from the cancelled task itself, before it went on.
            assert _cancel_params(cwire) == [{"sessionId": sid}]
            assert cwire.sent_cancels() == []
            await settle()
            prompt_id = cwire.request_id("session/prompt")
            (answer,) = awire.sent_responses(prompt_id)
            assert answer["result"] == {"stopReason": "cancelled"}
            assert agent.cancels == [sid]
            assert to_agent.prompts_in_flight() == {}  # the late reply was consumed
            agent.script = _echo
            assert await to_agent.prompt_text(sid, "again") == PromptResponse(
                stop_reason="end_turn"
            )
            assert client.texts()[-1] == "echo again"
            assert_one_response_each(awire, cwire)
    assert f"reply to request {prompt_id}" not in caplog.text
    assert "unknown request" not in caplog.text


async def test_the_next_prompt_waits_for_the_cancelled_turn(autojump_clock: Any) -> None:
    """An agent that takes 3 s to answer after session/cancel: the next
    prompt is sent only when it has, and goes ahead."""
    agent = ScriptedAgent(_deaf_for(3))
    client = RecordingClient()
    with trio.fail_after(LIMIT):
        async with open_pair(agent, client) as (to_agent, _, awire, cwire):
            sid = await start_session(to_agent)
            with trio.move_on_after(1):
                await to_agent.prompt_text(sid, "first")
            cancelled_at = trio.current_time()
            agent.script = _echo
            assert await to_agent.prompt_text(sid, "second") == PromptResponse(
                stop_reason="end_turn"
            )
            assert agent.log[-1] == ("deaf turn answered", cancelled_at + 2)
            first_id, second_id = [m["id"] for m in cwire.sent_requests("session/prompt")]
            # The second prompt went out after the first answer was read.
            recv_first = next(
                i
                for i, (d, m) in enumerate(cwire.frames)
                if d == "recv" and m.get("id") == first_id
            )
            sent_second = next(
                i
                for i, (d, m) in enumerate(cwire.frames)
                if d == "send" and m.get("id") == second_id
            )
            assert recv_first < sent_second
            assert_one_response_each(awire, cwire)


async def test_past_both_graces_the_next_prompt_is_sent(autojump_clock: Any) -> None:
    """An agent deaf to both cancels for 100 s: the next prompt is not
    refused, it waits for the ladder (``cancel_grace`` 7 s, then 2 s after
    ``$/cancel_request``) and is sent; the late reply is consumed."""
    agent = ScriptedAgent(_deaf_for(100))
    client = RecordingClient()
    with trio.fail_after(LIMIT):
        async with open_pair(agent, client) as (to_agent, _, awire, cwire):
            sid = await start_session(to_agent)
            to_agent.cancel_grace = 7
            with trio.move_on_after(1):
                await to_agent.prompt_text(sid, "first")
            agent.script = _echo
            async with trio.open_nursery() as nursery:
                nursery.start_soon(to_agent.prompt_text, sid, "second")
                await trio.sleep(8.5)
                assert len(cwire.sent_requests("session/prompt")) == 1
                await trio.sleep(0.5)  # 9 s after the cancel: abandoned, and sent
                await settle()
                assert len(cwire.sent_requests("session/prompt")) == 2
            # (This agent runs a session's turns one at a time: the second is
            # answered once the deaf one's handler returns.)
            assert trio.current_time() == 100
            first_id, _second_id = [m["id"] for m in cwire.sent_requests("session/prompt")]
            assert cwire.sent_cancels() == [first_id]
            assert to_agent.prompts_in_flight() == {}
            assert (await to_agent.prompt_text(sid, "third")).stop_reason == "end_turn"
            assert_one_response_each(awire, cwire)


async def test_cancel_turn_returns_the_stop_reason(autojump_clock: Any) -> None:
    agent = ScriptedAgent(waiting_on("permission"))
    client = RecordingClient()
    results: list[PromptResponse] = []
    with trio.fail_after(LIMIT):
        async with open_pair(agent, client) as (to_agent, _, awire, cwire):
            sid = await start_session(to_agent)

            async def run() -> None:
                results.append(await to_agent.prompt_text(sid, "go"))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(run)
                await client.event("permission").wait()
                answer = await to_agent.cancel_turn(sid)
            assert answer.how == "answered"
            assert answer.response == PromptResponse(stop_reason="cancelled")
            # The prompt's own caller got the same answer.
            assert results == [PromptResponse(stop_reason="cancelled")]
            assert _cancel_params(cwire) == [{"sessionId": sid}]
            assert cwire.sent_cancels() == []
            # No turn running: nothing is sent, "idle" comes back.
            assert await to_agent.cancel_turn(sid) == CancelOutcome(sid, "idle")
            assert len(_cancel_params(cwire)) == 1
            assert_one_response_each(awire, cwire)


async def test_cancel_turn_after_a_deadline_awaits_the_late_reply(autojump_clock: Any) -> None:
    """The caller's deadline left the turn on the ladder; ``cancel_turn()``
    sends session/cancel again and waits for the end, and its shorter grace
    brings the ``$/cancel_request`` closer."""
    agent = ScriptedAgent(_deaf_for(3.5))
    client = RecordingClient()
    with trio.fail_after(LIMIT):
        async with open_pair(agent, client) as (to_agent, _, awire, cwire):
            sid = await start_session(to_agent)
            start = trio.current_time()
            with trio.move_on_after(1):
                await to_agent.prompt_text(sid, "first")
            outcome = await to_agent.cancel_turn(sid, grace=1)
            # $/cancel_request at 2 s (not 6), ignored (shielded); the turn
            # ends at its 3.5 s. (The agent SDK reports a turn whose session
            # was cancelled as cancelled, even when its handler returned.)
            assert outcome.how == "escalated"
            assert outcome.response == PromptResponse(stop_reason="cancelled")
            assert trio.current_time() == start + 3.5
            assert cwire.sent_cancels() == [cwire.request_id("session/prompt")]
            assert len(_cancel_params(cwire)) == 2
            assert_one_response_each(awire, cwire)


async def test_a_prompt_cancelled_before_it_was_sent_sends_nothing(
    autojump_clock: Any,
) -> None:
    agent = ScriptedAgent(_deaf_for(50))
    client = RecordingClient()
    with trio.fail_after(LIMIT):
        async with open_pair(agent, client) as (to_agent, _, awire, cwire):
            sid = await start_session(to_agent)
            with trio.CancelScope() as scope:
                scope.cancel()
                await to_agent.prompt_text(sid, "never")
            assert scope.cancelled_caught
            await settle()
            assert cwire.sent_requests("session/prompt") == []
            assert _cancel_params(cwire) == []
            assert to_agent.prompts_in_flight() == {}
            # Cancelled while waiting for a cancelled turn: not sent either.
            to_agent.cancel_grace = 100  # counted from each session/cancel
            with trio.move_on_after(1):
                await to_agent.prompt_text(sid, "first")
            with trio.move_on_after(2) as scope:
                await to_agent.prompt_text(sid, "second")
            assert scope.cancelled_caught
            await settle()
            assert len(cwire.sent_requests("session/prompt")) == 1
            assert len(_cancel_params(cwire)) == 1
            agent.script = _echo
            assert (await to_agent.prompt_text(sid, "third")).stop_reason == "end_turn"
            assert_one_response_each(awire, cwire)


async def test_two_sessions_do_not_interfere(autojump_clock: Any) -> None:
    """Session A's cancelled turn winds down slowly: a prompt on session B
    goes at once, and only A's next prompt waits for A's answer."""

    async def script(agent: ScriptedAgent, params: PromptRequest) -> PromptResponse:
        if params.session_id == "sess-1":
            return await _deaf_for(3)(agent, params)
        return await _echo(agent, params)

    agent = ScriptedAgent(script)
    client = RecordingClient()
    with trio.fail_after(LIMIT):
        async with open_pair(agent, client) as (to_agent, _, awire, cwire):
            a = await start_session(to_agent)
            b = (await to_agent.new_session(NEW_SESSION)).session_id
            assert (a, b) == ("sess-1", "sess-2")
            with trio.move_on_after(1):
                await to_agent.prompt_text(a, "slow")
            start = trio.current_time()
            assert (await to_agent.prompt_text(b, "quick")).stop_reason == "end_turn"
            assert trio.current_time() == start  # B did not wait for A
            assert _cancel_params(cwire) == [{"sessionId": a}]
            assert to_agent.prompts_in_flight() == {a: 1}
            agent.script = _echo
            assert (await to_agent.prompt_text(a, "next")).stop_reason == "end_turn"
            assert trio.current_time() == start + 2
            assert to_agent.prompts_in_flight() == {}
            assert_one_response_each(awire, cwire)


async def test_an_enclosing_requests_cancel_sends_session_cancel(autojump_clock: Any) -> None:
    """A middle agent whose prompt handler prompts another agent: the outer
    ``$/cancel_request`` cancels the handler, and its inner ``prompt()``
    sends ``session/cancel`` to the inner agent."""
    inner = ScriptedAgent(waiting_on("read"))
    inner_client = RecordingClient()
    with trio.fail_after(LIMIT):
        async with open_pair(inner, inner_client) as (to_inner, _, iawire, icwire):
            inner_sid = await start_session(to_inner)

            async def forward(agent: ScriptedAgent, params: PromptRequest) -> PromptResponse:
                return await to_inner.prompt_text(inner_sid, "go")

            middle = ScriptedAgent(forward)
            async with open_pair(middle, RecordingClient()) as (to_middle, _, mawire, mcwire):
                sid = await start_session(to_middle)
                params = {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]}
                with trio.CancelScope() as scope:
                    async with trio.open_nursery() as nursery:
                        nursery.start_soon(to_middle.connection.call, "session/prompt", params)
                        await inner_client.event("read").wait()
                        scope.cancel()
                await settle()
                assert mcwire.sent_cancels() == [mcwire.request_id("session/prompt")]
                assert _cancel_params(icwire) == [{"sessionId": inner_sid}]
                assert icwire.sent_cancels() == []
                (answer,) = iawire.sent_responses(icwire.request_id("session/prompt"))
                assert answer["result"] == {"stopReason": "cancelled"}
                assert to_inner.prompts_in_flight() == {}
                assert_one_response_each(mawire, mcwire)
            assert_one_response_each(iawire, icwire)


async def test_a_cancel_also_cancels_a_prompt_waiting_to_be_sent(autojump_clock: Any) -> None:
    """A prompt waits behind a cancelled turn; the session is cancelled again
    (the user's stop button): that prompt is never sent, and fails, once
    the turn ahead has ended, with how it ended."""
    agent = ScriptedAgent(_deaf_for(3))
    client = RecordingClient()
    failed: list[PromptNotSent] = []
    with trio.fail_after(LIMIT):
        async with open_pair(agent, client) as (to_agent, _, awire, cwire):
            sid = await start_session(to_agent)
            with trio.move_on_after(1):
                await to_agent.prompt_text(sid, "first")

            async def second() -> None:
                with pytest.raises(PromptNotSent) as info:
                    await to_agent.prompt_text(sid, "second")
                failed.append(info.value)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(second)
                await trio.sleep(1)
                # The cancelled turn, and the prompt waiting behind it.
                assert to_agent.prompts_in_flight() == {sid: 2}
                await to_agent.cancel(sid)
            assert trio.current_time() == 3  # when the first turn ended
            (error,) = failed
            assert (error.session_id, error.reason) == (sid, "cancelled")
            assert error.outcome.stop_reason == "cancelled"
            assert len(cwire.sent_requests("session/prompt")) == 1
            assert len(_cancel_params(cwire)) == 2
            assert to_agent.prompts_in_flight() == {}
            # A prompt started after the cancel runs.
            agent.script = _echo
            assert (await to_agent.prompt_text(sid, "third")).stop_reason == "end_turn"
            assert_one_response_each(awire, cwire)
