"""The command line's CI options, shared by check-agent, check-agent-v2 and
check-client: ``--suite``, ``--only``, ``--results DIR`` and
``--expected-failures FILE`` (see :mod:`acp_trio.testing._check._kit`)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from acp_trio.testing._check._kit import (
    Baseline,
    judge,
    load_baseline,
    suite_names,
    write_results,
)
from acp_trio.testing._check._report import CheckResult

#: The checks of check-agent that need no session (no credentials).
AGENT_NO_SESSION = (
    "initialize",
    "version-negotiation",
    "agent-info",
    "unknown-method",
    "invalid-params",
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
)
#: The same for check-agent-v2.
V2_NO_SESSION = (
    *AGENT_NO_SESSION,
    "unsupported-version",
    "before-initialize",
    "repeated-initialize",
)


def add_kit_options(parser: argparse.ArgumentParser, *, only: bool = True) -> None:
    parser.add_argument(
        "--suite",
        metavar="NAME",
        help="run the checks of one suite: required, recommended, cancellation, or (agents) "
        "no-session, the checks that need no session and hence no credentials",
    )
    if only:
        parser.add_argument(
            "--only",
            action="append",
            metavar="NAMES",
            help="comma-separated checks to run (repeatable); see --list",
        )
    parser.add_argument(
        "--results",
        metavar="DIR",
        help="write this run's verdicts and evidence to DIR: one JSON document and one "
        "JUnit XML file (one test case per check)",
    )
    parser.add_argument(
        "--expected-failures",
        metavar="FILE",
        help="a baseline (YAML or JSON mapping check ids to reasons): listed checks that fail "
        "do not fail the run, a new failure does, and a listed check that now passes fails "
        "the run as a stale baseline (exit 1)",
    )


def _names(values: Sequence[str] | None) -> list[str] | None:
    if values is None:
        return None
    return [name.strip() for value in values for name in value.split(",") if name.strip()]


def selected(
    parser: argparse.ArgumentParser,
    args: argparse.Namespace,
    checks: Sequence[Any],
    no_session: Iterable[str] | None,
) -> list[str] | None:
    """The checks ``--only`` and ``--suite`` name (both: those in both);
    ``None`` for every check. Usage errors for unknown names."""
    only = _names(getattr(args, "only", None))
    known = [info.name for info in checks]
    if only is not None:
        unknown = [name for name in only if name not in known]
        if unknown:
            parser.error(f"unknown checks: {', '.join(unknown)} (see --list)")
    if args.suite is None:
        return only
    if args.suite == "no-session" and no_session is None:
        parser.error("the no-session suite is for agents")
    try:
        suite = suite_names(args.suite, checks, no_session or ())
    except ValueError as exc:
        parser.error(str(exc))
    return suite if only is None else [name for name in suite if name in only]


def baseline(
    parser: argparse.ArgumentParser, args: argparse.Namespace, checks: Sequence[Any]
) -> Baseline | None:
    if args.expected_failures is None:
        return None
    try:
        return load_baseline(args.expected_failures, [info.name for info in checks])
    except ValueError as exc:
        parser.error(str(exc))


def finish(
    args: argparse.Namespace,
    tool: str,
    report: Any,
    counts: Callable[[CheckResult], bool],
    expected: Baseline | None,
    *,
    allow_skips: bool = False,
) -> int:
    """Print the report (table or JSON), judged against the baseline; write
    the results directory; return the exit status."""
    results: tuple[CheckResult, ...] = tuple(report.results)
    document: dict[str, Any] = report.to_json()
    code: int = report.exit_code
    extra: list[str] = []
    if expected is not None:
        outcome = judge(results, counts, expected, allow_skips=allow_skips)
        code = outcome.exit_code
        document["baseline"] = outcome.to_json(expected)
        document["exit_code"] = code
        extra = outcome.lines(expected)
    if args.json:
        print(json.dumps(document, indent=2))
    else:
        print(report.format_table())
        if extra:
            print("\n".join(["", *extra, f"exit status {code} under the baseline"]))
    if args.results:
        paths = write_results(args.results, tool, document, results, report.duration)
        print(f"results: {', '.join(map(str, paths))}", file=sys.stderr)
    return code
