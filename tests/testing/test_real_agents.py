"""The real agents of ``tests/real_agents`` (``make check-real-agents``
installs them with npm) get the verdicts their wire supports. Skipped when
npm or the packages are absent: the default run does not need them."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from .conftest import REPO

BIN = REPO / "tests" / "real_agents" / "node_modules" / ".bin"
pytestmark = [
    pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed"),
    pytest.mark.skipif(
        not (BIN / "codex-acp").exists() or not (BIN / "claude-agent-acp").exists(),
        reason="the real agents are not installed (npm ci --prefix tests/real_agents)",
    ),
    pytest.mark.timeout(300),
]


@pytest.mark.parametrize("tool", ["check-agent", "check-agent-v2"])
def test_the_real_agents_get_the_verdicts_their_wire_supports(tool: str) -> None:
    process = subprocess.run(
        [sys.executable, str(REPO / "tools" / "real_agents.py"), "--tool", tool],
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )
    assert process.returncode == 0, process.stdout + process.stderr
    assert "codex-acp 2.6.0 | INCOMPLETE, exit 3; 0 failed" in process.stdout
    assert "claude-agent-acp 0.101.0 | INCOMPLETE, exit 3; 1 failed" in process.stdout
