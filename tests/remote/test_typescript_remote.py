"""Interop: the TypeScript SDK 2.4.0's experimental Streamable HTTP client
(``createHttpStream``) against acp_trio's server, on loopback. Skipped
without Node.js or the SDK (``make tests/interop/node_modules/.installed``)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import trio

from acp_trio.remote import agent_app
from acp_trio.testing import ScenarioAgent

from .conftest import LIMIT, running

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
            # The client sent DELETE when it finished.
            assert not app.http.connections
    texts = [e["text"] for e in events if e["ev"] == "update"]
    assert texts == ["hi there", *(f"{i}." if i < 10 else str(i) for i in range(20)), "read 2 128"]
    results = [e["result"]["stopReason"] for e in events if e["ev"] == "result"]
    assert results == ["end_turn"] * 4
    assert events[-1] == {"ev": "done"}
