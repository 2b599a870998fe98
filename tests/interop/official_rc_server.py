"""A remote agent served with the official Python SDK's experimental server
(``agent-client-protocol`` 1.0.0rc3: ``acp.http.asgi.create_asgi_app``, a
Starlette app, one agent per connection) on hypercorn's asyncio worker, the
ASGI server the SDK's own example uses (HTTP/1.1, h2c and WebSocket on one
port). Run with the interpreter of ``tests/interop/.venv-official-rc``:

    python official_rc_server.py

Prints ``{"url": "http://127.0.0.1:PORT/acp"}`` once listening on a free
loopback port. Commands (a subset of the scenario vocabulary): ``echo TEXT``,
``stream N [SIZE]``, ``read N PATH`` (sequential ``fs/read_text_file``),
``wait_for_cancel`` (ends ``cancelled`` on ``session/cancel``).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import signal
import socket
import sys
from typing import Any

import acp
from acp.http.asgi import create_asgi_app
from acp.schema import (
    AgentCapabilities,
    AgentMessageChunk,
    Implementation,
    InitializeResponse,
    NewSessionResponse,
    PromptResponse,
    TextContentBlock,
)
from hypercorn.asyncio import serve
from hypercorn.config import Config

_ids = itertools.count(1)


class ScenarioAgent:
    """Implements the ``acp.Agent`` protocol (methods found by name)."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.cancels: dict[str, asyncio.Event] = {}

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def initialize(self, protocol_version: int, **kwargs: Any) -> InitializeResponse:
        return InitializeResponse(
            protocol_version=acp.PROTOCOL_VERSION,
            agent_capabilities=AgentCapabilities(load_session=False),
            agent_info=Implementation(name="official-rc-remote-agent", version="1.0.0rc3"),
        )

    async def new_session(self, cwd: str, **kwargs: Any) -> NewSessionResponse:
        return NewSessionResponse(session_id=f"official-rc-{next(_ids)}")

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        event = self.cancels.get(session_id)
        if event is not None:
            event.set()

    async def say(self, session_id: str, text: str) -> None:
        content = TextContentBlock(type="text", text=text)
        chunk = AgentMessageChunk(session_update="agent_message_chunk", content=content)
        await self.conn.session_update(session_id=session_id, update=chunk)

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> PromptResponse:
        text = next((b.text for b in prompt if isinstance(b, TextContentBlock)), "").strip()
        command, _, rest = text.partition(" ")
        words = rest.split()
        if command == "echo":
            await self.say(session_id, rest)
        elif command == "stream":
            size = int(words[1]) if len(words) > 1 else 16
            for i in range(int(words[0])):
                await self.say(session_id, str(i).ljust(size, "."))
        elif command == "read":
            total = 0
            for _ in range(int(words[0])):
                got = await self.conn.read_text_file(session_id=session_id, path=words[1])
                total += len(got.content)
            await self.say(session_id, f"read {words[0]} {total}")
        elif command == "wait_for_cancel":
            event = self.cancels[session_id] = asyncio.Event()
            try:
                await event.wait()
            finally:
                del self.cancels[session_id]
            return PromptResponse(stop_reason="cancelled")
        else:
            await self.say(session_id, "unknown command")
        return PromptResponse(stop_reason="end_turn")


async def main() -> None:
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(100)
    port = listener.getsockname()[1]
    config = Config()
    config.bind = [f"fd://{listener.fileno()}"]
    config.accesslog = None
    config.errorlog = "-"
    config.loglevel = "WARNING"
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.call_soon(lambda: print(json.dumps({"url": f"http://127.0.0.1:{port}/acp"}), flush=True))
    try:
        await serve(create_asgi_app(ScenarioAgent), config, shutdown_trigger=stop.wait)
    finally:
        # A second SIGTERM (a runner's own shutdown) just ends the process.
        loop.remove_signal_handler(signal.SIGTERM)


if __name__ == "__main__":
    asyncio.run(main())
    sys.exit(0)
