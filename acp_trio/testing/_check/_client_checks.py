"""The checks of ``check_client`` (the report they make up is
:class:`~acp_trio.testing._check._report.ClientCheckReport`), and their
results read back from the agent side's report file."""

from __future__ import annotations

from typing import Any

import attrs

from acp_trio.testing._check._report import (
    CheckResult,
    Level,
    Verdict,
)

__all__ = ["CLIENT_CHECKS", "ClientCheckInfo", "result", "results_from_json"]


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
