"""A remote client written with the official Python SDK's experimental
transports (``agent-client-protocol`` 1.0.0rc3, module ``acp``: asyncio,
``acp.http.create_http_stream`` on httpx2 with HTTP/2, and
``acp.ws.create_websocket_stream`` on websockets). Run with the interpreter
of ``tests/interop/.venv-official-rc`` (``make tests/interop/.venv-official-rc/.installed``):

    python official_rc_client.py [--quiet] [--h2c] URL PROMPT...

``ws://`` URLs use the WebSocket profile, ``http://`` ones Streamable HTTP:
over HTTP/1.1 by default (the SDK's own httpx2 client asks for HTTP/2, which
httpx2 negotiates only over TLS), over HTTP/2 with prior knowledge (h2c)
with ``--h2c`` (an httpx2 client with ``http1=False`` handed to the SDK).
Initializes, opens a session, sends each PROMPT in turn and prints one JSON
line per event, as ``ts_remote_client.mjs`` does: ``{"ev": "update", "text"}``,
``{"ev": "result", "prompt", "result", "ms"}``, ``{"ev": "cancelled", "prompt"}``,
``{"ev": "done"}`` (with ``updates`` under ``--quiet``), or ``{"ev": "fatal",
"message"}`` (exit code 1). ``cancel:P`` sends P, then ``session/cancel``
200 ms after P was sent; ``abort:P`` sends P and cancels its task 200 ms
after (the SDK then sends ``$/cancel_request`` and stops waiting for the
answer).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
import time
import traceback
from typing import Any

import acp
import httpx2
from acp.http import create_http_stream
from acp.schema import (
    AgentMessageChunk,
    ClientCapabilities,
    FileSystemCapabilities,
    Implementation,
    ReadTextFileResponse,
    TextContentBlock,
    WriteTextFileResponse,
)
from acp.ws import create_websocket_stream


def emit(**event: Any) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


class RemoteClient:
    """Implements the ``acp.Client`` protocol (methods found by name)."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet
        self.updates = 0

    def on_connect(self, conn: Any) -> None:
        pass

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        if self.quiet:
            self.updates += 1
        elif isinstance(update, AgentMessageChunk) and isinstance(update.content, TextContentBlock):
            emit(ev="update", text=update.content.text)

    async def read_text_file(self, session_id: str, path: str, **kwargs: Any) -> Any:
        return ReadTextFileResponse(content="x" * 64)

    async def write_text_file(self, session_id: str, path: str, content: str, **kwargs: Any) -> Any:
        return WriteTextFileResponse()


class SentTap:
    """Wraps the SDK's transport, noting when a ``session/prompt`` has been
    sent (over HTTP: its POST answered), so that a cancel cannot overtake it
    on another HTTP connection."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.prompt_sent = asyncio.Event()

    async def send(self, message: dict[str, Any]) -> None:
        await self.inner.send(message)
        if message.get("method") == "session/prompt":
            self.prompt_sent.set()

    async def receive(self) -> dict[str, Any] | None:
        return await self.inner.receive()  # type: ignore[no-any-return]

    async def close(self) -> None:
        await self.inner.close()


def h2c_client() -> httpx2.AsyncClient:
    return httpx2.AsyncClient(http1=False, http2=True, timeout=httpx2.Timeout(None))


async def main(argv: list[str]) -> None:
    flags = {arg for arg in argv if arg.startswith("--")}
    url, *prompts = [arg for arg in argv if not arg.startswith("--")]
    quiet = "--quiet" in flags
    client = RemoteClient(quiet)
    if url.startswith("ws"):
        transport = await create_websocket_stream(url)
    else:
        transport = create_http_stream(url, client=h2c_client() if "--h2c" in flags else None)
    tap = SentTap(transport)
    conn = acp.connect_to_agent(client, tap)
    try:
        await conn.initialize(
            protocol_version=acp.PROTOCOL_VERSION,
            client_capabilities=ClientCapabilities(
                fs=FileSystemCapabilities(read_text_file=True, write_text_file=True)
            ),
            client_info=Implementation(name="official-rc-remote-client", version="1.0.0rc3"),
        )
        session = await conn.new_session(cwd=os.getcwd(), mcp_servers=[])
        sid = session.session_id
        for prompt in prompts:
            mode, text = "plain", prompt
            if prompt.startswith(("cancel:", "abort:")):
                mode, _, text = prompt.partition(":")
            tap.prompt_sent.clear()
            start = time.perf_counter()
            blocks = [TextContentBlock(type="text", text=text)]
            turn = asyncio.ensure_future(conn.prompt(session_id=sid, prompt=blocks))
            if mode != "plain":
                await tap.prompt_sent.wait()
                await asyncio.sleep(0.2)
                if mode == "abort":
                    turn.cancel()
                else:
                    await conn.cancel(session_id=sid)
            try:
                result = await turn
            except asyncio.CancelledError:
                emit(ev="cancelled", prompt=prompt)
                continue
            ms = (time.perf_counter() - start) * 1000
            answer = result.model_dump(by_alias=True, exclude_none=True)
            emit(ev="result", prompt=prompt, result=answer, ms=ms)
    finally:
        await conn.close()
        await tap.close()
    if quiet:
        emit(ev="done", updates=client.updates)
    else:
        emit(ev="done")


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    try:
        asyncio.run(main(sys.argv[1:]))
    except BaseException:
        emit(ev="fatal", message=traceback.format_exc())
        sys.exit(1)
