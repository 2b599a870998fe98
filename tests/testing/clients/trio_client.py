"""acp_trio's own typed client, driven the way check-client asks:

    python trio_client.py -- AGENT_CMD...

One prompt; ``session/cancel`` (``AgentProxy.cancel``) at the agent's cue.
It reads and writes real files and runs terminals (the SDK's
``TerminalsMixin``, every command approved). Permission requests titled ``check-client:
choose an option`` are answered ``allow``; the others wait for a cancel
(``$/cancel_request`` -> -32800, the SDK's answer to our own
``session/cancel`` -> ``cancelled``).
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


class CheckedClient(acp_trio.contrib.TerminalsMixin, acp_trio.Client):
    async def session_update(self, params: SessionNotification) -> None:
        update = params.update
        if (
            isinstance(update, AgentMessageChunk)
            and isinstance(update.content, TextContent)
            and CUE in update.content.text
        ):
            await self.agent.cancel(params.session_id)

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
        await agent.initialize()
        session = await agent.new_session(NewSessionRequest(cwd=str(Path.cwd()), mcp_servers=[]))
        await agent.prompt_text(session.session_id, "check me")


if __name__ == "__main__":
    assert sys.argv[1] == "--", sys.argv
    trio.run(main, sys.argv[2:])
