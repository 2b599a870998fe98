"""Type-checked by ``make typecheck`` (``mypy --strict``), imported by a
test: the v2 proxies' keyword forms and the turn API take what users have at
hand, with no cast or ignore, and return the typed results."""

from __future__ import annotations

from acp_trio import v2
from acp_trio.schema import v2 as s2


async def client_side(agent: v2.AgentProxy, cwd: str) -> str:
    await agent.initialize()
    made = await agent.new_session(cwd, additional_directories=[cwd])
    blocks: tuple[s2.ContentBlock, ...] = (s2.TextContent(text="hello"),)
    result = await agent.prompt(made.session_id, blocks)
    accepted = await agent.send_prompt(made.session_id, blocks)
    await agent.cancel_tool_call(made.session_id, "t1")
    await agent.cancel_terminal(made.session_id, "term")
    await agent.cancel(made.session_id)
    await agent.close_session(made.session_id)
    return f"{result.stop_reason} {accepted.message_id}"


class UsageAgent(v2.Agent):
    async def prompt(self, params: s2.PromptRequest, turn: v2.Turn) -> str | None:
        async with turn.tool_call("t1", title="read") as call:
            await call.update(raw_output={"ok": True})
        async with turn.terminal("term", command="make") as term:
            await term.output(b"ok\n")
            term.exited(0)
        answer = await self.client.request_permission(
            turn.session_id,
            "go on?",
            [s2.PermissionOption(option_id="y", name="Yes", kind="allow_once")],
        )
        if isinstance(answer.outcome, s2.CancelledPermissionOutcome):
            return "cancelled"
        return "end_turn"
