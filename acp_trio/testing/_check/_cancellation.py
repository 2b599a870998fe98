"""Checks of cancellation: $/cancel_request, nested requests on the wire, deadlines."""

from __future__ import annotations

from collections.abc import (
    Iterable,
)

import trio

from acp_trio.testing._check._base import (
    CANCELLATION,
    CANCELLED,
    _check,
    _Fail,
    _Pass,
    _Skip,
)
from acp_trio.testing._check._report import Rule
from acp_trio.testing._check._runner import _Runner
from acp_trio.testing._check._wire import (
    IncomingRequest,
    same_id,
)
from acp_trio.testing._scenario import HOLD_PATH


@_check(
    "cancel-request-prompt",
    CANCELLATION,
    "$/cancel_request of a running `wait_for_cancel` prompt: -32800 or stopReason cancelled",
    Rule(
        "MAY",
        "cancellation#cancel_request-notification",
        "a receiver of $/cancel_request MAY cancel the request's work (and MUST still answer "
        "it, with a result or -32800: one-reply-per-request checks that)",
    ),
)
async def _cancel_request_prompt(r: _Runner) -> _Pass:
    held = r.held_mode()
    if not held:
        await r.require_scenario()
    session, session_id = await r.fresh_session(hold_all=held)
    text = r.hold_prompt if r.hold_prompt is not None and held else "wait_for_cancel"
    async with r.open_prompt(session, session_id, text) as pending:
        if held:
            await r.held_requests(session, session_id, pending)
        else:
            await trio.sleep(0.1)
        if pending.done:
            early = await r.outcome(session, pending.result, "answer")
            raise _Fail(f"`{text}` ended without a cancel: {early.describe() if early else '?'}")
        reply = await r.outcome(session, pending.cancel_and_wait, "answer after $/cancel_request")
        if reply is None:
            after = await r.end_turn_anyway(session, session_id, pending)
            raise _Fail(
                f"no answer within {r.timeout:g} s (--timeout) after $/cancel_request of the "
                f"prompt (the agent ignores $/cancel_request?); {after}"
            )
    if not reply.cancelled:
        raise _Fail(
            f"answered {reply.describe()} after $/cancel_request: expected -32800 or "
            'stopReason "cancelled"'
        )
    return _Pass(
        f"{reply.describe()} {reply.latency * 1000:.0f} ms after $/cancel_request", reply.latency
    )


def _cancel_report(requests: Iterable[IncomingRequest]) -> str:
    return ", ".join(f"{r.method} (id {r.id!r})" for r in requests)


async def _held_cancel(r: _Runner, how: str) -> _Pass:
    """The nested checks on ``--hold-prompt``: the agent's requests to the
    client are held; ``how`` cancels the turn; each held request must then
    be cancelled on the wire (a permission request answered ``cancelled``
    by the checker counts as ended)."""
    session, session_id = await r.fresh_session(hold_all=True)
    start = r.transcript.mark()
    assert r.hold_prompt is not None
    async with r.open_prompt(session, session_id, r.hold_prompt) as pending:
        held = await r.held_requests(session, session_id, pending)
        if how == "session/cancel":
            await session.connection.notify("session/cancel", {"sessionId": session_id})
            session.client.cancel_permissions(session_id)
            reply = await r.outcome(session, pending.result, "answer after session/cancel")
        else:
            reply = await r.outcome(session, pending.cancel_and_wait, f"answer after {how}")
        if reply is None:
            after = await r.end_turn_anyway(session, session_id, pending)
            raise _Fail(f"no answer within {r.timeout:g} s (--timeout) after {how}; {after}")
    if how == "session/cancel" and (reply.error is not None or reply.stop_reason != "cancelled"):
        raise _Fail(
            f'answered {reply.describe()} after session/cancel: expected stopReason "cancelled"'
        )
    if how != "session/cancel" and not reply.cancelled:
        raise _Fail(f"answered {reply.describe()} after {how}: expected -32800 or cancelled")
    must = [request for request in held if request.answered != "cancelled"]
    missing = await r.wait_cancelled(session, must, start)
    if missing:
        raise _Fail(
            f"the turn ended ({reply.describe()}), but these held requests were never "
            f"cancelled on the wire ($/cancel_request): {_cancel_report(missing)}"
        )
    methods = ", ".join(sorted({request.method for request in held}))
    return _Pass(
        f"{reply.describe()} after {how}; {len(held)} held request(s) ended ({methods})",
        reply.latency,
    )


