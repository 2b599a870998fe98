"""The v2 agent the v2 tests drive (in memory, and as a subprocess over
pipes: ``python v2_test_agent.py`` serves it on stdio, through the version
router with a v1 agent beside it).

What a prompt does is its text:

- ``hello``: one agent message chunk ``hi``, then ``end_turn``;
- ``wait``: waits until cancelled;
- ``raise``: raises ``ValueError("boom")``;
- ``tools``: two tool calls in parallel: ``slow`` waits until cancelled,
  ``fast`` waits for ``slow`` to end, then completes;
- ``fixed``: a tool call that does not advertise ``cancel``, waits forever;
- ``terminal``: a cancellable display terminal that waits until cancelled;
- ``permission``: asks permission (``requires_action`` meanwhile);
- ``background``: starts background work ``bg`` (waits until stopped) and
  ends the turn.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import trio

if __name__ == "__main__":  # run as a script: the repository on the path
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import acp_trio
from acp_trio import schema as v1
from acp_trio import v2
from acp_trio.schema import v2 as s2


class V2TestAgent(v2.Agent):
    def __init__(self) -> None:
        self.sessions = 0

    async def new_session(self, params: s2.NewSessionRequest) -> s2.NewSessionResponse:
        self.sessions += 1
        return s2.NewSessionResponse(session_id=f"s{self.sessions}")

    async def prompt(self, params: s2.PromptRequest, turn: v2.Turn) -> str | None:
        block = params.prompt[0]
        text = block.text if isinstance(block, s2.TextContent) else ""
        if text == "hello":
            await turn.send(
                s2.AgentMessageChunk(message_id="a1", content=s2.TextContent(text="hi"))
            )
        elif text == "wait":
            await trio.sleep_forever()
        elif text == "raise":
            raise ValueError("boom")
        elif text == "tools":
            slow_done = trio.Event()

            async def slow() -> None:
                try:
                    async with turn.tool_call("slow", title="slow"):
                        await trio.sleep_forever()
                finally:
                    slow_done.set()

            async def fast() -> None:
                async with turn.tool_call("fast", title="fast") as call:
                    await slow_done.wait()
                    await call.update(raw_output={"ok": True})

            async with trio.open_nursery() as nursery:
                nursery.start_soon(slow)
                nursery.start_soon(fast)
        elif text == "fixed":
            async with turn.tool_call("fixed", cancellable=False):
                await trio.sleep_forever()
        elif text == "terminal":
            async with turn.terminal("t1", command="sleep"):
                await trio.sleep_forever()
        elif text == "permission":
            answer = await turn.request_permission(
                s2.RequestPermissionRequest(
                    session_id=turn.session_id,
                    title="run?",
                    options=[s2.PermissionOption(option_id="y", name="Yes", kind="allow_once")],
                )
            )
            if isinstance(answer.outcome, s2.CancelledPermissionOutcome):
                return "cancelled"
        elif text == "background":

            async def work(call: v2.ToolCallHandle) -> None:
                await trio.sleep_forever()

            await turn.start_background("bg", work, title="watcher")
        return None


class V1TestAgent(acp_trio.Agent):
    async def new_session(self, params: v1.NewSessionRequest) -> v1.NewSessionResponse:
        return v1.NewSessionResponse(session_id="v1-session")

    async def prompt(self, params: v1.PromptRequest) -> v1.PromptResponse:
        return v1.PromptResponse(stop_reason="end_turn")


def main(argv: list[str]) -> None:
    kinds: dict[str, Any] = {}
    if "--no-v2" not in argv:
        kinds["v2"] = V2TestAgent
    if "--no-v1" not in argv:
        kinds["v1"] = V1TestAgent
    trio.run(lambda: v2.run_router(v1=kinds.get("v1"), v2=kinds.get("v2")))


if __name__ == "__main__":
    main(sys.argv[1:])
