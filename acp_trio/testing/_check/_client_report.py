"""The verdicts of ``check_client``: the checks, and a report that prints as a
table or as one JSON document (and is read back from the agent side's file)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import attrs

from acp_trio.testing._check_report import (
    EXIT_STATUS,
    CheckResult,
    Level,
    Status,
    Verdict,
    table_lines,
)

__all__ = ["CLIENT_CHECKS", "ClientCheckInfo", "ClientCheckReport"]


@attrs.frozen
class ClientCheckInfo:
    """A check ``check_client`` runs: its name, level and what it checks."""

    name: str
    level: Level
    description: str


_R, _O = Level.REQUIRED, Level.RECOMMENDED

#: Every check of ``check-client``, in the order the agent side runs them.
CLIENT_CHECKS: tuple[ClientCheckInfo, ...] = tuple(
    ClientCheckInfo(name, level, description)
    for name, level, description in [
        (
            "initialize",
            _R,
            "the first message is an initialize request with an integer protocolVersion "
            "and a clientCapabilities object",
        ),
        ("session-new", _R, "session/new has an absolute cwd and an mcpServers array"),
        ("prompt", _R, "session/prompt names the session and carries a content-block array"),
        (
            "unknown-notification",
            _R,
            "an unknown notification gets no reply and the client keeps answering",
        ),
        ("unknown-method", _R, "a request for an unknown method gets an error reply (-32601)"),
        ("unknown-update", _O, "a session/update of an unknown kind is tolerated"),
        ("malformed-input", _O, "a line that is not JSON is tolerated (-32700 or nothing)"),
        (
            "fs-read",
            _R,
            "fs/read_text_file, if advertised, answers the file's content "
            "(or refuses with an error other than -32601)",
        ),
        (
            "fs-write",
            _R,
            "fs/write_text_file, if advertised, writes the content "
            "(or refuses with an error other than -32601)",
        ),
        (
            "terminal",
            _R,
            "terminal/create, if advertised, runs a command: wait_for_exit gives its exit "
            "status, terminal/output its output, then terminal/release "
            "(or refuses with an error other than -32601)",
        ),
        (
            "permission-outcome",
            _R,
            "session/request_permission gets a valid outcome: cancelled, or selected "
            "with an offered optionId",
        ),
        (
            "cancel-request",
            _R,
            "a request cancelled with $/cancel_request gets one reply: -32800, "
            "or a result if it was answered first",
        ),
        (
            "session-cancel",
            _O,
            "at the cue `check-client: cancel now` the client sends session/cancel for the session",
        ),
        (
            "cancelled-permission",
            _R,
            "after the client's session/cancel, its pending permission request gets the "
            "cancelled outcome",
        ),
        (
            "one-reply",
            _R,
            "every request of the agent gets exactly one well-formed reply, and no reply "
            "names an id the agent did not use",
        ),
        ("jsonrpc", _R, "every line the client writes is one JSON-RPC 2.0 message"),
    ]
)

_INFO = {info.name: info for info in CLIENT_CHECKS}


def result(
    name: str,
    verdict: Verdict,
    reason: str,
    latency: float | None = None,
    evidence: tuple[str, ...] = (),
) -> CheckResult:
    info = _INFO[name]
    return CheckResult(name, info.level, verdict, reason, latency, info.description, evidence)


@attrs.frozen
class ClientCheckReport:
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

    def __iter__(self) -> Iterator[CheckResult]:
        return iter(self.results)

    def __getitem__(self, name: str) -> CheckResult:
        for r in self.results:
            if r.name == name:
                return r
        raise KeyError(name)

    def __contains__(self, name: object) -> bool:
        return any(r.name == name for r in self.results)

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

    @property
    def ok(self) -> bool:
        """Every required check ran and passed."""
        return self.status is Status.CONFORMS

    @property
    def exit_code(self) -> int:
        """The exit status of ``check-client``: 0 CONFORMS, 1 DOES NOT
        CONFORM, 3 INCOMPLETE."""
        return EXIT_STATUS[self.status]

    def failures(self, level: Level | None = None) -> list[CheckResult]:
        """The failed checks, of every level or of ``level`` only."""
        return [r for r in self.results if r.failed and level in (None, r.level)]

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
        for r in self.results:
            if r.failed and r.evidence:
                lines.append("")
                lines.append(f"{r.name}:")
                lines.extend(f"  {line}" for line in r.evidence)
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


def results_from_json(checks: Any, missing_reason: str) -> tuple[CheckResult, ...]:
    """The results of the agent side's report file, every check once, in
    order; a check the file lacks is skipped for ``missing_reason``."""
    found: dict[str, CheckResult] = {}
    for item in checks if isinstance(checks, list) else []:
        try:
            name = item["name"]
            verdict = Verdict(item["verdict"])
            latency = item.get("latency_ms")
            evidence = tuple(str(line) for line in item.get("evidence") or ())
            found[name] = result(
                name,
                verdict,
                str(item["reason"]),
                None if latency is None else latency / 1000,
                evidence,
            )
        except (KeyError, TypeError, ValueError):
            continue
    return tuple(
        found.get(info.name) or result(info.name, Verdict.SKIP, missing_reason)
        for info in CLIENT_CHECKS
    )
