"""The verdicts of the checkers: one :class:`CheckResult` per check, in a
report that prints as a table or as one JSON document: a :class:`CheckReport`
for ``check_agent`` and ``check_agent_v2``, a :class:`ClientCheckReport` for
``check_client`` (read back from the agent side's file). Both share what
:class:`_Results` does with the results."""

from __future__ import annotations

import enum
import shlex
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Final

import attrs

__all__ = [
    "EXIT_STATUS",
    "CheckReport",
    "CheckResult",
    "ClientCheckReport",
    "Level",
    "Rule",
    "Status",
    "Verdict",
]


class Level(enum.Enum):
    """How much a check matters: the normative word of the sentence it rests
    on (its :class:`Rule`) decides. Only required checks decide conformance,
    unless a run promotes the other levels (``strict``, ``require``)."""

    #: A MUST (or MUST NOT) of ACP or JSON-RPC 2.0: a failure makes the peer
    #: non-conforming.
    REQUIRED = "required"
    #: A SHOULD or MAY of the protocol, or a convention it names without a
    #: normative word.
    RECOMMENDED = "recommended"
    #: Recommended too: the MAYs and SHOULDs of cancellation (a receiver of
    #: ``$/cancel_request`` MAY cancel the work and its nested requests,
    #: internal cancellation SHOULD answer ``-32800``), grouped so that
    #: ``require=["cancellation"]`` counts them; most need the scenario
    #: vocabulary or a hold prompt.
    CANCELLATION = "cancellation"


#: The normative words a :class:`Rule` may rest on; ``none`` is a
#: convention the text names without one (an error code JSON-RPC defines).
WORDS: Final = ("MUST", "MUST NOT", "SHOULD", "SHOULD NOT", "MAY", "none")


@attrs.frozen
class Rule:
    """The protocol sentence a check rests on: its normative word, where it
    is written, and what it says (in our words)."""

    #: One of :data:`WORDS`.
    word: str
    #: Where: an ACP page and anchor (``prompt-turn#cancellation``, of
    #: agentclientprotocol.com/protocol/), or ``JSON-RPC 2.0 §5``.
    source: str
    text: str

    def __attrs_post_init__(self) -> None:
        if self.word not in WORDS:
            raise ValueError(f"a rule's word is one of {', '.join(WORDS)}, not {self.word!r}")

    @property
    def binding(self) -> bool:
        """Whether the word is a MUST (or MUST NOT): a required check."""
        return self.word in ("MUST", "MUST NOT")

    def fits(self, level: Level) -> bool:
        """Whether ``level`` is the one the word gives: required for a MUST,
        recommended (or cancellation) for the rest."""
        return (level is Level.REQUIRED) is self.binding

    def __str__(self) -> str:
        word = "no normative word" if self.word == "none" else self.word
        return f"{word} ({self.source}): {self.text}"


def list_lines(infos: Iterable[Any]) -> list[str]:
    """``--list``: each check's name, level and description on a line, and
    under it, indented, the sentence it rests on."""
    checks = list(infos)
    width = max(len(info.name) for info in checks)
    lines = []
    for info in checks:
        lines.append(f"{info.name.ljust(width)}  {info.level.value.ljust(12)}  {info.description}")
        lines.append(f"{' ' * (width + 2)}rests on: {info.rule}")
    return lines


class Status(enum.Enum):
    """The outcome of a whole run."""

    #: Every check counted as required ran and passed.
    CONFORMS = "CONFORMS"
    #: A check counted as required failed.
    FAILS = "DOES NOT CONFORM"
    #: None failed, but a check counted as required could not run.
    INCOMPLETE = "INCOMPLETE"


#: The exit status of ``check-agent`` for each :class:`Status` (2 is a usage error).
EXIT_STATUS: Final = {Status.CONFORMS: 0, Status.FAILS: 1, Status.INCOMPLETE: 3}


class Verdict(enum.Enum):
    """The verdict of one check: it passed, it failed, or it could not run."""

    PASS = "pass"
    FAIL = "fail"
    #: The check could not run; the reason says why. Never a silent pass.
    SKIP = "skip"


