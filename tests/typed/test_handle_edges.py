"""The edges of the tool-call and terminal handles and of early-update
delivery that a review found: each failed before its fix."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
import trio

from acp_trio import build
from acp_trio.schema import PromptRequest, PromptResponse, ToolCall, ToolCallUpdate

from .conftest import (
    INIT,
    LIMIT,
    NEW_SESSION,
    RecordingClient,
    ScriptedAgent,
    notif,
    ok,
    open_pair,
    raw_agent,
    raw_client,
    req,
)
from .test_early_updates import SessionTable, chunk, initialized, settle

TERMINAL_INIT = {"protocolVersion": 1, "clientCapabilities": {"terminal": True}}


def tool_updates(client: RecordingClient) -> list[Any]:
    return [n.update for n in client.updates if isinstance(n.update, (ToolCall, ToolCallUpdate))]


async def start_prompt(peer: Any) -> str:
    await peer.send(req(1, "initialize", TERMINAL_INIT))
    await peer.receive()
    await peer.send(req(2, "session/new", {"cwd": "/w", "mcpServers": []}))
    sid: str = (await peer.receive())["result"]["sessionId"]
    prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]}
    await peer.send(req(3, "session/prompt", prompt))
    return sid


@pytest.mark.parametrize("same_chunk", [True, False])
async def test_a_terminal_answered_with_the_cancel_is_released(
    same_chunk: bool, autojump_clock: Any
) -> None:
    """session/cancel and the terminal/create answer read together: the
    terminal the answer brings is released all the same."""

    async def script(agent: ScriptedAgent, params: PromptRequest) -> PromptResponse:
        async with agent.client.terminal(params.session_id, "make"):
            await trio.sleep_forever()
        return PromptResponse(stop_reason="end_turn")

    got: list[Any] = []
    with trio.fail_after(LIMIT):
        async with raw_client(ScriptedAgent(script)) as (peer, _to_client, _wire):
            sid = await start_prompt(peer)
            create = await peer.receive()
            assert create["method"] == "terminal/create"
            cancel = notif("session/cancel", {"sessionId": sid})
            answer = ok(create["id"], {"terminalId": "t-1"})
            if same_chunk:
                await peer.send(cancel, answer)
            else:
                await peer.send(cancel)
                await peer.send(answer)
            while not any(m.get("method") == "terminal/release" for m in got):
                message = await peer.receive()
                got.append(message)
            release = got[-1]
            assert release["params"] == {"sessionId": sid, "terminalId": "t-1"}
            await peer.send(ok(release["id"], {}))


async def test_a_malformed_release_answer_does_not_replace_the_blocks_error(
    autojump_clock: Any,
) -> None:
    caught: list[BaseException] = []

    async def script(agent: ScriptedAgent, params: PromptRequest) -> PromptResponse:
        try:
            async with agent.client.terminal(params.session_id, "make"):
                raise ValueError("the tool broke")
        except BaseException as exc:
            caught.append(exc)
            raise

    with trio.fail_after(LIMIT):
        async with raw_client(ScriptedAgent(script)) as (peer, _to_client, _wire):
            await start_prompt(peer)
            create = await peer.receive()
            await peer.send(ok(create["id"], {"terminalId": "t-1"}))
            release = await peer.receive()
            assert release["method"] == "terminal/release"
            await peer.send(ok(release["id"], 5))  # not a ReleaseTerminalResponse
            reply = await peer.receive()
    assert [type(exc) for exc in caught] == [ValueError]
    assert reply["error"]["code"] == -32603


async def test_a_negative_release_timeout_is_refused_before_sending(autojump_clock: Any) -> None:
    async def script(agent: ScriptedAgent, params: PromptRequest) -> PromptResponse:
        with pytest.raises(ValueError, match="release_timeout"):
            async with agent.client.terminal(params.session_id, "make", release_timeout=-1):
                pass
        return PromptResponse(stop_reason="end_turn")

    client = RecordingClient()
    async with open_pair(ScriptedAgent(script), client) as (to_agent, *_):
        await to_agent.initialize(INIT)
        sid = (await to_agent.new_session(NEW_SESSION)).session_id
        assert (await to_agent.prompt_text(sid, "go")).stop_reason == "end_turn"
    assert client.log == []


async def test_concurrent_add_content_keeps_both(autojump_clock: Any) -> None:
    handles: list[Any] = []

    async def script(agent: ScriptedAgent, params: PromptRequest) -> PromptResponse:
        async with agent.client.tool_call(params.session_id, "Run", tool_call_id="t1") as call:
            handles.append(call)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(call.add_content, build.content("from task A"))
                nursery.start_soon(call.add_content, build.content("from task B"))
        return PromptResponse(stop_reason="end_turn")

    client = RecordingClient()
    with trio.fail_after(LIMIT):
        async with open_pair(ScriptedAgent(script), client) as (to_agent, *_):
            await to_agent.initialize(INIT)
            sid = (await to_agent.new_session(NEW_SESSION)).session_id
            await to_agent.prompt_text(sid, "go")
    last = [u for u in tool_updates(client) if u.content is not None][-1]
    assert len(last.content) == 2
    assert len(handles[0].content) == 2


async def test_the_agent_closing_mid_tool_call_still_reports_failed(autojump_clock: Any) -> None:
    inside = trio.Event()

    async def script(agent: ScriptedAgent, params: PromptRequest) -> PromptResponse:
        async with agent.client.tool_call(params.session_id, "Run", tool_call_id="t1"):
            inside.set()
            await trio.sleep_forever()
        return PromptResponse(stop_reason="end_turn")

    client = RecordingClient()
    with trio.fail_after(LIMIT):
        async with open_pair(ScriptedAgent(script), client) as (to_agent, to_client, a_wire, _c):
            await to_agent.initialize(INIT)
            sid = (await to_agent.new_session(NEW_SESSION)).session_id
            async with trio.open_nursery() as nursery:

                async def run() -> None:
                    with contextlib.suppress(Exception):
                        await to_agent.prompt_text(sid, "go")

                nursery.start_soon(run)
                await inside.wait()
                await to_client.connection.aclose()  # the agent shuts down
    sent = a_wire.sent()
    statuses = [
        m["params"]["update"].get("status") for m in sent if m.get("method") == "session/update"
    ]
    assert statuses == ["in_progress", "failed"]
    reply_at = next(i for i, m in enumerate(sent) if "method" not in m and m.get("id") == 2)
    final_at = max(i for i, m in enumerate(sent) if m.get("method") == "session/update")
    assert final_at < reply_at


class Slowish(SessionTable):
    async def session_update(self, params: Any) -> None:
        await trio.sleep(0.1)  # a UI or database write
        await super().session_update(params)


async def test_early_updates_precede_a_later_calls_result(autojump_clock: Any) -> None:
    """A reply read after the held updates are scheduled is handed over only
    after they were delivered, as for notifications read before it."""
    client = Slowish()
    client.sessions["k"] = []
    events: list[Any] = []
    with trio.fail_after(LIMIT):
        async with raw_agent(client) as (peer, to_agent, _wire), trio.open_nursery() as nursery:
            await initialized(peer, to_agent, nursery)
            await settle()
            # Session "k" is known (made earlier): its updates are not held.
            nursery.start_soon(to_agent.new_session, NEW_SESSION)
            made = await peer.receive()
            await peer.send(ok(made["id"], {"sessionId": "k"}))
            await settle()
            assert to_agent.known_sessions == {"k"}

            async def run() -> None:
                sid = await client.new_session()
                await to_agent.prompt_text(sid, "hi")
                events.append(list(client.sessions[sid]))

            nursery.start_soon(run)
            request = await peer.receive()
            await peer.send(
                chunk("s1", "commands"), ok(request["id"], {"sessionId": "s1"}), chunk("k", "x")
            )
            prompt = await peer.receive()
            assert prompt["method"] == "session/prompt"
            await peer.send(ok(prompt["id"], {"stopReason": "end_turn"}))
            while not events:  # noqa: ASYNC110
                await trio.sleep(0.1)
            nursery.cancel_scope.cancel()
    assert events == [["commands"]]


async def test_a_failed_load_does_not_leave_the_session_known(autojump_clock: Any) -> None:
    from acp_trio import RequestError
    from acp_trio.schema import LoadSessionRequest

    client = SessionTable()
    with trio.fail_after(LIMIT):
        async with raw_agent(client) as (peer, to_agent, _wire), trio.open_nursery() as nursery:
            await initialized(peer, to_agent, nursery)
            await settle()

            async def load() -> None:
                with pytest.raises(RequestError):
                    await to_agent.load_session(
                        LoadSessionRequest(session_id="gone", cwd="/w", mcp_servers=[])
                    )

            nursery.start_soon(load)
            request = await peer.receive()
            await peer.send(
                {"jsonrpc": "2.0", "id": request["id"], "error": {"code": -32602, "message": "?"}}
            )
            await settle()
            assert to_agent.known_sessions == set()
            nursery.cancel_scope.cancel()


def test_plan_refuses_one_string_and_command_takes_a_hint() -> None:
    with pytest.raises(TypeError, match="sequence of steps"):
        build.plan("Fix the bug")
    command = build.command("test", "Run the tests", hint="a test name")
    assert command.input is not None
    assert command.input.hint == "a test name"
