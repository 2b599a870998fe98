"""``check-client`` against the official TypeScript SDK's client
(``ts_check_client.mjs``) over real pipes; skipped without Node.js or the
SDK in ``tests/interop/node_modules`` (``npm ci --prefix tests/interop``)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import trio

from acp_trio.testing._check_client_run import check_client

HERE = Path(__file__).resolve().parent
SDK_DIR = HERE / "node_modules" / "@agentclientprotocol" / "sdk"
NODE = shutil.which("node")

if NODE is None:
    _skip_reason = "node is not on PATH (the TypeScript interop tests need Node.js >= 20)"
elif not SDK_DIR.is_dir():
    _skip_reason = "the TypeScript SDK is not installed (npm ci --prefix tests/interop)"
else:
    _skip_reason = ""

pytestmark = pytest.mark.skipif(bool(_skip_reason), reason=_skip_reason)


async def test_the_typescript_sdk_client_conforms() -> None:
    command = [NODE or "node", str(HERE / "ts_check_client.mjs"), "{agent-args}"]
    with trio.fail_after(120):
        report = await check_client(command, timeout=5)
    assert all(r.passed for r in report), report.format_table()
    assert report.ok
    assert report.client_exit == 0
    assert report.client_info == {"name": "ts-check-client", "version": "1"}
    # The cancellations were exercised, not skipped.
    assert report["cancel-request"].reason == "-32800"
    assert report["cancelled-permission"].reason == "cancelled"
