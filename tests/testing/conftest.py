"""Shared helpers for the tests of ``acp_trio.testing`` (the shipped kit).

Rules: every test runs under ``trio.fail_after``. In-memory tests use the
autojump clock (their limits are virtual seconds); tests of real processes
(``check-agent``, ``trace``, spawned agents) run on the real clock.

The planted-fault agents live in ``agents/``. ``check_agent`` is run against
them once per test session, a few at a time (:func:`fault_reports`), and
each test asserts on its report.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import trio
import trio.testing

from acp_trio.testing import CheckReport, check_agent

# The kit's fixtures. Once the pytest11 entry point is installed they come
# from the plugin as well; these (the same functions) take precedence.
from acp_trio.testing.pytest_plugin import (  # noqa: F401
    acp_agent,
    acp_client,
    acp_pair,
    acp_scenario_agent_command,
    acp_scripted_agent,
    acp_scripted_client,
)

AGENTS = Path(__file__).resolve().parent / "agents"
REPO = Path(__file__).resolve().parents[2]

#: Real seconds a test with processes may take.
REAL_LIMIT = 60
#: Virtual seconds an in-memory test may take.
LIMIT = 600
#: Per-wait timeout of the check runs against the planted faults.
CHECK_TIMEOUT = 3.0

#: Agent script -> the checks its planted fault must fail.
FAULTS: dict[str, set[str]] = {
    "clean": set(),
    "ignore_cancel_request": {"cancel-request-prompt", "nested-cancel-request"},
    "end_turn_after_cancel": {"session-cancel", "nested-session-cancel"},
    "answer_notifications": {"unknown-notification"},
    "no_nested_cancel": {"nested-session-cancel", "nested-cancel-request", "deadline"},
    "die_on_batch": {"batch-array", "malformed-input"},
    "print_stdout": {"stdout-json-only"},
    "answer_twice": {"one-reply-per-request"},
    "silent_on_parse_error": {"parse-error"},
    "deadline_no_cancel": {"deadline"},
    "die_on_late_cancel": {"stray-cancels"},
    # Issue 36: right answers the checker used to judge wrong, and faults it passed.
    "v2_on_65535": set(),
    "title_after_cancel": set(),
    # A cancelled turn that streams on for 1.5 s, then answers cancelled: the
    # SHOULD of stopping promptly, not the MUST of the stop reason.
    "stream_after_cancel": {"cancel-promptly"},
    "exit_after_scalar": {"malformed-input"},
    "idless_replies": {
        "parse-error",
        "batch-array",
        "scalar-message",
        "stdout-json-only",
        "schema",
    },
    # Issue 45: cancels that leak, each passing every check of before.
    "sticky_cancel": {"idle-cancel"},
    "cancel_all_sessions": {"cancel-isolation"},
}


def agent_command(name: str) -> list[str]:
    return [sys.executable, str(AGENTS / f"{name}.py")]


@pytest.fixture
def autojump_clock() -> trio.testing.MockClock:
    return trio.testing.MockClock(autojump_threshold=0)


@pytest.fixture(scope="session")
def fault_reports() -> dict[str, CheckReport]:
    """``check_agent`` against every agent of :data:`FAULTS`, three at a time."""

    async def run_all() -> dict[str, CheckReport]:
        reports: dict[str, CheckReport] = {}
        limiter = trio.CapacityLimiter(3)

        async def one(name: str) -> None:
            async with limiter:
                reports[name] = await check_agent(agent_command(name), timeout=CHECK_TIMEOUT)

        with trio.fail_after(REAL_LIMIT * 4):  # a watchdog: some 18 runs of ~10 s, 3 at a time
            async with trio.open_nursery() as nursery:
                for name in FAULTS:
                    nursery.start_soon(one, name)
        return reports

    return trio.run(run_all)
