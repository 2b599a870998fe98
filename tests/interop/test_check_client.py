"""``check-client`` against real clients over real pipes: the official
TypeScript SDK's (``ts_check_client.mjs``; skipped without Node.js or the SDK
in ``tests/interop/node_modules``), ``acpx`` (skipped unless installed with
``npm install --prefix tests/acpx``) and the official Python SDK's:
0.12.1 (``official_check_client.py``) and 1.0.0rc3
(``official_rc_check_client.py``, skipped without
``tests/interop/.venv-official-rc``)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
import trio

from acp_trio.testing._check._client_run import check_client

HERE = Path(__file__).resolve().parent
SDK_DIR = HERE / "node_modules" / "@agentclientprotocol" / "sdk"
NODE = shutil.which("node")

if NODE is None:
    _skip_reason = "node is not on PATH (the TypeScript interop tests need Node.js >= 20)"
elif not SDK_DIR.is_dir():
    _skip_reason = "the TypeScript SDK is not installed (npm ci --prefix tests/interop)"
else:
    _skip_reason = ""


@pytest.mark.skipif(bool(_skip_reason), reason=_skip_reason)
async def test_the_typescript_sdk_client_conforms(tmp_path: Path) -> None:
    command = [NODE or "node", str(HERE / "ts_check_client.mjs"), "{agent-args}"]
    with trio.fail_after(120):
        report = await check_client(command, timeout=5, cwd=tmp_path)
    # It does not advertise terminals.
    assert all(r.passed for r in report if r.name != "terminal"), report.format_table()
    assert report["terminal"].skipped
    assert report.ok
    assert report.client_exit == 0
    assert report.client_info == {"name": "ts-check-client", "version": "1"}
    # The cancellations were exercised, not skipped.
    assert report["cancel-request"].reason == "-32800"
    assert report["cancelled-permission"].reason == "cancelled"
    # Issue 45: a cancel that comes after the turn ended changes nothing, and
    # a session/cancel the agent ignores gets $/cancel_request (the SDK's
    # cancellationSignal) and leaves the session usable.
    assert "changed nothing" in report["idle-cancel"].reason
    assert "$/cancel_request for the prompt" in report["ignored-cancel"].reason
    assert "came on the same session" in report["usable-after-ignored-cancel"].reason


ACPX = HERE.parent / "acpx" / "node_modules" / ".bin" / "acpx"


@pytest.mark.skipif(
    NODE is None or not ACPX.is_file(),
    reason="acpx is not installed (npm install --prefix tests/acpx)",
)
async def test_acpx_conforms(tmp_path: Path) -> None:
    # A persistent session, one prompt, and `acpx cancel` from outside at
    # the cue: the checks of the later turns are skipped. --approve-all
    # answers every permission request at once (and lets the fs writes and
    # terminals through), so `cancelled-permission` cannot be exercised.
    acpx = f"{ACPX} --ttl 1 --agent '{{agent}}'"
    prompt = f"{acpx} --approve-all --format json prompt 'check me'"
    command = ["sh", "-c", f"{acpx} sessions new && exec {prompt}"]
    with trio.fail_after(120):
        report = await check_client(
            command,
            timeout=5,
            cwd=tmp_path,
            env={"HOME": str(tmp_path)},
            on_cue=["sh", "-c", f"{ACPX} --agent '{{agent}}' cancel"],
        )
    assert report.failures() == [], report.format_table()
    assert report["session-cancel"].passed
    assert report["cancelled-permission"].skipped
    for name in ("idle-cancel", "ignored-cancel", "usable-after-ignored-cancel"):
        assert report[name].skipped, report[name]
    # A required check that could not run: INCOMPLETE (exit 3), not CONFORMS.
    assert report.status.value == "INCOMPLETE"
    assert report.exit_code == 3
    assert report["fs-read"].reason == "the content, exactly"
    assert report["fs-write"].reason == "written, exactly"
    assert report["terminal"].reason == "ran, exit 0, output, released"
    assert report.client_info is not None
    assert report.client_info["name"] == "acpx"


async def test_the_official_python_sdk_client_does_not_answer_a_cancelled_request(
    tmp_path: Path,
) -> None:
    pytest.importorskip("acp")
    # The SDK (agent-client-protocol 0.12.1) has no $/cancel_request: the
    # cancelled permission request stays unanswered. Everything else passes.
    command = [sys.executable, str(HERE / "official_check_client.py"), "{agent-args}"]
    with trio.fail_after(120):
        report = await check_client(command, timeout=2, cwd=tmp_path)
    assert {r.name for r in report.failures()} == {"cancel-request"}, report.format_table()
    assert "after $/cancel_request" in report["cancel-request"].reason
    assert report["cancelled-permission"].passed
    assert not report.ok


OFFICIAL_RC_VENV = HERE / ".venv-official-rc"


@pytest.mark.skipif(
    not (OFFICIAL_RC_VENV / ".installed").is_file(),
    reason="needs agent-client-protocol 1.0.0rc3 in tests/interop/.venv-official-rc "
    "(make tests/interop/.venv-official-rc/.installed)",
)
async def test_the_official_python_sdk_rc3_client_conforms(tmp_path: Path) -> None:
    # 1.0.0rc3 answers a request cancelled with $/cancel_request -32800
    # itself; the pending permissions after session/cancel are still left to
    # the application (this client answers them).
    python = OFFICIAL_RC_VENV / "bin" / "python"
    command = [str(python), str(HERE / "official_rc_check_client.py"), "{agent-args}"]
    with trio.fail_after(120):
        report = await check_client(command, timeout=5, cwd=tmp_path)
    assert all(r.passed for r in report if r.name != "terminal"), report.format_table()
    assert report["terminal"].skipped  # not advertised
    assert report.ok
    assert report.client_exit == 0
    assert report.client_info == {
        "name": "official-python-rc-check-client",
        "version": "1.0.0rc3",
    }
    assert report["cancel-request"].reason == "-32800"
    assert report["cancelled-permission"].reason == "cancelled"
