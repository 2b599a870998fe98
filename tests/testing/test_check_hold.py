"""``check_agent(hold_prompt=...)`` / ``--hold-prompt``: the cancellation
checks of agents that do not speak the scenario vocabulary, on a prompt on
which they ask the client something (held unanswered)."""

from __future__ import annotations

import sys

import pytest
import trio

from acp_trio.testing import Verdict, check_agent
from acp_trio.testing._check._report import Status

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
    # The one check that needs more: the agent's own deadline.
    assert [r.name for r in report.results if r.verdict is Verdict.SKIP] == ["deadline"]
    assert "--hold-deadline" in report["deadline"].reason
    assert report.status is Status.INCOMPLETE


async def test_the_coding_agent_with_a_turn_limit_conforms_strictly() -> None:
    # Its turn limit is the agent's own deadline: the held read is cancelled
    # on the wire and the prompt answers -32800, so every check runs.
    with trio.fail_after(REAL_LIMIT):
        report = await check_agent(
            [*CODING_AGENT, "--turn-limit", "1.5"],
            hold_prompt="fix /nowhere/x.py",
            hold_deadline=1.5,
            strict=True,
            timeout=CHECK_TIMEOUT,
        )
    assert report["deadline"].verdict is Verdict.PASS, report["deadline"].reason
    assert "fs/read_text_file" in report["deadline"].reason
    assert [r.name for r in report.results if r.verdict is not Verdict.PASS] == []
    assert report.status is Status.CONFORMS


@pytest.mark.parametrize(
    ("agent", "verdict", "reason"),
    [
        ("clean", Verdict.PASS, "1 held request(s) cancelled on the wire"),
        ("deadline_no_cancel", Verdict.FAIL, "never cancelled on the wire"),
        ("end_turn_after_cancel", Verdict.PASS, "-32800 at its own"),
    ],
)
async def test_held_deadline_needs_minus_32800_and_the_held_requests_cancelled(
    agent: str, verdict: Verdict, reason: str
) -> None:
    # The planted agents' `deadline 300` in held mode: the read of /hold is
    # held; at 300 ms the agent must end the turn itself.
    with trio.fail_after(REAL_LIMIT):
        report = await check_agent(
            agent_command(agent),
            hold_prompt="deadline 300",
            hold_deadline=0.3,
            only=["deadline"],
            strict=True,
            timeout=CHECK_TIMEOUT,
        )
    result = report["deadline"]
    assert result.verdict is verdict, result.reason
    assert reason in result.reason


async def test_held_deadline_fails_an_agent_that_never_ends_the_turn() -> None:
    # The coding agent without a limit of its own keeps waiting on the read.
    with trio.fail_after(REAL_LIMIT):
        report = await check_agent(
            CODING_AGENT,
            hold_prompt="fix /nowhere/x.py",
            hold_deadline=0.2,
            only=["deadline"],
            timeout=1.0,
        )
    result = report["deadline"]
    assert result.verdict is Verdict.FAIL
    assert "0.2 s limit (--hold-deadline) passed and no answer came" in result.reason


async def test_a_hold_deadline_needs_a_hold_prompt_and_a_positive_limit() -> None:
    with pytest.raises(ValueError, match="hold_deadline needs hold_prompt"):
        await check_agent(CODING_AGENT, hold_deadline=1.0)
    with pytest.raises(ValueError, match="positive"):
        await check_agent(CODING_AGENT, hold_prompt="fix /x.py", hold_deadline=0)


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
