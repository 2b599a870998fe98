"""An agent that embeds a deadline: each turn may wait on the client for at
most two seconds.

The file read below is a request to the client. If the client has not
answered when the deadline passes, ``trio.move_on_after`` cancels the wait,
which sends ``$/cancel_request`` for it, and the agent ends the turn on its
own terms. (A deadline for *every* incoming request, answered ``-32800``, is
``ConnectionConfig(request_timeout=...)``.)
"""

import trio

import acp_trio
from acp_trio import schema


class DeadlineAgent(acp_trio.Agent):
    async def new_session(self, params: schema.NewSessionRequest) -> schema.NewSessionResponse:
        return schema.NewSessionResponse(session_id="deadline")

    async def prompt(self, params: schema.PromptRequest) -> schema.PromptResponse:
        with trio.move_on_after(2.0):
            answer = await self.client.read_text_file(params.session_id, "/hold")
            await self.client.send_text(params.session_id, f"read {len(answer.content)} chars")
            return schema.PromptResponse(stop_reason="end_turn")
        await self.client.send_text(params.session_id, "the client took too long")
        return schema.PromptResponse(stop_reason="end_turn")


if __name__ == "__main__":
    trio.run(acp_trio.run_agent, DeadlineAgent())
