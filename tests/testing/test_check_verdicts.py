"""Issue 36: verdicts ``check-agent`` used to get wrong, each shown by a
planted agent (``agents/_mini.py``) that got the wrong verdict before.

The planted agents of :data:`conftest.FAULTS` (``v2_on_65535``,
``title_after_cancel``, ``stream_after_cancel``, ``exit_after_scalar``) are
also judged by ``test_each_planted_fault_fails_exactly_its_checks``.
"""

from __future__ import annotations

import trio

from acp_trio.testing import CheckReport, Verdict, check_agent
from acp_trio.testing._check._report import Status

from .conftest import CHECK_TIMEOUT, REAL_LIMIT, agent_command

CANCELLATION_CHECKS = (
    "cancel-request-prompt",
    "nested-session-cancel",
    "nested-cancel-request",
    "deadline",
)


async def run(name: str, **options: object) -> CheckReport:
    with trio.fail_after(REAL_LIMIT):
        return await check_agent(agent_command(name), **options)  # type: ignore[arg-type]


def test_a_v2_answer_to_the_65535_probe_is_not_judged_by_the_v1_schema(
    fault_reports: dict[str, CheckReport],
) -> None:
    # The old checker: schema FAIL on initialize.authMethods[0].type.
    report = fault_reports["v2_on_65535"]
    assert report["version-negotiation"].reason == "asked 65535, answered 2"
    assert report["schema"].passed, report["schema"].reason
    assert "negotiated version 2 left out" in report["schema"].reason


def test_a_state_update_after_a_cancelled_turn_passes(
    fault_reports: dict[str, CheckReport],
) -> None:
    # The old checker: "1 session/update arrived after the turn's answer".
    report = fault_reports["title_after_cancel"]
    assert report["session-cancel"].passed, report["session-cancel"].reason


def test_a_turn_that_streams_on_after_session_cancel_fails(
    fault_reports: dict[str, CheckReport],
) -> None:
    # The old checker: PASS (it answered "cancelled", 1.5 s later). Stopping
    # promptly is a SHOULD: cancel-promptly (recommended) fails, while
    # session-cancel (the MUST of the stop reason) passes.
    assert fault_reports["stream_after_cancel"]["session-cancel"].passed
    result = fault_reports["stream_after_cancel"]["cancel-promptly"]
    assert result.failed
    assert "the turn went on after session/cancel" in result.reason, result.reason
    assert "--cancel-within" in result.reason
    assert any("still working" in line for line in result.evidence)
    # One that stops at once (the clean agent streams too) passes.
    clean = fault_reports["clean"]["cancel-promptly"]
    assert clean.passed, clean.reason


def test_an_agent_that_dies_after_malformed_input_fails(
    fault_reports: dict[str, CheckReport],
) -> None:
    # The old checker: PASS (it answered the probe right after the line).
    result = fault_reports["exit_after_scalar"]["malformed-input"]
    assert result.failed
    assert "exited" in result.reason, result.reason
    assert "code 3" in result.reason, result.reason


def test_a_failure_shows_only_the_stderr_of_its_own_check(
    fault_reports: dict[str, CheckReport],
) -> None:
    # The old checker: the tail of everything, "initialize" lines included.
    result = fault_reports["answer_notifications"]["unknown-notification"]
    assert result.failed
    assert "notification acp_trio_check/unknown_notification" in result.stderr, result.stderr
    assert "mini agent: initialize" not in result.stderr, result.stderr


async def test_authentication_demanded_by_a_prompt_skips_and_is_incomplete() -> None:
    # The old checker: prompt FAIL "answered with error -32000", DOES NOT CONFORM.
    report = await run("prompt_needs_auth", timeout=CHECK_TIMEOUT)
    table = report.format_table()
    assert report.status is Status.INCOMPLETE, table
    assert report.exit_code == 3
    assert report["session-new"].passed
    prompt = report["prompt"]
    assert prompt.skipped, table
    assert prompt.reason.startswith("authentication required: (no authMethods listed)")
    assert "session/prompt was answered with error -32000" in prompt.reason
    assert report["session-cancel"].skipped
    for name in CANCELLATION_CHECKS:
        assert report[name].reason.startswith("authentication required"), table
    # Demanding authentication without authMethods: a finding of its own.
    finding = report["auth-methods"]
    assert finding.failed, table
    assert finding.level.value == "recommended"
    assert "lists no authMethods" in finding.reason
    assert any('"code":-32000' in line.replace(" ", "") for line in finding.evidence)
    assert [r.name for r in report if r.failed] == ["auth-methods"], table
    assert report.auth_required == "(no authMethods listed)"


async def test_a_slow_first_answer_skips_the_scenario_checks() -> None:
    # The old checker (--timeout 1): the four cancellation checks FAILed and
    # one-reply-per-request counted the prompts it had given up on.
    report = await run("slow_echo", timeout=1.0, prompt_timeout=1.0)
    table = report.format_table()
    assert report["prompt"].failed, table
    assert "within 1 s (--prompt-timeout)" in report["prompt"].reason
    for name in CANCELLATION_CHECKS:
        assert report[name].verdict is Verdict.SKIP, table
        assert "--hold-prompt" in report[name].reason
        assert "--scenario" not in report[name].reason
    assert "not detected" in report.scenario_reason
    one = report["one-reply-per-request"]
    assert one.passed, table
    assert "still open: session/prompt" in one.reason


async def test_prompts_have_their_own_timeout() -> None:
    # --timeout stays small; the slow echo (6 s) is waited for.
    report = await run("slow_echo", only=["prompt"], timeout=1.0, prompt_timeout=12.0)
    assert report["prompt"].passed, report.format_table()


async def test_a_v2_only_agent_is_pointed_to_check_agent_v2() -> None:
    # The old checker: "unknown agent, protocol version None".
    report = await run("v2_only", timeout=CHECK_TIMEOUT)
    summary = report.summary()
    assert report["initialize"].failed
    assert "speaks version 2 only" in report["initialize"].reason
    assert "check-agent-v2" in summary, summary
    assert "unknown agent" not in summary, summary
    assert "protocol version 2" in summary, summary
    assert report.to_json()["only_version"] == 2
