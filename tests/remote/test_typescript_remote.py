"""Interop with the TypeScript SDK 2.4.0's experimental remote transports,
on loopback, Streamable HTTP (HTTP/1.1) and WebSocket: its clients
(``createHttpStream``, ``createWebSocketStream`` with the ``ws`` package)
against acp_trio's server, acp_trio's clients against its server
(``AcpServer`` with its Node adapter). Skipped without Node.js or the SDK
(``make tests/interop/node_modules/.installed``).

HTTP/2 is not tested: the SDK's client posts with ``globalThis.fetch``
(``dist/transports/http-stream.js``, ``resolveFetch``), which in Node speaks
HTTP/1.1 to ``http://`` URLs, and its Node adapter
(``dist/transports/node-adapter.js``, ``nodeHeaders``) copies every request
header into a Web ``Headers``, which rejects HTTP/2's pseudo-headers
(``Headers.set: ":method" is an invalid header name``, a 500 under
``node:http2``)."""

from __future__ import annotations

import json
import shutil
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import pytest
import trio

from acp_trio.remote import agent_app
from acp_trio.testing import ScenarioAgent

from .conftest import LIMIT, drive_scenario_server, running, server_process, until, ws_url

INTEROP = Path(__file__).resolve().parents[1] / "interop"
TS_CLIENT = INTEROP / "ts_remote_client.mjs"
SDK = INTEROP / "node_modules" / "@agentclientprotocol" / "sdk" / "package.json"
NODE = shutil.which("node")

pytestmark = pytest.mark.skipif(
    NODE is None or not SDK.is_file(),
    reason="needs node and the TypeScript SDK in tests/interop/node_modules",
)


async def run_ts_client(url: str, *prompts: str) -> list[dict[str, Any]]:
    assert NODE is not None
    result = await trio.run_process(
        [NODE, str(TS_CLIENT), url, *prompts],
        cwd=INTEROP,
        capture_stdout=True,
        capture_stderr=True,
        check=False,
    )
    events = [json.loads(line) for line in result.stdout.decode().splitlines() if line]
    assert result.returncode == 0, (events, result.stderr.decode())
    return events


async def test_the_typescript_http_client_talks_to_our_server() -> None:
    app = agent_app(ScenarioAgent)
    with trio.fail_after(LIMIT):
        async with running(app) as base:
            events = await run_ts_client(
                base + "/acp", "echo hi there", "stream 20 2", "read 2 /a", "write 1 /b 3"
            )
            # The client sent DELETE when it finished: its process may exit
            # before the server has read the request (in the socket's buffer).
            with trio.move_on_after(10):
                await until(lambda: not app.http.connections)
            assert not app.http.connections
    texts = [e["text"] for e in events if e["ev"] == "update"]
    assert texts == ["hi there", *(f"{i}." if i < 10 else str(i) for i in range(20)), "read 2 128"]
    results = [e["result"]["stopReason"] for e in events if e["ev"] == "result"]
    assert results == ["end_turn"] * 4
    assert events[-1] == {"ev": "done"}


TS_SERVER = INTEROP / "ts_remote_server.mjs"


def ts_server() -> AbstractAsyncContextManager[str]:
    """Run the TypeScript server for the block; yields its ``http://`` URL
    (the WebSocket profile is on the same port)."""
    assert NODE is not None
    return server_process([NODE, str(TS_SERVER)], INTEROP)


async def test_our_http_client_talks_to_the_typescript_server() -> None:
    with trio.fail_after(LIMIT):
        async with ts_server() as url:
            # Node's http server speaks HTTP/1.1 only.
            await drive_scenario_server(url, "http1", "ts")


async def test_our_websocket_client_talks_to_the_typescript_server() -> None:
    with trio.fail_after(LIMIT):
        async with ts_server() as url:
            await drive_scenario_server(url.replace("http://", "ws://", 1), "websocket", "ts")


async def test_the_typescript_websocket_client_talks_to_our_server() -> None:
    app = agent_app(ScenarioAgent)
    with trio.fail_after(LIMIT):
        async with running(app) as base:
            events = await run_ts_client(
                ws_url(base),
                "echo hi there",
                "stream 20 2",
                "read 2 /a",
                "write 1 /b 3",
                "cancel:wait_for_cancel",
                "abort:wait_for_cancel",
                "echo still here",
            )
    texts = [e["text"] for e in events if e["ev"] == "update"]
    assert texts == [
        "hi there",
        *(f"{i}." if i < 10 else str(i) for i in range(20)),
        "read 2 128",
        "still here",
    ]
    results = [(e["prompt"], e.get("result") or e["code"]) for e in events if "prompt" in e]
    assert results == [
        ("echo hi there", {"stopReason": "end_turn"}),
        ("stream 20 2", {"stopReason": "end_turn"}),
        ("read 2 /a", {"stopReason": "end_turn"}),
        ("write 1 /b 3", {"stopReason": "end_turn"}),
        # session/cancel from the TypeScript client.
        ("cancel:wait_for_cancel", {"stopReason": "cancelled"}),
        # Its aborted request: $/cancel_request, answered -32800.
        ("abort:wait_for_cancel", -32800),
        ("echo still here", {"stopReason": "end_turn"}),
    ]
    assert events[-1] == {"ev": "done"}
