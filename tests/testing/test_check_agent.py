"""``check_agent`` and ``python -m acp_trio check-agent`` against real agents:
the reference scenario agent passes everything; each planted fault fails the
check it should, with a useful reason, and nothing else; broken agents fail
within seconds."""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest
import trio

from acp_trio.testing import (
    CHECKS,
    SCENARIO_AGENT_COMMAND,
    CheckReport,
    Level,
    Verdict,
    check_agent,
)
from acp_trio.testing._schema_check import MessageValidator

from .conftest import FAULTS, REAL_LIMIT, REPO, agent_command

ALL_CHECKS = [info.name for info in CHECKS]


async def run_cli(*args: str, cwd: Any = None) -> tuple[int, str, str]:
    with trio.fail_after(REAL_LIMIT):
        result = await trio.run_process(
            [sys.executable, "-m", "acp_trio", *args],
            capture_stdout=True,
            capture_stderr=True,
            check=False,
            cwd=cwd,
        )
    return result.returncode, result.stdout.decode(), result.stderr.decode()


def test_the_check_list_has_the_promised_checks_and_levels() -> None:
    levels = {info.name: info.level for info in CHECKS}
    assert levels == {
        "initialize": Level.REQUIRED,
        "version-negotiation": Level.REQUIRED,
        "agent-info": Level.RECOMMENDED,
        "session-new": Level.REQUIRED,
        "prompt": Level.REQUIRED,
        "session-cancel": Level.REQUIRED,
        "unknown-method": Level.REQUIRED,
        "invalid-params": Level.RECOMMENDED,
        "unknown-notification": Level.REQUIRED,
        "stray-cancels": Level.REQUIRED,
        "cancel-request-prompt": Level.SCENARIO,
        "nested-session-cancel": Level.SCENARIO,
        "nested-cancel-request": Level.SCENARIO,
        "deadline": Level.SCENARIO,
        "parse-error": Level.RECOMMENDED,
        "batch-array": Level.RECOMMENDED,
        "scalar-message": Level.RECOMMENDED,
        "stdout-json-only": Level.REQUIRED,
        "schema": Level.REQUIRED,
        "one-reply-per-request": Level.REQUIRED,
    }


async def test_the_scenario_agent_passes_every_check_on_the_command_line() -> None:
    code, out, err = await run_cli("check-agent", "--json", "--", *SCENARIO_AGENT_COMMAND, cwd=REPO)
    report = json.loads(out)
    verdicts = {c["name"]: (c["verdict"], c["reason"]) for c in report["checks"]}
    assert list(verdicts) == ALL_CHECKS
    assert {name: v for name, (v, _) in verdicts.items()} == dict.fromkeys(ALL_CHECKS, "pass"), (
        verdicts,
        err,
    )
    assert code == 0
    assert report["ok"] is True
    assert report["scenario"] is True
    assert report["agent_info"]["name"] == "acp_trio-scenario-agent"
    assert "schema.json" in verdicts["schema"][1]
    deadline = next(c for c in report["checks"] if c["name"] == "deadline")
    assert deadline["latency_ms"] >= 180  # not before the deadline of 200 ms


@pytest.mark.parametrize("name", list(FAULTS))
def test_each_planted_fault_fails_exactly_its_checks(
    name: str, fault_reports: dict[str, CheckReport]
) -> None:
    report = fault_reports[name]
    failed = {r.name for r in report if r.failed}
    details = {r.name: r.reason for r in report if not r.passed}
    assert failed == FAULTS[name], details
    assert not any(r.skipped for r in report), details
    required = any(report[n].level is Level.REQUIRED for n in FAULTS[name])
    assert report.ok is not required
    assert report.exit_code == (1 if required else 0)


def reason(reports: dict[str, CheckReport], agent: str, check: str) -> str:
    result = reports[agent][check]
    assert result.verdict is Verdict.FAIL
    return result.reason


def test_the_reasons_say_what_went_wrong(fault_reports: dict[str, CheckReport]) -> None:
    text = reason(fault_reports, "ignore_cancel_request", "cancel-request-prompt")
    assert "no answer within 3 s after $/cancel_request" in text
    assert "session/cancel then ended it with stopReason 'cancelled'" in text

    text = reason(fault_reports, "end_turn_after_cancel", "session-cancel")
    assert "stopReason 'end_turn' after session/cancel" in text
    assert '"cancelled"' in text

    text = reason(fault_reports, "answer_notifications", "unknown-notification")
    assert "answered a notification" in text
    assert "acp_trio_check/unknown_notification" in text

    text = reason(fault_reports, "no_nested_cancel", "nested-session-cancel")
    assert "never cancelled on the wire" in text
    assert "fs/read_text_file (id" in text
    assert "terminal/create (id" in text
    text = reason(fault_reports, "no_nested_cancel", "nested-cancel-request")
    assert "session/request_permission (id" in text
    text = reason(fault_reports, "no_nested_cancel", "deadline")
    assert "answered -32800, but the read was never cancelled on the wire" in text

    text = reason(fault_reports, "die_on_batch", "batch-array")
    assert "closed the connection" in text
    assert "exited with code 1" in text
    assert "cannot handle a list" in text  # from its stderr

    text = reason(fault_reports, "print_stdout", "stdout-json-only")
    assert "not JSON-RPC" in text
    assert "mini agent: initialized" in text