@attrs.frozen
class CheckResult:
    """The verdict of one check: its name and level, the verdict and its
    reason, the latency of the wait it measured, and the wire lines (and
    stderr tail) that back the verdict.
    """

    name: str
    level: Level
    verdict: Verdict
    reason: str
    #: Seconds of the interesting wait (a reply, a cancellation), if any.
    latency: float | None = None
    description: str = ""
    #: The wire lines that prove the verdict ("> " sent, "< " received).
    evidence: tuple[str, ...] = ()
    #: The tail of the agent's stderr, kept for a failure.
    stderr: str = ""

    @property
    def passed(self) -> bool:
        """Whether the check ran and passed."""
        return self.verdict is Verdict.PASS

    @property
    def failed(self) -> bool:
        """Whether the check ran and failed."""
        return self.verdict is Verdict.FAIL

    @property
    def skipped(self) -> bool:
        """Whether the check could not run (its reason says why)."""
        return self.verdict is Verdict.SKIP

    def to_json(self) -> dict[str, Any]:
        """The result as a JSON-ready dict (latency in milliseconds)."""
        return {
            "name": self.name,
            "level": self.level.value,
            "verdict": self.verdict.value,
            "reason": self.reason,
            "latency_ms": None if self.latency is None else round(self.latency * 1000, 3),
            "description": self.description,
            "evidence": list(self.evidence),
            "stderr": self.stderr,
        }


def _latency(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:.1f} ms"


def table_lines(results: Iterable[CheckResult], level: Callable[[CheckResult], str]) -> list[str]:
    """The table of ``results``: a header, a rule, one row per check (name,
    ``level(result)``, verdict, latency, reason); shared by the agent and
    the client checkers."""
    header = ("check", "level", "verdict", "latency", "reason")
    rows = [
        (
            r.name,
            level(r),
            r.verdict.value.upper(),
            _latency(r.latency),
            " ".join(r.reason.split()),
        )
        for r in results
    ]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(4)]
    lines = []
    for row in [header, *rows]:
        cells = [row[i].ljust(widths[i]) for i in range(4)]
        lines.append("  ".join([*cells, row[4]]).rstrip())
    lines.insert(1, "  ".join("-" * w for w in [*widths, 6]))
    return lines


def failure_lines(results: Iterable[CheckResult], peer: str) -> list[str]:
    """The evidence of each failed check (and the ``peer``'s stderr tail
    kept with it), a block per check, each after a blank line."""
    lines: list[str] = []
    for r in results:
        if not r.failed or not (r.evidence or r.stderr):
            continue
        lines.append("")
        lines.append(f"{r.name}:")
        lines.extend(f"  {line}" for line in r.evidence)
        if r.stderr:
            lines.append(f"  {peer} stderr (tail):")
            lines.extend(f"    {line}" for line in r.stderr.splitlines())
    return lines


class _Results:
    """What a report does with its results, whichever checker made it: look
    a check up by name, list the failures, and turn :attr:`status` into
    :attr:`ok` and :attr:`exit_code`."""

    __slots__ = ()

    results: tuple[CheckResult, ...]

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
    def status(self) -> Status:
        raise NotImplementedError

    @property
    def ok(self) -> bool:
        """Whether the run CONFORMS."""
        return self.status is Status.CONFORMS

    @property
    def exit_code(self) -> int:
        """0 CONFORMS, 1 DOES NOT CONFORM, 3 INCOMPLETE."""
        return EXIT_STATUS[self.status]

    def failures(self, level: Level | None = None) -> list[CheckResult]:
        """The failed checks, of every level or of ``level`` only."""
        return [r for r in self.results if r.failed and level in (None, r.level)]

    def _counted(self, result: CheckResult) -> bool:
        """Whether ``result`` decides :attr:`status` (is counted as required)."""
        return result.level is Level.REQUIRED

    def _peer(self) -> str:
        raise NotImplementedError

    def format_table(self) -> str:
        raise NotImplementedError

    def __repr__(self) -> str:
        """One line, the verdict first, then what decided it: the failed
        checks (those counted as required first) with their reasons, the
        required checks that could not run, the counts, and the peer. (What
        pytest shows for ``assert report.ok, report``; it cuts a long one in
        the middle, so the head says the most.)"""
        failed = sorted((r for r in self.results if r.failed), key=lambda r: not self._counted(r))
        parts = []
        if failed:
            parts.append("failed " + ", ".join(f"{r.name} ({_reason(r)})" for r in failed))
        if self.status is Status.INCOMPLETE:
            blocked = [r for r in self.results if r.skipped and self._counted(r)]
            parts.append("could not run " + ", ".join(f"{r.name} ({_reason(r)})" for r in blocked))
        counts = {v: sum(r.verdict is v for r in self.results) for v in Verdict}
        parts.append(
            f"{counts[Verdict.PASS]} passed, {counts[Verdict.FAIL]} failed, "
            f"{counts[Verdict.SKIP]} skipped"
        )
        parts.append(self._peer())
        return f"<{type(self).__name__} {self.status.value}: {'; '.join(parts)}>"

    def __str__(self) -> str:
        """The whole table, with the failures' evidence (:meth:`format_table`)."""
        return self.format_table()


