"""What a report says when printed: ``repr`` is one line that leads with the
verdict and the failed checks (what pytest shows for ``assert report.ok,
report``), ``str`` is the whole table."""

from __future__ import annotations

import pytest

from acp_trio.testing import CheckReport, CheckResult, ClientCheckReport, Level, Verdict

pytest_plugins = ["pytester"]


def result(
    name: str, verdict: Verdict, reason: str = "", level: Level = Level.REQUIRED
) -> CheckResult:
    return CheckResult(name, level, verdict, reason or f"{name} {verdict.value}")


LONG = "the turn kept streaming for 0.42 s after session/cancel: " + "chunk " * 40
FAILING = CheckReport(
    command=("python", "agent.py"),
    results=(
        result("initialize", Verdict.PASS),
        result("session-cancel", Verdict.FAIL, LONG, Level.RECOMMENDED),
        result("unknown-method", Verdict.FAIL, "answered 200 instead of -32601"),
        result("deadline", Verdict.SKIP, "no scenario", Level.CANCELLATION),
    ),
    scenario=False,
    scenario_reason="not detected",
    agent_info={"name": "my-agent", "version": "1.2"},
)


def test_the_repr_leads_with_the_verdict_and_what_failed() -> None:
    text = repr(FAILING)
    assert "\n" not in text
    assert text.startswith(
        "<CheckReport DOES NOT CONFORM: failed unknown-method (answered 200 instead of -32601), "
        "session-cancel (the turn kept streaming for 0.42 s"
    )
    assert text.endswith("...); 1 passed, 2 failed, 1 skipped; agent: my-agent 1.2>")
    assert "CheckResult(name=" not in text
    assert str(FAILING) == FAILING.format_table()


def test_an_incomplete_run_names_what_could_not_run_and_a_clean_one_is_short() -> None:
    incomplete = CheckReport(
        command=("agent",),
        results=(result("initialize", Verdict.PASS), result("session-new", Verdict.SKIP, "auth")),
        scenario=False,
        scenario_reason="not detected",
    )
    assert repr(incomplete) == (
        "<CheckReport INCOMPLETE: could not run session-new (auth); 1 passed, 0 failed, "
        "1 skipped; agent: agent>"
    )
    clean = CheckReport(
        command=("agent",),
        results=(result("initialize", Verdict.PASS),),
        scenario=True,
        scenario_reason="detected",
        agent_info={"name": "a", "version": "1"},
    )
    assert repr(clean) == "<CheckReport CONFORMS: 1 passed, 0 failed, 0 skipped; agent: a 1>"


def test_a_client_report_reads_the_same_way() -> None:
    report = ClientCheckReport(
        command=("node", "client.js"),
        results=(result("initialize", Verdict.PASS), result("cancel", Verdict.FAIL, "no cancel")),
        client_info={"name": "editor", "version": "0.1"},
    )
    assert repr(report) == (
        "<ClientCheckReport DOES NOT CONFORM: failed cancel (no cancel); 1 passed, 1 failed, "
        "0 skipped; client: editor 0.1>"
    )
    assert str(report) == report.format_table()


def test_assert_report_ok_shows_it_in_pytest(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_agent=f"""
from acp_trio.testing import CheckReport, CheckResult, Level, Verdict

def test_conforms():
    report = CheckReport(
        command=("agent",),
        results=(
            CheckResult("initialize", Level.REQUIRED, Verdict.PASS, "ok"),
            CheckResult("unknown-method", Level.REQUIRED, Verdict.FAIL, {"answered 200"!r}),
        ),
        scenario=False,
        scenario_reason="not detected",
    )
    assert report.ok, report
"""
    )
    out = pytester.runpytest_subprocess("-p", "no:cacheprovider").stdout.str()
    assert (
        "AssertionError: <CheckReport DOES NOT CONFORM: failed unknown-method (answered 200); "
        "1 passed, 1 failed, 0 skipped; agent: agent>"
    ) in out
    assert "CheckResult(name=" not in out  # (the attrs repr it was)
