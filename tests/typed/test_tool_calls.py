"""``ClientProxy.tool_call``: the start, the updates, and the final status
on every exit path (return, exception, ``session/cancel``,
``$/cancel_request``, a deadline), over memory and pipes; the final update
always reaches the client, before the turn's answer."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from acp_trio import RequestError, build
from acp_trio.schema import PromptRequest, PromptResponse, TextContent, ToolCall, ToolCallUpdate

from .conftest import (
    INIT,
    NEW_SESSION,
    RecordingClient,
    ScriptedAgent,
    limit,
    open_pair,
)

ENDINGS = ["return", "raise", "session_cancel", "cancel_request", "deadline", "complete"]


def tool_script(ending: str, inside: trio.Event) -> Any:
    async def script(agent: ScriptedAgent, params: PromptRequest) -> PromptResponse:
        client = agent.client
        sid = params.session_id
        if ending == "deadline":
            with trio.move_on_after(1):
                async with client.tool_call(sid, "Run", kind="execute", tool_call_id="t1") as call:
                    await call.add_content(build.content("started"))
                    inside.set()
                    await trio.sleep_forever()
            return PromptResponse(stop_reason="end_turn")
        async with client.tool_call(sid, "Edit a.py", kind="edit", tool_call_id="t1") as call:
            await call.add_content(build.diff("/w/a.py", "new", old_text="old"))
            await call.add_content(build.content("edited"))
            inside.set()
            if ending == "raise":
                raise ValueError("the tool broke")
            if ending in ("session_cancel", "cancel_request"):
                await trio.sleep_forever()
            if ending == "complete":
                await call.complete(raw_output={"ok": True})
                with pytest.raises(RuntimeError, match="already ended"):
                    await call.update(title="late")
        return PromptResponse(stop_reason="end_turn")

    return script


def tool_updates(client: RecordingClient) -> list[Any]:
    return [n.update for n in client.updates if isinstance(n.update, (ToolCall, ToolCallUpdate))]


@pytest.mark.parametrize("transport", ["memory", "pipes"])
@pytest.mark.parametrize("ending", ENDINGS)
async def test_the_final_status_reaches_the_client_on_every_exit_path(
    ending: str, transport: str, request: pytest.FixtureRequest
) -> None:
    if transport == "memory":
        request.getfixturevalue("autojump_clock")
    inside = trio.Event()
    agent = ScriptedAgent(tool_script(ending, inside))
    client = RecordingClient()
    outcome: list[Any] = []
    with trio.fail_after(limit(transport)):
        async with open_pair(agent, client, transport) as (to_agent, _to_client, a_wire, _c):
            await to_agent.initialize(INIT)
            sid = (await to_agent.new_session(NEW_SESSION)).session_id
            prompt = PromptRequest(session_id=sid, prompt=[TextContent(text="go")])
            async with trio.open_nursery() as nursery:

                async def run() -> None:
                    if ending == "cancel_request":
                        # A bare call: cancelling it sends $/cancel_request.
                        with trio.CancelScope() as scope:
                            scopes.append(scope)
                            await to_agent.connection.call(
                                "session/prompt", to_agent.converter.unstructure(prompt)
                            )
                        outcome.append("cancelled")
                        return
                    try:
                        outcome.append((await to_agent.prompt(prompt)).stop_reason)
                    except RequestError as exc:
                        outcome.append(exc.code)

                scopes: list[trio.CancelScope] = []
                nursery.start_soon(run)
                await inside.wait()
                if ending == "session_cancel":
                    await to_agent.cancel(sid)
                elif ending == "cancel_request":
                    scopes[0].cancel()
            # The agent answered the prompt (also the one cancelled on the
            # wire), and the client saw every update of the call.
            count = 3 if ending == "deadline" else 4
            while len(tool_updates(client)) < count or not a_wire.sent_responses(  # noqa: ASYNC110
                a_wire.received_request_id("session/prompt")
            ):
                await trio.sleep(0.01)
            sent = a_wire.sent()
            (prompt_id,) = [
                m["id"] for m in a_wire.received() if m.get("method") == "session/prompt"
            ]
            reply_at = next(
                i for i, m in enumerate(sent) if m.get("id") == prompt_id and "method" not in m
            )
            finals = [
                i
                for i, m in enumerate(sent)
                if m.get("method") == "session/update"
                and m["params"]["update"].get("status") in ("completed", "failed")
            ]
            assert len(finals) == 1, sent
            assert finals[0] < reply_at, sent
            if ending == "cancel_request":
                assert sent[reply_at]["error"]["code"] == -32800
    updates = tool_updates(client)
    start, *middle, final = updates
    assert isinstance(start, ToolCall)
    assert (start.tool_call_id, start.status) == ("t1", "in_progress")
    assert all(isinstance(u, ToolCallUpdate) and u.status is None for u in middle)
    assert isinstance(final, ToolCallUpdate)
    expected = {
        "return": "completed",
        "complete": "completed",
        "raise": "failed",
        "session_cancel": "failed",
        "cancel_request": "failed",
        "deadline": "failed",
    }[ending]
    assert final.status == expected
    if ending == "complete":
        assert final.raw_output == {"ok": True}
    # add_content sends the whole content each time.
    if ending != "deadline":
        assert middle[-1].content is not None
        assert len(middle[-1].content) == 2
    assert outcome == [
        {
            "return": "end_turn",
            "complete": "end_turn",
            "deadline": "end_turn",
            "raise": -32603,
            "session_cancel": "cancelled",
            "cancel_request": "cancelled",
        }[ending]
    ]


async def test_a_tool_call_cannot_start_finished(autojump_clock: Any) -> None:
    agent = ScriptedAgent()
    async with open_pair(agent, RecordingClient()) as (to_agent, to_client, *_):
        await to_agent.initialize(INIT)
        with pytest.raises(ValueError, match="pending or in_progress"):
            async with to_client.tool_call("s", "x", status="completed"):
                pass


@pytest.mark.parametrize("answer", ["allow", "reject", "cancelled", "unknown"])
async def test_ask_permission_returns_the_chosen_option(answer: str, autojump_clock: Any) -> None:
    from acp_trio import RemoteProtocolError
    from acp_trio.schema import (
        RequestPermissionOutcomeCancelled,
        RequestPermissionResponse,
        SelectedPermissionOutcome,
    )

    got: list[Any] = []

    async def script(agent: ScriptedAgent, params: PromptRequest) -> PromptResponse:
        async with agent.client.tool_call(params.session_id, "rm -rf build", kind="delete") as call:
            try:
                got.append(await agent.client.ask_permission(params.session_id, call))
            except RemoteProtocolError as exc:
                got.append(str(exc))
        return PromptResponse(stop_reason="end_turn")

    client = RecordingClient()
    client.permission = RequestPermissionResponse(
        outcome=RequestPermissionOutcomeCancelled()
        if answer == "cancelled"
        else SelectedPermissionOutcome(option_id="nope" if answer == "unknown" else answer)
    )
    async with open_pair(ScriptedAgent(script), client) as (to_agent, _to_client, a_wire, _c):
        await to_agent.initialize(INIT)
        sid = (await to_agent.new_session(NEW_SESSION)).session_id
        await to_agent.prompt_text(sid, "go")
    (asked,) = a_wire.sent_requests("session/request_permission")
    assert [o["optionId"] for o in asked["params"]["options"]] == ["allow", "reject"]
    assert asked["params"]["toolCall"]["toolCallId"] == client.log[0][1]
    expected = {
        "allow": build.ALLOW_ONCE,
        "reject": build.REJECT_ONCE,
        "cancelled": None,
        "unknown": "the client chose permission option 'nope', which was not offered "
        "(offered: ['allow', 'reject'])",
    }[answer]
    assert got == [expected]


async def test_ask_permission_refuses_bad_options(autojump_clock: Any) -> None:
    async with open_pair(ScriptedAgent(), RecordingClient()) as (to_agent, to_client, *_):
        await to_agent.initialize(INIT)
        with pytest.raises(ValueError, match="at least one"):
            await to_client.ask_permission("s", "t", [])
        with pytest.raises(ValueError, match="must differ"):
            await to_client.ask_permission("s", "t", [build.ALLOW_ONCE, build.ALLOW_ONCE])
