"""The JSON backends decode alike: round trips and decoding edge cases.

(Split from one file; the shared helpers are in ``json_cases.py``.)
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from budget import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_trio._jsonrpc._messages import (
    InvalidMessage,
    Request,
    Response,
    decode_frame,
    encode_frame,
    parse_frame,
)
from jsonrpc.json_cases import (
    BACKENDS,
    FUZZ,
    PARSE_ERROR,
    decode_everywhere,
    encode_everywhere,
    json_values,
    outcome_of_decode,
    same,
    same_outcome,
    using,
)

# --- 1. round trips --------------------------------------------------------------


@FUZZ
@given(value=json_values)
def test_round_trip_keeps_values_and_types(backend: str, value: Any) -> None:
    frame = encode_frame(value)
    assert frame.endswith(b"\n")
    assert not frame.endswith(b"\n\n")
    assert b"\n" not in frame[:-1]
    body = frame[:-1]
    decoded = {}
    for name in BACKENDS:
        with using(name):
            decoded[name] = decode_frame(body)
            # A frame a peer sends with its line end still attached reads the same.
            assert same(decode_frame(frame), decoded[name]), name
        assert same(decoded[name], value), (name, body[:200], decoded[name])
    for name in BACKENDS:
        assert same(decoded[name], decoded[BACKENDS[0]])


@FUZZ
@given(value=json_values)
def test_both_backends_encode_to_the_same_json(value: Any) -> None:
    outcome = encode_everywhere(value)
    assert outcome[0] == "frame"
    assert same(outcome[1], value)


@FUZZ
@given(value=json_values)
def test_messages_with_big_ids_and_params_parse_the_same(backend: str, value: Any) -> None:
    frame = encode_frame({"jsonrpc": "2.0", "id": 2**64, "method": "m", "params": [value]})
    for name in BACKENDS:
        with using(name):
            msg = parse_frame(frame[:-1])
        assert type(msg) is Request, (name, msg)
        assert type(msg.id) is int
        assert msg.id == 2**64
        assert same(msg.params, [value]), name


@settings(max_examples=examples(200), deadline=None)
@given(
    text=st.from_regex(
        r"-?(0|[1-9][0-9]{0,30})(\.[0-9]{1,30})?([eE][+-]?[0-9]{1,4})?", fullmatch=True
    )
)
def test_numbers_read_the_same(text: str) -> None:
    outcome = decode_everywhere(text.encode())
    assert outcome[0] == "value"
    expected = json.loads(text)
    assert same(outcome[1], expected), (text, outcome)


@settings(max_examples=examples(300), deadline=None)
@given(
    frame=st.one_of(
        st.binary(max_size=40),
        st.text(st.sampled_from(list('[]{}:," 0123456789.eE-+tfrunlasNIy\\\ufeff\n\t'))).map(
            str.encode
        ),
    )
)
def test_arbitrary_bytes_decode_the_same(frame: bytes) -> None:
    decode_everywhere(frame)


def test_decoded_value_is_identical_across_backends_for_a_mixed_frame() -> None:
    frame = (
        '{"a":[1,-0,0.5,-0.0,1e-400,18446744073709551615,-9223372036854775809,'
        '"é\\u00e9\\ud800\\u2028",true,false,null],"b":{"c":{"d":[]}},"big":1e300}'
    ).encode()
    outcome = decode_everywhere(frame)
    assert same(
        outcome[1],
        {
            "a": [
                1,
                0,
                0.5,
                -0.0,
                0.0,
                18446744073709551615,
                -9223372036854775809,
                "éé\ud800\u2028",
                True,
                False,
                None,
            ],
            "b": {"c": {"d": []}},
            "big": 1e300,
        },
    )


# --- 2. decode edge cases --------------------------------------------------------

INVALID = object()

DECODE_CASES: list[tuple[str, bytes, Any]] = [
    ("bom", b'\xef\xbb\xbf{"a":1}', {"a": 1}),
    ("bom-scalar", b"\xef\xbb\xbf7", 7),
    ("bom-only", b"\xef\xbb\xbf", INVALID),
    ("bom-after-space", b' \xef\xbb\xbf{"a":1}', INVALID),
    ("double-bom", b"\xef\xbb\xbf\xef\xbb\xbf1", INVALID),
    ("whitespace", b' \t\r\n {"a" : [ 1 , 2 ] } \r\n\t ', {"a": [1, 2]}),
    ("whitespace-scalar", b"  12  ", 12),
    ("form-feed-is-not-whitespace", b"\x0c1", INVALID),
    ("nbsp-is-not-whitespace", b"\xc2\xa01", INVALID),
    ("trailing-garbage", b'{"a":1}x', INVALID),
    ("trailing-value", b'{"a":1} {"b":2}', INVALID),
    ("trailing-comma", b"[1,]", INVALID),
    ("trailing-nul", b"1\x00", INVALID),
    ("NaN", b"NaN", INVALID),
    ("Infinity", b"Infinity", INVALID),
    ("-Infinity", b"-Infinity", INVALID),
    ("nested-NaN", b'{"x":[1,NaN]}', INVALID),
    ("nested-Infinity", b'{"x":Infinity}', INVALID),
    ("nested--Infinity", b"[-Infinity]", INVALID),
    ("lone-high-surrogate", b'"\\ud800"', "\ud800"),
    ("lone-low-surrogate", b'"\\udfff"', "\udfff"),
    ("lone-surrogate-in-key", b'{"\\udc00x":1}', {"\udc00x": 1}),
    ("lone-surrogate-then-text", b'["a\\ud800b"]', ["a\ud800b"]),
    ("escaped-pair", b'"\\ud83d\\ude00"', "\U0001f600"),
    ("raw-surrogate-bytes", b'"\xed\xa0\x80"', INVALID),
    ("18-digits", b"999999999999999999", 999999999999999999),
    ("-18-digits", b"-999999999999999999", -999999999999999999),
    ("19-digits", b"1234567890123456789", 1234567890123456789),
    ("-19-digits", b"-1234567890123456789", -1234567890123456789),
    ("i64-max", b"9223372036854775807", 9223372036854775807),
    ("i64-min", b"-9223372036854775808", -9223372036854775808),
    ("i64-max+1", b"9223372036854775808", 9223372036854775808),
    ("i64-min-1", b"-9223372036854775809", -9223372036854775809),
    ("u64-max", b"18446744073709551615", 18446744073709551615),
    ("u64-max+1", b"18446744073709551616", 18446744073709551616),
    ("20-digits", b"12345678901234567890", 12345678901234567890),
    ("-20-digits", b"-12345678901234567890", -12345678901234567890),
    ("25-digits", b"1234567890123456789012345", 1234567890123456789012345),
    ("-25-digits", b"-1234567890123456789012345", -1234567890123456789012345),
    ("big-int-nested", b'{"a":[{"b":18446744073709551616}]}', {"a": [{"b": 2**64}]}),
    ("big-int-key-value", b'{"n":-18446744073709551617}', {"n": -(2**64) - 1}),
    ("1e400", b"1e400", math.inf),
    ("-1e400", b"-1e400", -math.inf),
    ("1e400-nested", b'{"x":[1E+400]}', {"x": [math.inf]}),
    ("1e-400", b"1e-400", 0.0),
    ("-1e-400", b"-1e-400", -0.0),
    ("-0", b"-0", 0),
    ("-0.0", b"-0.0", -0.0),
    ("0e0", b"0e0", 0.0),
    ("1.0", b"1.0", 1.0),
    ("1E2", b"1E2", 100.0),
    ("20-digit-float", b"0.12345678901234567890", 0.12345678901234567890),
    ("long-mantissa-float", b"123456789012345.678901234", 123456789012345.678901234),
    ("min-subnormal", b"5e-324", 5e-324),
    ("max-float", b"1.7976931348623157e308", 1.7976931348623157e308),
    ("leading-zero", b"01", INVALID),
    ("bare-minus", b"-", INVALID),
    ("bare-dot", b".5", INVALID),
    ("dot-no-digits", b"1.", INVALID),
    ("plus", b"+1", INVALID),
    ("hex", b"0x10", INVALID),
    ("duplicate-keys", b'{"a":1,"b":2,"a":3}', {"a": 3, "b": 2}),
    ("duplicate-keys-nested", b'{"x":{"k":[1],"k":{"z":null}}}', {"x": {"k": {"z": None}}}),
    ("invalid-utf8", b'"\xff"', INVALID),
    ("invalid-utf8-outside-string", b"\xff", INVALID),
    ("overlong-utf8", b'"\xc0\x80"', INVALID),
    ("beyond-unicode", b'"\xf4\x90\x80\x80"', INVALID),
    ("truncated-utf8", b'"\xe2\x82"', INVALID),
    ("empty", b"", INVALID),
    ("only-whitespace", b" \t ", INVALID),
    ("digits-in-string", b'{"s":"12345678901234567890123"}', {"s": "12345678901234567890123"}),
    ("digits-in-key", b'{"1234567890123456789":1.5}', {"1234567890123456789": 1.5}),
    (
        "digits-in-string-with-floats",
        b'{"s":"x9999999999999999999y","f":[0.1,2.5e-3]}',
        {"s": "x9999999999999999999y", "f": [0.1, 2.5e-3]},
    ),
    ("control-char-raw", b'"a\x01b"', INVALID),
    ("raw-newline-in-string", b'"a\nb"', INVALID),
    ("raw-tab-in-string", b'"a\tb"', INVALID),
    ("del-raw", b'"\x7f"', "\x7f"),
    ("escapes", b'"\\n\\t\\"\\\\\\/\\u0000"', '\n\t"\\/\x00'),
    ("bad-escape", b'"\\x41"', INVALID),
    ("short-unicode-escape", b'"\\u12"', INVALID),
    ("single-quotes", b"'a'", INVALID),
    ("unquoted-key", b"{a:1}", INVALID),
    ("non-ascii", '{"ключ":"значение 😀 \u2028"}'.encode(), {"ключ": "значение 😀 \u2028"}),
    ("true", b"true", True),
    ("null", b"null", None),
    ("True", b"True", INVALID),
    ("unterminated", b'{"a":', INVALID),
    ("unterminated-string", b'"abc', INVALID),
    # orjson decodes a frame only when it can tell orjson and the stdlib agree
    # (see decode_frame): these sit on either side of that line.
    ("many-short-numbers", b"[" + b",".join([b"12345"] * 10) + b"]", [12345] * 10),
    (
        "19-digit-int",
        b'{"a":[1,2],"n":1234567890123456789}',
        {"a": [1, 2], "n": 1234567890123456789},
    ),
    ("19-digits-in-a-string", b'{"s":"1234567890123456789"}', {"s": "1234567890123456789"}),
    ("300-shallow-openers", b"[" + b",".join([b"{}"] * 300) + b"]", [{}] * 300),
    ("depth-255", b"[" * 255 + b"]" * 255, json.loads(b"[" * 255 + b"]" * 255)),
    (
        "big-int-past-4096-bytes",
        b'{"t":"' + b"x" * 5000 + b'","n":18446744073709551616}',
        {"t": "x" * 5000, "n": 2**64},
    ),
]


@pytest.mark.parametrize(
    ("frame", "expected"), [c[1:] for c in DECODE_CASES], ids=[c[0] for c in DECODE_CASES]
)
def test_decode_edge_cases(backend: str, frame: bytes, expected: Any) -> None:
    got = outcome_of_decode(frame)
    if expected is INVALID:
        assert got[0] == "invalid", got
        assert got[1] == PARSE_ERROR
    else:
        assert got[0] == "value", got
        assert same(got[1], expected), got
    # ... and exactly what the other backend gives, error message included.
    assert same_outcome(got, decode_everywhere(frame))


def _deep_frame(shape: str, depth: int) -> bytes:
    if shape == "array":
        return b"[" * depth + b"]" * depth
    return b'{"a":' * depth + b"1" + b"}" * depth


#: Deeper than any supported Python decodes: where the stdlib gives up depends
#: on the interpreter (3.11 at about a thousand levels, 3.13 past 5,000).
TOO_DEEP = 100_000


@pytest.mark.parametrize("depth", [10, 254, 255, 500, 900, 1000, 1024, 1025, 1100, 5000, TOO_DEEP])
@pytest.mark.parametrize("shape", ["array", "object"])
def test_deep_nesting_decodes_the_same(backend: str, depth: int, shape: str) -> None:
    frame = _deep_frame(shape, depth)
    # Never raises, under either backend; the same value or the same error.
    got = outcome_of_decode(frame)
    msg = parse_frame(frame)
    assert isinstance(msg, InvalidMessage)
    assert same_outcome(got, decode_everywhere(frame)), (shape, depth, got[0])
    if depth >= TOO_DEEP:
        assert got[0] == "invalid"
        assert got[1] == PARSE_ERROR
        assert msg.error.code == PARSE_ERROR


def test_deep_nesting_inside_a_message_is_the_same(backend: str) -> None:
    frame = (
        b'{"jsonrpc":"2.0","id":1,"method":"m","params":' + b"[" * TOO_DEEP + b"]" * TOO_DEEP + b"}"
    )
    msg = parse_frame(frame)
    assert isinstance(msg, InvalidMessage)
    assert msg.error.code == PARSE_ERROR
    assert same_outcome(outcome_of_decode(frame), decode_everywhere(frame))


PARSE_CASES: list[tuple[str, bytes, Any]] = [
    (
        "big-request-id",
        b'{"jsonrpc":"2.0","id":9223372036854775808,"method":"m","params":{"n":18446744073709551616}}',
        Request(9223372036854775808, "m", {"n": 18446744073709551616}),
    ),
    (
        "big-negative-response-id",
        b'{"jsonrpc":"2.0","id":-9223372036854775809,"result":[1e400,-0]}',
        Response(-9223372036854775809, [math.inf, 0]),
    ),
    (
        "bom-request",
        b'\xef\xbb\xbf {"jsonrpc":"2.0","id":"\\ud800","method":"m"} ',
        Request("\ud800", "m", None),
    ),
    (
        "duplicate-id",
        b'{"jsonrpc":"2.0","id":1,"id":12345678901234567890,"result":null}',
        Response(12345678901234567890, None),
    ),
]


@pytest.mark.parametrize(
    ("frame", "expected"), [c[1:] for c in PARSE_CASES], ids=[c[0] for c in PARSE_CASES]
)
def test_parse_frame_edge_cases(backend: str, frame: bytes, expected: Any) -> None:
    msg = parse_frame(frame)
    assert type(msg) is type(expected), msg
    assert same(msg.id, expected.id)  # type: ignore[union-attr]
    if type(expected) is Request:
        assert msg.method == expected.method  # type: ignore[union-attr]
        assert same(msg.params, expected.params)  # type: ignore[union-attr]
    else:
        assert same(msg.result, expected.result)  # type: ignore[union-attr]


def test_surrogate_pair_written_separately_reads_back_as_one() -> None:
    # Two lone surrogates in a row are written as two \u escapes, which JSON
    # reads as one character: the same under both backends.
    outcome = encode_everywhere(["\ud83d\ude00"])
    assert same(outcome[1], ["\U0001f600"])
    assert same(decode_everywhere(outcome[2][:-1]), ("value", ["\U0001f600"]))
