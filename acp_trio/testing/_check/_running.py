"""Running one check: its verdict, its evidence (the wire lines and the
stderr the agent wrote while it ran), whatever the check raised."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import trio

from acp_trio._exceptions import ConnectionClosed, ProtocolError, RequestError
from acp_trio.testing._check._base import (
    EVIDENCE_LINES,
    EVIDENCE_WIDTH,
    CheckFunc,
    CheckInfo,
    _Fail,
    _Skip,
    _wire_line,
)
from acp_trio.testing._check._report import CheckResult, Verdict
from acp_trio.testing._check._wire import AgentSession, Transcript, WireEntry


class _Runner(Protocol):
    """What running a check reads of the runner (``_runner._Runner``)."""

    main: AgentSession | None
    sessions: list[AgentSession]
    stderr_marks: dict[int, int]
    transcript: Transcript
    timeout: float
    init_timeout: float
    prompt_timeout: float

    def diagnose(self, session: AgentSession | None) -> str: ...


def stderr_tail(r: _Runner) -> str:
    """The last lines the agent process of the check wrote to stderr
    while the check ran (not those of earlier checks)."""
    session = r.main if r.main is not None else None
    if session is None and r.sessions:
        session = r.sessions[-1]
    if session is None:
        return ""
    since = r.stderr_marks.get(session.index, 0)
    tail = (session.process.stderr_tail(since) or b"").decode("utf-8", "replace")
    lines = [line.rstrip() for line in tail.strip().splitlines()][-EVIDENCE_LINES:]
    return "\n".join(line[:EVIDENCE_WIDTH] for line in lines)


def failure(r: _Runner, info: CheckInfo, reason: str, evidence: Sequence[WireEntry]) -> CheckResult:
    return CheckResult(
        info.name,
        info.level,
        Verdict.FAIL,
        reason,
        None,
        info.description,
        evidence=tuple(_wire_line(e) for e in evidence[-EVIDENCE_LINES:]),
        stderr=stderr_tail(r),
    )


async def run_check(r: _Runner, info: CheckInfo, func: CheckFunc) -> CheckResult:
    limit = 3 * r.timeout + 5 + r.init_timeout + 2 * r.prompt_timeout
    mark = r.transcript.mark()
    r.stderr_marks = {s.index: s.process.stderr_written for s in r.sessions}
    try:
        with trio.fail_after(limit):
            outcome = await func(r)
    except _Fail as exc:
        evidence = exc.evidence or r.transcript.since(mark)
        return failure(r, info, exc.reason, evidence)
    except _Skip as exc:
        return CheckResult(info.name, info.level, Verdict.SKIP, exc.reason, None, info.description)
    except trio.TooSlowError:
        reason = (
            f"the check did not finish within {limit:g} s (3 x --timeout + 5 + "
            "--init-timeout + 2 x --prompt-timeout)"
            f"{r.diagnose(r.main)}"
        )
        return failure(r, info, reason, r.transcript.since(mark))
    except (ConnectionClosed, ProtocolError, RequestError) as exc:
        reason = f"{type(exc).__name__}: {exc}{r.diagnose(r.main)}"
        return failure(r, info, reason, r.transcript.since(mark))
    except Exception as exc:  # a bug of the checker: one verdict, not a crash
        reason = f"internal error of the checker: {exc!r}"
        return failure(r, info, reason, r.transcript.since(mark))
    lines = r.transcript.since(mark)[-EVIDENCE_LINES:]
    return CheckResult(
        info.name,
        info.level,
        Verdict.PASS,
        outcome.reason,
        outcome.latency,
        info.description,
        evidence=tuple(_wire_line(e) for e in lines),
    )