def _who(role: str, info: Any, command: tuple[str, ...]) -> str:
    """``agent: NAME VERSION`` from its info, else ``agent: COMMAND``."""
    if isinstance(info, dict):
        return f"{role}: {info.get('name', '?')} {info.get('version', '?')}"
    return f"{role}: {shlex.join(command)}"


def _reason(result: CheckResult, limit: int = 80) -> str:
    text = " ".join(result.reason.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


@attrs.frozen(repr=False)
class CheckReport(_Results):
    """All verdicts of one run, and the :attr:`status` they add up to.

    A check counts as required when its level is :attr:`Level.REQUIRED` or
    one of :attr:`promoted` (``strict`` promotes every level). The run
    CONFORMS when every check counted as required ran and passed; it FAILS
    when one of them failed; it is INCOMPLETE when none failed but one was
    skipped, unless :attr:`allow_skips`.
    """

    command: tuple[str, ...]
    results: tuple[CheckResult, ...]
    #: Whether the scenario checks ran, and why (detected, forced, or not).
    scenario: bool
    scenario_reason: str
    agent_info: Any = None
    protocol_version: Any = None
    duration: float = 0.0
    #: Levels counted as required besides :attr:`Level.REQUIRED`.
    promoted: frozenset[Level] = frozenset()
    allow_skips: bool = False
    #: The agent's ``authMethods`` when it refused ``session/new`` for want
    #: of authentication (the checks needing a session were skipped).
    auth_required: str | None = None
    #: Which validator the schema check used.
    validator: str = ""
    #: The version an agent answered a client asking version 1 with, when
    #: it speaks only that one (2: check it with ``check-agent-v2``).
    only_version: Any = None

    def counts(self, result: CheckResult) -> bool:
        """Whether ``result`` is counted as required in this run."""
        return result.level is Level.REQUIRED or result.level in self.promoted

    def _counted(self, result: CheckResult) -> bool:
        return self.counts(result)

    def _peer(self) -> str:
        if isinstance(self.agent_info, dict):
            return (
                f"agent: {self.agent_info.get('name', '?')} {self.agent_info.get('version', '?')}"
            )
        return f"agent: {shlex.join(self.command)}"

    def required_failures(self) -> list[CheckResult]:
        """The failed checks that count as required (see :meth:`counts`)."""
        return [r for r in self.results if r.failed and self.counts(r)]

    def required_skips(self) -> list[CheckResult]:
        """The skipped checks that count as required (see :meth:`counts`)."""
        return [r for r in self.results if r.skipped and self.counts(r)]

    @property
    def status(self) -> Status:
        """What the run adds up to: CONFORMS, FAILS or INCOMPLETE (see the
        class's docstring).
        """
        if self.required_failures():
            return Status.FAILS
        if self.required_skips() and not self.allow_skips:
            return Status.INCOMPLETE
        return Status.CONFORMS

    def summary(self) -> str:
        """One line: the status, the counts of each verdict and who was checked."""
        counts = {v: sum(r.verdict is v for r in self.results) for v in Verdict}
        required = len(self.required_failures())
        skips = len(self.required_skips())
        agent = "unknown agent"
        if isinstance(self.agent_info, dict):
            agent = f"{self.agent_info.get('name', '?')} {self.agent_info.get('version', '?')}"
        status = self.status
        head = status.value
        if status is Status.INCOMPLETE:
            head += f": {skips} required check(s) could not run"
            if self.auth_required is not None:
                head += f" (authentication required: {self.auth_required})"
            head += "; --allow-skips accepts that"
        elif status is Status.CONFORMS and skips:
            head += f" ({skips} required check(s) skipped, allowed by --allow-skips)"
        elif status is Status.FAILS and self.auth_required is not None:
            head += f" (and authentication required: {self.auth_required})"
        if self.only_version is not None:
            head += f" (the agent speaks protocol version {self.only_version} only" + (
                ": check it with `python -m acp_trio check-agent-v2 -- AGENT`)"
                if self.only_version == 2
                else ")"
            )
        counted = ", ".join(sorted(level.value for level in self.promoted))
        return (
            f"{head}\n{counts[Verdict.PASS]} passed, {counts[Verdict.FAIL]} failed "
            f"({required} counted as required), {counts[Verdict.SKIP]} skipped in "
            f"{self.duration:.1f} s; agent: {agent}, protocol version {self.protocol_version}; "
            f"scenario checks: {self.scenario_reason}"
            + (f"; also counted as required: {counted}" if counted else "")
            + (f"; schema: {self.validator}" if self.validator else "")
        )

    def format_table(self) -> str:
        """A plain-text table, one row per check, then the failures' evidence
        and a summary."""
        lines = table_lines(
            self.results,
            lambda r: (
                r.level.value + ("*" if self.counts(r) and r.level is not Level.REQUIRED else "")
            ),
        )
        lines.extend(failure_lines(self.results, "agent"))
        lines.append("")
        lines.append(self.summary())
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        """The whole report as one JSON-ready dict, every check included."""
        return {
            "command": list(self.command),
            "ok": self.ok,
            "verdict": self.status.value,
            "status": self.status.name.lower(),
            "exit_code": self.exit_code,
            "promoted": sorted(level.value for level in self.promoted),
            "allow_skips": self.allow_skips,
            "auth_required": self.auth_required,
            "validator": self.validator,
            "agent_info": self.agent_info,
            "protocol_version": self.protocol_version,
            "only_version": self.only_version,
            "scenario": self.scenario,
            "scenario_reason": self.scenario_reason,
            "duration_s": round(self.duration, 3),
            "checks": [dict(r.to_json(), required=self.counts(r)) for r in self.results],
        }


@attrs.frozen(repr=False)
class ClientCheckReport(_Results):
    """All verdicts of one run against a client. :attr:`ok` (and
    :attr:`exit_code`) depend on the required checks only."""

    command: tuple[str, ...]
    results: tuple[CheckResult, ...]
    client_info: Any = None
    protocol_version: Any = None
    client_capabilities: Any = None
    #: The client's exit status (None: still running when it was stopped).
    client_exit: int | None = None
    #: The last lines the client wrote to stdout and stderr.
    client_output: str = ""
    duration: float = 0.0

    @property
    def status(self) -> Status:
        """FAILS if a required check failed; INCOMPLETE if none failed but a
        required one could not run (a capability the client does not
        advertise is not checked, and does not count); else CONFORMS (as
        ``check-agent``)."""
        if any(r.failed and r.level is Level.REQUIRED for r in self.results):
            return Status.FAILS
        if any(
            r.skipped and r.level is Level.REQUIRED and not r.reason.endswith("not advertised")
            for r in self.results
        ):
            return Status.INCOMPLETE
        return Status.CONFORMS

    def _peer(self) -> str:
        return _who("client", self.client_info, self.command)

    def summary(self) -> str:
        """One line: the verdict, the counts of each verdict, and the client's
        name, version, exit and protocol version.
        """
        counts = {v: sum(r.verdict is v for r in self.results) for v in Verdict}
        required = len(self.failures(Level.REQUIRED))
        client = "unknown client"
        if isinstance(self.client_info, dict):
            client = f"{self.client_info.get('name', '?')} {self.client_info.get('version', '?')}"
        verdict = self.status.value
        exit_ = "still running" if self.client_exit is None else f"exit {self.client_exit}"
        return (
            f"{verdict}: {counts[Verdict.PASS]} passed, {counts[Verdict.FAIL]} failed "
            f"({required} required), {counts[Verdict.SKIP]} skipped in {self.duration:.1f} s; "
            f"client: {client} ({exit_}), protocol version {self.protocol_version}"
        )

    def format_table(self) -> str:
        """A plain-text table, one row per check, then a summary line."""
        lines = table_lines(self.results, lambda r: r.level.value)
        lines.extend(failure_lines(self.results, "client"))
        if self.failures() or self.client_exit not in (0, None):
            # Why a failing client failed: its exit status and last output.
            exit_ = "still running, stopped" if self.client_exit is None else self.client_exit
            lines.append("")
            lines.append(f"client exit status: {exit_}; its output (tail):")
            tail = self.client_output.strip().splitlines()[-12:]
            lines.extend(f"  {line[:300]}" for line in tail or ["(none)"])
        lines.append("")
        lines.append(self.summary())
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        """The whole report as one JSON-ready dict, every check included."""
        return {
            "command": list(self.command),
            "ok": self.ok,
            "verdict": self.status.value,
            "exit_code": self.exit_code,
            "client_info": self.client_info,
            "protocol_version": self.protocol_version,
            "client_capabilities": self.client_capabilities,
            "client_exit": self.client_exit,
            "client_output": self.client_output,
            "duration_s": round(self.duration, 3),
            "checks": [r.to_json() for r in self.results],
        }
