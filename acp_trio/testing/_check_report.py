"""The verdicts of ``check_agent``: one :class:`CheckResult` per check, in a
:class:`CheckReport` that prints as a table or as one JSON document."""

from __future__ import annotations

import enum
from collections.abc import Iterator
from typing import Any

import attrs

__all__ = ["CheckReport", "CheckResult", "Level", "Verdict"]


class Level(enum.Enum):
    """How much a check matters."""

    #: A rule of ACP or JSON-RPC 2.0: a failure makes the agent non-conforming.
    REQUIRED = "required"
    #: What the protocol recommends, or robustness every client relies on.
    RECOMMENDED = "recommended"
    #: Behaviour of the scenario vocabulary (cancellation in depth); runs only
    #: against agents that speak it.
    SCENARIO = "scenario"


class Verdict(enum.Enum):
    PASS = "pass"
    FAIL = "fail"
    #: The check could not run; the reason says why. Never a silent pass.
    SKIP = "skip"


@attrs.frozen
class CheckResult:
    name: str
    level: Level
    verdict: Verdict
    reason: str
    #: Seconds of the interesting wait (a reply, a cancellation), if any.
    latency: float | None = None
    description: str = ""

    @property
    def passed(self) -> bool:
        return self.verdict is Verdict.PASS

    @property
    def failed(self) -> bool:
        return self.verdict is Verdict.FAIL

    @property
    def skipped(self) -> bool:
        return self.verdict is Verdict.SKIP

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "level": self.level.value,
            "verdict": self.verdict.value,
            "reason": self.reason,
            "latency_ms": None if self.latency is None else round(self.latency * 1000, 3),
            "description": self.description,
        }


def _latency(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:.1f} ms"


@attrs.frozen
class CheckReport:
    """All verdicts of one run. :attr:`ok` (and :attr:`exit_code`) depend on
    the required checks only."""

    command: tuple[str, ...]
    results: tuple[CheckResult, ...]
    #: Whether the scenario checks ran, and why (detected, forced, or not).
    scenario: bool
    scenario_reason: str
    agent_info: Any = None
    protocol_version: Any = None
    duration: float = 0.0

    def __iter__(self) -> Iterator[CheckResult]:
        return iter(self.results)

    def __getitem__(self, name: str) -> CheckResult:
        for result in self.results:
            if result.name == name:
                return result
        raise KeyError(name)

    def __contains__(self, name: object) -> bool:
        return any(result.name == name for result in self.results)

    @property
    def ok(self) -> bool:
        """No required check failed."""
        return not any(r.failed and r.level is Level.REQUIRED for r in self.results)

    @property
    def exit_code(self) -> int:
        return 0 if self.ok else 1

    def failures(self, level: Level | None = None) -> list[CheckResult]:
        return [r for r in self.results if r.failed and level in (None, r.level)]

    def summary(self) -> str:
        counts = {v: sum(r.verdict is v for r in self.results) for v in Verdict}
        required = len(self.failures(Level.REQUIRED))
        agent = "unknown agent"
        if isinstance(self.agent_info, dict):
            agent = f"{self.agent_info.get('name', '?')} {self.agent_info.get('version', '?')}"
        verdict = "CONFORMS" if self.ok else "DOES NOT CONFORM"
        return (
            f"{verdict}: {counts[Verdict.PASS]} passed, {counts[Verdict.FAIL]} failed "
            f"({required} required), {counts[Verdict.SKIP]} skipped in {self.duration:.1f} s; "
            f"agent: {agent}, protocol version {self.protocol_version}; "
            f"scenario checks: {self.scenario_reason}"
        )

    def format_table(self) -> str:
        """A plain-text table, one row per check, then a summary line."""
        header = ("check", "level", "verdict", "latency", "reason")
        rows = [
            (
                r.name,
                r.level.value,
                r.verdict.value.upper(),
                _latency(r.latency),
                " ".join(r.reason.split()),
            )
            for r in self.results
        ]
        widths = [max(len(row[i]) for row in [header, *rows]) for i in range(4)]
        lines = []
        for row in [header, *rows]:
            cells = [row[i].ljust(widths[i]) for i in range(4)]
            lines.append("  ".join([*cells, row[4]]).rstrip())
        lines.insert(1, "  ".join("-" * w for w in [*widths, 6]))
        lines.append("")
        lines.append(self.summary())
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return {
            "command": list(self.command),
            "ok": self.ok,
            "agent_info": self.agent_info,
            "protocol_version": self.protocol_version,
            "scenario": self.scenario,
            "scenario_reason": self.scenario_reason,
            "duration_s": round(self.duration, 3),
            "checks": [r.to_json() for r in self.results],
        }
