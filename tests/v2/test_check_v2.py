"""``python -m acp_trio check-agent-v2``: levels, authentication-aware
SKIPs, INCOMPLETE, ``--json``, the credential-free checks on any agent; the
v2 scenario agent conforms, a broken one fails the check it breaks."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import trio

from acp_trio.testing._check._report import Level, Status
from acp_trio.testing._check._v2 import V2_CHECKS, check_agent_v2

from .conftest import PIPE_LIMIT

HERE = Path(__file__).resolve().parent
BROKEN = [sys.executable, str(HERE / "broken_v2_agent.py")]
AUTH = [sys.executable, str(HERE / "auth_v2_agent.py")]
SCENARIO = [sys.executable, "-m", "acp_trio", "scenario-agent", "--v2"]
LIMIT = PIPE_LIMIT * 6

#: The checks that need neither a session nor credentials.
CREDENTIAL_FREE = {
    "initialize",
    "version-negotiation",
    "unsupported-version",
    "before-initialize",
    "repeated-initialize",
    "unknown-method",
    "unknown-notification",
    "stray-cancels",
    "parse-error",
    "batch-array",
    "scalar-message",
    "malformed-input",
    "stdout-json-only",
    "schema",
    "one-reply-per-request",
}


async def cli(*args: str) -> tuple[int, str]:
    with trio.fail_after(LIMIT):
        result = await trio.run_process(
            [sys.executable, "-m", "acp_trio", "check-agent-v2", *args],
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    return result.returncode, result.stdout.decode()


async def test_the_v2_scenario_agent_conforms_through_the_cli() -> None:
    code, out = await cli("--strict", "--json", "--timeout", "3", "--", *SCENARIO)
    report = json.loads(out)
    assert code == 0, out
    assert report["verdict"] == "CONFORMS"
    assert [c["verdict"] for c in report["checks"]] == ["pass"] * len(V2_CHECKS)
    assert report["protocol_version"] == 2


async def test_a_broken_v2_agent_fails_the_check_it_breaks() -> None:
    with trio.fail_after(LIMIT):
        report = await check_agent_v2(BROKEN, timeout=3.0)
    failed = {r.name for r in report if r.failed}
    # Served by run_agent alone (no version router): it opens a session
    # before initialize (recommended to refuse with -32600).
    assert failed == {"error-turn", "before-initialize"}, report.format_table()
    assert "not error" in report["error-turn"].reason
    assert report["error-turn"].level is Level.RECOMMENDED
    assert report.status is Status.CONFORMS
    code, out = await cli("--strict", "--only", "error-turn", "--timeout", "3", "--", *BROKEN)
    assert code == 1, out
    assert "DOES NOT CONFORM" in out


async def test_authentication_at_the_turn_is_incomplete_with_a_finding() -> None:
    # The old check-agent-v2: lifecycle, held-prompts, tool-call-cancel and
    # error-turn FAILed ("stopReason 'error', not end_turn"), DOES NOT CONFORM.
    with trio.fail_after(LIMIT):
        report = await check_agent_v2(AUTH, timeout=3.0)
    table = report.format_table()
    assert report.status is Status.INCOMPLETE, table
    assert report.exit_code == 3
    assert {r.name for r in report if r.passed} >= CREDENTIAL_FREE, table
    assert report["lifecycle"].skipped
    assert report["lifecycle"].reason.startswith("authentication required")
    for name in ("held-prompts", "tool-call-cancel", "error-turn"):
        assert report[name].reason.startswith("authentication required"), table
    assert [r.name for r in report if r.failed] == ["auth-methods"], table
    assert any('"stopReason": "error"' in line for line in report["auth-methods"].evidence)


async def test_list_only_and_usage_errors() -> None:
    code, out = await cli("--list")
    assert code == 0
    names = [line.split()[0] for line in out.splitlines() if line[:1] != " "]
    assert names == [i.name for i in V2_CHECKS]
    assert sum(line.strip().startswith("rests on: ") for line in out.splitlines()) == len(names)
    code, out = await cli("--only", "no-such-check", "--", *SCENARIO)
    assert code == 2
    code, out = await cli("--json", "--only", "unsupported-version", "--timeout", "3", "--", *AUTH)
    report = json.loads(out)
    assert code == 0, out
    assert [c["name"] for c in report["checks"]] == [
        "initialize",
        "unsupported-version",
        "session-new",
    ]


async def test_held_prompts_on_a_hold_prompt_for_agents_without_the_vocabulary() -> None:
    # `permission` makes the agent ask the client: the turn runs while held.
    with trio.fail_after(LIMIT):
        report = await check_agent_v2(
            SCENARIO, only=["held-prompts"], timeout=3.0, hold_prompt="permission"
        )
    result = report["held-prompts"]
    assert result.passed, report.format_table()
    assert "both held prompts -32800" in result.reason
    # Without one, an agent without the vocabulary is told which option helps.
    with trio.fail_after(LIMIT):
        report = await check_agent_v2(AUTH, only=["held-prompts"], timeout=3.0)
    assert report["held-prompts"].skipped
