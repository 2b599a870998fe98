"""Checks of robustness: unknown methods and notifications, stray cancels, bad input, stdout."""

from __future__ import annotations

from contextlib import suppress
from typing import Final

import trio

from acp_trio._exceptions import ConnectionClosed, RequestError
from acp_trio._jsonrpc import InvalidMessage, classify
from acp_trio.testing._check._base import (
    NO_REPLY_TO_NOTIFICATIONS,
    QUIET,
    RECOMMENDED,
    REQUIRED,
    VALID_OUTPUT,
    _brief,
    _check,
    _Fail,
    _Pass,
    _Skip,
)
from acp_trio.testing._check._report import Rule
from acp_trio.testing._check._runner import _Runner
from acp_trio.testing._check._wire import (
    WireEntry,
    same_id,
)
from acp_trio.testing._peer import NOT_JSON


@_check(
    "unknown-method",
    REQUIRED,
    "an unknown request method (plain and `_` extension) gets -32601",
    Rule(
        "MUST",
        "JSON-RPC 2.0 §5, §5.1; extensibility#custom-requests",
        "every call gets a response, with an error object when it fails; -32601 is the code "
        "defined for a method that does not exist (ACP: answer Method not found)",
    ),
)
async def _unknown_method(r: _Runner) -> _Pass:
    session = await r.ensure_main(need_session=False)
    latency = None
    for method in ("acp_trio_check/no_such_method", "_acp_trio_check/no_such_method"):
        reply = await r.request(session, method, {"acp_trio_check": True})
        latency = reply.latency if latency is None else latency
        if reply.error is None:
            raise _Fail(
                f"{method} was answered with a result {_brief(reply.result)}: expected -32601"
            )
        if reply.error.code != -32601:
            raise _Fail(f"{method} was answered with {_brief(reply.error)}: expected -32601")
    return _Pass("-32601 for both", latency)


@_check(
    "invalid-params",
    RECOMMENDED,
    "session/new with ill-typed params gets -32602",
    Rule("none", "JSON-RPC 2.0 §5.1", "-32602 is the code defined for invalid method parameters"),
)
async def _invalid_params(r: _Runner) -> _Pass:
    session = await r.ensure_main(need_session=False)
    reply = await r.request(session, "session/new", {"cwd": 42, "mcpServers": "none"})
    if reply.error is None:
        raise _Fail(
            f'session/new with cwd 42 and mcpServers "none" was answered with '
            f"{_brief(reply.result)}: expected -32602"
        )
    if reply.error.code == -32000 and r.auth_required is not None:
        raise _Skip(
            f"authentication required: {r.auth_required} (session/new is refused before its "
            "params are looked at)"
        )
    if reply.error.code != -32602:
        raise _Fail(f"session/new with ill-typed params got {_brief(reply.error)}: expected -32602")
    return _Pass("-32602", reply.latency)


@_check(
    "unknown-notification",
    REQUIRED,
    "unknown notifications get no reply; the agent goes on",
    NO_REPLY_TO_NOTIFICATIONS,
)
async def _unknown_notification(r: _Runner) -> _Pass:
    session = await r.ensure_main(need_session=False)
    mark = r.transcript.mark()
    methods = (
        "acp_trio_check/unknown_notification",
        "_acp_trio_check/unknown_notification",
        "$/acp_trio_check/unknown",
    )
    for method in methods:
        await session.connection.notify(method, {"acp_trio_check": True})
    await trio.sleep(QUIET)
    # The probe's round trip also gives a slow reply time to show up.
    probe = await r.try_probe(session, "unknown notifications")
    stray = r.stray_replies(session, mark)
    if stray:
        raise _Fail(
            f"answered a notification (notifications never get a reply): {_brief(stray[0].data)}",
            stray[:3],
        )
    if probe is not None:
        raise probe
    return _Pass(f"{len(methods)} unknown notifications ignored; the agent still answers")


