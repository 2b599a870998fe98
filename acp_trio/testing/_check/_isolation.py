"""Checks that a ``session/cancel`` ends the turn it names and nothing else:
not the next turn of an idle session (``idle-cancel``), not the turn of
another session (``cancel-isolation``). Both are the cancels users of real
clients see leak: a stop pressed as the turn ends, two chats on one agent."""

from __future__ import annotations

import contextlib
from typing import Final

import trio

from acp_trio.testing._check._base import (
    QUIET,
    RECOMMENDED,
    _brief,
    _check,
    _Fail,
    _Pass,
    _Reply,
    _Skip,
)
from acp_trio.testing._check._report import Rule
from acp_trio.testing._check._runner import _Runner
from acp_trio.testing._check._wire import AgentSession, same_id

#: The scenario prompt of the session that is not cancelled: it runs for a
#: moment (so the other session's cancel lands while it runs), then ends
#: ``end_turn``.
OTHER_TURN: Final = "sleep 400"
#: A moment for a reply to a session/cancel to show (the next prompt's
#: round trip gives it more).
SETTLE: Final = 0.05


async def _turn_after(r: _Runner, session: AgentSession, session_id: str, after: str) -> _Reply:
    """A prompt that works (``echo <token>``) on a session that ``after``
    describes; fails unless it is answered as usual."""
    reply, texts = await r.echo(session, session_id)
    if reply.error is not None:
        raise _Fail(f"the prompt {after} was answered with {_brief(reply.error)}")
    if reply.stop_reason == "cancelled":
        raise _Fail(
            f"the prompt {after} was answered stopReason 'cancelled': the cancel of an idle "
            "session leaked into its next turn"
        )
    if r.scenario and reply.stop_reason != "end_turn":
        raise _Fail(f"`echo` {after} was answered {reply.describe()}, not end_turn")
    if r.scenario and not any(r.token in text for text in texts):
        raise _Fail(f"`echo {r.token}` {after} was answered without its text: {texts!r}")
    return reply


@_check(
    "idle-cancel",
    RECOMMENDED,
    "session/cancel of a session with no turn running (before its first turn, and after one "
    "ended) gets no reply and changes nothing: the next prompt is answered as usual",
    Rule(
        "MAY",
        "prompt-turn#cancellation",
        "a client MAY send session/cancel at any time; it cancels the ongoing turn, so with "
        "none running it has nothing to end",
    ),
)
async def _idle_cancel(r: _Runner) -> _Pass:
    r.require_model()
    session, session_id = await r.fresh_session()
    mark = r.transcript.mark()
    await session.connection.notify("session/cancel", {"sessionId": session_id})
    await trio.sleep(SETTLE)
    await _turn_after(r, session, session_id, "after a session/cancel sent before any turn")
    # The race of a stop button and the turn's end: the cancel comes late.
    await session.connection.notify("session/cancel", {"sessionId": session_id})
    await trio.sleep(SETTLE)
    second = await _turn_after(
        r, session, session_id, "after a session/cancel sent once the previous turn had ended"
    )
    stray = r.stray_replies(session, mark)
    if stray:
        raise _Fail(
            f"a session/cancel of an idle session was answered: {_brief(stray[0].data)}",
            stray[:3],
        )
    return _Pass(
        f"two idle session/cancel ignored; the prompts after each answered {second.describe()}",
        second.latency,
    )


