"""The CI kit of the checkers: ``--list``, ``--only``, ``--suite``,
``--results DIR`` (JSON and JUnit XML), ``--expected-failures FILE`` (its
three outcomes), and the CI recipe of ``docs/testing.md``, its command run as
printed."""

from __future__ import annotations

import json
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import trio

from acp_trio.testing import CHECKS
from acp_trio.testing._check._kit import Baseline, judge, load_baseline, suite_names
from acp_trio.testing._check._report import CheckResult, Level, Verdict

from .conftest import AGENTS, REAL_LIMIT, REPO, agent_command

STREAMS_ON = agent_command("stream_after_cancel")  # fails cancel-promptly only
CLEAN = agent_command("clean")


async def cli(*args: str, cwd: Path | None = None) -> tuple[int, str, str]:
    with trio.fail_after(REAL_LIMIT):
        done = await trio.run_process(
            [sys.executable, "-m", "acp_trio", *args],
            capture_stdout=True,
            capture_stderr=True,
            check=False,
            cwd=cwd,
        )
    return done.returncode, done.stdout.decode(), done.stderr.decode()


def baseline(tmp_path: Path, text: str, name: str = "baseline.yaml") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


# A recommended check, counted (--strict).
ONLY = ("--only", "cancel-promptly", "--strict", "--timeout", "3")


async def test_a_listed_failure_does_not_fail_the_run(tmp_path: Path) -> None:
    listed = baseline(tmp_path, "cancel-promptly: streams on after the cancel, issue 12\n")
    code, out, _ = await cli("check-agent", *ONLY, "--expected-failures", listed, "--", *STREAMS_ON)
    assert code == 0, out
    assert "expected failure: cancel-promptly (streams on after the cancel, issue 12)" in out


async def test_a_new_failure_fails_the_run(tmp_path: Path) -> None:
    other = baseline(tmp_path, '{"deadline": "not ours"}', "baseline.json")
    code, out, _ = await cli(
        "check-agent", *ONLY, "--json", "--expected-failures", other, "--", *STREAMS_ON
    )
    assert code == 1, out
    document = json.loads(out)
    assert document["baseline"]["new"] == ["cancel-promptly"]
    assert document["exit_code"] == 1


async def test_a_listed_check_that_now_passes_is_a_stale_baseline(tmp_path: Path) -> None:
    listed = baseline(tmp_path, "cancel-promptly: streams on after the cancel\n")
    code, out, _ = await cli("check-agent", *ONLY, "--expected-failures", listed, "--", *CLEAN)
    assert code == 1, out
    assert "STALE: cancel-promptly now passes; remove it from the baseline" in out


async def test_a_baseline_naming_an_unknown_check_is_a_usage_error(tmp_path: Path) -> None:
    wrong = baseline(tmp_path, "no-such-check: why\n")
    code, _, err = await cli("check-agent", "--expected-failures", wrong, "--", *CLEAN)
    assert code == 2
    assert "unknown checks: ['no-such-check']" in err


def test_judge_counts_only_what_counts() -> None:
    results = [
        CheckResult("a", Level.REQUIRED, Verdict.FAIL, "x"),
        CheckResult("b", Level.RECOMMENDED, Verdict.FAIL, "y"),
        CheckResult("c", Level.REQUIRED, Verdict.SKIP, "z"),
    ]

    def required(result: CheckResult) -> bool:
        return result.level is Level.REQUIRED

    # Listed: allowed; a recommended failure not counted is no new failure;
    # the required skip still makes the run INCOMPLETE.
    outcome = judge(results, required, Baseline("f", {"a": "known"}))
    assert (outcome.exit_code, outcome.expected, outcome.new) == (3, ("a",), ())
    assert judge(results, required, Baseline("f", {"a": "k"}), allow_skips=True).exit_code == 0
    assert judge(results, required, Baseline("f", {})).new == ("a",)


def test_the_yaml_subset_is_read_without_pyyaml(tmp_path: Path) -> None:
    path = tmp_path / "b.yaml"
    path.write_text("# comment\nexpected-failures:\n  session-cancel: 'issue 12'\n  deadline: x\n")
    found = load_baseline(path, [info.name for info in CHECKS])
    assert found.reasons == {"session-cancel": "issue 12", "deadline": "x"}


