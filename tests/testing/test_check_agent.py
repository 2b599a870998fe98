"""``check_agent`` and ``python -m acp_trio check-agent`` against real agents:
the reference scenario agent passes everything; each planted fault fails the
check it should, with a useful reason, and nothing else; broken agents fail
within seconds."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

import acp_trio
from acp_trio import RequestError
from acp_trio.testing import (
    CHECKS,
    SCENARIO_AGENT_COMMAND,
    CheckReport,
    Level,
    Verdict,
    check_agent,
)
from acp_trio.testing import _schema_check as schema_check
from acp_trio.testing._check import _brief, promoted_levels
from acp_trio.testing._check._report import Status
from acp_trio.testing._schema_check import MessageValidator, TypedValidator

from .conftest import CHECK_TIMEOUT, FAULTS, REAL_LIMIT, REPO, agent_command

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
        "cancel-promptly": Level.RECOMMENDED,
        "idle-cancel": Level.RECOMMENDED,
        "cancel-isolation": Level.RECOMMENDED,
        "unknown-method": Level.REQUIRED,
        "invalid-params": Level.RECOMMENDED,
        "unknown-notification": Level.REQUIRED,
        "stray-cancels": Level.REQUIRED,
        "cancel-request-prompt": Level.CANCELLATION,
        "nested-session-cancel": Level.CANCELLATION,
        "nested-cancel-request": Level.CANCELLATION,
        "deadline": Level.CANCELLATION,
        "parse-error": Level.RECOMMENDED,
        "batch-array": Level.RECOMMENDED,
        "scalar-message": Level.RECOMMENDED,
        "malformed-input": Level.REQUIRED,
        "auth-methods": Level.RECOMMENDED,
        "stdout-json-only": Level.REQUIRED,
        "schema": Level.REQUIRED,
        "one-reply-per-request": Level.REQUIRED,
    }


async def test_the_scenario_agent_passes_every_check_on_the_command_line() -> None:
    code, out, err = await run_cli(
        "check-agent", "--strict", "--json", "--", *SCENARIO_AGENT_COMMAND, cwd=REPO
    )
    report = json.loads(out)
    verdicts = {c["name"]: (c["verdict"], c["reason"]) for c in report["checks"]}
    assert list(verdicts) == ALL_CHECKS
    assert {name: v for name, (v, _) in verdicts.items()} == dict.fromkeys(ALL_CHECKS, "pass"), (
        verdicts,
        err,
    )
    assert code == 0
    assert report["ok"] is True
    assert report["status"] == "conforms"
    assert report["verdict"] == "CONFORMS"  # the headline
    assert report["promoted"] == ["cancellation", "recommended"]
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
    assert report.status is (Status.FAILS if required else Status.CONFORMS)
    assert report.exit_code == (1 if required else 0)
    # --strict counts every failure.
    strict = attrs.evolve(report, promoted=promoted_levels(True))
    assert strict.exit_code == (1 if FAULTS[name] else 0)


#: The bug classes --strict must catch, each for its own reason:
#: (planted agent, the check that fails, words of its reason).
STRICT_CLASSES = {
    "no nested cancel on the wire": (
        "no_nested_cancel",
        "nested-cancel-request",
        "never cancelled on the wire",
    ),
    "ignores $/cancel_request": (
        "ignore_cancel_request",
        "cancel-request-prompt",
        "after $/cancel_request of the prompt (the agent ignores $/cancel_request?)",
    ),
    "end_turn after session/cancel": (
        "end_turn_after_cancel",
        "session-cancel",
        "stopReason 'end_turn' after session/cancel",
    ),
    "replies to notifications": (
        "answer_notifications",
        "unknown-notification",
        "answered a notification",
    ),
    "answers a request twice": ("answer_twice", "one-reply-per-request", "got 2 answers"),
    "silent on invalid JSON": (
        "silent_on_parse_error",
        "parse-error",
        "no error reply to invalid JSON within 3 s (--timeout)",
    ),
    "deadline passes without cancelling": (
        "deadline_no_cancel",
        "deadline",
        "200 ms deadline passed and no answer came within 3 s (--timeout); the nested read "
        "was never cancelled on the wire: fs/read_text_file",
    ),
    "dies on a late cancel": (
        "die_on_late_cancel",
        "stray-cancels",
        "the agent stopped answering after stray $/cancel_request",
    ),
    "dies on a JSON array": (
        "die_on_batch",
        "malformed-input",
        "the agent stopped answering after a batch array",
    ),
}


@pytest.mark.parametrize("bug", list(STRICT_CLASSES))
def test_strict_fails_each_planted_bug_class_for_its_own_reason(
    bug: str, fault_reports: dict[str, CheckReport]
) -> None:
    agent, check, words = STRICT_CLASSES[bug]
    report = attrs.evolve(fault_reports[agent], promoted=promoted_levels(True))
    assert report.status is Status.FAILS
    assert report.exit_code == 1
    assert check in {r.name for r in report.required_failures()}
    assert words in report[check].reason, report[check].reason
    # The verdict does not depend on which levels count.
    assert report[check].failed
    assert fault_reports["clean"].ok
    assert attrs.evolve(fault_reports["clean"], promoted=promoted_levels(True)).ok


def test_require_promotes_one_group(fault_reports: dict[str, CheckReport]) -> None:
    report = fault_reports["deadline_no_cancel"]
    assert report.ok
    assert not attrs.evolve(report, promoted=promoted_levels(False, ["cancellation"])).ok
    assert attrs.evolve(report, promoted=promoted_levels(False, ["recommended"])).ok
    assert promoted_levels(False, ["required"]) == frozenset()
    with pytest.raises(ValueError, match="unknown check group 'bogus'"):
        promoted_levels(False, ["bogus"])


def test_a_reply_without_an_id_is_not_a_reply_with_id_null(
    fault_reports: dict[str, CheckReport],
) -> None:
    report = fault_reports["idless_replies"]
    for check in ("parse-error", "batch-array", "scalar-message"):
        assert "a reply without an id" in report[check].reason
        assert report[check].evidence  # the line that proves it
        assert '"error"' in report[check].evidence[-1]
    assert report.status is Status.FAILS  # and stdout-json-only (required) says why


def test_an_agent_that_dies_on_a_json_array_does_not_conform(
    fault_reports: dict[str, CheckReport],
) -> None:
    report = fault_reports["die_on_batch"]
    assert report["malformed-input"].level is Level.REQUIRED
    assert report.status is Status.FAILS
    assert "cannot handle a list" in report["malformed-input"].reason
    assert "cannot handle a list" in report["malformed-input"].stderr
    # The probe lost with the dead agent is not blamed twice.
    assert report["one-reply-per-request"].passed


def reason(reports: dict[str, CheckReport], agent: str, check: str) -> str:
    result = reports[agent][check]
    assert result.verdict is Verdict.FAIL
    return result.reason


def test_the_reasons_say_what_went_wrong(fault_reports: dict[str, CheckReport]) -> None:
    text = reason(fault_reports, "ignore_cancel_request", "cancel-request-prompt")
    assert "no answer within 3 s (--timeout) after $/cancel_request" in text
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
        ("hang", ["no answer to initialize within 1 s (--init-timeout)"]),
        ("exit_at_once", ["exited with code 3", "no API key configured"]),
        ("echo_input", ["echoes what it reads"]),
        # Deeper than json.loads can go: a verdict, not a RecursionError.
        ("nested_json", ["its stdout has non-JSON lines"]),
    ],
)
async def test_a_broken_agent_fails_within_seconds(name: str, words: list[str]) -> None:
    # Each wait is bounded by --timeout: the run ends (under run_cli's
    # watchdog) with the verdict of the wait that ran out.
    code, out, _ = await run_cli(
        "check-agent", "--timeout", "1", "--init-timeout", "1", "--", *agent_command(name)
    )
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
    assert out.rstrip().splitlines()[-2] == "CONFORMS"
    assert out.rstrip().splitlines()[-1].startswith("3 passed, 0 failed")

    code, _, err = await run_cli("check-agent", "--only", "nope", "--", "true")
    assert code == 2
    assert "unknown checks: nope" in err
    code, _, err = await run_cli("check-agent")
    assert code == 2
    assert "give the agent's command after --" in err
    code, _, err = await run_cli("check-agent", "--hold-deadline", "1", "--", "true")
    assert code == 2
    assert "--hold-deadline needs --hold-prompt" in err
    code, out, _ = await run_cli("check-agent", "--list")
    assert code == 0
    assert [line.split()[0] for line in out.splitlines() if line[:1] != " "] == ALL_CHECKS
    # Under each check, the sentence it rests on.
    rules = [line.strip() for line in out.splitlines() if line[:1] == " "]
    assert len(rules) == len(ALL_CHECKS)
    assert all(line.startswith("rests on: ") for line in rules)
    assert rules[ALL_CHECKS.index("session-cancel")].startswith(
        "rests on: MUST (prompt-turn#cancellation)"
    )


async def test_a_missing_schema_path_is_a_usage_error(tmp_path: Any) -> None:
    missing = tmp_path / "missing.json"
    with pytest.raises(ValueError, match=r"missing\.json does not exist"):
        await check_agent(SCENARIO_AGENT_COMMAND, only=["schema"], schema=missing)
    code, out, err = await run_cli(
        "check-agent", "--schema", str(missing), "--", *SCENARIO_AGENT_COMMAND
    )
    assert code == 2, out
    assert "missing.json does not exist (--schema PATH)" in err


async def test_without_a_schema_directory_the_generated_types_validate(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(schema_check, "DEFAULT_SCHEMA", "no/such/schema.json")
    with trio.fail_after(REAL_LIMIT):
        report = await check_agent(SCENARIO_AGENT_COMMAND, only=["schema"], timeout=3)
    assert report["schema"].passed, report.format_table()
    assert "acp_trio.schema types" in report["schema"].reason
    assert report.validator.startswith("acp_trio.schema types")
    assert "schema not found" in report.validator
    assert "schema: acp_trio.schema types" in report.summary()


@pytest.mark.parametrize(
    ("validator_kind", "where", "why"),
    [
        ("typed", "session/update params", "text"),
        ("jsonschema", "session/update params.update.content", "'text' is a required property"),
    ],
)
def test_the_validator_reads_the_messages_of_their_method(
    validator_kind: str, where: str, why: str
) -> None:
    validator: TypedValidator | MessageValidator | str
    validator = TypedValidator() if validator_kind == "typed" else MessageValidator.load()
    assert not isinstance(validator, str), validator
    chunk = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text"}}
    update = {"sessionId": "s", "update": chunk}
    problem = validator.check({"jsonrpc": "2.0", "method": "session/update", "params": update})
    assert problem is not None
    assert where in problem
    assert why in problem
    good = {"jsonrpc": "2.0", "id": 1, "result": {"stopReason": "end_turn"}}
    assert validator.check(good, "session/prompt") is None
    bad = {"jsonrpc": "2.0", "id": 1, "result": {"stopReason": "bored"}}
    assert "result of session/prompt" in (validator.check(bad, "session/prompt") or "")
    echoed = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}}
    assert "not a request an agent sends" in (validator.check(echoed) or "")
    assert validator.check({"jsonrpc": "2.0", "id": None, "error": {"code": 1}}) is not None
    assert validator.check({"jsonrpc": "2.0", "error": {"code": 1, "message": "x"}}) is not None
    assert validator.check({"jsonrpc": "2.0", "method": "_x/y", "params": [1]}) is None


def test_without_jsonschema_the_types_validate_and_the_extra_is_named(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "jsonschema.validators", None)
    reason = MessageValidator.load()
    assert reason == schema_check.NO_JSONSCHEMA
    assert "pip install 'acp-trio[check]'" in reason
    validator = schema_check.load_validator()
    assert isinstance(validator, TypedValidator)
    assert "pip install 'acp-trio[check]'" in validator.description
    with pytest.raises(ValueError, match=r"acp-trio\[check\]"):
        schema_check.load_validator(schema_check.DEFAULT_SCHEMA)


@pytest.mark.parametrize("version", [1, 2])
def test_by_default_jsonschema_validates_against_the_shipped_schema(version: int) -> None:
    validator = schema_check.load_validator(version=version)
    assert isinstance(validator, MessageValidator)
    folder = "v2" if version == 2 else "v1"
    assert validator.path is not None
    assert validator.path.parts[-5:] == ("acp_trio", "schema", "json", folder, "schema.json")
    assert validator.path.is_relative_to(Path(acp_trio.__file__).parent)
    found, tried = schema_check.find_schema(version=version)
    assert (found, tried) == (validator.path, [validator.path])


SESSION_FREE = {
    "initialize",
    "version-negotiation",
    "agent-info",
    "unknown-method",
    "unknown-notification",
    "stray-cancels",
    "parse-error",
    "batch-array",
    "scalar-message",
    "malformed-input",
    "auth-methods",
    "stdout-json-only",
    "schema",
    "one-reply-per-request",
}


async def test_an_agent_that_needs_authentication_is_incomplete_not_conforming() -> None:
    with trio.fail_after(REAL_LIMIT):
        report = await check_agent(agent_command("needs_auth"), timeout=CHECK_TIMEOUT)
    table = report.format_table()
    assert report.status is Status.INCOMPLETE, table
    assert report.exit_code == 3
    assert report.auth_required == "mini-login"
    # Every check that needs no session ran and passed (no false alarm of
    # unknown-notification: the agent does answer, it refuses sessions).
    assert {r.name for r in report if r.passed} == SESSION_FREE, table
    for result in report:
        if result.skipped:
            assert result.reason.startswith("authentication required: mini-login"), table
    assert "INCOMPLETE" in report.summary()
    assert "authentication required: mini-login" in report.summary().splitlines()[0]
    assert attrs.evolve(report, allow_skips=True).status is Status.CONFORMS


async def test_incomplete_exit_status_and_allow_skips_on_the_command_line() -> None:
    command = ["--", *agent_command("needs_auth")]
    code, out, _ = await run_cli("check-agent", "--timeout", "3", *command)
    assert code == 3, out
    assert "INCOMPLETE: " in out
    code, out, _ = await run_cli("check-agent", "--json", "--only", "prompt", *command)
    assert code == 3, out
    assert json.loads(out)["verdict"] == "INCOMPLETE"
    assert json.loads(out)["exit_code"] == 3
    code, out, _ = await run_cli(
        "check-agent", "--allow-skips", "--json", "--only", "prompt", *command
    )
    assert code == 0, out
    report = json.loads(out)
    assert report["status"] == "conforms"
    assert report["auth_required"] == "mini-login"
    assert [c["verdict"] for c in report["checks"]] == ["pass", "skip", "skip"]


async def test_strict_and_require_on_the_command_line() -> None:
    command = ["--", *agent_command("silent_on_parse_error")]
    code, out, _ = await run_cli("check-agent", "--only", "parse-error", *command)
    assert code == 0, out
    code, out, _ = await run_cli("check-agent", "--strict", "--only", "parse-error", *command)
    assert code == 1, out
    assert "recommended*" in out  # counted as required
    assert "DOES NOT CONFORM" in out
    code, out, _ = await run_cli(
        "check-agent", "--require", "recommended", "--json", "--only", "parse-error", *command
    )
    assert code == 1, out
    check = json.loads(out)["checks"][-1]
    assert check["name"] == "parse-error"
    assert check["required"] is True
    assert "no error reply to invalid JSON" in check["reason"]
    code, _, err = await run_cli("check-agent", "--require", "bogus", *command)
    assert code == 2
    assert "unknown check group 'bogus'" in err


OFFICIAL_AGENT = REPO / "benchmarks" / "peers" / "official_agent.py"


@pytest.mark.skipif(
    importlib.util.find_spec("acp") is None, reason="needs agent-client-protocol (the test extra)"
)
async def test_the_official_python_sdk_agent_does_not_conform() -> None:
    # It dies on a JSON array (and on a JSON scalar): a required failure.
    with trio.fail_after(REAL_LIMIT):
        report = await check_agent(
            [sys.executable, str(OFFICIAL_AGENT)],
            only=["batch-array", "malformed-input"],
            timeout=CHECK_TIMEOUT,
        )
    assert report.status is Status.FAILS, report.format_table()
    assert report["malformed-input"].failed
    assert "stopped answering after a batch array" in report["malformed-input"].reason


async def test_the_permission_policy_on_the_command_line() -> None:
    command = ["--", *agent_command("ask_permission")]
    for policy in ("reject", "cancel"):
        code, out, _ = await run_cli(
            "check-agent", "--permissions", policy, "--only", "prompt", *command
        )
        assert code == 0, out
    code, _, err = await run_cli("check-agent", "--permissions", "maybe", *command)
    assert code == 2
    assert "--permissions" in err


def test_failures_show_their_evidence(fault_reports: dict[str, CheckReport]) -> None:
    report = fault_reports["answer_notifications"]
    result = report["unknown-notification"]
    # The reply to a notification is the proof, as it came over the wire.
    assert any(line.startswith("< ") and '"id": null' in line for line in result.evidence)
    table = report.format_table()
    assert "unknown-notification:\n  < [" in table
    died = fault_reports["die_on_batch"].format_table()
    assert "agent stderr (tail):" in died
    assert "cannot handle a list" in died
    # --json: every check carries its wire lines, passes too.
    checks = {c["name"]: c for c in fault_reports["clean"].to_json()["checks"]}
    assert any('"method":"session/prompt"' in line for line in checks["prompt"]["evidence"])
    assert checks["prompt"]["required"] is True
    assert all(isinstance(c["evidence"], list) for c in checks.values())


def test_error_data_is_shown() -> None:
    error = RequestError(-32602, "Invalid params", {"cwd": "must be a string"})
    assert _brief(error) == "error -32602 (Invalid params) data {'cwd': 'must be a string'}"
    assert _brief(RequestError(-32601, "Method not found")) == "error -32601 (Method not found)"


def test_the_checks_run_in_the_documented_order_and_every_one_is_ordered() -> None:
    from acp_trio.testing._check import ORDER

    assert [info.name for info in CHECKS] == list(ORDER)
    assert len(set(ORDER)) == len(ORDER)


#: The checks of check-agent before issue 45 (session-cancel then also judged
#: how soon a cancelled turn stops: now cancel-promptly).
BEFORE_45 = [name for name in ALL_CHECKS if name not in ("idle-cancel", "cancel-isolation")]
#: Each plant of issue 45 and the one new check it fails.
NEW_45 = {
    "sticky_cancel": ("idle-cancel", "leaked into its next turn"),
    "cancel_all_sessions": ("cancel-isolation", "ended the turn of the other session"),
}


@pytest.mark.parametrize("agent", list(NEW_45))
def test_each_new_plant_passes_every_check_of_before_and_fails_its_new_one(
    agent: str, fault_reports: dict[str, CheckReport]
) -> None:
    report = fault_reports[agent]
    table = report.format_table()
    # The checker of before finds nothing wrong with it (not even --strict)...
    assert all(report[name].passed for name in BEFORE_45), table
    # ...the new check does, for the right reason, with the wire to show.
    check, words = NEW_45[agent]
    assert {r.name for r in report if r.failed} == {check}, table
    assert words in report[check].reason, report[check].reason
    assert report[check].evidence
    assert report[check].level is Level.RECOMMENDED
    # Both are SHOULD-level (no MUST covers them): the plain run conforms.
    assert report.ok
    assert not attrs.evolve(report, promoted=promoted_levels(True)).ok


def test_the_well_behaved_agents_pass_the_new_checks(fault_reports: dict[str, CheckReport]) -> None:
    clean = fault_reports["clean"]
    for check in ("idle-cancel", "cancel-isolation", "cancel-promptly"):
        assert clean[check].passed, clean[check].reason
    assert "the other's: stopReason 'end_turn'" in clean["cancel-isolation"].reason
    assert "had ended before the cancel" not in clean["cancel-isolation"].reason


async def test_an_agent_that_cannot_reach_its_model_is_incomplete_not_failing() -> None:
    # As opencode answers without network access: "Cannot connect to API".
    with trio.fail_after(REAL_LIMIT):
        report = await check_agent(agent_command("no_model"), timeout=CHECK_TIMEOUT)
    table = report.format_table()
    assert report.status is Status.INCOMPLETE, table
    assert not report.failures(), table
    for name in ("prompt", "idle-cancel", "cancel-isolation", "deadline"):
        assert report[name].skipped, table
        assert report[name].reason.startswith("no model reachable: "), table
        assert "Cannot connect to API" in report[name].reason
    # A cancelled turn needs no model: it is judged.
    assert report["session-cancel"].passed, table
