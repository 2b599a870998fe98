"""The client SDK's side of ``session/cancel``: pending permission requests
of the cancelled turn are answered ``cancelled`` by the SDK (late answers of
the application are dropped), and so is one arriving before the cancelled
prompt is answered; the next turn's requests reach the application again."""

from __future__ import annotations

from typing import Any

import trio

from acp_trio.schema import (
    PromptRequest,
    PromptResponse,
    RequestPermissionOutcomeCancelled,
    RequestPermissionRequest,
    RequestPermissionResponse,
    SelectedPermissionOutcome,
)

from .conftest import (
    CANCELLED_OUTCOME,
    LIMIT,
    RecordingClient,
    ScriptedAgent,
    assert_one_response_each,
    error_code,
    notif,
    ok,
    open_pair,
    raw_agent,
    req,
    settle,
    start_session,
)
from .test_session_cancel import nested_call, waiting_on

ALLOW = RequestPermissionResponse(outcome=SelectedPermissionOutcome(option_id="ok"))
PERMISSION_PARAMS = {
    "sessionId": "s1",
    "toolCall": {"toolCallId": "t9"},
    "options": [{"optionId": "ok", "name": "OK", "kind": "allow_once"}],
}


class LateClient(RecordingClient):
    """Answers permission requests only when :attr:`release` is set, and
    ignores being cancelled meanwhile (a UI that answers late)."""

    def __init__(self) -> None:
        super().__init__()
        self.release = trio.Event()

    async def request_permission(
        self, params: RequestPermissionRequest
    ) -> RequestPermissionResponse:
        self.event("permission").set()
        with trio.CancelScope(shield=True):
            await self.release.wait()
        self.log.append(("late answer", "allow"))
        return ALLOW


async def test_pending_permission_answered_cancelled_at_once(autojump_clock: Any) -> None:
    agent = ScriptedAgent(waiting_on("permission"))
    client = RecordingClient()
    with trio.fail_after(LIMIT):
        async with open_pair(agent, client) as (to_agent, _, awire, cwire):
            sid = await start_session(to_agent)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(to_agent.prompt_text, sid, "go")
                await client.event("permission").wait()
                await to_agent.cancel(sid)
                # The application's handler is cancelled right away.
                await settle()
                assert ("permission", "cancelled") in client.log
            permission_id = awire.request_id("session/request_permission")
            (reply,) = cwire.sent_responses(permission_id)
            assert reply == ok(permission_id, CANCELLED_OUTCOME)
            assert_one_response_each(awire, cwire)


async def test_late_answer_of_the_application_is_not_sent(autojump_clock: Any) -> None:
    seen: list[Any] = []

    async def script(agent: ScriptedAgent, params: PromptRequest) -> PromptResponse:
        with trio.CancelScope(shield=True):
            answer = await nested_call(agent, params.session_id, "permission")
        seen.append(answer.outcome)
        return PromptResponse(stop_reason="end_turn")

    agent = ScriptedAgent(script)
    client = LateClient()
    results: list[PromptResponse] = []
    with trio.fail_after(LIMIT):
        async with open_pair(agent, client) as (to_agent, _, awire, cwire):
            sid = await start_session(to_agent)

            async def run() -> None:
                results.append(await to_agent.prompt_text(sid, "go"))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(run)
                await client.event("permission").wait()
                await to_agent.cancel(sid)
                await trio.sleep(5)
                client.release.set()
            await settle()
            assert client.log == [("late answer", "allow")]
            permission_id = awire.request_id("session/request_permission")
            # One answer for the id, and it is the SDK's, not the late one.
            assert cwire.sent_responses(permission_id) == [ok(permission_id, CANCELLED_OUTCOME)]
            # The agent's (shielded) call got the SDK's answer.
            assert seen == [RequestPermissionOutcomeCancelled()]
            assert results == [PromptResponse(stop_reason="cancelled")]
            assert_one_response_each(awire, cwire)


async def test_permission_between_cancel_and_answer_is_cancelled_at_once(
    autojump_clock: Any,
) -> None:
    """A raw agent asks for permission after the client's session/cancel but
    before answering the prompt: the SDK answers ``cancelled`` without asking
    the application. After the prompt's answer, the application is asked."""
    client = RecordingClient()
    client.permission = ALLOW
    results: list[PromptResponse] = []
    with trio.fail_after(LIMIT):
        async with raw_agent(client) as (peer, to_agent, wire):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(to_agent.initialize)
                init = await peer.receive()
                assert init["method"] == "initialize"
                await peer.send(ok(init["id"], {"protocolVersion": 1}))
            assert to_agent.protocol_version == 1

            async def run() -> None:
                results.append(await to_agent.prompt_text("s1", "go"))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(run)
                prompt = await peer.receive()
                assert prompt["method"] == "session/prompt"
                await to_agent.cancel("s1")
                assert await peer.receive() == notif("session/cancel", {"sessionId": "s1"})
                await peer.send(req("p1", "session/request_permission", PERMISSION_PARAMS))
                assert await peer.receive() == ok("p1", CANCELLED_OUTCOME)
                assert client.log == []  # the application was not asked
                await peer.send(ok(prompt["id"], {"stopReason": "cancelled"}))
            assert results == [PromptResponse(stop_reason="cancelled")]

            # The turn is over: the next permission request is the application's.
            await peer.send(req("p2", "session/request_permission", PERMISSION_PARAMS))
            assert await peer.receive() == ok(
                "p2", {"outcome": {"outcome": "selected", "optionId": "ok"}}
            )
            assert client.log == [("permission", "t9")]
            await peer.expect_silence(5)
            assert wire.sent_responses("p1") == [ok("p1", CANCELLED_OUTCOME)]


