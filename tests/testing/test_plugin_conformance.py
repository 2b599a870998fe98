"""``pytest --acp-agent CMD``: one test item per agent check, in an inner
pytest run (a subprocess), with JUnit XML."""

from __future__ import annotations

import shlex
import sys
import xml.etree.ElementTree as ET

import pytest

from acp_trio.testing import CHECKS, SCENARIO_AGENT_COMMAND

from .conftest import agent_command

pytest_plugins = ["pytester"]
pytestmark = pytest.mark.timeout(180)


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    pytester.makeconftest("")
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", *args)


def test_a_clean_agent_passes_one_item_per_check(pytester: pytest.Pytester) -> None:
    xml = pytester.path / "checks.xml"
    result = run(
        pytester,
        "--acp-agent",
        shlex.join(SCENARIO_AGENT_COMMAND),
        "--acp-strict",
        f"--junitxml={xml}",
    )
    result.assert_outcomes(passed=len(CHECKS))
    # The items are counted as collected (not "collected 0 items").
    result.stdout.fnmatch_lines([f"collected {len(CHECKS)} items"])
    result.stdout.no_fnmatch_line("collected 0 items")
    cases = [case.get("name") for case in ET.parse(xml).iter("testcase")]
    assert cases == [f"acp-check[{info.name}]" for info in CHECKS]


def test_a_trio_mode_project_runs_the_checks_beside_its_own_async_tests(
    pytester: pytest.Pytester,
) -> None:
    # trio_mode = true (what the agents guide tells users to set): pytest-trio
    # looks at every item's function (was INTERNALERROR: AcpCheckItem has no obj).
    pytester.makeini("[pytest]\ntrio_mode = true\n")
    pytester.makepyfile(
        test_own="import trio\n\nasync def test_async():\n    await trio.sleep(0)\n"
    )
    xml = pytester.path / "checks.xml"
    agent = shlex.join(SCENARIO_AGENT_COMMAND)
    result = run(pytester, "--acp-agent", agent, "--acp-strict", f"--junitxml={xml}")
    result.assert_outcomes(passed=len(CHECKS) + 1)
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    cases = [case.get("name") for case in ET.parse(xml).iter("testcase")]
    assert cases == ["test_async", *(f"acp-check[{info.name}]" for info in CHECKS)]


def test_a_planted_bug_fails_its_check_under_strict_and_warns_without(
    pytester: pytest.Pytester,
) -> None:
    agent = shlex.join(agent_command("no_nested_cancel"))
    strict = run(pytester, "--acp-agent", agent, "--acp-strict", "-rf")
    strict.assert_outcomes(passed=len(CHECKS) - 3, failed=3)
    strict.stdout.fnmatch_lines(["nested-session-cancel: *never cancelled on the wire*"])
    lenient = run(pytester, "--acp-agent", agent)
    lenient.assert_outcomes(passed=len(CHECKS), warnings=3)


def test_a_required_check_that_cannot_run_fails_unless_skips_are_allowed(
    pytester: pytest.Pytester,
) -> None:
    agent = shlex.join(agent_command("needs_auth"))
    result = run(pytester, "--acp-agent", agent)
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) > 0
    result.stdout.fnmatch_lines(["*required, but could not run: authentication required*"])
    allowed = run(pytester, "--acp-agent", agent, "--acp-allow-skips")
    assert allowed.parseoutcomes().get("failed", 0) == 0
    skipped = allowed.parseoutcomes().get("skipped", 0)
    assert skipped == outcomes["failed"] + outcomes.get("skipped", 0)


def test_without_the_option_nothing_is_added(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_one():\n    pass\n")
    run(pytester).assert_outcomes(passed=1)
    assert sys.executable


def test_skip_reasons_name_the_plugins_options(pytester: pytest.Pytester) -> None:
    # The agent does not speak the scenario vocabulary: the cancellation
    # checks skip, naming the option that helps, as this plugin spells it.
    agent = shlex.join(agent_command("ask_permission"))
    result = run(pytester, "--acp-agent", agent, "--acp-allow-skips", "-rs")
    result.stdout.fnmatch_lines(["*--acp-hold-prompt TEXT*"])
    assert " --hold-prompt" not in result.stdout.str()
    assert "--scenario" not in result.stdout.str()


def test_plugin_words_renames_check_agents_options() -> None:
    from acp_trio.testing._pytest_conformance import plugin_words

    assert plugin_words("use --hold-prompt TEXT, or --prompt-timeout S; --timeout") == (
        "use --acp-hold-prompt TEXT, or --acp-prompt-timeout S; --acp-timeout"
    )
