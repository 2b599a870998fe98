"""Checks of the lifecycle: initialize, version, agent info, sessions, prompts, session/cancel."""

from __future__ import annotations

from typing import Any, Final

import attrs
import trio

from acp_trio.testing._check._base import (
    LONG_PROMPT,
    RECOMMENDED,
    REQUIRED,
    STOP_REASONS,
    TURN_OUTPUT,
    _brief,
    _check,
    _Fail,
    _Pass,
    _Skip,
)
from acp_trio.testing._check._report import Rule
from acp_trio.testing._check._runner import _Runner
from acp_trio.testing._check._wire import AgentSession, WireEntry

SAME_VERSION: Final = Rule(
    "MUST",
    "initialization#protocol-version",
    "an agent that supports the protocol version the client asks for answers with that version",
)
CANCELLED_STOP: Final = Rule(
    "MUST",
    "prompt-turn#cancellation",
    "after session/cancel the agent answers the prompt with the stop reason cancelled, not an "
    "error, and sends every update of the turn before that answer",
)


@_check(
    "initialize",
    REQUIRED,
    "initialize asking protocol version 1 is answered with 1",
    SAME_VERSION,
)
async def _initialize(r: _Runner) -> _Pass:
    try:
        session = r.main = await r.spawn()
        reply = await r.initialize(session, 1)
        version = reply.result.get("protocolVersion")
        if type(version) is not int:
            raise _Fail(f"protocolVersion is {_brief(version)}, not an integer")
        if version == 2:
            r.other_version = reply.result
            raise _Fail(
                "a client asking protocol version 1 got 2: the agent speaks version 2 only "
                "(this checker speaks 1); check it with `python -m acp_trio check-agent-v2 -- "
                "AGENT`"
            )
        if version != 1:
            raise _Fail(
                f"a client asking protocol version 1 got {version}: an agent that speaks "
                "version 1 must answer 1 (this checker speaks only 1)"
            )
    except _Fail as exc:
        r.setup_error = "initialize failed"
        raise _Fail(exc.reason) from None
    r.init_result = reply.result
    auth = reply.result.get("authMethods")
    note = f"; authMethods: {_brief(auth, 60)}" if auth else ""
    return _Pass(f"protocolVersion 1{note}", reply.latency)


@_check(
    "version-negotiation",
    REQUIRED,
    "initialize asking version 65535 is answered with the agent's own latest, not an echo",
    Rule(
        "MUST",
        "initialization#protocol-version",
        "an agent that does not support the version asked for answers with the latest version "
        "it supports",
    ),
)
async def _version_negotiation(r: _Runner) -> _Pass:
    if r.setup_error is not None:
        raise _Skip(f"needs a working initialize ({r.setup_error})")
    session = await r.spawn()
    try:
        reply = await r.initialize(session, 65535)
    finally:
        await session.aclose()
    version = reply.result.get("protocolVersion")
    if type(version) is not int:
        raise _Fail(f"protocolVersion is {_brief(version)}, not an integer")
    if version == 65535:
        raise _Fail(
            "echoed protocolVersion 65535: an agent that does not support the version "
            "asked for must answer its own latest version"
        )
    if not 1 <= version < 65535:
        raise _Fail(f"answered protocolVersion {version}, not a version it can speak")
    return _Pass(f"asked 65535, answered {version}", reply.latency)


@_check(
    "agent-info",
    RECOMMENDED,
    "initialize result names the agent (agentInfo)",
    Rule(
        "SHOULD",
        "initialization#implementation-information",
        "the agent gives its name and version in agentInfo",
    ),
)
async def _agent_info(r: _Runner) -> _Pass:
    if r.init_result is None:
        raise _Skip(f"needs a working initialize ({r.setup_error})")
    info = r.init_result.get("agentInfo")
    if not isinstance(info, dict):
        raise _Fail("no agentInfo in the initialize result (name and version should be sent)")
    name, version = info.get("name"), info.get("version")
    if not isinstance(name, str) or not isinstance(version, str):
        raise _Fail(f"agentInfo {_brief(info)} lacks a string name or version")
    return _Pass(f"{name} {version}")


