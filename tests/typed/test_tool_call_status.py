"""A tool call's status as the client sees it: ``in_progress`` while the
block's body runs; ``pending`` until :meth:`ToolCallHandle.start` when the
call waits for permission first; and what a permission request for a
handle carries (everything the handle knows)."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from acp_trio import build
from acp_trio.schema import (
    Content,
    PromptRequest,
    PromptResponse,
    RequestPermissionResponse,
    SelectedPermissionOutcome,
    TextContent,
    ToolCall,
    ToolCallUpdate,
)

from .conftest import INIT, NEW_SESSION, RecordingClient, ScriptedAgent, Wire, open_pair


def statuses(client: RecordingClient) -> list[str | None]:
    return [
        n.update.status for n in client.updates if isinstance(n.update, ToolCall | ToolCallUpdate)
    ]


async def run(script: Any, client: RecordingClient | None = None) -> tuple[RecordingClient, Any]:
    client = client or RecordingClient()
    async with open_pair(ScriptedAgent(script), client) as (to_agent, _c, a_wire, _w):
        await to_agent.initialize(INIT)
        sid = (await to_agent.new_session(NEW_SESSION)).session_id
        await to_agent.prompt_text(sid, "go")
    return client, a_wire


async def test_a_tool_call_is_in_progress_while_its_block_runs(autojump_clock: Any) -> None:
    async def script(agent: ScriptedAgent, params: PromptRequest) -> PromptResponse:
        async with agent.client.tool_call(params.session_id, "Run", kind="execute") as call:
            assert call.status == "in_progress"
            await call.add_content("running")
        return PromptResponse(stop_reason="end_turn")

    client, _ = await run(script)
    assert statuses(client) == ["in_progress", None, "completed"]


async def test_a_pending_call_starts_when_told(autojump_clock: Any) -> None:
    async def script(agent: ScriptedAgent, params: PromptRequest) -> PromptResponse:
        sid = params.session_id
        async with agent.client.tool_call(sid, "Edit", kind="edit", status="pending") as call:
            choice = await agent.client.ask_permission(sid, call)
            assert choice is not None
            await call.start()
            await call.start()  # already in progress: nothing sent
            assert call.status == "in_progress"
        return PromptResponse(stop_reason="end_turn")

    client = RecordingClient()
    client.permission = RequestPermissionResponse(
        outcome=SelectedPermissionOutcome(option_id="allow")
    )
    client, _ = await run(script, client)
    assert statuses(client) == ["pending", "in_progress", "completed"]


async def test_start_after_the_end_raises(autojump_clock: Any) -> None:
    async def script(agent: ScriptedAgent, params: PromptRequest) -> PromptResponse:
        async with agent.client.tool_call(params.session_id, "Run") as call:
            await call.complete()
            with pytest.raises(RuntimeError, match="already ended"):
                await call.start()
        return PromptResponse(stop_reason="end_turn")

    client, _ = await run(script)
    assert statuses(client) == ["in_progress", "completed"]


async def test_content_blocks_and_strings_are_shown_as_content(autojump_clock: Any) -> None:
    async def script(agent: ScriptedAgent, params: PromptRequest) -> PromptResponse:
        async with agent.client.tool_call(params.session_id, "Run", content=["first"]) as call:
            await call.add_content(build.text("second"), build.content("third"))
            assert call.content == tuple(
                Content(content=TextContent(text=t)) for t in ("first", "second", "third")
            )
            await call.update(content=[build.text("only")])
            assert call.content == (Content(content=TextContent(text="only")),)
        return PromptResponse(stop_reason="end_turn")

    await run(script)


async def test_a_permission_request_for_a_handle_carries_what_it_knows(
    autojump_clock: Any,
) -> None:
    async def script(agent: ScriptedAgent, params: PromptRequest) -> PromptResponse:
        sid = params.session_id
        async with agent.client.tool_call(
            sid, "Edit a.py", kind="edit", raw_input={"path": "/w/a.py"}
        ) as call:
            await call.add_content(build.diff("/w/a.py", "new", old_text="old"))
            await call.update(title="Edit /w/a.py", locations=[build.location("/w/a.py", line=3)])
            await agent.client.ask_permission(sid, call)
        return PromptResponse(stop_reason="end_turn")

    client = RecordingClient()
    client.permission = RequestPermissionResponse(
        outcome=SelectedPermissionOutcome(option_id="reject")
    )
    _, a_wire = await run(script, client)
    (asked,) = a_wire.sent_requests("session/request_permission")
    call = dict(asked["params"]["toolCall"])
    assert call.pop("toolCallId").startswith("call_")
    assert call == {  # what the call is about; not its status (no change of state)
        "title": "Edit /w/a.py",
        "kind": "edit",
        "content": [{"type": "diff", "path": "/w/a.py", "oldText": "old", "newText": "new"}],
        "locations": [{"path": "/w/a.py", "line": 3}],
        "rawInput": {"path": "/w/a.py"},
    }


async def run_traced(script: Any, client: RecordingClient) -> Wire:
    """:func:`run`, the script able to wait on the agent's own wire
    (``WIRES[0]``): it sees each frame as it is queued."""
    async with open_pair(ScriptedAgent(script), client) as (to_agent, _c, a_wire, _w):
        WIRES[:] = [a_wire]
        await to_agent.initialize(INIT)
        sid = (await to_agent.new_session(NEW_SESSION)).session_id
        await to_agent.prompt_text(sid, "go")
    return a_wire


WIRES: list[Wire] = []


def queued(wire: Wire, key: str, value: str) -> bool:
    return any(
        m.get("method") == "session/update" and value in str(m["params"]["update"].get(key))
        for m in wire.sent()
    )


async def test_a_permission_asked_meanwhile_sees_what_is_queued(autojump_clock: Any) -> None:
    """The handle records an update as it is queued, not after the
    schedule point that follows: another task asking permission then (woken
    by the queued frame) sends the diff already on its way to the client."""

    async def ask(agent: ScriptedAgent, sid: str, call: Any) -> None:
        await WIRES[0].wait_until(lambda: queued(WIRES[0], "content", "diff"))
        await agent.client.ask_permission(sid, call)

    async def script(agent: ScriptedAgent, params: PromptRequest) -> PromptResponse:
        sid = params.session_id
        async with (
            agent.client.tool_call(sid, "Edit", kind="edit") as call,
            trio.open_nursery() as nursery,
        ):
            nursery.start_soon(ask, agent, sid, call)
            await trio.testing.wait_all_tasks_blocked()
            await call.add_content(build.diff("/w/a.py", "new", old_text="old"))
        return PromptResponse(stop_reason="end_turn")

    client = RecordingClient()
    client.permission = RequestPermissionResponse(
        outcome=SelectedPermissionOutcome(option_id="allow")
    )
    for _ in range(10):  # the old order was a coin toss: try it often
        wire = await run_traced(script, client)
        (asked,) = wire.sent_requests("session/request_permission")
        assert asked["params"]["toolCall"]["content"][0]["type"] == "diff"


async def test_a_handle_from_outside_its_block_stays_final(autojump_clock: Any) -> None:
    """An update queued just before the block's end does not make the
    handle forget that it ended."""
    handles: list[Any] = []

    async def script(agent: ScriptedAgent, params: PromptRequest) -> PromptResponse:
        async with (
            trio.open_nursery() as nursery,
            agent.client.tool_call(params.session_id, "Run", status="pending") as call,
        ):
            handles.append(call)
            nursery.start_soon(call.start)
            await WIRES[0].wait_until(lambda: queued(WIRES[0], "status", "in_progress"))
        return PromptResponse(stop_reason="end_turn")

    for _ in range(10):  # the old order was a coin toss: try it often
        handles.clear()
        await run_traced(script, RecordingClient())
        (call,) = handles
        assert (call.status, call.finished) == ("completed", True)
        with pytest.raises(RuntimeError, match="already ended"):
            await call.update(title="late")


async def test_permission_for_an_ended_or_foreign_handle_is_refused(autojump_clock: Any) -> None:
    async def script(agent: ScriptedAgent, params: PromptRequest) -> PromptResponse:
        sid = params.session_id
        async with agent.client.tool_call(sid, "Run") as call:
            with pytest.raises(ValueError, match="belongs to session"):
                await agent.client.ask_permission("another", call)
        with pytest.raises(RuntimeError, match="already ended"):
            await agent.client.ask_permission(sid, call)
        return PromptResponse(stop_reason="end_turn")

    _, a_wire = await run(script)
    assert a_wire.sent_requests("session/request_permission") == []
