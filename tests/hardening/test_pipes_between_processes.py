"""Ordering and the concurrency limit between two real processes, over the
agent's stdin and stdout, as ACP runs.

- A coding agent reports a tool call (its diff), then asks permission for
  it: the client's permission handler must never run before its
  ``session_update`` handler saw that tool call (a user would be asked to
  approve an edit the UI has not shown).
- A client that pipelines tens of thousands of prompts while a turn waits for
  its ``fs/read_text_file`` reply: the agent goes on reading, the turn gets
  its reply, every prompt gets exactly one answer, and the agent exits once
  its client has gone.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import pytest
import trio
import trio.lowlevel

import acp_trio
from acp_trio import schema

from .conftest import HERE, handshake, open_agent, prompt_params

TOOL_CALL_AGENT = (sys.executable, str(HERE / "agents" / "tool_call_agent.py"))


class EditorClient(acp_trio.Client):
    """Shows tool calls (taking a moment to draw them), then is asked."""

    def __init__(self) -> None:
        self.shown: set[str] = set()
        self.asked: list[tuple[str, bool]] = []

    async def session_update(self, params: schema.SessionNotification) -> None:
        update = params.update
        if isinstance(update, schema.ToolCall):
            await trio.lowlevel.checkpoint()  # a UI that yields while it draws
            self.shown.add(update.tool_call_id)

    async def request_permission(
        self, params: schema.RequestPermissionRequest
    ) -> schema.RequestPermissionResponse:
        call_id = params.tool_call.tool_call_id
        self.asked.append((call_id, call_id in self.shown))
        return schema.RequestPermissionResponse(
            outcome=schema.SelectedPermissionOutcome(option_id="allow")
        )


async def test_a_permission_request_never_overtakes_its_tool_call() -> None:
    client = EditorClient()
    with trio.fail_after(120):
        async with acp_trio.open_spawned_agent(client, TOOL_CALL_AGENT) as agent:
            await agent.initialize()
            session = await agent.new_session(
                schema.NewSessionRequest(cwd=os.getcwd(), mcp_servers=[])
            )
            for turn in range(100):
                result = await agent.prompt_text(session.session_id, f"edit {turn}")
                assert result.stop_reason == "end_turn"
    assert len(client.asked) == 100
    out_of_order = [call for call, shown in client.asked if not shown]
    assert out_of_order == []


PROMPTS = 33_000


@pytest.mark.slow  # 33,000 prompts through real pipes: minutes on a busy machine
@pytest.mark.timeout(600)
async def test_a_flood_of_pipelined_prompts_while_a_turn_waits_for_a_reply() -> None:
    """With the default limits (16,384 running, 16,384 waiting) the prompts
    beyond both are refused at once; the reader never stops, so the waiting
    turn's file read is answered and every turn runs."""
    answers: dict[Any, Any] = {}
    with trio.fail_after(300):
        async with open_agent(receive_timeout=120) as peer:
            session_id = await handshake(peer)
            first = await peer.request(
                "session/prompt", prompt_params(session_id, "read 1 /some/file")
            )
            read = await peer.receive_request("fs/read_text_file")
            ids = [peer.next_id() for _ in range(PROMPTS)]
            frames = [
                {
                    "jsonrpc": "2.0",
                    "id": request_id,
                    "method": "session/prompt",
                    "params": prompt_params(session_id, f"echo {n}"),
                }
                for n, request_id in enumerate(ids)
            ]

            async def flood() -> None:
                for start in range(0, PROMPTS, 1000):
                    await peer.send(*frames[start : start + 1000])
                # The reply the first turn has been waiting for, behind them.
                await peer.respond(read["id"], {"content": "x" * 64})

            async with trio.open_nursery() as nursery:
                nursery.start_soon(flood)
                while len(answers) < PROMPTS + 1:
                    message = await peer.receive()
                    if "method" not in message:
                        assert message["id"] not in answers, message
                        answers[message["id"]] = message
            assert answers[first]["result"] == {"stopReason": "end_turn"}
            refused = [m for m in answers.values() if "error" in m]
            ran = [m for m in answers.values() if "result" in m]
            assert all(m["result"] == {"stopReason": "end_turn"} for m in ran)
            assert all(m["error"]["message"] == "Too many requests" for m in refused)
            assert len(ran) == 16_384 * 2  # the first turn, and every one that found room
            assert len(refused) == PROMPTS + 1 - len(ran)
            # The client goes away: the agent must exit.
            await peer.close_send()
            await peer.expect_eof(within=60)
            process = peer.process
            assert process is not None
            with trio.fail_after(60):
                await process.process.wait()
            assert process.returncode == 0
