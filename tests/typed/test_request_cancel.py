"""``$/cancel_request`` of a running prompt, and deadlines inside the agent:
the nested requests are cancelled on the wire, the prompt is answered
``-32800`` (or with the agent's own result when it chose to move on).

The typed ``AgentProxy.prompt()`` cancels with ``session/cancel`` instead
(test_prompt_cancel.py): here the prompt is a raw ``Connection.call``, the
way a client of any other SDK may cancel it."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from acp_trio import AgentProxy, RequestError
from acp_trio.schema import PromptRequest, PromptResponse, ReadTextFileRequest

from .conftest import (
    LIMIT,
    RecordingClient,
    ScriptedAgent,
    assert_one_response_each,
    error_code,
    limit,
    open_pair,
    settle,
    start_session,
)
from .test_session_cancel import NESTED, nested_call, waiting_on


async def raw_prompt(to_agent: AgentProxy, sid: str, text: str) -> Any:
    """``session/prompt`` as a plain call: cancelling it sends ``$/cancel_request``."""
    params = {"sessionId": sid, "prompt": [{"type": "text", "text": text}]}
    return await to_agent.connection.call("session/prompt", params)


@pytest.mark.parametrize("kind", list(NESTED))
async def test_client_abandons_a_running_prompt(kind: str, transport: str, clock: Any) -> None:
    method, event = NESTED[kind]
    agent = ScriptedAgent(waiting_on(kind))
    client = RecordingClient()
    with trio.fail_after(limit(transport)):
        async with open_pair(agent, client, transport) as (to_agent, _, awire, cwire):
            sid = await start_session(to_agent)
            with trio.CancelScope() as scope:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(raw_prompt, to_agent, sid, "go")
                    await client.event(event).wait()
                    scope.cancel()
            assert scope.cancelled_caught
            prompt_id = cwire.request_id("session/prompt")
            nested_id = awire.request_id(method)
            await awire.wait_for_response(prompt_id)
            await cwire.wait_for_response(nested_id)
            # One $/cancel_request from the client, for the prompt.
            assert cwire.sent_cancels() == [prompt_id]
            # The agent answers it -32800 (a cancel of the request, not of the
            # turn) after cancelling its own nested request on the wire.
            (answer,) = awire.sent_responses(prompt_id)
            assert answer["error"] == {"code": -32800, "message": "Request cancelled"}
            assert awire.sent_cancels() == [nested_id]
            assert agent.log[-1] == ("nested", "cancelled")
            # Its handler in the client was cancelled and answered -32800
            # (for a permission too: this is not a session/cancel).
            (reply,) = cwire.sent_responses(nested_id)
            assert error_code(reply) == -32800
            assert (event, "cancelled") in client.log
            # session/cancel played no part.
            assert agent.cancels == []
            assert cwire.sent_notifications("session/cancel") == []
            assert_one_response_each(awire, cwire)
            # The session goes on.
            agent.script = lambda a, p: _end_turn()
            assert await to_agent.prompt_text(sid, "again") == PromptResponse(
                stop_reason="end_turn"
            )


async def test_client_deadline_on_a_prompt(autojump_clock: Any) -> None:
    """``trio.move_on_after`` around a raw prompt call: at the deadline,
    exactly one ``$/cancel_request`` goes out, and the agent answers -32800."""
    agent = ScriptedAgent(waiting_on("read"))
    client = RecordingClient()
    with trio.fail_after(LIMIT):
        async with open_pair(agent, client) as (to_agent, _, awire, cwire):
            sid = await start_session(to_agent)
            start = trio.current_time()
            with trio.move_on_after(5) as scope:
                await raw_prompt(to_agent, sid, "go")
            assert scope.cancelled_caught
            assert trio.current_time() - start == 5
            await settle()
            prompt_id = cwire.request_id("session/prompt")
            read_id = awire.request_id("fs/read_text_file")
            assert cwire.sent_cancels() == [prompt_id]
            assert error_code(awire.sent_responses(prompt_id)[0]) == -32800
            assert awire.sent_cancels() == [read_id]
            assert error_code(cwire.sent_responses(read_id)[0]) == -32800
            assert_one_response_each(awire, cwire)
            # Later prompts on the session work.
            agent.script = lambda a, p: _end_turn()
            assert await to_agent.prompt_text(sid, "again") == PromptResponse(
                stop_reason="end_turn"
            )


async def _end_turn() -> PromptResponse:
    return PromptResponse(stop_reason="end_turn")


async def test_agent_request_timeout(autojump_clock: Any) -> None:
    """``ConnectionConfig(request_timeout=...)`` on the agent: the nested
    request is cancelled on the wire at the deadline, the prompt -32800."""
    agent = ScriptedAgent(waiting_on("terminal"))
    client = RecordingClient()
    with trio.fail_after(LIMIT):
        async with open_pair(agent, client, agent_config={"request_timeout": 10}) as (
            to_agent,
            _,
            awire,
            cwire,
        ):
            sid = await start_session(to_agent)
            start = trio.current_time()
            with pytest.raises(RequestError) as info:
                await to_agent.prompt_text(sid, "go")
            assert info.value.code == -32800
            assert trio.current_time() - start == 10
            await settle()
            terminal_id = awire.request_id("terminal/create")
            assert awire.sent_cancels() == [terminal_id]
            assert error_code(cwire.sent_responses(terminal_id)[0]) == -32800
            assert ("terminal", "cancelled") in client.log
            assert cwire.sent_cancels() == []
            assert agent.log[-1] == ("nested", "cancelled")
            # The turn's updates are on the wire before the error.
            methods = awire.methods_sent()
            assert methods[-3:] == ["terminal/create", "$/cancel_request", "<response>"]
            assert methods.count("session/update") == 2
            assert_one_response_each(awire, cwire)


async def test_agent_moves_on_after_its_own_deadline(autojump_clock: Any) -> None:
    """The handler's own ``move_on_after`` around a nested call: the call is
    cancelled on the wire, and the turn ends with the agent's own result."""

    async def script(agent: ScriptedAgent, params: PromptRequest) -> PromptResponse:
        sid = params.session_id
        with trio.move_on_after(3):
            await agent.client.read_text_file(ReadTextFileRequest(session_id=sid, path="/hold"))
        await agent.client.send_text(sid, "the client took too long")
        return PromptResponse(stop_reason="max_turn_requests")

    agent = ScriptedAgent(script)
    client = RecordingClient()
    with trio.fail_after(LIMIT):
        async with open_pair(agent, client) as (to_agent, _, awire, cwire):
            sid = await start_session(to_agent)
            start = trio.current_time()
            result = await to_agent.prompt_text(sid, "go")
            assert result == PromptResponse(stop_reason="max_turn_requests")
            assert trio.current_time() - start == 3
            assert client.texts() == ["the client took too long"]
            await settle()
            read_id = awire.request_id("fs/read_text_file")
            assert awire.sent_cancels() == [read_id]
            assert error_code(cwire.sent_responses(read_id)[0]) == -32800
            assert ("read", "cancelled") in client.log
            assert_one_response_each(awire, cwire)


async def test_agent_fails_after_its_own_deadline(autojump_clock: Any) -> None:
    """The handler's own ``fail_after`` expiring (uncaught ``TooSlowError``):
    the nested call is cancelled on the wire, the prompt answered -32800, as
    for any deadline (not -32603)."""

    async def script(agent: ScriptedAgent, params: PromptRequest) -> PromptResponse:
        with trio.fail_after(3):
            await nested_call(agent, params.session_id, "read")
        return PromptResponse(stop_reason="end_turn")  # pragma: no cover

    agent = ScriptedAgent(script)
    client = RecordingClient()
    with trio.fail_after(LIMIT):
        async with open_pair(agent, client) as (to_agent, _, awire, cwire):
            sid = await start_session(to_agent)
            with pytest.raises(RequestError) as info:
                await to_agent.prompt_text(sid, "go")
            assert info.value.code == -32800
            await settle()
            read_id = awire.request_id("fs/read_text_file")
            assert awire.sent_cancels() == [read_id]
            assert error_code(cwire.sent_responses(read_id)[0]) == -32800
            assert_one_response_each(awire, cwire)
