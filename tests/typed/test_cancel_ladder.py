"""The cancel ladder, client side: ``session/cancel``, then ``$/cancel_request``
for the prompt after ``cancel_grace``, then the turn abandoned after
``escalation_grace`` (its late answer dropped), with the abandon policy:
free the session, or close the connection. And isolation: a cancel touches
its own session only, and an idle one touches nothing.

The agent is planted: a raw peer on a memory stream that does exactly what
each test says (answers ``session/cancel``, only ``$/cancel_request``,
nothing at all, or nothing more ever). The autojump clock makes every time
here virtual, so the ladder's times are asserted exactly.
"""

from __future__ import annotations

import logging
import math
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
import trio.testing

import acp_trio
from acp_trio import (
    AgentProxy,
    CancelOutcome,
    ConnectionClosed,
    ConnectionConfig,
    PromptNotSent,
    RequestError,
    TurnNotAnswered,
)
from acp_trio.schema import PromptResponse
from acp_trio.testing import ExpectationFailed, ScriptedPeer

from .conftest import LIMIT, RecordingClient, Wire

#: What a planted agent does with a prompt turn:
#: - "end_turn": answers it at once;
#: - "honours_session_cancel": answers it "cancelled" on session/cancel;
#: - "honours_cancel_request": ignores session/cancel, answers -32800 to
#:   $/cancel_request;
#: - "deaf": ignores both (answers only when the test says so);
#: - "mute": ignores both, and never answers anything again.
Plan = Callable[[int, str], str]


class PlantedAgent:
    """A raw agent on a memory stream: answers ``initialize`` and
    ``session/new`` (``s1``, ``s2``, ...), and each prompt as ``plan(n,
    session_id)`` says (``n`` counts prompts from 1). :attr:`log` has
    ``(time, method, params or id)`` for each message read."""

    def __init__(self, peer: ScriptedPeer, plan: Plan) -> None:
        self.peer = peer
        self.plan = plan
        self.log: list[tuple[float, str, Any]] = []
        self.prompts: dict[Any, tuple[str, str]] = {}  # id -> (session, behaviour)
        self.sessions = 0
        self.mute = False
        self.turn_started: dict[str, trio.Event] = {}

    def started(self, session_id: str) -> trio.Event:
        return self.turn_started.setdefault(session_id, trio.Event())

    def times(self, method: str) -> list[float]:
        return [t for t, m, _ in self.log if m == method]

    def methods(self) -> list[str]:
        return [m for _, m, _ in self.log]

    async def answer(self, prompt_id: Any, stop_reason: str = "end_turn") -> None:
        self.prompts.pop(prompt_id)
        await self.peer.respond(prompt_id, {"stopReason": stop_reason})

    async def serve(self) -> None:
        peer = self.peer
        while True:
            try:
                msg = await peer.receive(within=math.inf)
            except (ExpectationFailed, trio.BrokenResourceError, trio.ClosedResourceError):
                return
            method = msg.get("method", "<response>")
            self.log.append((trio.current_time(), method, msg.get("params", msg.get("id"))))
            if self.mute:
                continue
            if method == "initialize":
                await peer.respond(msg["id"], {"protocolVersion": 1, "agentCapabilities": {}})
            elif method == "session/new":
                self.sessions += 1
                await peer.respond(msg["id"], {"sessionId": f"s{self.sessions}"})
            elif method == "session/prompt":
                sid = msg["params"]["sessionId"]
                how = self.plan(len(self.prompts_seen()), sid)
                self.prompts[msg["id"]] = (sid, how)
                if how == "end_turn":
                    await self.answer(msg["id"])
                elif how == "mute":
                    self.mute = True
                self.started(sid).set()
            elif method == "session/cancel":
                sid = msg["params"]["sessionId"]
                for pid, (psid, how) in list(self.prompts.items()):
                    if psid == sid and how == "honours_session_cancel":
                        await self.answer(pid, "cancelled")
            elif method == "$/cancel_request":
                target = msg["params"]["requestId"]
                if self.prompts.get(target, ("", ""))[1] == "honours_cancel_request":
                    self.prompts.pop(target)
                    await peer.respond_error(target, -32800, "Request cancelled")

    def prompts_seen(self) -> list[float]:
        return self.times("session/prompt")


