"""Type-checked by ``make typecheck`` (``mypy --strict``), imported by a
test: the builders accept what users build first, with no cast or ignore."""

from __future__ import annotations

import acp_trio
from acp_trio import build
from acp_trio.schema import Diff, PlanEntry, ToolCall, ToolCallContent, ToolCallUpdate


def edit_call(old: str, new: str) -> tuple[ToolCall, ToolCallUpdate]:
    diffs: list[Diff] = [build.diff("/work/main.py", new, old_text=old)]
    start = build.tool_call_start("call-1", "Edit main.py", kind="edit", content=diffs)
    mixed: tuple[ToolCallContent, ...] = (build.content("done"), *diffs)
    update = build.tool_call_update("call-1", status="completed", content=mixed)
    return start, update


def steps() -> list[PlanEntry]:
    entries = [build.plan_entry("read", status="completed"), build.plan_entry("edit")]
    return build.plan([*entries, "test"]).entries


async def tool_call_as_written(client: acp_trio.ClientProxy, session_id: str) -> None:
    """A handle takes what a user naturally writes: a content block, a
    string, or tool-call content, side by side."""
    async with client.tool_call(session_id, "Check", kind="execute", status="pending") as call:
        await call.start()
        await call.add_content(build.text("running the tests"), "plain text", build.content("ok"))
        await call.update(content=[build.text("replaced")])
        await client.ask_permission(session_id, call)
