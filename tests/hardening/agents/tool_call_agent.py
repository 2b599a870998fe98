"""An agent that does what a coding agent does before an edit: report the
tool call (with its diff), then ask permission for it. One tool call and one
permission request per prompt; the prompt's text is ignored."""

from __future__ import annotations

import itertools

import trio

import acp_trio
from acp_trio import schema


class ToolCallAgent(acp_trio.Agent):
    def __init__(self) -> None:
        self.calls = itertools.count()

    async def new_session(self, params: schema.NewSessionRequest) -> schema.NewSessionResponse:
        return schema.NewSessionResponse(session_id="edits")

    async def prompt(self, params: schema.PromptRequest) -> schema.PromptResponse:
        call_id = f"call-{next(self.calls)}"
        diff = schema.Diff(path="/src/app.py", old_text="a = 1\n", new_text="a = 2\n")
        await self.client.session_update(
            params.session_id,
            schema.ToolCall(
                tool_call_id=call_id,
                title="Edit app.py",
                kind="edit",
                status="pending",
                content=[diff],
            ),
        )
        answer = await self.client.request_permission(
            schema.RequestPermissionRequest(
                session_id=params.session_id,
                tool_call=schema.ToolCallUpdate(tool_call_id=call_id),
                options=[
                    schema.PermissionOption(option_id="allow", name="Allow", kind="allow_once"),
                    schema.PermissionOption(option_id="reject", name="Reject", kind="reject_once"),
                ],
            )
        )
        assert isinstance(answer.outcome, schema.SelectedPermissionOutcome)
        return schema.PromptResponse(stop_reason="end_turn")


if __name__ == "__main__":
    trio.run(acp_trio.run_agent, ToolCallAgent())
