"""``examples/coding_agent.py`` written with the official Python SDK
(``agent-client-protocol`` 0.12.1, module ``acp``, asyncio + pydantic) and
its ``acp.helpers``, doing the same on the wire, cancellation included:
for the line counts in docs/compared.md (``tools/count_lines.py``) and to run
the same tests against (``tests/examples/test_coding_agent.py``).

What the kit does for the acp_trio version is written out here: the turn
as a task that ``session/cancel`` cancels, the tool call's final status on
every exit path, the terminal released (shielded) on every exit path, and
the permission outcome read from its union.
"""

from __future__ import annotations

import argparse
import asyncio
import os
from typing import Any

import acp
from acp.schema import (
    AgentCapabilities,
    Implementation,
    InitializeResponse,
    NewSessionResponse,
    PermissionOption,
    PromptResponse,
    TextContentBlock,
    ToolCallUpdate,
)

OPTIONS = [
    PermissionOption(option_id="allow", name="Allow", kind="allow_once"),
    PermissionOption(option_id="reject", name="Reject", kind="reject_once"),
]


def fake_model(source: str) -> tuple[list[str], str]:
    fixed = source.replace("prnt(", "print(")
    words = ["I", "found", "a", "misspelt", "print", "and", "will", "fix", "it."]
    return [w + " " for w in words], fixed


class CodingAgent:
    turn_limit = 300.0  # seconds

    def __init__(self) -> None:
        self.conn: Any = None
        self.turns: dict[str, asyncio.Task[Any]] = {}

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def initialize(self, protocol_version: int, **kwargs: Any) -> InitializeResponse:
        return InitializeResponse(
            protocol_version=acp.PROTOCOL_VERSION,
            agent_capabilities=AgentCapabilities(),
            agent_info=Implementation(name="official-coding-agent", version="1.0"),
        )

    async def new_session(self, cwd: str, mcp_servers: Any = None, **kwargs: Any) -> Any:
        return NewSessionResponse(session_id=f"session-{os.urandom(4).hex()}")

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        turn = self.turns.get(session_id)
        if turn is not None:
            turn.cancel()

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> PromptResponse:
        text = " ".join(b.text for b in prompt if isinstance(b, TextContentBlock))
        if not text.startswith("fix /"):
            await self.update(
                session_id, acp.update_agent_message_text("Say: fix /path/to/file.py")
            )
            return PromptResponse(stop_reason="end_turn")
        turn = asyncio.ensure_future(self.run(session_id, text.removeprefix("fix ").strip()))
        self.turns[session_id] = turn
        try:
            async with asyncio.timeout(self.turn_limit):
                await turn
        except TimeoutError:
            raise acp.RequestError(-32800, "Request cancelled", {"reason": "turn limit"}) from None
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if not turn.cancelled() or (current is not None and current.cancelling()):
                raise
            return PromptResponse(stop_reason="cancelled")
        finally:
            self.turns.pop(session_id, None)
        return PromptResponse(stop_reason="end_turn")

    async def update(self, session_id: str, update: Any) -> None:
        await self.conn.session_update(session_id, update)

    async def run(self, sid: str, path: str) -> None:
        steps = ["read the file", "fix it", "check it"]
        await self.update(sid, acp.update_plan([acp.plan_entry(s) for s in steps]))
        await self.update(sid, acp.update_agent_thought_text(f"Reading {path}"))
        call_id = f"call_{os.urandom(8).hex()}"
        title = f"Fix {os.path.basename(path)}"
        await self.update(
            sid, acp.start_tool_call(call_id, title, kind="edit", status="in_progress")
        )
        final: dict[str, Any] | None = {"status": "failed"}
        try:
            final = await self.tool(sid, call_id, title, path)
        finally:
            # The final status, also when cancelled (shielded from it).
            if final is not None:
                update = acp.update_tool_call(call_id, **final)
                await asyncio.shield(self.update(sid, update))
        if final is not None:  # None: refused, the turn ends here
            await self.update(sid, acp.update_agent_message_text("Done."))

    async def tool(self, sid: str, call_id: str, title: str, path: str) -> dict[str, Any] | None:
        source = (await self.conn.read_text_file(session_id=sid, path=path)).content
        words, fixed = fake_model(source)
        for word in words:
            await self.update(sid, acp.update_agent_message_text(word))
            await asyncio.sleep(0.01)
        content = [acp.tool_diff_content(path, fixed, source)]
        await self.update(sid, acp.update_tool_call(call_id, content=content))
        call = ToolCallUpdate(tool_call_id=call_id, title=title, kind="edit", content=content)
        asked = await self.conn.request_permission(session_id=sid, tool_call=call, options=OPTIONS)
        outcome = asked.outcome
        if getattr(outcome, "outcome", None) != "selected" or outcome.option_id != "allow":
            output = {"reason": "not allowed"}
            await self.update(
                sid, acp.update_tool_call(call_id, status="failed", raw_output=output)
            )
            return None
        await self.conn.write_text_file(session_id=sid, path=path, content=fixed)
        terminal = await self.conn.create_terminal(
            session_id=sid, command="python", args=["-m", "py_compile", path]
        )
        try:
            content.append(acp.tool_terminal_ref(terminal.terminal_id))
            await self.update(sid, acp.update_tool_call(call_id, content=content))
            exit_status = await self.conn.wait_for_terminal_exit(
                session_id=sid, terminal_id=terminal.terminal_id
            )
        finally:
            release = self.conn.release_terminal(session_id=sid, terminal_id=terminal.terminal_id)
            await asyncio.shield(asyncio.wait_for(release, 5))
        if exit_status.exit_code != 0:
            return {"status": "failed", "raw_output": {"exit_code": exit_status.exit_code}}
        return {"status": "completed"}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="A coding agent (fake model) on stdio")
    parser.add_argument("--turn-limit", type=float, default=300.0, metavar="SECONDS")
    CodingAgent.turn_limit = parser.parse_args().turn_limit
    asyncio.run(acp.run_agent(CodingAgent()))
