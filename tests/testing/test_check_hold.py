"""``check_agent(hold_prompt=...)`` / ``--hold-prompt``: the cancellation
checks of agents that do not speak the scenario vocabulary, on a prompt on
which they ask the client something (held unanswered)."""

from __future__ import annotations

import sys

import pytest
import trio

from acp_trio.testing import Verdict, check_agent
from acp_trio.testing._check_report import Status

from .conftest import CHECK_TIMEOUT, REAL_LIMIT, REPO, agent_command

CODING_AGENT = [sys.executable, str(REPO / "examples" / "coding_agent.py")]
HELD = ["session-cancel", "cancel-request-prompt", "nested-session-cancel", "nested-cancel-request"]


async def test_a_plain_agent_gets_its_cancellation_checked_on_a_held_request() -> None:
    with trio.fail_after(REAL_LIMIT):
        report = await check_agent(
            CODING_AGENT, hold_prompt="fix /nowhere/x.py", strict=True, timeout=CHECK_TIMEOUT
        )
    assert not report.scenario
    for name in HELD:
        assert report[name].verdict is Verdict.PASS, report[name].reason
    assert "fs/read_text_file" in report["nested-session-cancel"].reason
    # The one check that needs the vocabulary: the agent's own deadline.
    assert [r.name for r in report.results if r.verdict is Verdict.SKIP] == ["deadline"]
    assert report.status is Status.INCOMPLETE


@pytest.mark.parametrize(
    ("agent", "verdict"), [("clean", Verdict.PASS), ("no_nested_cancel", Verdict.FAIL)]
)
async def test_held_requests_must_be_cancelled_on_the_wire(agent: str, verdict: Verdict) -> None:
    # The planted agents speak the vocabulary; held mode ignores it: `nested`
    # sends three requests, all held.
    with trio.fail_after(REAL_LIMIT):
        report = await check_agent(
            agent_command(agent),
            hold_prompt="nested",
            only=["nested-session-cancel", "nested-cancel-request"],
            strict=True,
            timeout=CHECK_TIMEOUT,
        )
    for name in ("nested-session-cancel", "nested-cancel-request"):
        assert report[name].verdict is verdict, report[name].reason
        if verdict is Verdict.FAIL:
            assert "never cancelled on the wire" in report[name].reason
        else:
            assert "3 held request(s) ended" in report[name].reason


async def test_a_hold_prompt_that_asks_nothing_skips_with_its_reason() -> None:
    with trio.fail_after(REAL_LIMIT):
        report = await check_agent(
            agent_command("clean"),
            hold_prompt="echo hi",
            only=["session-cancel"],
            timeout=CHECK_TIMEOUT,
        )
    result = report["session-cancel"]
    assert result.verdict is Verdict.SKIP
    assert "did not make the agent send the client a request" in result.reason
