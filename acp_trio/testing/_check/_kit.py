"""What the three checkers share for CI: suites of checks, a results
directory (one JSON document and one JUnit XML file per run), and a baseline
of expected failures.

A baseline file (``--expected-failures FILE``) lists check ids with a
reason, in JSON (``{"session-cancel": "upstream bug #12"}``) or YAML (the
same mapping, one ``check-id: reason`` per line; PyYAML is used if
installed, else that subset is read). Under a baseline:

- a listed check that fails does not fail the run;
- a check that fails and is not listed fails it (exit 1), as it would
  without a baseline;
- a listed check that now passes fails the run as a *stale* baseline
  (exit 1, saying which): remove it from the file;
- a listed check that could not run changes nothing.
"""

from __future__ import annotations

import json
import os
import re
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import attrs

from acp_trio.testing._check._report import CheckResult, Level

__all__ = ["Baseline", "BaselineOutcome", "load_baseline", "suite_names", "write_results"]


def suite_names(suite: str, checks: Iterable[Any], no_session: Iterable[str] = ()) -> list[str]:
    """The checks of ``suite``: a level (``required``, ``recommended``,
    ``cancellation``) or ``no-session`` (the checks that need no session,
    hence no credentials). ``ValueError`` for another name."""
    infos = list(checks)
    if suite == "no-session":
        wanted = set(no_session)
        return [info.name for info in infos if info.name in wanted]
    try:
        level = Level(suite)
    except ValueError:
        names = ", ".join([*(lvl.value for lvl in Level), "no-session"])
        raise ValueError(f"unknown suite {suite!r} (suites: {names})") from None
    return [info.name for info in infos if info.level is level]


@attrs.frozen
class Baseline:
    """Check ids expected to fail, each with its reason, and the file."""

    path: str
    reasons: dict[str, str]


def _parse_yaml_subset(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split(" #")[0].rstrip() if not raw.lstrip().startswith("#") else ""
        if not line.strip() or line.strip() in ("---", "expected-failures:"):
            continue
        found = re.fullmatch(r"\s*([A-Za-z0-9_.-]+)\s*:\s*(.*)", line)
        if found is None:
            raise ValueError(f"line {number}: expected `check-id: reason`, got {raw!r}")
        reason = found.group(2).strip()
        if len(reason) >= 2 and reason[0] == reason[-1] and reason[0] in "'\"":
            reason = reason[1:-1]
        out[found.group(1)] = reason
    return out


def load_baseline(path: str | os.PathLike[str], known: Iterable[str]) -> Baseline:
    """Read a baseline file; ``ValueError`` if it cannot be read, is not a
    mapping of check ids to reasons, or names an unknown check."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ValueError(f"cannot read the baseline {os.fspath(path)}: {exc}") from None
    data: Any
    if Path(path).suffix == ".json" or text.lstrip().startswith("{"):
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise ValueError(f"the baseline {os.fspath(path)} is not JSON: {exc}") from None
    else:
        try:
            import yaml  # type: ignore[import-untyped]

            data = yaml.safe_load(text) or {}
        except ImportError:
            data = _parse_yaml_subset(text)
        except Exception as exc:
            raise ValueError(f"the baseline {os.fspath(path)} is not YAML: {exc}") from None
    if isinstance(data, dict) and isinstance(data.get("expected-failures"), dict):
        data = data["expected-failures"]
    if not isinstance(data, dict):
        raise ValueError(f"the baseline {os.fspath(path)} must map check ids to reasons")
    unknown = sorted(set(map(str, data)) - set(known))
    if unknown:
        raise ValueError(f"the baseline {os.fspath(path)} names unknown checks: {unknown}")
    return Baseline(os.fspath(path), {str(k): str(v or "") for k, v in data.items()})


@attrs.frozen
class BaselineOutcome:
    """A run judged against a baseline."""

    exit_code: int
    #: Listed and failing: allowed.
    expected: tuple[str, ...]
    #: Failing, counted, and not listed: the run fails.
    new: tuple[str, ...]
    #: Listed, and now passing: the run fails until the file is updated.
    stale: tuple[str, ...]

    def lines(self, baseline: Baseline) -> list[str]:
        out = [f"baseline {baseline.path}:"]
        for name in self.expected:
            out.append(f"  expected failure: {name} ({baseline.reasons[name] or 'no reason'})")
        for name in self.new:
            out.append(f"  NEW FAILURE: {name} (not in the baseline)")
        for name in self.stale:
            out.append(f"  STALE: {name} now passes; remove it from the baseline")
        return out

    def to_json(self, baseline: Baseline) -> dict[str, Any]:
        return {
            "path": baseline.path,
            "expected": list(self.expected),
            "new": list(self.new),
            "stale": list(self.stale),
            "exit_code": self.exit_code,
        }


def judge(
    results: Sequence[CheckResult],
    counts: Callable[[CheckResult], bool],
    baseline: Baseline,
    *,
    allow_skips: bool = False,
) -> BaselineOutcome:
    """The exit status of a run under ``baseline`` (``counts``: whether a
    result counts as required in this run)."""
    listed = baseline.reasons
    expected = tuple(r.name for r in results if r.failed and r.name in listed)
    new = tuple(r.name for r in results if r.failed and r.name not in listed and counts(r))
    stale = tuple(r.name for r in results if r.passed and r.name in listed)
    skipped = any(r.skipped and counts(r) for r in results)
    code = 1 if new or stale else 3 if skipped and not allow_skips else 0
    return BaselineOutcome(code, expected, new, stale)


def write_results(
    directory: str | os.PathLike[str],
    tool: str,
    document: dict[str, Any],
    results: Sequence[CheckResult],
    duration: float,
) -> list[Path]:
    """Write ``<tool>-<time>.json`` (``document``) and ``<tool>-<time>.xml``
    (JUnit: one test case per check) into ``directory``; their paths."""
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    stem = f"{tool}-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}"
    json_path = folder / f"{stem}.json"
    json_path.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    suite = ET.Element(
        "testsuite",
        name=tool,
        tests=str(len(results)),
        failures=str(sum(r.failed for r in results)),
        skipped=str(sum(r.skipped for r in results)),
        errors="0",
        time=f"{duration:.3f}",
    )
    for r in results:
        case = ET.SubElement(
            suite,
            "testcase",
            classname=f"{tool}.{r.level.value}",
            name=r.name,
            time=f"{(r.latency or 0.0):.3f}",
        )
        if r.failed:
            failure = ET.SubElement(case, "failure", message=r.reason)
            failure.text = "\n".join([r.reason, *r.evidence, *r.stderr.splitlines()])
        elif r.skipped:
            ET.SubElement(case, "skipped", message=r.reason)
    xml_path = folder / f"{stem}.xml"
    root = ET.Element("testsuites")
    root.append(suite)
    ET.ElementTree(root).write(xml_path, encoding="utf-8", xml_declaration=True)
    return [json_path, xml_path]
