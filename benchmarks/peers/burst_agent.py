"""The scenario agent with its ``stream`` sent in bursts: each chunk
through ``send_text_nowait`` (no checkpoint, no wait), ``await send_text``
(which waits for room) only when the output queue is full, and a
checkpoint every ``BURST`` chunks so that a ``session/cancel`` still lands.
Everything else is the scenario agent's. For ``bench_sdks.py``'s
``acp_trio-burst`` agent: the same workload as ``stream`` written the way
its guide advises for a model's tokens already at hand.
"""

from __future__ import annotations

import trio

import acp_trio
from acp_trio import schema
from acp_trio.testing import ScenarioAgent

BURST = 64


class BurstAgent(ScenarioAgent):
    async def run_command(
        self, session_id: str, text: str, words: list[str]
    ) -> schema.PromptResponse:
        if words[:1] != ["stream"] or not 2 <= len(words) <= 3:
            return await super().run_command(session_id, text, words)
        count = int(words[1])
        size = int(words[2]) if len(words) > 2 else 16
        send_nowait = self.client.send_text_nowait
        for i in range(count):
            chunk = str(i).ljust(size, ".")
            try:
                send_nowait(session_id, chunk)
            except trio.WouldBlock:
                await self.client.send_text(session_id, chunk)
            if i % BURST == BURST - 1:
                await trio.lowlevel.checkpoint()
        return schema.PromptResponse(stop_reason="end_turn")


if __name__ == "__main__":
    trio.run(acp_trio.run_agent, BurstAgent())
