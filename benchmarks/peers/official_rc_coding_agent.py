"""``examples/coding_agent.py`` written with the official Python SDK's
release candidate (``agent-client-protocol`` 1.0.0rc3, module ``acp``,
asyncio + pydantic) and its ``acp.contrib.ToolCallTracker``, doing the same
on the wire, cancellation and the turn limit included: for the line counts
in docs/compared.md (``tools/count_lines.py``) and to run the same tests against
(``tests/examples/test_coding_agent.py``). Run it with the interpreter of
``tests/interop/.venv-official-rc`` (``make tests/interop/.venv-official-rc/.installed``).

The SDK runs each request's handler in its own task, cancels it on
``$/cancel_request`` (answering ``-32800``) and sends ``$/cancel_request``
for an outgoing request whose caller is cancelled. What the kit does for the
acp_trio version is written out here: ``session/cancel`` cancelling the
turn (a timeout rescheduled to now), the turn limit answered ``-32800``,
the tool call's final status on every exit path (shielded) and the
terminal released (shielded) on every exit path.
"""

from __future__ import annotations

import argparse
import asyncio
import os
from typing import Any

import acp
from acp import schema
from acp.contrib import ToolCallTracker

OPTIONS = [
    schema.PermissionOption(option_id="allow", name="Allow", kind="allow_once"),
    schema.PermissionOption(option_id="reject", name="Reject", kind="reject_once"),
]


def fake_model(source: str) -> tuple[list[str], str]:
    fixed = source.replace("prnt(", "print(")
    words = ["I", "found", "a", "misspelt", "print", "and", "will", "fix", "it."]
    return [w + " " for w in words], fixed


def message(text: str, kind: Any = schema.AgentMessageChunk) -> Any:
    return kind(content=schema.TextContentBlock(text=text))


class CodingAgent:
    turn_limit = 300.0  # seconds

    def __init__(self) -> None:
        self.conn: Any = None
        self.turns: dict[str, asyncio.Timeout] = {}

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def initialize(self, protocol_version: int, **kwargs: Any) -> schema.InitializeResponse:
        info = schema.Implementation(name="official-rc-coding-agent", version="1.0")
        return schema.InitializeResponse(protocol_version=acp.PROTOCOL_VERSION, agent_info=info)

    async def new_session(self, cwd: str, **kwargs: Any) -> schema.NewSessionResponse:
        return schema.NewSessionResponse(session_id=f"session-{os.urandom(4).hex()}")

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        turn = self.turns.get(session_id)
        if turn is not None and not turn.expired():
            turn.reschedule(0)  # now: the turn's task is cancelled

    async def prompt(
        self, session_id: str, prompt: list[Any], **kwargs: Any
    ) -> schema.PromptResponse:
        text = " ".join(b.text for b in prompt if isinstance(b, schema.TextContentBlock))
        try:
            async with asyncio.timeout(self.turn_limit):
                try:
                    async with asyncio.timeout(None) as self.turns[session_id]:
                        return await self.turn(session_id, text)
                except TimeoutError:  # session/cancel
                    return schema.PromptResponse(stop_reason="cancelled")
                finally:
                    self.turns.pop(session_id, None)
        except TimeoutError:  # the turn limit; nested requests were cancelled on the wire
            raise acp.RequestError.request_cancelled({"reason": "turn limit"}) from None

    async def send(self, sid: str, update: Any) -> None:
        await self.conn.session_update(session_id=sid, update=update)

    async def turn(self, sid: str, text: str) -> schema.PromptResponse:
        path = text.removeprefix("fix ").strip()
        if not text.startswith("fix /"):
            await self.send(sid, message("Say: fix /path/to/file.py"))
            return schema.PromptResponse(stop_reason="end_turn")
        steps = ["read the file", "fix it", "check it"]
        plan = [schema.PlanEntry(content=s, priority="medium", status="pending") for s in steps]
        await self.send(sid, schema.AgentPlanUpdate(entries=plan))
        await self.send(sid, message(f"Reading {path}", schema.AgentThoughtChunk))
        calls = ToolCallTracker()
        await self.send(sid, calls.start("fix", title=f"Fix {os.path.basename(path)}", kind="edit"))
        try:
            source = (await self.conn.read_text_file(session_id=sid, path=path)).content
            words, fixed = fake_model(source)
            for word in words:
                await self.send(sid, message(word))
                await asyncio.sleep(0.01)
            diff = schema.FileEditToolCallContent(path=path, old_text=source, new_text=fixed)
            await self.send(sid, calls.progress("fix", content=[diff]))
            asked = await self.conn.request_permission(
                session_id=sid, tool_call=calls.tool_call_model("fix"), options=OPTIONS
            )
            if getattr(asked.outcome, "option_id", None) != "allow":  # or cancelled
                output = {"reason": "not allowed"}
                await self.send(sid, calls.progress("fix", status="failed", raw_output=output))
                return schema.PromptResponse(stop_reason="end_turn")
            await self.conn.write_text_file(session_id=sid, path=path, content=fixed)
            terminal = await self.conn.create_terminal(
                session_id=sid, command="python", args=["-m", "py_compile", path]
            )
            tid = terminal.terminal_id
            try:
                content = [diff, schema.TerminalToolCallContent(terminal_id=tid)]
                await self.send(sid, calls.progress("fix", content=content))
                exit_status = await self.conn.wait_for_terminal_exit(
                    session_id=sid, terminal_id=tid
                )
            finally:  # released on every path, cancellation included
                release = self.conn.release_terminal(session_id=sid, terminal_id=tid)
                await asyncio.shield(asyncio.wait_for(release, 5))
        except BaseException:  # failed, also when cancelled (shielded from a second cancel)
            await asyncio.shield(self.send(sid, calls.progress("fix", status="failed")))
            raise
        if exit_status.exit_code != 0:
            output = {"exit_code": exit_status.exit_code}
            await self.send(sid, calls.progress("fix", status="failed", raw_output=output))
        else:
            await self.send(sid, calls.progress("fix", status="completed"))
        await self.send(sid, message("Done."))
        return schema.PromptResponse(stop_reason="end_turn")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="A coding agent (fake model) on stdio")
    parser.add_argument("--turn-limit", type=float, default=300.0, metavar="SECONDS")
    CodingAgent.turn_limit = parser.parse_args().turn_limit
    asyncio.run(acp.run_agent(CodingAgent()))