@_check(
    "session-new",
    REQUIRED,
    "session/new returns a sessionId, a new one each time",
    Rule(
        "MUST",
        "session-setup#creating-a-session",
        "the agent answers session/new with a unique session ID",
    ),
)
async def _session_new(r: _Runner) -> _Pass:
    session = await r.ensure_main(need_session=False)
    try:
        first, latency = await r.new_session(session)
        second, _ = await r.new_session(session)
    except (_Fail, _Skip) as exc:
        r.session_error = "session/new failed" if isinstance(exc, _Fail) else exc.reason
        raise
    if first == second:
        r.session_error = "session/new failed"
        raise _Fail(f"two session/new calls returned the same sessionId {first!r}")
    session.session_id = first
    return _Pass(f"sessionId {first!r}, then {second!r}", latency)


@_check(
    "prompt",
    REQUIRED,
    "a prompt is answered with a valid stopReason; updates name its session",
    Rule(
        "MUST",
        "prompt-turn#4-check-for-completion",
        "when the turn ends the agent answers the session/prompt request with a StopReason",
    ),
)
async def _prompt_check(r: _Runner) -> _Pass:
    session = await r.ensure_main()
    assert session.session_id is not None
    mark = r.transcript.mark()
    reply, _ = await r.echo(session, session.session_id)
    if reply.error is not None:
        raise _Fail(f"the prompt `echo ...` was answered with {_brief(reply.error)}")
    if reply.stop_reason not in STOP_REASONS:
        raise _Fail(
            f"the prompt was answered with {_brief(reply.result)}: stopReason must be one "
            f"of {', '.join(sorted(STOP_REASONS))}"
        )
    updates = r.updates(session, None, mark)
    foreign = [u for u in updates if u.params.get("sessionId") != session.session_id]
    if foreign:
        raise _Fail(
            f"a session/update of the turn names another session: {_brief(foreign[0].data)}"
        )
    return _Pass(
        f"stopReason {reply.stop_reason!r} after {len(updates)} session/update", reply.latency
    )


def _turn_output(entries: list[WireEntry]) -> list[WireEntry]:
    """The updates among ``entries`` that are a turn's output (not state)."""
    return [
        e
        for e in entries
        if isinstance(e.params.get("update"), dict)
        and e.params["update"].get("sessionUpdate") in TURN_OUTPUT
    ]


@attrs.frozen
class _CancelledTurn:
    """A turn cancelled with ``session/cancel``, as the wire showed it."""

    session: AgentSession
    mark: int
    cancelled_at: float
    #: The answer (``None``: none within ``--timeout``).
    reply: Any
    #: The turn's output after the cancel.
    output: list[WireEntry]
    #: The answer's wire entry.
    answer: WireEntry | None
    #: Replies to the session/cancel notification.
    stray: list[WireEntry]


async def _cancelled_turn(r: _Runner) -> _CancelledTurn:
    """Run (once per checker run) a turn of ``--cancel-prompt`` (or the hold
    prompt) and cancel it with ``session/cancel``: ``session-cancel`` judges
    the answer, ``cancel-promptly`` how soon the turn stopped."""
    if isinstance(r.cancelled_turn, _CancelledTurn):
        return r.cancelled_turn
    if isinstance(r.cancelled_turn, _Skip):
        raise _Skip(r.cancelled_turn.reason)
    try:
        turn = await _run_cancelled_turn(r)
    except _Skip as exc:
        r.cancelled_turn = exc
        raise
    r.cancelled_turn = turn
    return turn