async def test_the_next_turns_permission_reaches_the_application(autojump_clock: Any) -> None:
    """Cancel a turn and send the next prompt at once (the user pressed stop,
    then typed again): the first turn's permission ends ``cancelled``, the
    second turn's permission is asked of the application and answered."""
    outcomes: list[Any] = []

    async def script(agent: ScriptedAgent, params: PromptRequest) -> PromptResponse:
        answer = await nested_call(agent, params.session_id, "permission")
        outcomes.append(answer.outcome)
        return PromptResponse(stop_reason="end_turn")

    agent = ScriptedAgent(script)
    client = RecordingClient()
    results: dict[str, PromptResponse] = {}
    with trio.fail_after(LIMIT):
        async with open_pair(agent, client) as (to_agent, _, awire, cwire):
            sid = await start_session(to_agent)

            async def run(text: str) -> None:
                results[text] = await to_agent.prompt_text(sid, text)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(run, "first")
                await client.event("permission").wait()
                await to_agent.cancel(sid)
                client.permission = ALLOW
                nursery.start_soon(run, "second")
            assert results == {
                "first": PromptResponse(stop_reason="cancelled"),
                "second": PromptResponse(stop_reason="end_turn"),
            }
            assert outcomes == [SelectedPermissionOutcome(option_id="ok")]
            _first_id, second_id = [m["id"] for m in awire.sent_requests()]
            assert cwire.sent_responses(second_id) == [
                ok(second_id, {"outcome": {"outcome": "selected", "optionId": "ok"}})
            ]
            assert client.log == [
                ("permission", "t1"),
                ("permission", "cancelled"),
                ("permission", "t1"),
            ]
            assert_one_response_each(awire, cwire)


async def test_cancel_of_another_session_leaves_permissions_alone(autojump_clock: Any) -> None:
    agent = ScriptedAgent(waiting_on("permission"))
    client = RecordingClient()
    with trio.fail_after(LIMIT):
        async with open_pair(agent, client) as (to_agent, _, _awire, cwire):
            sid = await start_session(to_agent)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(to_agent.prompt_text, sid, "go")
                await client.event("permission").wait()
                await to_agent.cancel("some-other-session")
                await trio.sleep(10)
                assert ("permission", "cancelled") not in client.log
                assert cwire.sent_responses() == []
                assert agent.cancels == ["some-other-session"]
                nursery.cancel_scope.cancel()


async def _cancel_racing_the_peer(client: RecordingClient, *, peer_first: bool) -> Any:
    """One permission request held by the application; the agent's
    ``$/cancel_request`` for it and the client's ``session/cancel``. With
    ``peer_first`` the client reads the peer's cancel before cancelling;
    otherwise both happen before the handler resumes, and the reader and the
    handler run in the same scheduler batch, in Trio's random order."""
    async with raw_agent(client) as (peer, to_agent, wire):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(to_agent.initialize)
            init = await peer.receive()
            await peer.send(ok(init["id"], {"protocolVersion": 1}))
        async with trio.open_nursery() as nursery:
            nursery.start_soon(to_agent.prompt_text, "s1", "go")
            prompt = await peer.receive()
            await peer.send(req("p1", "session/request_permission", PERMISSION_PARAMS))
            await client.event("permission").wait()
            await peer.send(notif("$/cancel_request", {"requestId": "p1"}))
            if peer_first:
                await settle()
            await to_agent.cancel("s1")
            received = [await peer.receive(), await peer.receive()]
            assert notif("session/cancel", {"sessionId": "s1"}) in received
            (reply,) = [m for m in received if m.get("id") == "p1"]
            await peer.send(ok(prompt["id"], {"stopReason": "cancelled"}))
        await peer.expect_silence(1)
        assert wire.sent_responses("p1") == [reply]
        return reply


async def test_local_cancel_answers_before_the_peers_cancel_request(
    autojump_clock: Any,
) -> None:
    """The client's own ``session/cancel`` came first, so its ``cancelled``
    outcome is the answer every time, even when the agent's
    ``$/cancel_request`` is read before the handler resumes (it used to get
    ``-32800`` about half the time)."""
    with trio.fail_after(LIMIT):
        replies = [
            await _cancel_racing_the_peer(RecordingClient(), peer_first=False) for _ in range(200)
        ]
    assert replies == [ok("p1", CANCELLED_OUTCOME)] * 200


async def test_peers_cancel_request_read_first_answers_minus_32800(autojump_clock: Any) -> None:
    with trio.fail_after(LIMIT):
        reply = await _cancel_racing_the_peer(RecordingClient(), peer_first=True)
    assert error_code(reply) == -32800