@asynccontextmanager
async def open_planted(
    plan: Plan, client: RecordingClient | None = None, **options: Any
) -> AsyncIterator[tuple[AgentProxy, PlantedAgent, Wire]]:
    """The typed client under test against a :class:`PlantedAgent`."""
    wire = Wire()
    ours, theirs = trio.testing.memory_stream_pair()
    planted = PlantedAgent(ScriptedPeer(theirs, timeout=30), plan)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(planted.serve)
        async with acp_trio.open_agent(
            client or RecordingClient(), ours, config=ConnectionConfig(trace=wire), **options
        ) as to_agent:
            await to_agent.initialize()
            yield to_agent, planted, wire
        nursery.cancel_scope.cancel()


def first(how: str) -> Plan:
    """The first prompt as ``how`` says, the next ones answered ``end_turn``."""
    return lambda n, sid: how if n == 1 else "end_turn"


async def new_session(to_agent: AgentProxy) -> str:
    return (await to_agent.new_session(cwd="/work")).session_id


async def cancel_when_started(
    to_agent: AgentProxy, planted: PlantedAgent, sid: str, **kw: Any
) -> tuple[CancelOutcome, list[Any]]:
    """Run a prompt in a task; once the agent has it, ``cancel_turn``.
    Returns the outcome and what the prompt's own call ended with."""
    ended: list[Any] = []

    async def prompt() -> None:
        try:
            ended.append(await to_agent.prompt_text(sid, "go"))
        except (RequestError, TurnNotAnswered) as exc:
            ended.append(exc)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(prompt)
        await planted.started(sid).wait()
        outcome = await to_agent.cancel_turn(sid, **kw)
    return outcome, ended


async def test_an_agent_that_honours_session_cancel_ends_at_the_first_rung(
    autojump_clock: Any,
) -> None:
    with trio.fail_after(LIMIT):
        async with open_planted(first("honours_session_cancel")) as (to_agent, planted, wire):
            sid = await new_session(to_agent)
            start = trio.current_time()
            outcome, ended = await cancel_when_started(to_agent, planted, sid)
            assert trio.current_time() == start
            assert outcome.how == "answered"
            assert outcome.stop_reason == "cancelled"
            assert outcome.error is None
            assert outcome.request_id == wire.request_id("session/prompt")
            assert ended == [PromptResponse(stop_reason="cancelled")]
            assert wire.sent_cancels() == []
            assert to_agent.prompts_in_flight() == {}


async def test_an_agent_that_ignores_session_cancel_gets_cancel_request_after_the_grace(
    autojump_clock: Any,
) -> None:
    with trio.fail_after(LIMIT):
        async with open_planted(first("honours_cancel_request"), cancel_grace=3) as (
            to_agent,
            planted,
            wire,
        ):
            sid = await new_session(to_agent)
            outcome, ended = await cancel_when_started(to_agent, planted, sid)
            (cancelled_at,) = planted.times("session/cancel")
            (escalated_at,) = planted.times("$/cancel_request")
            assert escalated_at == cancelled_at + 3
            assert wire.sent_cancels() == [outcome.request_id]
            assert outcome.how == "escalated"
            assert outcome.response is None
            assert isinstance(outcome.error, RequestError)
            assert outcome.error.code == -32800
            assert len(ended) == 1
            assert isinstance(ended[0], RequestError)
            assert ended[0].code == -32800
            # The session goes on.
            assert (await to_agent.prompt_text(sid, "next")).stop_reason == "end_turn"


