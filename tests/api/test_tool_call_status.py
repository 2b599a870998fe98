"""A tool call's status as the client sees it: ``in_progress`` while the
block's body runs; ``pending`` until :meth:`ToolCallHandle.start` when the
call waits for permission first; and what a permission request for a
handle carries (everything the handle knows)."""

from __future__ import annotations

from typing import Any

import pytest

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

from .conftest import INIT, NEW_SESSION, RecordingClient, ScriptedAgent, open_pair


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
    assert call == {
        "title": "Edit /w/a.py",
        "kind": "edit",
        "status": "in_progress",
        "content": [{"type": "diff", "path": "/w/a.py", "oldText": "old", "newText": "new"}],
        "locations": [{"path": "/w/a.py", "line": 3}],
        "rawInput": {"path": "/w/a.py"},
    }
