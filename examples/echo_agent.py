"""The smallest useful ACP agent: it streams the prompt back, word by word.

Launch it from any ACP client (an editor, ``examples/client.py``) as the
command ``python examples/echo_agent.py``.
"""

import uuid

import trio

import acp_trio
from acp_trio import schema


class EchoAgent(acp_trio.Agent):
    info = schema.Implementation(name="acp_trio-echo", version="1.0")  # sent as agentInfo

    async def new_session(self, params: schema.NewSessionRequest) -> schema.NewSessionResponse:
        # Session ids must be unique for the agent's lifetime: a uuid is.
        return schema.NewSessionResponse(session_id=f"echo-{uuid.uuid4().hex}")

    async def prompt(self, params: schema.PromptRequest) -> schema.PromptResponse:
        for block in params.prompt:
            if isinstance(block, schema.TextContent):
                for word in block.text.split():
                    await self.client.send_text(params.session_id, word + " ")
                    await trio.sleep(0.05)  # cancellable: session/cancel stops here
        return schema.PromptResponse(stop_reason="end_turn")


if __name__ == "__main__":
    trio.run(acp_trio.run_agent, EchoAgent())