async def _run_cancelled_turn(r: _Runner) -> _CancelledTurn:
    held = r.held_mode()
    session, session_id = await r.fresh_session(hold_all=held)
    conn = session.connection
    text = r.hold_prompt if r.hold_prompt is not None and held else r.cancel_prompt
    async with r.open_prompt(session, session_id, text) as pending:
        if held:
            await r.held_requests(session, session_id, pending)
        else:
            await trio.sleep(0.2)
        if pending.done:
            early = await r.outcome(session, pending.result, "answer")
            if early is not None:
                r.refused_for_auth(session, "session/prompt", early)
            raise _Skip(
                f"the turn ended ({early.describe() if early else '?'}) before it could be "
                f"cancelled; the prompt {text!r} has to keep the agent busy "
                "(choose another with --cancel-prompt"
                + (f", e.g. {LONG_PROMPT!r} for a model)" if r.no_vocabulary else ")")
            )
        mark = r.transcript.mark()
        cancelled_at = trio.current_time()
        await conn.notify("session/cancel", {"sessionId": session_id})
        session.client.cancel_permissions(session_id)
        reply = await r.outcome(session, pending.result, "answer after session/cancel")
    await trio.sleep(0.1)
    return _CancelledTurn(
        session=session,
        mark=mark,
        cancelled_at=cancelled_at,
        reply=reply,
        output=_turn_output(r.updates(session, session_id, mark)),
        answer=r.reply_entry(session, pending.id) if reply is not None else None,
        stray=r.stray_replies(session, mark),
    )


@_check(
    "session-cancel",
    REQUIRED,
    "session/cancel of a running turn: it answers stopReason cancelled, its output all before "
    "that answer",
    CANCELLED_STOP,
)
async def _session_cancel(r: _Runner) -> _Pass:
    turn = await _cancelled_turn(r)
    reply = turn.reply
    if reply is None:
        raise _Fail(
            f"no answer within {r.timeout:g} s (--timeout) after session/cancel",
            r.transcript.since(turn.mark, turn.session.index)[-12:],
        )
    if reply.error is not None:
        raise _Fail(
            f"the cancelled turn was answered with {_brief(reply.error)}: ACP requires the "
            'result stopReason "cancelled", not an error'
        )
    if reply.stop_reason != "cancelled":
        raise _Fail(
            f'answered {reply.describe()} after session/cancel: ACP requires stopReason "cancelled"'
        )
    if turn.answer is not None:
        late = [u for u in turn.output if u.time > turn.answer.time]
        if late:
            raise _Fail(
                f"{len(late)} update(s) of the turn's output arrived after its answer; a "
                "turn's output all comes before its answer",
                late[:3],
            )
    if turn.stray:
        raise _Fail(
            f"the session/cancel notification was answered: {_brief(turn.stray[0].data)}",
            turn.stray[:3],
        )
    return _Pass(
        f"stopReason 'cancelled' {reply.latency * 1000:.0f} ms after session/cancel; "
        f"{len(turn.output)} turn update(s) after the cancel",
        reply.latency,
    )


@_check(
    "cancel-promptly",
    RECOMMENDED,
    "session/cancel of a running turn: its output stops and its answer comes within "
    "--cancel-within seconds",
    Rule(
        "SHOULD",
        "prompt-turn#cancellation",
        "on session/cancel the agent stops its language model requests and tool calls as soon "
        "as possible",
    ),
)
async def _cancel_promptly(r: _Runner) -> _Pass:
    turn = await _cancelled_turn(r)
    reply = turn.reply
    bound = r.cancel_within
    last = (turn.output[-1].time - turn.cancelled_at) if turn.output else 0.0
    if reply is None:
        raise _Fail(
            f"the turn went on after session/cancel: {len(turn.output)} turn update(s) over "
            f"{last:.2f} s and no answer within {r.timeout:g} s (--timeout); a cancelled turn "
            f"should stop within {bound:g} s (--cancel-within)",
            r.transcript.since(turn.mark, turn.session.index)[-12:],
        )
    if last > bound or reply.latency > bound:
        raise _Fail(
            f"the turn went on after session/cancel: {len(turn.output)} turn update(s) over "
            f"{last:.2f} s, then {reply.describe()} after {reply.latency:.2f} s; a cancelled "
            f"turn should stop within {bound:g} s (--cancel-within)",
            r.transcript.since(turn.mark, turn.session.index)[-12:],
        )
    return _Pass(
        f"answered {reply.latency * 1000:.0f} ms after session/cancel; the output stopped "
        f"{last * 1000:.0f} ms after it ({len(turn.output)} update(s))",
        reply.latency,
    )
