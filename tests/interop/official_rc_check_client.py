"""A client written with the official Python SDK's release candidate
(``agent-client-protocol`` 1.0.0rc3, module ``acp``: asyncio + pydantic),
driven the way ``python -m acp_trio check-client`` asks. Run with the
interpreter of ``tests/interop/.venv-official-rc``
(``make tests/interop/.venv-official-rc/.installed``):

    python official_rc_check_client.py AGENT_CMD...

One session, one prompt; ``session/cancel`` (``conn.cancel``) at the cue
``check-client: cancel now``, after which our own code answers the pending
permission requests ``cancelled`` (the SDK leaves that to the application).
It reads and writes real files. Permission requests titled ``check-client:
choose an option`` are answered ``allow``, the others are held until
cancelled: by ``session/cancel`` (our code) or by ``$/cancel_request``,
which the SDK handles itself (the handler is cancelled and the request
answered ``-32800``). The same program as ``official_check_client.py``
(0.12.1) but for the version in ``client_info`` and ``acp.text_block``,
which 1.0.0rc3 no longer has.
"""

from __future__ import annotations

import asyncio
import contextlib
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
AGAIN = "check-client: prompt again"
#: How long a cancelled turn may take before the prompt is given up (the
#: SDK then sends $/cancel_request for it): well inside check-client's
#: --cancel-wait.
STOP_WAIT = 2.0


class CheckedClient:
    """Implements the ``acp.Client`` protocol (methods found by name)."""

    def __init__(self) -> None:
        self.conn: Any = None
        self.held: dict[str, set[asyncio.Future[RequestPermissionResponse]]] = {}
        self.again = False
        self.cancelled: asyncio.Event = asyncio.Event()

    def on_connect(self, conn: Any) -> None:
        pass

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        text = update.content if isinstance(update, AgentMessageChunk) else None
        if not isinstance(text, TextContentBlock):
            return
        if AGAIN in text.text:
            self.again = True
        if CUE in text.text:
            self.cancelled.set()
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
            client_info=Implementation(name="official-python-rc-check-client", version="1.0.0rc3"),
        )
        session = await conn.new_session(cwd=os.getcwd(), mcp_servers=[])
        # As a user would: prompt again while a turn asks for it; a stop
        # button that the agent ignores gives the turn up after a while.
        while True:
            client.again = False
            client.cancelled.clear()
            prompt = asyncio.ensure_future(
                conn.prompt(
                    session_id=session.session_id, prompt=[TextContentBlock(text="check me")]
                )
            )
            stopped = asyncio.ensure_future(client.cancelled.wait())
            await asyncio.wait({prompt, stopped}, return_when=asyncio.FIRST_COMPLETED)
            # Given up after STOP_WAIT: the SDK sends $/cancel_request for it.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(prompt, STOP_WAIT)
            stopped.cancel()
            if not client.again:
                break


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