@_check(
    "stray-cancels",
    REQUIRED,
    "$/cancel_request for a finished, unknown, repeated or malformed id: no reply, no effect",
    Rule(
        "MUST NOT",
        "JSON-RPC 2.0 §4.1, §5; cancellation#cancel_request-notification",
        "$/cancel_request is a notification, never answered; a request already answered is not "
        "answered again (each request gets exactly one response)",
    ),
)
async def _stray_cancels(r: _Runner) -> _Pass:
    session = await r.ensure_main(need_session=False)
    conn = session.connection
    params = {"cwd": r.session_cwd, "mcpServers": []}
    with r.waiting("answer to session/new", session):
        async with conn.open_request("session/new", params) as done:
            with suppress(RequestError):  # refused (authentication, say): finished too
                await done.result()
    mark = r.transcript.mark()
    for cancel in (
        {"requestId": done.id},  # finished
        {"requestId": done.id},  # repeated
        {"requestId": 987654321},  # unknown
        {"requestId": "acp-check-unknown"},  # unknown
        {"requestId": {"not": "an id"}},  # malformed
        {},  # malformed
    ):
        try:
            await conn.notify("$/cancel_request", cancel)
        except ConnectionClosed as exc:
            # The agent died on an earlier one: the write met the closed pipe
            # before the probe could (the scheduler decides which comes first).
            raise _Fail(
                f"the agent stopped answering after stray $/cancel_request: {exc.reason}"
                f"{r.diagnose(session)}"
            ) from None
    await trio.sleep(QUIET)
    probe = await r.try_probe(session, "stray $/cancel_request")
    stray = r.stray_replies(session, mark)
    if stray:
        raise _Fail(f"a $/cancel_request was answered: {_brief(stray[0].data)}", stray[:3])
    again = [
        e
        for e in r.transcript.received(session.index, mark)
        if e.is_response and same_id(e.message.get("id"), done.id)
    ]
    if again:
        raise _Fail(
            f"a late $/cancel_request made the agent answer again: {_brief(again[0].data)}",
            again[:3],
        )
    if probe is not None:
        raise probe
    return _Pass("6 stray $/cancel_request ignored; the agent still answers")


async def _bad_input(r: _Runner, data: bytes, code: int, what: str) -> _Pass:
    session = await r.ensure_main(need_session=False)
    mark = r.transcript.mark()
    start = trio.current_time()
    await session.send_raw(data)

    def is_answer(entry: WireEntry) -> bool:
        message = entry.message
        return isinstance(message, list) or (entry.is_response and message.get("id") is None)

    entry = await r.wait_entry(session, is_answer, mark, f"error reply to {what}")
    latency = entry.time - start
    message = entry.message
    if isinstance(message, list):
        raise _Fail(
            f"answered {what} with a batch reply {_brief(entry.data)}: ACP v1 has no batches; "
            f"expected one {code} error with id null",
            [entry],
        )
    if "id" not in message:
        raise _Fail(
            f"answered {what} with a reply without an id {_brief(entry.data)}: a JSON-RPC "
            f'response always carries "id" (null when the request\'s id could not be read); '
            f"expected error {code} with id null",
            [entry],
        )
    error = message.get("error")
    got = error.get("code") if isinstance(error, dict) else None
    if got != code:
        raise _Fail(
            f"answered {what} with {_brief(entry.data)}: expected error {code} with id null",
            [entry],
        )
    await r.probe(session, what)
    return _Pass(f"{code} with id null; the agent still answers", latency)


INVALID_JSON: Final = b'{"jsonrpc": "2.0", "id": "acp-check", "method": \n'
BATCH: Final = (
    b'[{"jsonrpc":"2.0","id":"acp-check-batch","method":"session/new",'
    b'"params":{"cwd":"/","mcpServers":[]}}]\n'
)
#: How long after the malformed lines the agent must still be alive and answering.
LINGER: Final = 2.5
MALFORMED: Final = (
    (INVALID_JSON, "a line of invalid JSON"),
    (BATCH, "a batch array"),
    (b"42\n", "a JSON scalar"),
)