def test_suites_are_levels_or_no_session() -> None:
    assert suite_names("cancellation", CHECKS) == [
        "cancel-request-prompt",
        "nested-session-cancel",
        "nested-cancel-request",
        "deadline",
    ]
    assert suite_names("no-session", CHECKS, ["schema", "initialize"]) == ["initialize", "schema"]
    with pytest.raises(ValueError, match="unknown suite"):
        suite_names("fast", CHECKS)


async def test_suite_list_and_results_on_the_command_line(tmp_path: Path) -> None:
    code, out, _ = await cli("check-agent", "--list")
    assert code == 0
    assert len(out.splitlines()) == 2 * len(CHECKS)  # each check, then its sentence
    results = tmp_path / "results"
    code, out, err = await cli(
        "check-agent", "--suite", "cancellation", "--results", str(results), "--", *CLEAN
    )
    assert code == 0, out
    (json_file,) = results.glob("check-agent-*.json")
    (xml_file,) = results.glob("check-agent-*.xml")
    assert str(json_file) in err
    document = json.loads(json_file.read_text())
    names = [c["name"] for c in document["checks"]]
    assert names == ["initialize", "session-new", *suite_names("cancellation", CHECKS)]
    assert all("evidence" in c for c in document["checks"])
    cases = [case.get("name") for case in ET.parse(xml_file).iter("testcase")]
    assert cases == names
    code, _, err = await cli("check-agent-v2", "--suite", "nope", "--", *CLEAN)
    assert code == 2
    assert "unknown suite" in err
    code, out, _ = await cli("check-client", "--list")
    assert code == 0


async def test_check_client_suite_and_results(tmp_path: Path) -> None:
    client = [sys.executable, str(AGENTS.parent / "clients" / "raw_client.py"), "clean"]
    code, out, _ = await cli(
        "check-client",
        "--suite",
        "recommended",
        "--json",
        "--results",
        str(tmp_path / "r"),
        "--timeout",
        "3",
        "--cwd",
        str(tmp_path),
        "--",
        *client,
        "--",
        "{agent-args}",
    )
    assert code == 0, out
    document = json.loads(out)
    assert {c["level"] for c in document["checks"]} == {"recommended"}
    assert list((tmp_path / "r").glob("check-client-*.xml"))


def _recipe() -> tuple[str, str]:
    """The CI job of docs/checking-in-ci.md: the command of its step "Check
    the agent", and the baseline file shown after it. (tests/test_install.py
    runs every step of it, with acp_trio installed as the page says.)"""
    page = (REPO / "docs" / "checking-in-ci.md").read_text()
    job = page.split("<!-- ci-recipe -->", 1)[1]
    command = re.search(r"- name: Check the agent\n\s+run: (.+)\n", job)
    assert command is not None
    baseline = re.search(r"<!-- ci-baseline -->\n```yaml\n(.*?)```", page, flags=re.DOTALL)
    assert baseline is not None
    return command.group(1), baseline.group(1)


async def test_the_ci_recipe_runs_as_printed(tmp_path: Path) -> None:
    command, baseline_text = _recipe()
    assert command.startswith("python -m acp_trio check-agent ")
    # The job's checkout: an agent with one known failure, and its baseline.
    (tmp_path / "agent.py").write_text(
        "import runpy, sys\n"
        f"sys.path.insert(0, {str(AGENTS)!r})\n"
        f"runpy.run_path({str(AGENTS / 'stream_after_cancel.py')!r}, run_name='__main__')\n"
    )
    (tmp_path / "acp-baseline.yaml").write_text(baseline_text)
    words = [sys.executable if word == "python" else word for word in command.split()]
    with trio.fail_after(REAL_LIMIT):
        done = await trio.run_process(
            words, cwd=tmp_path, capture_stdout=True, capture_stderr=True, check=False
        )
    out = done.stdout.decode()
    assert done.returncode == 0, out + done.stderr.decode()
    assert "expected failure: cancel-promptly" in out
    assert list((tmp_path / "acp-results").glob("check-agent-*.json"))
    assert list((tmp_path / "acp-results").glob("check-agent-*.xml"))
