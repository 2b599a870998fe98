"""``examples/editor_client.py`` driving ``examples/coding_agent.py``, both
as processes: the answer typed on stdin decides, and Ctrl-C (SIGINT)
during a turn cancels it."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import trio

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
LIMIT = 60  # real seconds: three processes


def command(root: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        str(EXAMPLES / "editor_client.py"),
        "--root",
        str(root),
        "--prompt",
        f"fix {root / 'main.py'}",
        *extra,
        "--",
        sys.executable,
        str(EXAMPLES / "coding_agent.py"),
    ]


async def test_the_answer_on_stdin_decides(tmp_path: Path) -> None:
    for answer, expected in (("y\n", "print('hi')\n"), ("n\n", "prnt('hi')\n")):
        (tmp_path / "main.py").write_text("prnt('hi')\n")
        with trio.fail_after(LIMIT):
            done = await trio.run_process(
                command(tmp_path), stdin=answer.encode(), capture_stdout=True, capture_stderr=True
            )
        out = done.stdout.decode()
        assert "allow 'Fix main.py'? [y/N]" in out
        assert "stop reason: end_turn" in out
        assert (tmp_path / "main.py").read_text() == expected
        final = "completed" if answer == "y\n" else "failed"
        assert f"tool call 'Fix main.py': {final}" in out


async def test_ctrl_c_cancels_the_turn(tmp_path: Path) -> None:
    (tmp_path / "main.py").write_text("prnt('hi')\n")
    with trio.fail_after(LIMIT):
        process = await trio.lowlevel.open_process(
            command(tmp_path),
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
