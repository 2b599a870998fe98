"""The sans-IO peer on its own: frames in, events out; calls in, bytes out.

The protocol rules (duplicate ids, parse errors, oversized frames, stale
replies, never answering a response or a notification, malformed cancels,
exactly one reply, one cancel per request), and property tests holding the
one classifier (``message_kind``, behind ``classify`` and ``Peer.receive``)
to a slow, obviously correct reference on arbitrary JSON values and bytes.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest
from budget import examples
from frames import err, frame, ok, req
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_trio._exceptions import MessageTooLarge, RemoteProtocolError, RequestError
from acp_trio._jsonrpc import (
    ErrorResponse,
    InvalidMessage,
    Notification,
    OversizedFrame,
    Request,
    Response,
    cancel_request_frame,
    cancelled_reply_frame,
    classify,
    parse_frame,
)
from acp_trio._jsonrpc._messages import (
    ERROR_REPLY,
    INVALID,
    NOTIFICATION,
    REQUEST,
    RESULT,
    message_kind,
)
from acp_trio._jsonrpc._peer import (
    CancelReceived,
    NotificationReceived,
    Peer,
    ReplyReceived,
    RequestReceived,
    SendFrame,
)

P = Peer[object, object]


def answer(event: Any) -> dict[str, Any]:
    assert type(event) is SendFrame, event
    assert event.data.endswith(b"\n")
    assert event.data.count(b"\n") == 1
    decoded: dict[str, Any] = json.loads(event.data)
    return decoded


# ---------------------------------------------------------------------------
# Incoming requests


def test_a_request_is_registered_and_answered_once() -> None:
    peer: P = Peer()
    event = peer.receive(frame(req(7, "echo", {"a": 1})))
    assert type(event) is RequestReceived
    assert (event.entry.id, event.entry.method, event.params) == (7, "echo", {"a": 1})
    assert 7 in peer.table.incoming
    data = peer.respond(event.entry, {"b": 2})
    assert data is not None
    assert json.loads(data) == {"jsonrpc": "2.0", "id": 7, "result": {"b": 2}}
    assert 7 not in peer.table.incoming  # a late cancel finds nothing
    assert peer.respond(event.entry, "again") is None
    assert peer.respond_error(event.entry, RequestError.internal_error()) is None
    assert peer.reply(event.entry, None) is None
    peer.done(event.entry)
    assert peer.receive(frame({"jsonrpc": "2.0", "method": "$/cancel_request",
                                "params": {"requestId": 7}})) is None  # fmt: skip


def test_a_duplicate_in_flight_id_is_refused_and_the_first_left_alone() -> None:
    peer: P = Peer()
    first = peer.receive(frame(req("a", "m")))
    assert type(first) is RequestReceived
    refusal = answer(peer.receive(frame(req("a", "other"))))
    assert refusal["id"] == "a"
    assert refusal["error"]["code"] == -32600
    assert peer.table.incoming["a"] is first.entry
    data = peer.respond(first.entry, 1)
    assert data is not None
    peer.done(first.entry)
    # Once answered, the id may be used again.
    assert type(peer.receive(frame(req("a", "m")))) is RequestReceived


def test_a_cancelled_reply_and_an_error_reply() -> None:
    peer: P = Peer()
    event = peer.receive(frame(req(3, "m")))
    assert type(event) is RequestReceived
    assert peer.reply(event.entry, None) == cancelled_reply_frame(3)
    event = peer.receive(frame(req(4, "m")))
    assert type(event) is RequestReceived
    data = peer.respond_error(event.entry, RequestError.method_not_found("m"))
    assert data is not None
    assert json.loads(data)["error"]["code"] == -32601


def test_a_result_json_cannot_express_is_answered_internal_error() -> None:
    peer: P = Peer()
    event = peer.receive(frame(req(1, "m")))
    assert type(event) is RequestReceived
    data = peer.respond(event.entry, {1, 2})
    assert data is not None
    assert json.loads(data)["error"]["code"] == -32603


@pytest.mark.parametrize(
    "cancel",
    [
        frame({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": 5}}),
        cancel_request_frame(5),  # the template bytes
    ],
    ids=["decoded", "template"],
)
def test_a_cancel_marks_a_running_request_once(cancel: bytes) -> None:
    peer: P = Peer()
    event = peer.receive(frame(req(5, "m")))
    assert type(event) is RequestReceived
    got = peer.receive(cancel)
    assert type(got) is CancelReceived
    assert got.entry is event.entry
    assert event.entry.cancel_requested
    assert peer.receive(cancel) is None  # a repeated cancel does nothing


@pytest.mark.parametrize(
    "params",
    [None, {}, {"requestId": True}, {"requestId": 1.5}, {"requestId": [1]}, [5]],
)
def test_a_malformed_cancel_is_ignored_and_never_answered(params: Any) -> None:
    peer: P = Peer()
    assert type(peer.receive(frame(req(5, "m")))) is RequestReceived
    msg: dict[str, Any] = {"jsonrpc": "2.0", "method": "$/cancel_request"}
    if params is not None:
        msg["params"] = params
    assert peer.receive(frame(msg)) is None
    assert not peer.table.incoming[5].cancel_requested


def test_a_cancel_for_an_unknown_id_is_ignored() -> None:
    peer: P = Peer()
    assert peer.receive(cancel_request_frame(42)) is None


def test_notifications_are_events_and_never_answered() -> None:
    peer: P = Peer()
    event = peer.receive(frame({"jsonrpc": "2.0", "method": "note", "params": [1]}))
    assert type(event) is NotificationReceived
    assert (event.method, event.params) == ("note", [1])


def test_method_names_are_shared_and_bounded() -> None:
    peer: P = Peer()
    a = peer.receive(frame(req(1, "session/" + "x")))
    b = peer.receive(frame(req(2, "session/" + "x")))
    assert type(a) is RequestReceived
    assert type(b) is RequestReceived
    assert a.entry.method is b.entry.method
    long_name = "y" * 10_000
    c = peer.receive(frame(req(3, long_name)))
    d = peer.receive(frame(req(4, long_name)))
    assert type(c) is RequestReceived
    assert type(d) is RequestReceived
    assert c.entry.method is not d.entry.method  # long names are not kept
    firsts = [peer.receive(frame(req(100 + i, f"m{i}"))) for i in range(600)]
    last = peer.receive(frame(req(1000, "m599")))
    first = peer.receive(frame(req(1001, "m0")))
    assert type(last) is RequestReceived
    assert type(first) is RequestReceived
    assert all(type(e) is RequestReceived for e in (firsts[0], firsts[-1]))
    assert last.entry.method is firsts[-1].entry.method  # a recent name is still shared
    assert first.entry.method is not firsts[0].entry.method  # an old one was let go: bounded


# ---------------------------------------------------------------------------
# Invalid input


@pytest.mark.parametrize(
    "data",
    [b"{not json", b"\xff\xfe", b'{"jsonrpc":"2.0","id":1,"method":"m","params":NaN}', b""],
)
def test_unparsable_input_is_answered_parse_error_with_a_null_id(data: bytes) -> None:
    reply = answer(Peer().receive(data))
    assert reply["id"] is None
    assert reply["error"]["code"] == -32700


def test_an_unparsable_reply_fails_its_call_and_is_not_answered() -> None:
    peer: P = Peer()
    entry, _ = peer.send_request("m")
    event = peer.receive(b'{"jsonrpc":"2.0","id":%d,"result":{"x": NaN}}' % entry.id)
    assert type(event) is ReplyReceived
    assert event.entry is entry
    assert isinstance(event.error, RemoteProtocolError)
    assert peer.table.outgoing == {}
    # An unparsable reply to no pending call is dropped, not answered.
    assert peer.receive(b'{"id": "zz", "result": NaN}') is None


@pytest.mark.parametrize(
    ("value", "reply_id"),
    [
        ([], None),
        (5, None),
        ({"jsonrpc": "1.0", "id": 3, "method": "m"}, 3),
        ({"jsonrpc": "2.0", "id": 3, "method": 7}, None),
        ({"jsonrpc": "2.0", "id": 3, "method": "m", "params": 5}, 3),
        ({"jsonrpc": "2.0", "id": True, "method": "m"}, None),
        ({"jsonrpc": "2.0"}, None),
    ],
)
def test_an_invalid_request_is_answered_invalid_request(value: Any, reply_id: Any) -> None:
    reply = answer(Peer().receive(frame(value)))
    assert reply["id"] == reply_id
    assert reply["error"]["code"] == -32600


@pytest.mark.parametrize(
    "value",
    [
        {"jsonrpc": "2.0", "result": 1},  # no id
        {"jsonrpc": "2.0", "error": {"code": -1, "message": "x"}},  # no id
        {"jsonrpc": "2.0", "id": 0, "result": 1, "error": {"code": 1, "message": "x"}},
        {"jsonrpc": "2.0", "id": 0, "error": "bad"},
        {"jsonrpc": "1.0", "id": 0, "result": 1},
        {"jsonrpc": "2.0", "id": 1.5, "result": 1},
    ],
)
def test_a_response_is_never_answered_and_a_malformed_one_fails_its_call(value: Any) -> None:
    peer: P = Peer()
    entry, _ = peer.send_request("m")
    event = peer.receive(frame(value))
    assert type(event) is not SendFrame
    if event is not None:
        assert type(event) is ReplyReceived
        assert event.entry is entry
        assert isinstance(event.error, RemoteProtocolError)


def test_oversized_frames() -> None:
    peer: P = Peer()
    entry, _ = peer.send_request("m")
    head = b'{"jsonrpc":"2.0","id":%d,"result":"' % entry.id
    event = peer.receive(OversizedFrame(10_000, 100, head, b'xxxx"}'))
    assert type(event) is ReplyReceived
    assert isinstance(event.error, MessageTooLarge)
    # A request is answered, with its id when it shows...
    reply = answer(
        peer.receive(OversizedFrame(10_000, 100, b'{"id":9,"method":"m","params":', b"}"))
    )
    assert reply["id"] == 9
    assert reply["error"]["message"] == "Request too large"
    # ... with id null when it does not...
    reply = answer(peer.receive(OversizedFrame(10_000, 100, b"[[[[", b"]]]]")))
    assert reply["id"] is None
    # ... and a notification never.
    assert peer.receive(OversizedFrame(10_000, 100, b'{"method":"m","params":"', b'"}')) is None


# ---------------------------------------------------------------------------
# Outgoing requests and replies


def test_send_request_and_its_reply() -> None:
    peer: P = Peer()
    entry, data = peer.send_request("echo", {"a": 1})
    assert json.loads(data) == {
        "jsonrpc": "2.0",
        "id": entry.id,
        "method": "echo",
        "params": {"a": 1},
    }
    event = peer.receive(frame(ok(entry.id, "r")))
    assert type(event) is ReplyReceived
    assert (event.entry, event.result, event.error) == (
        entry,
        "r",
        None,
    )
    assert peer.receive(frame(ok(entry.id, "again"))) is None  # a repeated reply is dropped


def test_an_error_reply() -> None:
    peer: P = Peer()
    entry, _ = peer.send_request("m")
    event = peer.receive(frame(err(entry.id, -32001, "nope")))
    assert type(event) is ReplyReceived
    assert isinstance(event.error, RequestError)
    assert (event.error.code, event.error.message) == (-32001, "nope")


def test_a_request_params_json_cannot_express_registers_nothing() -> None:
    peer: P = Peer()
    with pytest.raises(Exception, match="cannot be encoded"):
        peer.send_request("m", {"x": {1, 2}})
    assert peer.table.outgoing == {}


def test_cancel_is_sent_once_and_a_late_reply_dropped(caplog: pytest.LogCaptureFixture) -> None:
    peer: P = Peer()
    entry, _ = peer.send_request("m")
    assert peer.cancel(entry) == cancel_request_frame(entry.id)
    assert peer.cancel(entry) is None
    peer.cancel_not_sent(entry)
    assert peer.cancel(entry) == cancel_request_frame(entry.id)
    peer.abandon(entry)
    for late in (
        cancelled_reply_frame(entry.id),
        frame(ok(entry.id, None)),
        frame(err(entry.id, -32000, "no")),
    ):
        assert peer.receive(late) is None
    assert [r for r in caplog.records if r.levelno >= 30] == []


def test_a_reply_to_an_id_never_issued_is_warned_about(caplog: pytest.LogCaptureFixture) -> None:
    peer: P = Peer()
    assert peer.receive(frame(ok(99, None))) is None
    assert peer.receive(cancelled_reply_frame(98)) is None
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= 30]
    assert warnings == [
        "dropping reply to unknown request id 99",
        "dropping reply to unknown request id 98",
    ]


def test_templates_off_gives_the_same_outcome() -> None:
    for templates in (True, False):
        peer: P = Peer()
        peer.templates = templates
        event = peer.receive(frame(req(5, "m")))
        assert type(event) is RequestReceived
        assert type(peer.receive(cancel_request_frame(5))) is CancelReceived
        out, _ = peer.send_request("m")
        peer.abandon(out)
        assert peer.receive(cancelled_reply_frame(out.id)) is None


def test_notify_and_close() -> None:
    peer: P = Peer()
    assert json.loads(peer.notify("n", [1])) == {"jsonrpc": "2.0", "method": "n", "params": [1]}
    event = peer.receive(frame(req(1, "m")))
    out, _ = peer.send_request("m")
    assert type(event) is RequestReceived
    assert peer.close() == ([event.entry], [out])
    assert len(peer.table) == 0


# ---------------------------------------------------------------------------
# The one classifier against a slow, obviously correct reference


def _is_id(value: Any) -> bool:
    return (
        value is None
        or (isinstance(value, int) and not isinstance(value, bool))
        or (isinstance(value, str))
    )


def reference_kind(value: Any) -> int:
    """JSON-RPC 2.0 as ACP v1 uses it, spelled out one rule at a time."""
    if not isinstance(value, dict):
        return INVALID
    if "jsonrpc" not in value or not isinstance(value["jsonrpc"], str):
        return INVALID
    if value["jsonrpc"] != "2.0":
        return INVALID
    keys = set(value)
    if "method" in keys:
        if not isinstance(value["method"], str):
            return INVALID
        params = value.get("params")
        if not (params is None or isinstance(params, (dict, list))):
            return INVALID
        if "id" not in keys:
            return NOTIFICATION
        return REQUEST if _is_id(value["id"]) else INVALID
    if "id" not in keys or not _is_id(value["id"]):
        return INVALID
    if "result" in keys and "error" in keys:
        return INVALID
    if "result" in keys:
        return RESULT
    if "error" not in keys:
        return INVALID
    error = value["error"]
    if not isinstance(error, dict):
        return INVALID
    code = error.get("code")
    if not isinstance(code, int) or isinstance(code, bool):
        return INVALID
    if not isinstance(error.get("message"), str):
        return INVALID
    return ERROR_REPLY


_KIND_OF_MESSAGE = {
    Request: REQUEST,
    Notification: NOTIFICATION,
    Response: RESULT,
    ErrorResponse: ERROR_REPLY,
    InvalidMessage: INVALID,
}

_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text()
json_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)
_ids = st.none() | st.integers() | st.text(max_size=3) | st.booleans() | st.floats() | json_values
_errors = (
    st.fixed_dictionaries(
        {},
        optional={
            "code": st.integers() | st.booleans() | st.text(max_size=2) | st.none(),
            "message": st.text(max_size=3) | st.integers() | st.none(),
            "data": json_values,
        },
    )
    | json_values
)
_members = {
    "method": st.sampled_from(["m", "$/cancel_request"]) | json_values,
    "id": _ids,
    "params": st.none()
    | st.dictionaries(st.text(max_size=3), json_values, max_size=2)
    | st.lists(json_values, max_size=2)
    | json_values,
    "result": json_values,
    "error": _errors,
}
message_like = st.fixed_dictionaries(
    {},
    optional={
        "jsonrpc": st.sampled_from(["2.0", "1.0", "2", ""]) | st.just(2.0) | json_values,
        **_members,
    },
)
# Mostly valid envelopes, so that every rule past the envelope is reached.
message_like_2 = st.fixed_dictionaries({"jsonrpc": st.just("2.0")}, optional=_members)
values = message_like_2 | message_like | json_values


@settings(max_examples=examples(1000), deadline=None)
@given(values)
def test_the_classifier_agrees_with_the_reference_on_json_values(value: Any) -> None:
    expected = reference_kind(value)
    assert message_kind(value) == expected
    assert _KIND_OF_MESSAGE[type(classify(value))] == expected


def reference_decode(data: bytes) -> Any:
    """Strict JSON (no NaN or Infinity), UTF-8, a leading BOM tolerated;
    ``INVALID_JSON`` when it is not."""

    def reject(name: str) -> Any:
        raise ValueError(name)

    try:
        text = data.decode("utf-8")
        if text.startswith("\ufeff"):
            text = text[1:]
        return json.loads(text, parse_constant=reject)
    except (ValueError, RecursionError):
        return INVALID_JSON


INVALID_JSON = object()

# Bytes: random ones, JSON of message-like values, and those cut or spliced.
_encoded = values.map(lambda v: json.dumps(v, separators=(",", ":")).encode())
frames = (
    st.binary(max_size=40)
    | _encoded
    | st.tuples(_encoded, st.integers(0, 60)).map(lambda t: t[0][: t[1]])
    | st.tuples(_encoded, st.binary(max_size=4), st.integers(0, 60)).map(
        lambda t: t[0][: t[2]] + t[1] + t[0][t[2] :]
    )
)


@settings(max_examples=examples(1000), deadline=None)
@given(frames)
def test_the_classifier_agrees_with_the_reference_on_bytes(data: bytes) -> None:
    decoded = reference_decode(data)
    message = parse_frame(data)
    if decoded is INVALID_JSON:
        assert type(message) is InvalidMessage
        assert message.error.code in (-32700, -32600)  # -32600: nested too deeply
        return
    expected = reference_kind(decoded)
    assert _KIND_OF_MESSAGE[type(message)] == expected
    # The peer routes the same way (a fresh peer: no request in flight).
    event = Peer().receive(data)
    if expected == REQUEST:
        assert type(event) is RequestReceived
    elif expected == NOTIFICATION:
        if decoded["method"] == "$/cancel_request":
            assert event is None  # nothing running to cancel
        else:
            assert type(event) is NotificationReceived
    elif expected in (RESULT, ERROR_REPLY):
        assert event is None  # a reply to nothing we sent: dropped
    else:
        # Looks like a response: no method, and a result or an error, or
        # (for a 2.0 message) a valid id.
        is_reply = (
            isinstance(decoded, dict)
            and "method" not in decoded
            and (
                "result" in decoded
                or "error" in decoded
                or (decoded.get("jsonrpc") == "2.0" and "id" in decoded and _is_id(decoded["id"]))
            )
        )
        if is_reply:
            assert event is None  # never answered
        else:
            assert type(event) is SendFrame


def test_deep_nesting_is_invalid_not_a_crash() -> None:
    data = b"[" * (sys.getrecursionlimit() + 100) + b"]" * (sys.getrecursionlimit() + 100)
    assert type(parse_frame(data)) is InvalidMessage
    assert type(Peer().receive(data)) is SendFrame
