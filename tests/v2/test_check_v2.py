"""``python -m acp_trio check-agent-v2``: passes the v2 scenario agent,
fails one that breaks the rules, and says which."""

from __future__ import annotations

import sys
from pathlib import Path

import trio

from acp_trio.v2._check import check_agent_v2

from .conftest import PIPE_LIMIT

BROKEN = [sys.executable, str(Path(__file__).with_name("broken_v2_agent.py"))]


async def test_the_v2_scenario_agent_conforms_through_the_cli() -> None:
    with trio.fail_after(PIPE_LIMIT * 3):
        result = await trio.run_process(
            [
                sys.executable,
                "-m",
                "acp_trio",
                "check-agent-v2",
                "--",
                sys.executable,
                "-m",
                "acp_trio",
                "scenario-agent",
                "--v2",
            ],
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    out = result.stdout.decode()
    assert result.returncode == 0, out
    assert out.count("PASS ") == 5
    assert "CONFORMS" in out


async def test_a_broken_v2_agent_fails_the_checks_it_breaks() -> None:
    with trio.fail_after(PIPE_LIMIT * 3):
        results = await check_agent_v2(BROKEN)
    verdicts = {r.name: r.passed for r in results}
    assert verdicts == {
        "unsupported-version": True,  # serve_agent alone answers -32022 itself
        "lifecycle": True,
        "held-prompts": True,
        "tool-call-cancel": True,
        "error-turn": False,
    }
    failed = next(r for r in results if not r.passed)
    assert "not error" in failed.detail