@_check(
    "cancel-isolation",
    RECOMMENDED,
    "two sessions with a turn each: session/cancel of one ends only that one; the other turn "
    "ends as usual",
    Rule(
        "MAY",
        "prompt-turn#cancellation",
        "a client MAY cancel an ongoing prompt turn by sending session/cancel for its session "
        "(sessionId); the turns of other sessions are not named",
    ),
)
async def _cancel_isolation(r: _Runner) -> _Pass:
    if r.held_mode():
        return await _held_isolation(r)
    r.require_model()
    if r.scenario is None:
        main = await r.ensure_main()  # whether it speaks the scenario vocabulary
        assert main.session_id is not None
        with contextlib.suppress(_Fail):  # the prompt check judges that turn
            await r.echo(main, main.session_id)
    session, cancelled_id = await r.fresh_session()
    _, other_id = await r.fresh_session()
    cancelled_text = r.cancel_prompt
    other_text = OTHER_TURN if r.scenario else f"echo {r.token}"
    async with r.open_prompt(session, cancelled_id, cancelled_text) as cancelled:
        await trio.sleep(0.1)
        async with r.open_prompt(session, other_id, other_text) as other:
            await trio.sleep(0.1)
            if cancelled.done:
                early = await r.outcome(session, cancelled.result, "answer")
                if early is not None:
                    r.refused_for_auth(session, "session/prompt", early)
                raise _Skip(
                    f"the turn to cancel ended ({early.describe() if early else '?'}) before it "
                    f"could be cancelled; the prompt {cancelled_text!r} has to keep the agent "
                    "busy (choose another with --cancel-prompt)"
                )
            other_ran = not other.done
            await session.connection.notify("session/cancel", {"sessionId": cancelled_id})
            first = await r.outcome(session, cancelled.result, "answer after session/cancel")
            second = await r.outcome(
                session,
                other.result,
                "answer of the other session's turn",
                r.prompt_timeout,
            )
    if second is None:
        raise _Fail(
            f"session/cancel of {cancelled_id!r}: the turn of the other session {other_id!r} "
            f"was not answered within {r.prompt_timeout:g} s (--prompt-timeout)"
        )
    r.refused_for_auth(session, "session/prompt", second)
    r.no_model(second)
    if second.cancelled:
        raise _Fail(
            f"session/cancel of {cancelled_id!r} ended the turn of the other session "
            f"{other_id!r} too: it was answered {second.describe()}"
        )
    if second.error is not None or (r.scenario and second.stop_reason != "end_turn"):
        raise _Fail(
            f"after session/cancel of {cancelled_id!r}, the turn of the other session "
            f"{other_id!r} was answered {second.describe()}, not as usual"
        )
    how = first.describe() if first is not None else "no answer (session-cancel judges that)"
    note = "" if other_ran else " (it had ended before the cancel: choose a longer prompt)"
    return _Pass(
        f"the cancelled session's turn: {how}; the other's: {second.describe()}{note}",
        second.latency,
    )


async def _held_isolation(r: _Runner) -> _Pass:
    """``cancel-isolation`` on ``--hold-prompt``: both sessions run the hold
    prompt, every request of the agent held; after the cancel of one, the
    other's turn must still run and its held requests stay uncancelled (it
    is then cancelled too, to end it)."""
    assert r.hold_prompt is not None
    session, cancelled_id = await r.fresh_session(hold_all=True)
    _, other_id = await r.fresh_session(hold_all=True)
    mark = r.transcript.mark()
    async with (
        r.open_prompt(session, cancelled_id, r.hold_prompt) as cancelled,
        r.open_prompt(session, other_id, r.hold_prompt) as other,
    ):
        await r.held_requests(session, cancelled_id, cancelled)
        kept = await r.held_requests(session, other_id, other)
        await session.connection.notify("session/cancel", {"sessionId": cancelled_id})
        session.client.cancel_permissions(cancelled_id)
        first = await r.outcome(session, cancelled.result, "answer after session/cancel")
        await trio.sleep(QUIET)
        ended = await r.outcome(session, other.result, "answer", 0) if other.done else None
        seen = r.transcript.cancels_received(session.index, mark)
        touched = [q for q in kept if any(same_id(q.id, c) for c in seen) or q.answered]
        await session.connection.notify("session/cancel", {"sessionId": other_id})
        session.client.cancel_permissions(other_id)
        await r.outcome(session, other.result, "answer after session/cancel")
    if ended is not None:
        raise _Fail(
            f"session/cancel of {cancelled_id!r} ended the turn of the other session "
            f"{other_id!r} too: it was answered {ended.describe()}"
        )
    if touched:
        names = ", ".join(f"{q.method} (id {q.id!r})" for q in touched)
        raise _Fail(
            f"session/cancel of {cancelled_id!r} cancelled the held requests of the other "
            f"session {other_id!r}: {names}"
        )
    how = first.describe() if first is not None else "no answer (session-cancel judges that)"
    return _Pass(
        f"the cancelled session's turn: {how}; the other's still ran, its {len(kept)} held "
        "request(s) untouched"
    )