@_check(
    "nested-session-cancel",
    CANCELLATION,
    "`nested` then session/cancel: every nested request cancelled on the wire, turn cancelled",
    Rule(
        "SHOULD",
        "prompt-turn#cancellation; cancellation#example-cascading-cancellation-flow",
        "on session/cancel the agent stops its tool calls as soon as possible; the cascading "
        "example cancels each of its open requests to the client with $/cancel_request",
    ),
)
async def _nested_session_cancel(r: _Runner) -> _Pass:
    if r.held_mode():
        return await _held_cancel(r, "session/cancel")
    await r.require_scenario()
    session, session_id = await r.fresh_session(hold=True)
    start = r.transcript.mark()
    async with r.open_prompt(session, session_id, "nested") as pending:
        nested = await r.nested_requests(session, session_id, pending)
        await session.connection.notify("session/cancel", {"sessionId": session_id})
        session.client.cancel_permissions(session_id)
        reply = await r.outcome(session, pending.result, "answer after session/cancel")
        if reply is None:
            raise _Fail(f"no answer within {r.timeout:g} s (--timeout) after session/cancel")
    if reply.error is not None or reply.stop_reason != "cancelled":
        raise _Fail(
            f'answered {reply.describe()} after session/cancel: expected stopReason "cancelled"'
        )
    permission = nested["session/request_permission"]
    must = [nested["fs/read_text_file"], nested["terminal/create"]]
    if permission.answered != "cancelled":  # else answered by the client: allowed
        must.append(permission)
    missing = await r.wait_cancelled(session, must, start)
    if missing:
        raise _Fail(
            f"the turn ended cancelled, but these nested requests were never cancelled on the "
            f"wire ($/cancel_request): {_cancel_report(missing)}"
        )
    how = "answered cancelled" if permission.answered == "cancelled" else "cancelled on the wire"
    return _Pass(
        f"stopReason 'cancelled'; read and terminal cancelled on the wire, permission {how}",
        reply.latency,
    )


@_check(
    "nested-cancel-request",
    CANCELLATION,
    "`nested` then $/cancel_request of the prompt: nested requests cancelled on the wire",
    Rule(
        "MAY",
        "cancellation#cancel_request-notification",
        "a receiver of $/cancel_request MAY cancel the request's activity and every activity "
        "nested in it",
    ),
)
async def _nested_cancel_request(r: _Runner) -> _Pass:
    if r.held_mode():
        return await _held_cancel(r, "$/cancel_request")
    await r.require_scenario()
    session, session_id = await r.fresh_session(hold=True)
    start = r.transcript.mark()
    async with r.open_prompt(session, session_id, "nested") as pending:
        nested = await r.nested_requests(session, session_id, pending)
        reply = await r.outcome(session, pending.cancel_and_wait, "answer after $/cancel_request")
        if reply is None:
            after = await r.end_turn_anyway(session, session_id, pending)
            raise _Fail(
                f"no answer within {r.timeout:g} s (--timeout) after $/cancel_request of the "
                f"prompt; {after}"
            )
    if not reply.cancelled:
        raise _Fail(
            f"answered {reply.describe()} after $/cancel_request: expected -32800 or cancelled"
        )
    missing = await r.wait_cancelled(session, nested.values(), start)
    if missing:
        raise _Fail(
            f"the prompt ended ({reply.describe()}), but these nested requests were never "
            f"cancelled on the wire ($/cancel_request): {_cancel_report(missing)}"
        )
    return _Pass(f"{reply.describe()}; all 3 nested requests cancelled on the wire", reply.latency)