def test_the_agent_is_restarted_after_it_died(fault_reports: dict[str, CheckReport]) -> None:
    report = fault_reports["die_on_batch"]
    # The checks after the batch ran on a new process.
    assert report["scalar-message"].passed
    assert report["one-reply-per-request"].passed


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("hang", ["no answer to initialize within 1 s"]),
        ("exit_at_once", ["exited with code 3", "no API key configured"]),
        ("echo_input", ["echoes what it reads"]),
        # Deeper than json.loads can go: a verdict, not a RecursionError.
        ("nested_json", ["its stdout has non-JSON lines"]),
    ],
)
async def test_a_broken_agent_fails_within_seconds(name: str, words: list[str]) -> None:
    # Each wait is bounded by --timeout: the run ends (under run_cli's
    # watchdog) with the verdict of the wait that ran out.
    code, out, _ = await run_cli("check-agent", "--timeout", "1", "--", *agent_command(name))
    assert code == 1, out
    lines = [line for line in out.splitlines() if line.startswith("initialize ")]
    assert "FAIL" in lines[0]
    for word in words:
        assert word in lines[0]
    assert "DOES NOT CONFORM" in out


async def test_an_agent_that_cannot_start_fails_at_once() -> None:
    with trio.fail_after(REAL_LIMIT):
        report = await check_agent(["/nonexistent/acp-agent"], timeout=1)
    assert report.exit_code == 1
    assert report["initialize"].failed
    assert "cannot start the agent" in report["initialize"].reason
    assert "No such file" in report["initialize"].reason
    # Nothing else can run, and nothing passes silently.
    assert all(r.skipped for r in report.results[1:])
    assert all(r.reason for r in report.results)


async def test_only_runs_the_named_checks_and_the_setup() -> None:
    with trio.fail_after(REAL_LIMIT):
        report = await check_agent(SCENARIO_AGENT_COMMAND, only=["deadline"], timeout=3)
    assert [r.name for r in report] == ["initialize", "session-new", "deadline"]
    assert all(r.passed for r in report), report.format_table()
    assert report.scenario is True
    with pytest.raises(ValueError, match="unknown checks: nope"):
        await check_agent(SCENARIO_AGENT_COMMAND, only=["nope"])


async def test_scenario_checks_can_be_turned_off_and_are_then_skipped() -> None:
    with trio.fail_after(REAL_LIMIT):
        report = await check_agent(
            SCENARIO_AGENT_COMMAND, only=["nested-session-cancel"], scenario=False, timeout=3
        )
    result = report["nested-session-cancel"]
    assert result.skipped
    assert "turned off" in result.reason


async def test_the_table_and_usage_errors_on_the_command_line() -> None:
    code, out, _ = await run_cli(
        "check-agent", "--only", "batch-array", "--", *SCENARIO_AGENT_COMMAND
    )
    assert code == 0
    header, rule, *rows = out.splitlines()
    assert header.split() == ["check", "level", "verdict", "latency", "reason"]
    assert set(rule) == {"-", " "}
    assert rows[2].split()[:3] == ["batch-array", "recommended", "PASS"]
    assert "-32600 with id null" in rows[2]
    assert out.rstrip().splitlines()[-1].startswith("CONFORMS: 3 passed")

    code, _, err = await run_cli("check-agent", "--only", "nope", "--", "true")
    assert code == 2
    assert "unknown checks: nope" in err
    code, _, err = await run_cli("check-agent")
    assert code == 2
    assert "give the agent's command after --" in err
    code, out, _ = await run_cli("check-agent", "--list")
    assert code == 0
    assert [line.split()[0] for line in out.splitlines()] == ALL_CHECKS


async def test_the_schema_check_is_skipped_with_a_reason_without_a_schema(tmp_path: Any) -> None:
    with trio.fail_after(REAL_LIMIT):
        report = await check_agent(
            SCENARIO_AGENT_COMMAND, only=["schema"], schema=tmp_path / "missing.json", timeout=3
        )
    assert report["schema"].skipped
    assert "schema not found" in report["schema"].reason
    assert "missing.json" in report["schema"].reason


def test_the_schema_check_is_skipped_without_jsonschema(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "jsonschema.validators", None)
    assert MessageValidator.load() == "jsonschema is not installed (pip install jsonschema)"


def test_the_schema_check_reads_the_messages_of_their_method() -> None:
    validator = MessageValidator.load()
    assert isinstance(validator, MessageValidator)
    chunk = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text"}}
    update = {"sessionId": "s", "update": chunk}
    problem = validator.check({"jsonrpc": "2.0", "method": "session/update", "params": update})
    assert problem is not None
    assert "session/update params.update.content" in problem
    assert "'text' is a required property" in problem
    good = {"jsonrpc": "2.0", "id": 1, "result": {"stopReason": "end_turn"}}
    assert validator.check(good, "session/prompt") is None
    bad = {"jsonrpc": "2.0", "id": 1, "result": {"stopReason": "bored"}}
    assert "result of session/prompt" in (validator.check(bad, "session/prompt") or "")
    echoed = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}}
    assert "not a request an agent sends" in (validator.check(echoed) or "")
    assert validator.check({"jsonrpc": "2.0", "id": None, "error": {"code": 1}}) is not None
