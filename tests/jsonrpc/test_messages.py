"""parse_frame / classify / encode_frame: the JSON-RPC 2.0 rules of ``_messages``."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from budget import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_trio._exceptions import ErrorCode, RequestError
from acp_trio._jsonrpc import (
    ErrorResponse,
    InvalidMessage,
    LineDecoder,
    Notification,
    Request,
    Response,
    classify,
    encode_frame,
    error_response,
    is_request_id,
    notification,
    parse_frame,
    request,
    response,
)

PARSE_ERROR = -32700
INVALID_REQUEST = -32600


def same_json(a: Any, b: Any) -> bool:
    """Equality that also requires equal types (1 != 1.0 != True, 0.0 != -0.0)."""
    if type(a) is not type(b):
        return False
    if type(a) is dict:
        return list(a) == list(b) and all(same_json(a[k], b[k]) for k in a)
    if type(a) is list:
        return len(a) == len(b) and all(same_json(x, y) for x, y in zip(a, b, strict=True))
    if type(a) is float:
        return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
    return bool(a == b)


def assert_invalid(
    msg: object,
    code: int,
    reply_id: Any = None,
    response_id: Any = None,
) -> InvalidMessage:
    assert isinstance(msg, InvalidMessage), msg
    assert msg.error.code == code
    assert same_json(msg.reply_id, reply_id), msg.reply_id
    assert same_json(msg.response_id, response_id), msg.response_id
    return msg


# Parse errors: -32700, id null


@pytest.mark.parametrize(
    "frame",
    [
        b"\xff\xfe{}",
        b'{"jsonrpc":"2.0","id":1,"method":"m\xc3"}',  # truncated multibyte char
        b'{"jsonrpc":"2.0","id":1,"method":"\xed\xa0\x80"}',  # UTF-8-encoded surrogate
        b'{"jsonrpc":"2.0","id":1,"method":"\xc0\xaf"}',  # overlong encoding
    ],
)
def test_invalid_utf8_is_a_parse_error(frame: bytes) -> None:
    msg = assert_invalid(parse_frame(frame), PARSE_ERROR)
    assert msg.error.message == "Parse error"
    assert "UTF-8" in str(msg.error.data)


@pytest.mark.parametrize(
    "frame",
    [
        b"",
        b"{",
        b'{"jsonrpc":"2.0","id":1,"method":"m"',
        b'{"jsonrpc":"2.0","id":1,"method":"m",}',
        b"{'jsonrpc':'2.0'}",
        b'{"jsonrpc":"2.0","id":1,"method":"m"} x',
        b'{"jsonrpc":"2.0","method":"a"}{"jsonrpc":"2.0","method":"b"}',
        b"NaN",
        b"Infinity",
        b"-Infinity",
        b'{"jsonrpc":"2.0","id":1,"method":"m","params":[NaN]}',
        b'{"jsonrpc":"2.0","id":1,"method":"m","params":{"x":Infinity}}',
        b'{"jsonrpc":"2.0","id":1,"result":-Infinity}',
        b"\xef\xbb\xbf\xef\xbb\xbf{}",  # only one BOM is tolerated
    ],
)
def test_invalid_json_is_a_parse_error_with_null_id(frame: bytes) -> None:
    msg = assert_invalid(parse_frame(frame), PARSE_ERROR)
    assert msg.error.message == "Parse error"
    assert str(msg.error.data).startswith("invalid JSON")


def test_too_deep_nesting_is_a_parse_error_not_a_crash() -> None:
    deep = b"[" * 100_000 + b"]" * 100_000
    assert_invalid(parse_frame(deep), PARSE_ERROR)
    nested = b'{"jsonrpc":"2.0","id":1,"method":"m","params":' + deep + b"}"
    assert_invalid(parse_frame(nested), PARSE_ERROR)


def test_bom_is_tolerated() -> None:
    frame = b'\xef\xbb\xbf{"jsonrpc":"2.0","id":3,"method":"m","params":{}}'
    assert parse_frame(frame) == Request(3, "m", {})


def test_whitespace_around_the_object_is_tolerated() -> None:
    assert parse_frame(b' \t{"jsonrpc":"2.0","method":"m"} \r') == Notification("m")


# Not a message object: -32600, id null


@pytest.mark.parametrize(
    "frame",
    [
        b'[{"jsonrpc":"2.0","id":1,"method":"m"}]',
        b"[]",
        b"42",
        b"-1.5",
        b'"x"',
        b"null",
        b"true",
        b"false",
    ],
)
def test_non_object_is_an_invalid_request_with_null_id(frame: bytes) -> None:
    msg = assert_invalid(parse_frame(frame), INVALID_REQUEST)
    assert msg.error.message == "Invalid request"


def test_batch_reason_mentions_batches() -> None:
    msg = assert_invalid(parse_frame(b"[]"), INVALID_REQUEST)
    assert "batch" in str(msg.error.data)


# Invalid objects: answered with their id when they name a method and a valid id


@pytest.mark.parametrize(
    ("obj", "reply_id"),
    [
        ({"jsonrpc": "1.0", "id": 1, "method": "m"}, 1),
        ({"jsonrpc": "1.0", "id": "abc", "method": "m"}, "abc"),
        ({"jsonrpc": "1.0", "id": 0, "method": "m"}, 0),
        ({"jsonrpc": "1.0", "id": None, "method": "m"}, None),
        ({"jsonrpc": "1.0", "id": 1.5, "method": "m"}, None),
        ({"id": 4, "method": "m"}, 4),  # no "jsonrpc" at all
        ({"jsonrpc": 2.0, "id": 5, "method": "m"}, 5),
        ({"jsonrpc": None, "id": 6, "method": "m"}, 6),
        ({"jsonrpc": "1.0", "id": 1}, None),  # no method: id null
        ({"jsonrpc": "1.0"}, None),
        ({"jsonrpc": "2.0"}, None),  # neither method nor id
        ({"jsonrpc": "2.0", "params": {}}, None),
        ({"jsonrpc": "2.0", "id": 1, "method": 5}, None),  # method not a string
        ({"jsonrpc": "2.0", "id": 1, "method": None}, None),
        ({"jsonrpc": "2.0", "id": 1, "method": ["m"]}, None),
        ({"jsonrpc": "2.0", "method": 5}, None),
        ({"jsonrpc": "2.0", "id": 7, "method": "m", "params": "x"}, 7),
        ({"jsonrpc": "2.0", "id": "7", "method": "m", "params": 3}, "7"),
        ({"jsonrpc": "2.0", "id": 7, "method": "m", "params": True}, 7),
        ({"jsonrpc": "2.0", "id": 7, "method": "m", "params": 1.5}, 7),
        ({"jsonrpc": "2.0", "method": "m", "params": "x"}, None),  # notification
        ({"jsonrpc": "2.0", "id": 1.5, "method": "m"}, None),
        ({"jsonrpc": "2.0", "id": 1.0, "method": "m"}, None),
        ({"jsonrpc": "2.0", "id": True, "method": "m"}, None),
        ({"jsonrpc": "2.0", "id": False, "method": "m"}, None),
        ({"jsonrpc": "2.0", "id": {"n": 1}, "method": "m"}, None),
        ({"jsonrpc": "2.0", "id": [1], "method": "m"}, None),
    ],
)
def test_invalid_request_objects(obj: dict[str, Any], reply_id: Any) -> None:
    frame = json.dumps(obj).encode()
    msg = assert_invalid(parse_frame(frame), INVALID_REQUEST, reply_id=reply_id)
    assert msg.error.message == "Invalid request"
    assert isinstance(msg.error.data, str)
    assert_invalid(classify(obj), INVALID_REQUEST, reply_id=reply_id)


def test_invalid_id_reasons_are_specific() -> None:
    bad_id = assert_invalid(
        parse_frame(b'{"jsonrpc":"2.0","id":true,"method":"m"}'), INVALID_REQUEST
    )
    assert '"id"' in bad_id.error.data
    bad_params = assert_invalid(
        parse_frame(b'{"jsonrpc":"2.0","id":1,"method":"m","params":"p"}'), INVALID_REQUEST, 1
    )
    assert '"params"' in bad_params.error.data
    bad_version = assert_invalid(
        parse_frame(b'{"jsonrpc":"1.0","id":1,"method":"m"}'), INVALID_REQUEST, 1
    )
    assert '"jsonrpc"' in bad_version.error.data


# Ids are kept exactly


@pytest.mark.parametrize(
    "request_id", [0, "0", -1, 1, "1", "", 2**70, -(2**64), "\u00e9\U0001f600", "null"]
)
def test_request_ids_are_kept_exactly(request_id: int | str) -> None:
    frame = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "m"}).encode()
    msg = parse_frame(frame)
    assert isinstance(msg, Request)
    assert type(msg.id) is type(request_id)
    assert msg.id == request_id
    reply = parse_frame(json.dumps({"jsonrpc": "2.0", "id": request_id, "result": 1}).encode())
    assert isinstance(reply, Response)
    assert type(reply.id) is type(request_id)
    assert reply.id == request_id


def test_int_and_string_ids_are_distinct() -> None:
    one = parse_frame(b'{"jsonrpc":"2.0","id":1,"method":"m"}')
    one_str = parse_frame(b'{"jsonrpc":"2.0","id":"1","method":"m"}')
    assert one == Request(1, "m")
    assert one_str == Request("1", "m")
    assert one != one_str


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        (0, True),
        (-5, True),
        ("", True),
        (None, True),
        (True, False),
        (False, False),
        (1.0, False),
        (1.5, False),
        ({}, False),
        ([], False),
    ],
)
def test_is_request_id(value: object, ok: bool) -> None:
    assert is_request_id(value) is ok


# Requests and notifications


def test_notification_has_no_id_and_request_may_have_null_id() -> None:
    assert parse_frame(b'{"jsonrpc":"2.0","method":"m"}') == Notification("m", None)
    msg = parse_frame(b'{"jsonrpc":"2.0","method":"m","id":null}')
    assert msg == Request(None, "m", None)
    assert type(msg) is Request


@pytest.mark.parametrize(
    ("params_json", "params"),
    [
        (b"", None),
        (b',"params":null', None),
        (b',"params":{}', {}),
        (b',"params":[]', []),
        (b',"params":[1,"a",null]', [1, "a", None]),
        (b',"params":{"sessionId":"s","id":9}', {"sessionId": "s", "id": 9}),
    ],
)
def test_params_object_array_or_absent(params_json: bytes, params: Any) -> None:
    req = parse_frame(b'{"jsonrpc":"2.0","id":2,"method":"session/prompt"' + params_json + b"}")
    assert req == Request(2, "session/prompt", params)
    assert isinstance(req, Request)
    assert same_json(req.params, params)
    note = parse_frame(b'{"jsonrpc":"2.0","method":"session/update"' + params_json + b"}")
    assert note == Notification("session/update", params)


def test_key_order_does_not_matter() -> None:
    frame = b'{"params":[1],"method":"m","id":"x","jsonrpc":"2.0"}'
    assert parse_frame(frame) == Request("x", "m", [1])


def test_empty_and_odd_method_names_are_kept() -> None:
    assert parse_frame(b'{"jsonrpc":"2.0","method":""}') == Notification("")
    assert parse_frame(b'{"jsonrpc":"2.0","method":"$/cancel_request","params":{}}') == (
        Notification("$/cancel_request", {})
    )


# Responses


@pytest.mark.parametrize(
    ("frame", "expected"),
    [
        (b'{"jsonrpc":"2.0","id":1,"result":null}', Response(1, None)),
        (b'{"jsonrpc":"2.0","id":"1","result":{"a":[1]}}', Response("1", {"a": [1]})),
        (b'{"jsonrpc":"2.0","id":0,"result":0}', Response(0, 0)),
        (b'{"jsonrpc":"2.0","id":null,"result":false}', Response(None, False)),
    ],
)
def test_responses(frame: bytes, expected: Response) -> None:
    msg = parse_frame(frame)
    assert msg == expected
    assert isinstance(msg, Response)
    assert same_json(msg.result, expected.result)
    assert same_json(msg.id, expected.id)


@pytest.mark.parametrize(
    ("obj", "response_id"),
    [
        ({"jsonrpc": "2.0", "id": 1, "result": 1, "error": {"code": 1, "message": "x"}}, 1),
        ({"jsonrpc": "2.0", "id": "r", "result": None, "error": None}, "r"),
        ({"jsonrpc": "2.0", "id": 9}, 9),
        ({"jsonrpc": "2.0", "id": None}, None),
        ({"jsonrpc": "2.0", "id": 3, "error": {"code": True, "message": "x"}}, 3),
        ({"jsonrpc": "2.0", "id": 3, "error": {"code": False, "message": "x"}}, 3),
        ({"jsonrpc": "2.0", "id": 3, "error": {"code": 1.0, "message": "x"}}, 3),
        ({"jsonrpc": "2.0", "id": 3, "error": {"code": "1", "message": "x"}}, 3),
        ({"jsonrpc": "2.0", "id": 3, "error": {"message": "x"}}, 3),
        ({"jsonrpc": "2.0", "id": 3, "error": {"code": -1}}, 3),
        ({"jsonrpc": "2.0", "id": 3, "error": {"code": -1, "message": None}}, 3),
        ({"jsonrpc": "2.0", "id": 3, "error": {"code": -1, "message": 5}}, 3),
        ({"jsonrpc": "2.0", "id": "3", "error": "boom"}, "3"),
        ({"jsonrpc": "2.0", "id": 3, "error": None}, 3),
        ({"jsonrpc": "2.0", "id": 3, "error": [-1, "x"]}, 3),
        # A response with a bad envelope still names the call it answers.
        ({"jsonrpc": "1.0", "id": 4, "result": 1}, 4),
        ({"id": "4", "error": {"code": 1, "message": "m"}}, "4"),
    ],
)
def test_invalid_responses_carry_their_id(obj: dict[str, Any], response_id: Any) -> None:
    msg = assert_invalid(parse_frame(json.dumps(obj).encode()), INVALID_REQUEST, None, response_id)
    assert isinstance(msg.error.data, str)


@pytest.mark.parametrize(
    "obj",
    [
        {"jsonrpc": "2.0", "id": 1.5, "result": 1},
        {"jsonrpc": "2.0", "id": True, "result": 1},
        {"jsonrpc": "2.0", "id": {}, "error": {"code": 1, "message": "m"}},
        {"jsonrpc": "1.0", "id": 1.5, "result": 1},
    ],
)
def test_responses_with_an_invalid_id_carry_none(obj: dict[str, Any]) -> None:
    assert_invalid(parse_frame(json.dumps(obj).encode()), INVALID_REQUEST, None, None)


def test_error_response_without_data() -> None:
    msg = parse_frame(b'{"jsonrpc":"2.0","id":5,"error":{"code":-32601,"message":"nope"}}')
    assert isinstance(msg, ErrorResponse)
    assert msg.id == 5
    assert type(msg.error) is RequestError
    assert msg.error.code == -32601
    assert msg.error.message == "nope"
    assert msg.error.has_data is False
    assert msg.error.data is None
    assert msg.error.to_error_object() == {"code": -32601, "message": "nope"}


def test_error_response_with_null_data_keeps_it() -> None:
    msg = parse_frame(b'{"jsonrpc":"2.0","id":5,"error":{"code":1,"message":"m","data":null}}')
    assert isinstance(msg, ErrorResponse)
    assert msg.error.has_data is True
    assert msg.error.data is None
    assert msg.error.to_error_object() == {"code": 1, "message": "m", "data": None}


def test_error_response_keeps_data_and_ignores_extra_members() -> None:
    frame = (
        b'{"jsonrpc":"2.0","id":"e","error":{"code":-32800,"message":"Request cancelled",'
        b'"data":{"why":["user",1]},"extra":true}}'
    )
    msg = parse_frame(frame)
    assert isinstance(msg, ErrorResponse)
    assert msg.id == "e"
    assert msg.error.code == ErrorCode.REQUEST_CANCELLED
    assert msg.error.is_cancelled
    assert msg.error.has_data
    assert msg.error.data == {"why": ["user", 1]}
    assert msg.error.to_error_object() == {
        "code": -32800,
        "message": "Request cancelled",
        "data": {"why": ["user", 1]},
    }


def test_method_wins_over_result() -> None:
    # "method" present means request, whatever else the object holds.
    msg = parse_frame(b'{"jsonrpc":"2.0","id":1,"method":"m","result":1}')
    assert msg == Request(1, "m")


# encode_frame


def test_encode_is_compact_with_one_trailing_newline() -> None:
    frame = encode_frame(request(1, "session/new", {"cwd": "/tmp", "mcpServers": []}))
    assert frame == (
        b'{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}\n'
    )


def test_wire_helpers() -> None:
    assert request(0, "m") == {"jsonrpc": "2.0", "id": 0, "method": "m"}
    assert request("a", "m", []) == {"jsonrpc": "2.0", "id": "a", "method": "m", "params": []}
    assert notification("n") == {"jsonrpc": "2.0", "method": "n"}
    assert notification("n", {"x": 1}) == {"jsonrpc": "2.0", "method": "n", "params": {"x": 1}}
    assert response(None, None) == {"jsonrpc": "2.0", "id": None, "result": None}
    assert error_response(2, RequestError.method_not_found("zz")) == {
        "jsonrpc": "2.0",
        "id": 2,
        "error": {"code": -32601, "message": "Method not found", "data": {"method": "zz"}},
    }
    assert encode_frame(error_response(None, RequestError.parse_error())) == (
        b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}\n'
    )


@pytest.mark.parametrize(
    "text",
    ["a\nb", "a\r\nb", "line\u2028sep\u2029para", "\x85nel", "\n", "tab\there", "\x00\x1f"],
)
def test_encoded_frame_is_one_line(text: str) -> None:
    frame = encode_frame(notification("m", {"text": text, text: [text]}))
    assert frame.endswith(b"\n")
    assert frame.count(b"\n") == 1
    assert b"\r" not in frame
    assert parse_frame(frame[:-1]) == Notification("m", {"text": text, text: [text]})
    # The decoder splits it back into exactly one frame.
    dec = LineDecoder()
    assert dec.feed(frame) == [frame[:-1]]


def test_non_ascii_is_written_as_utf8() -> None:
    frame = encode_frame(notification("m", ["\u00e9", "\u65e5\u672c", "\U0001f600", "\u2028"]))
    assert frame == (
        b'{"jsonrpc":"2.0","method":"m","params":["\xc3\xa9","\xe6\x97\xa5\xe6\x9c\xac",'
        b'"\xf0\x9f\x98\x80","\xe2\x80\xa8"]}\n'
    )


@pytest.mark.parametrize("lone", [chr(0xD800), chr(0xDFFF), f"a{chr(0xDC00)}b"])
def test_lone_surrogate_still_encodes_to_valid_utf8(lone: str) -> None:
    frame = encode_frame(notification("m", {"s": lone, "ok": "\u00e9"}))
    text = frame.decode("utf-8")  # strict: must not raise
    assert text.endswith("\n")
    assert text.count("\n") == 1
    assert "\\u" in text  # escaped, not raw
    msg = parse_frame(frame[:-1])
    assert msg == Notification("m", {"s": lone, "ok": "\u00e9"})


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_encode_rejects_non_finite_floats(bad: float) -> None:
    with pytest.raises(ValueError, match="JSON compliant"):
        encode_frame(response(1, {"x": [bad]}))


def test_encode_rejects_non_json_values() -> None:
    with pytest.raises(TypeError):
        encode_frame(response(1, {1, 2}))
    with pytest.raises(TypeError):
        encode_frame(response(1, object()))


def test_encode_rejects_circular_and_too_deep_values_with_value_error() -> None:
    loop: dict[str, Any] = {}
    loop["self"] = loop
    with pytest.raises(ValueError, match="circular or nested too deeply"):
        encode_frame(response(1, loop))
    cycle: list[Any] = []
    cycle.append(cycle)
    with pytest.raises(ValueError, match="circular or nested too deeply"):
        encode_frame(notification("m", cycle))
    deep: list[Any] = []
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(ValueError, match="circular or nested too deeply"):
        encode_frame(response(1, deep))


def test_encode_writes_int_enum_codes_as_numbers() -> None:
    frame = encode_frame(error_response(1, RequestError(ErrorCode.INTERNAL_ERROR)))
    assert frame == (
        b'{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"Internal error"}}\n'
    )


# Round trip: encode -> parse is the identity

_chars = st.one_of(
    st.characters(exclude_categories=()),
    st.sampled_from(["\ud800", "\udfff", "\n", "\r", "\u2028", "\x00", '"', "\\", "\ufeff"]),
)
_text = st.text(_chars, max_size=12)
_json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    _text,
)
_json = st.recursive(
    _json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_text, inner, max_size=4),
    max_leaves=16,
)
_ids = st.one_of(st.none(), st.integers(), _text)
_params = st.one_of(
    st.none(), st.lists(_json, max_size=4), st.dictionaries(_text, _json, max_size=4)
)
_codes = st.one_of(st.sampled_from(list(ErrorCode)), st.integers(-(2**31), 2**31 - 1))


def _roundtrip(obj: dict[str, Any]) -> Any:
    frame = encode_frame(obj)
    assert frame.endswith(b"\n")
    assert frame.count(b"\n") == 1
    frame.decode("utf-8")
    return parse_frame(frame[:-1])


@settings(max_examples=examples(300), deadline=None)
@given(request_id=_ids, method=_text, params=_params)
def test_roundtrip_request(request_id: Any, method: str, params: Any) -> None:
    msg = _roundtrip(request(request_id, method, params))
    assert type(msg) is Request
    assert same_json(msg.id, request_id)
    assert msg.method == method
    assert same_json(msg.params, params)


@settings(max_examples=examples(300), deadline=None)
@given(method=_text, params=_params)
def test_roundtrip_notification(method: str, params: Any) -> None:
    msg = _roundtrip(notification(method, params))
    assert type(msg) is Notification
    assert msg.method == method
    assert same_json(msg.params, params)


@settings(max_examples=examples(300), deadline=None)
@given(request_id=_ids, result=_json)
def test_roundtrip_response(request_id: Any, result: Any) -> None:
    msg = _roundtrip(response(request_id, result))
    assert type(msg) is Response
    assert same_json(msg.id, request_id)
    assert same_json(msg.result, result)


@settings(max_examples=examples(300), deadline=None)
@given(
    request_id=_ids,
    code=_codes,
    message=_text,
    data=st.one_of(st.just(...), _json),
)
def test_roundtrip_error_response(request_id: Any, code: int, message: str, data: Any) -> None:
    error = RequestError(code, message) if data is ... else RequestError(code, message, data)
    msg = _roundtrip(error_response(request_id, error))
    assert type(msg) is ErrorResponse
    assert same_json(msg.id, request_id)
    assert msg.error.code == code
    assert msg.error.message == message
    assert msg.error.has_data is (data is not ...)
    if data is not ...:
        assert same_json(msg.error.data, data)
    assert msg.error.to_error_object() == error.to_error_object()


@settings(max_examples=examples(200), deadline=None)
@given(value=_json)
def test_parse_frame_never_raises_on_any_json_value(value: Any) -> None:
    frame = encode_frame(value)[:-1]
    msg = parse_frame(frame)
    if type(value) is not dict:
        assert_invalid(msg, INVALID_REQUEST)


@settings(max_examples=examples(300), deadline=None)
@given(frame=st.binary(max_size=64))
def test_parse_frame_never_raises_on_random_bytes(frame: bytes) -> None:
    msg = parse_frame(frame)
    assert isinstance(msg, Request | Notification | Response | ErrorResponse | InvalidMessage)