@_check(
    "deadline",
    CANCELLATION,
    "`deadline 200`: the nested read is cancelled on the wire and the prompt answers -32800",
    Rule(
        "SHOULD",
        "cancellation#internal-cancellation",
        "a request cancelled from inside (a timeout) is answered -32800, as if $/cancel_request "
        "had come, and behaves the same whatever the source",
    ),
)
async def _deadline(r: _Runner) -> _Pass:
    if r.held_mode():
        if r.hold_deadline is None:
            raise _Skip(
                "the agent's own deadline: with --hold-prompt, give --hold-deadline SECONDS "
                "(the agent's time limit on that turn) to check it"
            )
        return await _held_deadline(r, r.hold_deadline)
    await r.require_scenario()
    session, session_id = await r.fresh_session(hold=True)
    start = r.transcript.mark()

    def held_reads() -> list[IncomingRequest]:
        return [
            q
            for q in session.client.requests_of(session_id, "fs/read_text_file")
            if isinstance(q.params, dict) and q.params.get("path") == HOLD_PATH
        ]

    async with r.open_prompt(session, session_id, "deadline 200") as pending:
        reply = await r.outcome(session, pending.result, "answer to `deadline 200`")
        if reply is None:
            reads = held_reads()
            seen = r.transcript.cancels_received(session.index, start)
            kept = [q for q in reads if not any(same_id(q.id, c) for c in seen)]
            what = (
                f"the nested read was never cancelled on the wire: {_cancel_report(kept)}"
                if kept
                else "no nested read was sent"
                if not reads
                else "the read was cancelled, but the prompt was not answered"
            )
            raise _Fail(
                f"the prompt's 200 ms deadline passed and no answer came within "
                f"{r.timeout:g} s (--timeout); {what}"
            )
    reads = held_reads()
    if not reads:
        raise _Fail(
            f"no fs/read_text_file of {HOLD_PATH} was sent; the prompt got {reply.describe()}"
        )
    if reply.error is None or reply.error.code != CANCELLED:
        raise _Fail(
            f"answered {reply.describe()}: at its own deadline the prompt must answer -32800"
        )
    missing = await r.wait_cancelled(session, reads, start)
    if missing:
        raise _Fail(
            "answered -32800, but the read was never cancelled on the wire: "
            + _cancel_report(missing),
            r.transcript.since(start, session.index),
        )
    if reply.latency < 0.18:
        raise _Fail(
            f"answered -32800 after {reply.latency * 1000:.0f} ms, before its 200 ms deadline"
        )
    return _Pass(
        f"-32800 after {reply.latency * 1000:.0f} ms; the read was cancelled on the wire",
        reply.latency,
    )


async def _held_deadline(r: _Runner, deadline: float) -> _Pass:
    """``deadline`` on ``--hold-prompt``: every request of the agent is held;
    at its own time limit (``--hold-deadline``) the agent must end the turn
    with ``-32800`` and cancel each held request on the wire."""
    assert r.hold_prompt is not None
    session, session_id = await r.fresh_session(hold_all=True)
    start = r.transcript.mark()
    async with r.open_prompt(session, session_id, r.hold_prompt) as pending:
        held = await r.held_requests(session, session_id, pending)
        reply = await r.outcome(
            session, pending.result, "the turn to end at its deadline", deadline + r.timeout
        )
        if reply is None:
            seen = r.transcript.cancels_received(session.index, start)
            kept = [q for q in held if not any(same_id(q.id, c) for c in seen)]
            what = (
                f"the held requests were never cancelled on the wire: {_cancel_report(kept)}"
                if kept
                else "the held requests were cancelled, but the prompt was not answered"
            )
            raise _Fail(
                f"the turn's {deadline:g} s limit (--hold-deadline) passed and no answer came "
                f"within {r.timeout:g} s (--timeout) more; {what}"
            )
    if reply.error is None or reply.error.code != CANCELLED:
        raise _Fail(
            f"answered {reply.describe()} at its own deadline: internal cancellation must "
            "answer -32800, as a $/cancel_request does"
        )
    must = [request for request in held if request.answered != "cancelled"]
    missing = await r.wait_cancelled(session, must, start)
    if missing:
        raise _Fail(
            "answered -32800, but these held requests were never cancelled on the wire "
            f"($/cancel_request): {_cancel_report(missing)}",
            r.transcript.since(start, session.index),
        )
    methods = ", ".join(sorted({request.method for request in held}))
    return _Pass(
        f"-32800 at its own {deadline:g} s limit; {len(held)} held request(s) cancelled "
        f"on the wire ({methods})",
        reply.latency,
    )