async def test_an_agent_that_ignores_both_cancels_for_one_turn(
    autojump_clock: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """Done when: the typed outcome within the documented bound (cancel_grace
    + escalation_grace), and the next prompt on that session is sent and
    answered. The late answer is dropped and logged; a permission request of
    the abandoned turn is answered ``cancelled`` by the SDK."""
    caplog.set_level(logging.DEBUG, logger="acp_trio")
    client = RecordingClient()
    with trio.fail_after(LIMIT):
        async with open_planted(first("deaf"), client) as (to_agent, planted, wire):
            sid = await new_session(to_agent)
            assert (to_agent.cancel_grace, to_agent.escalation_grace) == (5.0, 2.0)
            start = trio.current_time()
            outcome, ended = await cancel_when_started(to_agent, planted, sid)
            # The bound: 5 s to the escalation, 2 more to the end.
            assert trio.current_time() == start + 7
            assert planted.times("$/cancel_request") == [start + 5]
            assert outcome == CancelOutcome(
                sid, "abandoned", request_id=outcome.request_id, policy="free_session"
            )
            assert outcome.stop_reason is None
            (late,) = ended
            assert isinstance(late, TurnNotAnswered)
            assert (late.session_id, late.request_id, late.grace) == (sid, outcome.request_id, 7)
            assert "turn is abandoned" in caplog.text
            assert to_agent.prompts_in_flight() == {}

            # The abandoned turn asks for a permission: nobody waits for it.
            reply = await planted.peer.request(
                "session/request_permission",
                {
                    "sessionId": sid,
                    "toolCall": {"toolCallId": "t1"},
                    "options": [{"optionId": "ok", "name": "OK", "kind": "allow_once"}],
                },
            )
            await wire.wait_for_response(reply)
            (answer,) = wire.sent_responses(reply)
            assert answer["result"] == {"outcome": {"outcome": "cancelled"}}
            assert client.log == []  # the application was never asked

            # Its late answer is dropped, quietly for the application.
            await planted.answer(outcome.request_id, "end_turn")
            await trio.testing.wait_all_tasks_blocked()
            assert f"late or repeated reply to request {outcome.request_id}" in caplog.text

            # The next prompt is sent and answered.
            assert (await to_agent.prompt_text(sid, "next")).stop_reason == "end_turn"
            assert len(planted.times("session/prompt")) == 2
            assert to_agent.prompts_in_flight() == {}


async def test_a_cancelled_prompt_climbs_the_ladder_by_itself(autojump_clock: Any) -> None:
    """Nobody waits for the turn a deadline cancelled: its ladder still runs
    (the $/cancel_request goes out at the grace) and frees the session."""
    with trio.fail_after(LIMIT):
        async with open_planted(first("deaf")) as (to_agent, planted, _wire):
            sid = await new_session(to_agent)
            with trio.move_on_after(1):
                await to_agent.prompt_text(sid, "go")
            assert planted.times("session/cancel") == []  # (not read yet)
            await trio.sleep(10)
            (cancelled_at,) = planted.times("session/cancel")
            assert planted.times("$/cancel_request") == [cancelled_at + 5]
            assert to_agent.prompts_in_flight() == {}
            assert (await to_agent.prompt_text(sid, "next")).stop_reason == "end_turn"


async def test_a_prompt_queued_behind_a_cancelled_turn_is_sent_when_it_ends(
    autojump_clock: Any,
) -> None:
    with trio.fail_after(LIMIT):
        async with open_planted(first("deaf")) as (to_agent, planted, _wire):
            sid = await new_session(to_agent)
            with trio.move_on_after(1):
                await to_agent.prompt_text(sid, "go")
            assert to_agent.prompts_in_flight() == {sid: 1}
            # Queued: it waits for the ladder, then goes.
            assert (await to_agent.prompt_text(sid, "next")).stop_reason == "end_turn"
            first_at, second_at = planted.times("session/prompt")
            assert second_at == first_at + 1 + 7


async def test_a_queued_prompt_fails_with_the_outcome_when_the_session_is_cancelled_again(
    autojump_clock: Any,
) -> None:
    with trio.fail_after(LIMIT):
        async with open_planted(first("honours_cancel_request")) as (to_agent, planted, _wire):
            sid = await new_session(to_agent)
            with trio.move_on_after(1):
                await to_agent.prompt_text(sid, "go")
            failed: list[PromptNotSent] = []

            async def queued() -> None:
                with pytest.raises(PromptNotSent) as info:
                    await to_agent.prompt_text(sid, "queued")
                failed.append(info.value)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(queued)
                await trio.sleep(1)
                assert to_agent.prompts_in_flight() == {sid: 2}
                await to_agent.cancel(sid)  # the stop button, again
            (error,) = failed
            assert error.reason == "cancelled"
            assert error.session_id == sid
            assert error.outcome.how == "escalated"  # how the turn ahead ended
            assert "was not sent" in str(error)
            assert len(planted.times("session/prompt")) == 1
            # A prompt started after that cancel is sent.
            assert (await to_agent.prompt_text(sid, "after")).stop_reason == "end_turn"


async def test_an_agent_that_answers_nothing_more_has_its_connection_closed(
    autojump_clock: Any,
) -> None:
    """Done when, with the "close_connection" policy: the typed outcome,
    then the connection closed within its bound (close_timeout), and what
    waited behind the turn fails, with the outcome."""
    with trio.fail_after(LIMIT):
        async with open_planted(
            first("mute"), abandon_policy="close_connection", escalation_grace=1
        ) as (to_agent, planted, _wire):
            sid = await new_session(to_agent)
            failed: list[BaseException] = []

            async def queued() -> None:
                await planted.started(sid).wait()
                await trio.sleep(1)
                try:
                    await to_agent.prompt_text(sid, "queued")
                except (PromptNotSent, ConnectionClosed) as exc:
                    failed.append(exc)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(queued)
                start = trio.current_time()
                outcome, ended = await cancel_when_started(to_agent, planted, sid)
                assert trio.current_time() == start + 6
            assert outcome.how == "abandoned"
            assert outcome.policy == "close_connection"
            assert isinstance(ended[0], TurnNotAnswered)
            (error,) = failed
            assert isinstance(error, PromptNotSent)
            assert error.reason == "abandoned"
            assert error.outcome == outcome
            closed_at = trio.current_time()
            await to_agent.connection.wait_closed()
            assert trio.current_time() <= closed_at + to_agent.connection.config.close_timeout
            with pytest.raises(ConnectionClosed):
                await to_agent.prompt_text(sid, "after")
            assert len(planted.times("session/prompt")) == 1


async def test_an_agent_that_hangs_up_mid_cancel_is_an_error_at_once(
    autojump_clock: Any,
) -> None:
    with trio.fail_after(LIMIT):
        async with open_planted(first("deaf")) as (to_agent, planted, wire):
            sid = await new_session(to_agent)

            async def prompt() -> None:
                with pytest.raises(ConnectionClosed):
                    await to_agent.prompt_text(sid, "go")

            async with trio.open_nursery() as nursery:
                nursery.start_soon(prompt)
                await planted.started(sid).wait()

                async def hang_up() -> None:
                    await wire.wait_until(lambda: wire.sent_notifications("session/cancel"))
                    await planted.peer.aclose()

                nursery.start_soon(hang_up)
                start = trio.current_time()
                with pytest.raises(ConnectionClosed):
                    await to_agent.cancel_turn(sid)
                assert trio.current_time() == start  # no grace waited
            assert wire.sent_cancels() == []


async def test_a_shorter_grace_brings_the_next_rung_closer_a_repeat_never_pushes_it_back(
    autojump_clock: Any,
) -> None:
    with trio.fail_after(LIMIT):
        async with open_planted(first("deaf")) as (to_agent, planted, _wire):
            sid = await new_session(to_agent)
            start = trio.current_time()
            with trio.move_on_after(1):
                await to_agent.prompt_text(sid, "go")
            # Pressed again and again, with a longer grace: no later.
            for _ in range(3):
                await trio.sleep(1)
                await to_agent.cancel(sid)
            await trio.sleep(1)  # now 5 s in; escalation due at 6 s
            outcome = await to_agent.cancel_turn(sid, grace=0.5)
            assert planted.times("$/cancel_request") == [start + 5.5]
            assert trio.current_time() == start + 5.5 + 2
            assert outcome.how == "abandoned"
            assert len(planted.times("session/cancel")) == 5


@pytest.mark.parametrize(
    ("option", "value"),
    [("cancel_grace", -1), ("escalation_grace", float("nan")), ("cancel_grace", "5")],
)
async def test_graces_are_checked(option: str, value: Any) -> None:
    client = RecordingClient()
    ours, _theirs = trio.testing.memory_stream_pair()
    with trio.fail_after(LIMIT):
        async with acp_trio.open_agent(client, ours) as to_agent:
            with pytest.raises(ValueError, match=option):
                setattr(to_agent, option, value)
            with pytest.raises(ValueError, match="stop_process"):
                to_agent.abandon_policy = "stop_process"
            with pytest.raises(ValueError, match="abandon_policy"):
                to_agent.abandon_policy = "later"  # type: ignore[assignment]


# ----------------------------------------------------------------------
# Isolation


async def test_an_idle_cancel_turn_changes_nothing(autojump_clock: Any) -> None:
    """No turn running: nothing is sent, and the next prompt is an ordinary
    one (neither delayed nor cancelled)."""
    with trio.fail_after(LIMIT):
        async with open_planted(lambda n, sid: "end_turn") as (to_agent, planted, wire):
            sid = await new_session(to_agent)
            assert (await to_agent.prompt_text(sid, "one")).stop_reason == "end_turn"
            sent = len(wire.sent())
            start = trio.current_time()
            assert await to_agent.cancel_turn(sid) == CancelOutcome(sid, "idle")
            assert await to_agent.cancel_turn("never-made") == CancelOutcome("never-made", "idle")
            assert len(wire.sent()) == sent
            assert to_agent.prompts_in_flight() == {}
            assert (await to_agent.prompt_text(sid, "two")).stop_reason == "end_turn"
            assert trio.current_time() == start
            assert planted.times("session/cancel") == []


async def test_cancelling_one_session_leaves_the_others_alone(autojump_clock: Any) -> None:
    """Three sessions on one connection: A's turn is cancelled; B's turn, and
    the permission request B's agent is waiting on, go on; C's cancelled
    turn climbs its own ladder on its own times, and the prompt queued
    behind it is sent when it ends."""

    def plan(n: int, sid: str) -> str:
        if sid == "s1":
            return "honours_session_cancel"
        if sid == "s3" and n == 3:
            return "deaf"
        return "end_turn" if n > 3 else "deaf"

    client = RecordingClient()  # holds permission requests
    with trio.fail_after(LIMIT):
        async with open_planted(plan, client) as (to_agent, planted, wire):
            a, b, c = [await new_session(to_agent) for _ in range(3)]
            results: dict[str, Any] = {}

            async def prompt(sid: str, text: str) -> None:
                results[text] = await to_agent.prompt_text(sid, text)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(prompt, a, "a")
                await planted.started(a).wait()
                nursery.start_soon(prompt, b, "b")
                await planted.started(b).wait()
                # B's agent asks for a permission; the client holds it.
                permission = await planted.peer.request(
                    "session/request_permission",
                    {
                        "sessionId": b,
                        "toolCall": {"toolCallId": "t1"},
                        "options": [{"optionId": "ok", "name": "OK", "kind": "allow_once"}],
                    },
                )
                await client.event("permission").wait()
                # C: a turn cancelled by a deadline, and a prompt behind it.
                with trio.move_on_after(1):
                    await to_agent.prompt_text(c, "c")
                c_cancelled_at = trio.current_time()
                nursery.start_soon(prompt, c, "c-queued")
                await trio.sleep(1)
                in_flight = to_agent.prompts_in_flight()
                assert in_flight == {a: 1, b: 1, c: 2}

                outcome = await to_agent.cancel_turn(a)
                assert outcome.how == "answered"
                assert outcome.stop_reason == "cancelled"

                # Nothing of B's or C's was touched.
                assert [p["sessionId"] for _, m, p in planted.log if m == "session/cancel"] == [
                    c,
                    a,
                ]
                assert wire.sent_responses(permission) == []
                assert ("permission", "cancelled") not in client.log
                assert to_agent.prompts_in_flight() == {b: 1, c: 2}
                # C's ladder runs on its own times; its queued prompt is sent.
                await trio.sleep(10)
                c_prompt = [i for i, (s, _) in planted.prompts.items() if s == c]
                assert planted.times("$/cancel_request") == [c_cancelled_at + 5]
                assert results["c-queued"].stop_reason == "end_turn"
                assert c_prompt  # the abandoned turn, never answered
                # B is still running, its permission still pending.
                assert wire.sent_responses(permission) == []
                assert to_agent.prompts_in_flight() == {b: 1}
                (b_prompt,) = [i for i, (s, _) in planted.prompts.items() if s == b]
                await planted.answer(b_prompt)
            assert results["b"].stop_reason == "end_turn"
            assert results["a"].stop_reason == "cancelled"
