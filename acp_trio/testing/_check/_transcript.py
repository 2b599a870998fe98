"""Checks of the whole transcript: the schema, one reply per request."""

from __future__ import annotations

from typing import Any

import trio

from acp_trio.testing._check._base import (
    GRACE,
    ONE_ANSWER,
    RECOMMENDED,
    REQUIRED,
    VALID_OUTPUT,
    _check,
    _Fail,
    _Pass,
    _Skip,
)
from acp_trio.testing._check._report import Rule
from acp_trio.testing._check._runner import _Runner
from acp_trio.testing._check._wire import (
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


def _cancelled_by_us(r: _Runner, session: int) -> list[Any]:
    """The ids of the requests the checker sent ``$/cancel_request`` for."""
    return [
        e.params.get("requestId")
        for e in r.transcript.since(0, session)
        if e.direction == "sent"
        and e.is_notification
        and e.method == "$/cancel_request"
        and isinstance(e.params, dict)
    ]


@_check(
    "auth-methods",
    RECOMMENDED,
    "an agent that demands authentication lists its authMethods in the initialize result",
    Rule(
        "none",
        "authentication; initialization",
        "agents advertise the ways to authenticate in authMethods, and a request refused for "
        "want of it is answered -32000 (auth_required)",
    ),
)
async def _auth_methods(r: _Runner) -> _Pass:
    if r.init_result is None:
        raise _Skip(f"needs a working initialize ({r.setup_error})")
    methods = r.auth_methods()
    if r.auth_refusal is None:
        note = f" (authMethods: {methods})" if methods else ""
        return _Pass(f"no request was refused for want of authentication{note}")
    method, entry = r.auth_refusal
    if methods:
        return _Pass(f"{method} was refused for want of authentication; authMethods: {methods}")
    init = next(
        (
            e
            for e in r.transcript.received()
            if e.is_response
            and isinstance(e.message.get("result"), dict)
            and e.message["result"].get("protocolVersion") == r.protocol
        ),
        None,
    )
    raise _Fail(
        f"{method} was refused for want of authentication, but the initialize result lists "
        "no authMethods: a client cannot know how to authenticate",
        [e for e in (init, entry) if e is not None],
    )


@_check(
    "schema",
    REQUIRED,
    "every message the agent sends is valid ACP (its JSON Schema, or the generated types)",
    VALID_OUTPUT,
)
async def _schema(r: _Runner) -> _Pass:
    validator = r.validator
    problems: list[str] = []
    evidence: list[WireEntry] = []
    count = 0
    batches = 0
    other: dict[Any, int] = {}
    for session in r.sessions:
        init = session.initialize_result
        version = init.get("protocolVersion") if isinstance(init, dict) else r.protocol
        if version != r.protocol:
            # It negotiated another version (the 65535 probe): not v1's messages.
            other[version] = other.get(version, 0) + len(r.transcript.received(session.index))
            continue
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
    for version, n in other.items():
        note += (
            f" ({n} message(s) of a connection that negotiated version {version} left out: "
            f"the v{r.protocol} schema does not judge them)"
        )
    return _Pass(f"{count} messages valid ({validator.description}){note}")


@_check(
    "one-reply-per-request",
    REQUIRED,
    "every request of the checker was answered exactly once",
    ONE_ANSWER,
)
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
    still_open: list[str] = []
    for session in r.sessions:
        sent = _sent_methods(r, session.index)
        total += len(sent)
        replies = [e for e in r.transcript.received(session.index) if e.is_response]
        given_up = _cancelled_by_us(r, session.index)
        for request_id, method in sent:
            matching = [e for e in replies if same_id(e.message.get("id"), request_id)]
            n = len(matching)
            if not n and any(i == session.index and same_id(request_id, a) for i, a in r.abandoned):
                lost += 1  # the agent died first: the check that waited failed
                continue
            if not n and any(same_id(request_id, c) for c in given_up):
                # The checker gave up on it and sent $/cancel_request: the
                # agent may ignore that and answer later, on its own time.
                still_open.append(f"{method} (id {request_id!r}) [{session.index}]")
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
    if still_open:
        note += (
            f"; still open: {', '.join(still_open)} (the checker gave up on them and sent "
            "$/cancel_request; not answered yet, which a cancel allows)"
        )
    answered = total - lost - len(still_open)
    return _Pass(f"{answered} requests, each answered exactly once{note}")


#: Every check, in the order they run.
