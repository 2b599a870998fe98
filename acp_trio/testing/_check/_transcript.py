"""Checks of the whole transcript: the schema, one reply per request."""

from __future__ import annotations

from typing import Any

import trio

from acp_trio.testing._check._base import (
    GRACE,
    REQUIRED,
    _check,
    _Fail,
    _Pass,
    _Skip,
)
from acp_trio.testing._check._runner import _Runner
from acp_trio.testing._check_wire import (
    AgentSession,
    WireEntry,
    same_id,
)
from acp_trio.testing._peer import NOT_JSON


def _sent_methods(r: _Runner, session: int) -> list[tuple[Any, str]]:
    return [
        (e.message["id"], e.method or "")
        for e in r.transcript.since(0, session)
        if e.direction == "sent" and e.is_request and not e.raw
    ]


@_check(
    "schema",
    REQUIRED,
    "every message the agent sends is valid ACP v1 (its JSON Schema, or the generated types)",
)
async def _schema(r: _Runner) -> _Pass:
    validator = r.validator
    problems: list[str] = []
    evidence: list[WireEntry] = []
    count = 0
    batches = 0
    for session in r.sessions:
        methods = _sent_methods(r, session.index)
        for entry in r.transcript.received(session.index):
            if isinstance(entry.message, list):
                batches += 1
                continue
            if entry.message is NOT_JSON:
                continue
            count += 1
            answered = None
            if entry.is_response:
                reply_id = entry.message.get("id")
                answered = next((m for i, m in methods if same_id(i, reply_id)), None)
            problem = validator.check(entry.message, answered)
            if problem is not None:
                problems.append(problem)
                evidence.append(entry)
            await trio.lowlevel.checkpoint()
    if not count:
        raise _Skip("no message was read from the agent")
    if problems:
        raise _Fail(
            f"{len(problems)} of {count} messages are not valid ({validator.description}); "
            f"first: {problems[0]}",
            evidence[:3],
        )
    note = f" ({batches} batch replies not validated)" if batches else ""
    return _Pass(f"{count} messages valid ({validator.description}){note}")


@_check("one-reply-per-request", REQUIRED, "every request of the checker was answered exactly once")
async def _one_reply(r: _Runner) -> _Pass:
    def unanswered() -> list[tuple[AgentSession, Any, str]]:
        out = []
        for session in r.sessions:
            for request_id, method in _sent_methods(r, session.index):
                if r.reply_entry(session, request_id) is None:
                    out.append((session, request_id, method))
        return out

    with trio.move_on_after(min(GRACE, r.timeout)):
        while any(s.alive for s, _, _ in unanswered()):
            await r.transcript.wait_for(lambda e: True, r.transcript.mark())
    problems: list[str] = []
    evidence: list[WireEntry] = []
    total = lost = 0
    for session in r.sessions:
        sent = _sent_methods(r, session.index)
        total += len(sent)
        replies = [e for e in r.transcript.received(session.index) if e.is_response]
        for request_id, method in sent:
            matching = [e for e in replies if same_id(e.message.get("id"), request_id)]
            n = len(matching)
            if not n and any(i == session.index and same_id(request_id, a) for i, a in r.abandoned):
                lost += 1  # the agent died first: the check that waited failed
                continue
            if n != 1:
                answers = "no answer" if not n else f"{n} answers"
                problems.append(f"{method} (id {request_id!r}) got {answers}")
                evidence.extend(matching[:3])
        for entry in replies:
            reply_id = entry.message.get("id")
            if reply_id is not None and not any(same_id(reply_id, i) for i, _ in sent):
                problems.append(f"a reply to id {reply_id!r}, which was never sent")
                evidence.append(entry)
    if not total:
        raise _Skip("no request was sent")
    if problems:
        raise _Fail(
            f"{len(problems)} problem(s); first: {problems[0]}"
            + (f"; then: {problems[1]}" if len(problems) > 1 else ""),
            evidence,
        )
    note = f" ({lost} lost with an agent that died, judged by their checks)" if lost else ""
    return _Pass(f"{total - lost} requests, each answered exactly once{note}")


#: Every check, in the order they run.
