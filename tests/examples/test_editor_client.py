"""``examples/editor_client.py`` driving ``examples/coding_agent.py``, both
as processes: the answer typed on stdin decides, and Ctrl-C (SIGINT)
during a turn cancels it. The same tests run the same client written with
the official Python SDK: 0.12.1 (``benchmarks/peers/official_editor_client.py``),
skipped where ``agent-client-protocol`` is not installed, and 1.0.0rc3
(``benchmarks/peers/official_rc_editor_client.py``), skipped without
``tests/interop/.venv-official-rc``."""

from __future__ import annotations

import importlib.util
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import trio

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
PEERS = ROOT / "benchmarks" / "peers"
# The official Python SDK's release candidate lives in its own virtualenv.
OFFICIAL_RC_VENV = ROOT / "tests" / "interop" / ".venv-official-rc"
CLIENTS = {
    "acp_trio": [sys.executable, str(EXAMPLES / "editor_client.py")],
    # The same client written with the official Python SDK, for comparison:
    # 0.12.1 (in this environment) and 1.0.0rc3 (in its own).
    "official": [sys.executable, str(PEERS / "official_editor_client.py")],
    "official-rc3": [
        str(OFFICIAL_RC_VENV / "bin" / "python"),
        str(PEERS / "official_rc_editor_client.py"),
    ],
}
# The test extra installs it (so does .venv-bench); skipped where it is absent.
HAVE_OFFICIAL_SDK = importlib.util.find_spec("acp") is not None
HAVE_OFFICIAL_RC = (OFFICIAL_RC_VENV / ".installed").is_file()
WHICH = pytest.mark.parametrize(
    "which",
    [
        "acp_trio",
        pytest.param(
            "official",
            marks=pytest.mark.skipif(not HAVE_OFFICIAL_SDK, reason="agent-client-protocol missing"),
        ),
        pytest.param(
            "official-rc3",
            marks=pytest.mark.skipif(
                not HAVE_OFFICIAL_RC,
                reason="needs agent-client-protocol 1.0.0rc3 in tests/interop/.venv-official-rc "
                "(make tests/interop/.venv-official-rc/.installed)",
            ),
        ),
    ],
)
LIMIT = 60  # real seconds: three processes


def command(root: Path, *extra: str, which: str = "acp_trio") -> list[str]:
    return [
        *CLIENTS[which],
        "--root",
        str(root),
        "--prompt",
        f"fix {root / 'main.py'}",
        *extra,
        "--",
        sys.executable,
        str(EXAMPLES / "coding_agent.py"),
    ]


@WHICH
async def test_the_answer_on_stdin_decides(tmp_path: Path, which: str) -> None:
    for answer, expected in (("y\n", "print('hi')\n"), ("n\n", "prnt('hi')\n")):
        (tmp_path / "main.py").write_text("prnt('hi')\n")
        with trio.fail_after(LIMIT):
            done = await trio.run_process(
                command(tmp_path, which=which),
                stdin=answer.encode(),
                capture_stdout=True,
                capture_stderr=True,
            )
        out = done.stdout.decode()
        assert "allow 'Fix main.py'? [y/N]" in out
        assert "stop reason: end_turn" in out
        assert (tmp_path / "main.py").read_text() == expected
        final = "completed" if answer == "y\n" else "failed"
        assert f"tool call 'Fix main.py': {final}" in out


@WHICH
async def test_ctrl_c_cancels_the_turn(tmp_path: Path, which: str) -> None:
    (tmp_path / "main.py").write_text("prnt('hi')\n")
    with trio.fail_after(LIMIT):
        process = await trio.lowlevel.open_process(
            command(tmp_path, which=which),
            stdin=subprocess.PIPE,  # never answered: the turn waits for the user
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        assert process.stdout is not None
        seen = b""
        while b"[y/N]" not in seen:
            chunk = await process.stdout.receive_some()
            assert chunk, seen
            seen += chunk
        process.send_signal(signal.SIGINT)
        while chunk := await process.stdout.receive_some():
            seen += chunk
        assert await process.wait() == 0
    out = seen.decode()
    assert "cancelling the turn" in out
    assert "stop reason: cancelled" in out
    assert "tool call 'Fix main.py': failed" in out
    assert (tmp_path / "main.py").read_text() == "prnt('hi')\n"


@WHICH
async def test_writes_outside_the_root_are_refused(tmp_path: Path, which: str) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (root / "link").symlink_to(outside)  # a way out through a symlink
    prompts = [f"write 1 {root / 'inside.txt'} 8", f"write 1 {root / 'link' / 'x.txt'} 8"]
    client = [*CLIENTS[which], "--root", str(root)]
    for prompt in prompts:
        client += ["--prompt", prompt]
    agent = [sys.executable, "-m", "acp_trio", "scenario-agent"]
    with trio.fail_after(LIMIT):
        done = await trio.run_process(
            [*client, "--", *agent], capture_stdout=True, capture_stderr=True, check=False
        )
    # The first prompt wrote inside the root; the second was refused, which
    # fails its turn (neither example client handles a failed turn).
    assert (root / "inside.txt").read_text() == "x" * 8
    assert list(outside.iterdir()) == []
    assert done.returncode != 0
    assert b"fs/write_text_file failed" in done.stderr