@_check(
    "parse-error",
    RECOMMENDED,
    "a line of invalid JSON gets -32700 with id null; the agent goes on",
    Rule(
        "none",
        "JSON-RPC 2.0 §5, §5.1, §7",
        "invalid JSON is answered -32700 with id null (JSON-RPC's example); ACP forbids a client "
        "to send it (transports#stdio), so no MUST covers the agent's answer",
    ),
)
async def _parse_error(r: _Runner) -> _Pass:
    return await _bad_input(r, INVALID_JSON, -32700, "invalid JSON")


@_check(
    "batch-array",
    RECOMMENDED,
    "a batch array gets -32600 with id null; the agent goes on",
    Rule(
        "none",
        "JSON-RPC 2.0 §5.1; transports#stdio",
        "ACP v1 has no batches: an array is an Invalid Request, -32600 with id null",
    ),
)
async def _batch_array(r: _Runner) -> _Pass:
    return await _bad_input(r, BATCH, -32600, "a batch array")


@_check(
    "scalar-message",
    RECOMMENDED,
    "a JSON scalar gets -32600 with id null; the agent goes on",
    Rule(
        "none",
        "JSON-RPC 2.0 §5.1",
        "JSON that is not a Request object is an Invalid Request, -32600 with id null",
    ),
)
async def _scalar_message(r: _Runner) -> _Pass:
    return await _bad_input(r, b"42\n", -32600, "a JSON scalar")


@_check(
    "malformed-input",
    REQUIRED,
    "after a line of invalid JSON, a batch array or a JSON scalar the agent still answers",
    Rule(
        "MUST",
        "JSON-RPC 2.0 §5",
        "every call gets a response: the valid requests that follow a malformed line are answered",
    ),
)
async def _malformed_input(r: _Runner) -> _Pass:
    # Whatever the agent replies to it (the checks above judge that), one bad
    # line must not end the connection: an editor's bug would kill the agent.
    for data, what in MALFORMED:
        session = await r.ensure_main(need_session=False)
        await session.send_raw(data)
        await r.probe(session, what)
    # An agent may die a moment later (a task that failed on the line): it
    # must still be there, and answer, a while after.
    sent_at = trio.current_time()
    with trio.move_on_after(LINGER):
        await session.connection.wait_closed()
    if not session.alive or session.process.returncode is not None:
        with trio.move_on_after(1.0):
            await session.process.process.wait()
        raise _Fail(
            f"the agent exited {trio.current_time() - sent_at:.1f} s after the malformed lines "
            f"(it had answered at first){r.diagnose(session) or '; exit status unknown'}"
        )
    await r.probe(session, f"{LINGER:g} s")
    return _Pass(
        f"still answers after each of {len(MALFORMED)} malformed lines, and {LINGER:g} s later"
    )


@_check(
    "stdout-json-only",
    REQUIRED,
    "every line the agent writes to stdout is a JSON-RPC message",
    VALID_OUTPUT,
)
async def _stdout_json_only(r: _Runner) -> _Pass:
    lines = r.transcript.received()
    if not lines:
        raise _Skip("nothing was read from the agent's stdout")
    bad: list[tuple[WireEntry, str]] = []
    for entry in lines:
        message = entry.message
        if message is NOT_JSON:
            bad.append((entry, "not JSON"))
            continue
        items = message if isinstance(message, list) and message else [message]
        for item in items:
            parsed = classify(item)
            if isinstance(parsed, InvalidMessage):
                bad.append((entry, str(parsed.error.data)))
                break
    if bad:
        entry, why = bad[0]
        raise _Fail(
            f"{len(bad)} of {len(lines)} lines on stdout are not JSON-RPC messages; first: "
            f"{_brief(entry.data, 80)!r} ({why})"
        )
    return _Pass(f"{len(lines)} lines, all JSON-RPC messages")
