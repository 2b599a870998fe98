"""acp_trio's own typed client, driven the way check-client asks:

    python trio_client.py -- AGENT_CMD...

Each prompt runs in a cancel scope; the agent's cue is the stop button: it
sends ``session/cancel`` (``AgentProxy.cancel``) and cancels that scope (the
SDK decides what follows when the agent does not answer: ``cancel_grace``
is one second here). When a turn said ``check-client: prompt again`` the next
prompt goes out on the same session. It reads and writes real files and
runs terminals (the SDK's ``TerminalsMixin``, every command approved).
Permission requests titled ``check-client: choose an option`` are answered
``allow``; the others wait for a cancel (``$/cancel_request`` -> -32800, the
SDK's answer to our own ``session/cancel`` -> ``cancelled``).
"""

from __future__ import annotations

import sys
from pathlib import Path

import trio

import acp_trio
from acp_trio.schema import (
    AgentMessageChunk,
    NewSessionRequest,
    ReadTextFileRequest,
    ReadTextFileResponse,
    RequestPermissionRequest,
    RequestPermissionResponse,
    SelectedPermissionOutcome,
    SessionNotification,
    TextContent,
    WriteTextFileRequest,
    WriteTextFileResponse,
)

CUE = "check-client: cancel now"
PROMPT_AGAIN = "check-client: prompt again"
MAX_PROMPTS = 10


class CheckedClient(acp_trio.contrib.TerminalsMixin, acp_trio.Client):
    def __init__(self) -> None:
        super().__init__()
        #: The running prompt's scope: the stop button.
        self.stop: trio.CancelScope | None = None
        self.prompt_again = False

    async def session_update(self, params: SessionNotification) -> None:
        update = params.update
        if not isinstance(update, AgentMessageChunk) or not isinstance(update.content, TextContent):
            return
        if PROMPT_AGAIN in update.content.text:
            self.prompt_again = True
        if CUE in update.content.text:
            # The stop button: session/cancel now, whatever the turn's state
            # (its answer may already be on its way), and the prompt's scope.
            await self.agent.cancel(params.session_id)
            if self.stop is not None:
                self.stop.cancel()

    async def request_permission(
        self, params: RequestPermissionRequest
    ) -> RequestPermissionResponse:
        if params.tool_call.title == "check-client: choose an option":
            return RequestPermissionResponse(outcome=SelectedPermissionOutcome(option_id="allow"))
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    async def read_text_file(self, params: ReadTextFileRequest) -> ReadTextFileResponse:
        content = await trio.Path(params.path).read_text(encoding="utf-8")
        return ReadTextFileResponse(content=content)

    async def write_text_file(self, params: WriteTextFileRequest) -> WriteTextFileResponse:
        await trio.Path(params.path).write_text(params.content, encoding="utf-8")
        return WriteTextFileResponse()


async def approve(params: object) -> bool:
    return True  # a test: every command the checking agent asks for runs


async def main(command: list[str]) -> None:
    client = CheckedClient()
    async with (
        acp_trio.contrib.open_terminal_manager(approve) as client.terminals,
        acp_trio.open_spawned_agent(client, command) as agent,
    ):
        agent.cancel_grace = 1.0
        await agent.initialize()
        session = await agent.new_session(NewSessionRequest(cwd=str(Path.cwd()), mcp_servers=[]))
        for _ in range(MAX_PROMPTS):
            client.prompt_again = False
            with trio.CancelScope() as client.stop:
                await agent.prompt_text(session.session_id, "check me")
            client.stop = None
            if not client.prompt_again:
                break


if __name__ == "__main__":
    assert sys.argv[1] == "--", sys.argv
    trio.run(main, sys.argv[2:])
