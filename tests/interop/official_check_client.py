"""A client written with the official Python SDK (``agent-client-protocol``
0.12.1, module ``acp``: asyncio + pydantic), driven the way ``python -m acp_trio
check-client`` asks:

    python official_check_client.py AGENT_CMD...

One session, one prompt; ``session/cancel`` (``conn.cancel``) at the cue
``check-client: cancel now``, after which our own code answers the pending
permission requests ``cancelled`` (the SDK leaves that to the application).
It reads and writes real files. Permission requests titled ``check-client:
choose an option`` are answered ``allow``, the others are held until
cancelled: 0.12.1 does not handle ``$/cancel_request``, so one the agent
cancels that way is never answered (1.0.0rc3 does:
``official_rc_check_client.py``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from pathlib import Path
from typing import Any

import acp
from acp.schema import (
    AgentMessageChunk,
    AllowedOutcome,
    ClientCapabilities,
    DeniedOutcome,
    FileSystemCapabilities,
    Implementation,
    ReadTextFileResponse,
    RequestPermissionResponse,
    TextContentBlock,
    WriteTextFileResponse,
)

CUE = "check-client: cancel now"


class CheckedClient:
    """Implements the ``acp.Client`` protocol (methods found by name)."""

    def __init__(self) -> None:
        self.conn: Any = None
        self.held: dict[str, set[asyncio.Future[RequestPermissionResponse]]] = {}

    def on_connect(self, conn: Any) -> None:
        pass

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        if (
            isinstance(update, AgentMessageChunk)
            and isinstance(update.content, TextContentBlock)
            and CUE in update.content.text
        ):
            await self.conn.cancel(session_id=session_id)
            cancelled = RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
            for answer in self.held.pop(session_id, set()):
                if not answer.done():
                    answer.set_result(cancelled)

    async def request_permission(
        self, options: Any, session_id: str, tool_call: Any, **kwargs: Any
    ) -> Any:
        if tool_call.title == "check-client: choose an option":
            outcome = AllowedOutcome(outcome="selected", option_id="allow")
            return RequestPermissionResponse(outcome=outcome)
        answer: asyncio.Future[RequestPermissionResponse] = asyncio.Future()
        self.held.setdefault(session_id, set()).add(answer)
        return await answer

    async def read_text_file(self, path: str, session_id: str, **kwargs: Any) -> Any:
        content = await asyncio.to_thread(Path(path).read_text, encoding="utf-8")
        return ReadTextFileResponse(content=content)

    async def write_text_file(self, content: str, path: str, session_id: str, **kwargs: Any) -> Any:
        await asyncio.to_thread(Path(path).write_text, content, encoding="utf-8")
        return WriteTextFileResponse()


async def main(command: list[str]) -> None:
    # The SDK logs each $/cancel_request it cannot handle as an ERROR traceback.
    logging.disable(logging.CRITICAL)
    client = CheckedClient()
    async with acp.spawn_agent_process(
        client, command[0], *command[1:], transport_kwargs={"stderr": None}
    ) as (conn, _process):
        client.conn = conn
        await conn.initialize(
            protocol_version=acp.PROTOCOL_VERSION,
            client_capabilities=ClientCapabilities(
                fs=FileSystemCapabilities(read_text_file=True, write_text_file=True),
                terminal=False,
            ),
            client_info=Implementation(name="official-python-check-client", version="0.12.1"),
        )
        session = await conn.new_session(cwd=os.getcwd(), mcp_servers=[])
        await conn.prompt(session_id=session.session_id, prompt=[acp.text_block("check me")])


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
