"""An agent for the chain tests: answers a prompt with every text block it
received, joined with `` | ``."""

from __future__ import annotations

import trio

import acp_trio
from acp_trio import schema


class EchoAll(acp_trio.Agent):
    async def new_session(self, params: schema.NewSessionRequest) -> schema.NewSessionResponse:
        return schema.NewSessionResponse(session_id="s")

    async def prompt(self, params: schema.PromptRequest) -> schema.PromptResponse:
        texts = [b.text for b in params.prompt if isinstance(b, schema.TextContent)]
        await self.client.send_text(params.session_id, " | ".join(texts))
        return schema.PromptResponse(stop_reason="end_turn")


trio.run(acp_trio.run_agent, EchoAll())
