"""A deadline around the typed ``AgentProxy.prompt()`` ends the turn for
agents of other SDKs too: ``session/cancel`` goes out from the cancelled
call (never ``$/cancel_request``, which the official Python SDK answers
"Method not found"), the agent stops streaming and answers ``cancelled``,
acp_trio consumes that late reply, and the next prompt on the session works.

Agents, each spawned with ``acp_trio.open_spawned_agent`` and streaming until
cancelled (``stream 100000000 8``):

- the official Python SDK's (``benchmarks/peers/official_agent.py``, needs
  ``agent-client-protocol``, in the ``test`` extra; skipped without it);
- acp_trio's own (``python -m acp_trio scenario-agent``).

The TypeScript SDK's agent has the same test in test_typescript.py.
Real processes: a generous ``trio.fail_after``, no speed assertion.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

import acp_trio
from acp_trio import schema
from acp_trio.testing import SCENARIO_AGENT_COMMAND

ROOT = Path(__file__).resolve().parents[2]
OFFICIAL_AGENT = ROOT / "benchmarks" / "peers" / "official_agent.py"
HAVE_OFFICIAL_SDK = importlib.util.find_spec("acp") is not None

AGENTS = {
    "official-python-sdk": [sys.executable, str(OFFICIAL_AGENT)],
    "acp_trio": list(SCENARIO_AGENT_COMMAND),
}
STREAM = "stream 100000000 8"


class ChunkClient(acp_trio.Client):
    """Keeps the text chunks; says when the first one arrived."""

    def __init__(self) -> None:
        super().__init__()
        self.chunks: list[str] = []
        self.first_chunk = trio.Event()

    async def session_update(self, params: schema.SessionNotification) -> None:
        update = params.update
        if isinstance(update, schema.AgentMessageChunk) and isinstance(
            update.content, schema.TextContent
        ):
            self.chunks.append(update.content.text)
            self.first_chunk.set()


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(
            "official-python-sdk",
            marks=pytest.mark.skipif(
                not HAVE_OFFICIAL_SDK,
                reason="agent-client-protocol is not installed (pip install -e '.[test]')",
            ),
        ),
        "acp_trio",
    ],
)
async def test_prompt_deadline_cancels_a_streaming_turn(
    name: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="acp_trio")
    frames: list[tuple[str, dict[str, Any]]] = []
    client = ChunkClient()
    config = acp_trio.ConnectionConfig(
        trace=lambda direction, frame: frames.append((direction, json.loads(frame)))
    )
    with trio.fail_after(60):
        async with acp_trio.open_spawned_agent(client, AGENTS[name], config=config) as agent:
            await agent.initialize()
            new = schema.NewSessionRequest(cwd=os.getcwd(), mcp_servers=[])
            session_id = (await agent.new_session(new)).session_id
            with trio.CancelScope() as scope:
                async with trio.open_nursery() as nursery:

                    async def deadline_once_streaming() -> None:
                        await client.first_chunk.wait()
                        scope.deadline = trio.current_time() + 0.2

                    nursery.start_soon(deadline_once_streaming)
                    await agent.prompt_text(session_id, STREAM)
            assert scope.cancelled_caught
            # session/cancel was sent by the cancelled call, before it returned.
            sent = [m for d, m in frames if d == "send"]
            assert sent[-1] == {
                "jsonrpc": "2.0",
                "method": "session/cancel",
                "params": {"sessionId": session_id},
            }
            (prompt,) = [m for m in sent if m.get("method") == "session/prompt"]
            # The next prompt on the session waits for the cancelled turn's
            # answer, then works.
            result = await agent.prompt_text(session_id, "echo after")
            assert result.stop_reason == "end_turn"
            assert client.chunks[-1] == "after"
            assert agent.prompts_in_flight() == {}
    sent = [m for d, m in frames if d == "send"]
    assert [m for m in sent if m.get("method") == "$/cancel_request"] == []
    assert len([m for m in sent if m.get("method") == "session/cancel"]) == 1
    replies = [
        (i, m) for i, (d, m) in enumerate(frames) if d == "recv" and m.get("id") == prompt["id"]
    ]
    assert len(replies) == 1, replies
    answered_at, reply = replies[0]
    assert reply["result"]["stopReason"] == "cancelled", reply
    # The agent stopped streaming: after the cancelled turn's answer, the only
    # chunk is the next turn's.
    late = [
        m["params"]["update"]["content"]["text"]
        for d, m in frames[answered_at:]
        if d == "recv" and m.get("method") == "session/update"
    ]
    assert late == ["after"]
    # The late reply was consumed, not dropped as late or unknown.
    assert f"reply to request {prompt['id']}" not in caplog.text
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text
