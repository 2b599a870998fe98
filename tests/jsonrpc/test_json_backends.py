"""The two JSON backends of ``_messages`` (orjson and the standard library)
give the same values and the same errors.

orjson only encodes (decoding is always the standard library's), so the
decoding tests pin that the backend switch changes nothing there.

Every test runs its checks under both backends (the ``backend`` fixture, or
:func:`under_each`), comparing values with :func:`same`, which also requires
equal types: an integer that comes back as a float is a failure.
"""

from __future__ import annotations

import collections
import dataclasses
import datetime
import decimal
import enum
import importlib.util
import json
import math
import os
import re
import subprocess
import sys
import tracemalloc
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
from connection.conftest import FnHandler, connection_pair
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from acp_trio._jsonrpc import _messages
from acp_trio._jsonrpc._messages import (
    InvalidMessage,
    Request,
    Response,
    decode_frame,
    encode_frame,
    json_backend,
    parse_frame,
    use_json_backend,
)
from acp_trio.lowlevel import RequestContext

HAVE_ORJSON = importlib.util.find_spec("orjson") is not None
needs_orjson = pytest.mark.skipif(not HAVE_ORJSON, reason="orjson is not installed")
BACKENDS = ["orjson", "stdlib"] if HAVE_ORJSON else ["stdlib"]

PARSE_ERROR = -32700
REPO = Path(__file__).resolve().parents[2]

FUZZ = settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


# --- helpers -----------------------------------------------------------------


@pytest.fixture(params=[pytest.param("orjson", marks=needs_orjson), "stdlib"])
def backend(request: pytest.FixtureRequest) -> Iterator[str]:
    """Run the test under one backend, then restore the one in use before."""
    previous = json_backend()
    use_json_backend(request.param)
    try:
        yield request.param
    finally:
        use_json_backend(previous)


@contextmanager
def using(name: str) -> Iterator[None]:
    previous = json_backend()
    use_json_backend(name)
    try:
        assert json_backend() == name
        yield
    finally:
        use_json_backend(previous)


def under_each(fn: Callable[[], Any]) -> dict[str, Any]:
    """``fn()`` under every available backend, by backend name."""
    results = {}
    for name in BACKENDS:
        with using(name):
            results[name] = fn()
    return results


def same(a: Any, b: Any) -> bool:
    """Equality that also requires equal types, recursively (tuples count as
    lists; ``1``, ``1.0`` and ``True`` differ; so do ``0.0`` and ``-0.0``;
    dict keys must come in the same order). Iterative: deep values are fine."""
    stack = [(a, b)]
    while stack:
        x, y = stack.pop()
        if type(x) is tuple:
            x = list(x)
        if type(y) is tuple:
            y = list(y)
        if type(x) is not type(y):
            return False
        if type(x) is dict:
            if list(x) != list(y):
                return False
            stack.extend((x[k], y[k]) for k in x)
        elif type(x) is list:
            if len(x) != len(y):
                return False
            stack.extend(zip(x, y, strict=True))
        elif type(x) is float:
            if math.isnan(x) or math.isnan(y):
                if not (math.isnan(x) and math.isnan(y)):
                    return False
            elif x != y or math.copysign(1.0, x) != math.copysign(1.0, y):
                return False
        elif x != y:
            return False
    return True


def outcome_of_decode(frame: bytes) -> tuple[Any, ...]:
    """``("value", v)`` or ``("invalid", code, error object)``; never raises."""
    value = decode_frame(frame)
    if type(value) is InvalidMessage:
        assert value.reply_id is None
        assert value.response_id is None
        return ("invalid", value.error.code, value.error.to_error_object())
    return ("value", value)


def same_outcome(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    if a[0] != b[0]:
        return False
    if a[0] == "invalid":
        return a == b
    return same(a[1], b[1])


def decode_everywhere(frame: bytes) -> tuple[Any, ...]:
    """Decode ``frame`` under every backend, check they agree, return the outcome."""
    outcomes = under_each(lambda: outcome_of_decode(frame))
    first = outcomes[BACKENDS[0]]
    for got in outcomes.values():
        assert same_outcome(got, first), (frame[:80], outcomes)
    return first


def outcome_of_encode(value: Any) -> tuple[Any, ...]:
    """``("frame", decoded, frame)`` or ``("raises", type, message)``."""
    try:
        frame = encode_frame(value)
    except Exception as exc:
        return ("raises", type(exc), str(exc))
    assert frame.endswith(b"\n")
    assert frame.count(b"\n") == 1, frame
    # The oracle is the standard json module, not the code under test.
    return ("frame", json.loads(frame), frame)


def encode_everywhere(value: Any) -> tuple[Any, ...]:
    """Encode ``value`` under every backend, check they agree (decoded frames,
    or exception type and message), return the outcome."""
    outcomes = under_each(lambda: outcome_of_encode(value))
    first = outcomes[BACKENDS[0]]
    for name, got in outcomes.items():
        assert got[0] == first[0], (name, outcomes)
        if got[0] == "raises":
            assert got[1:] == first[1:], outcomes
        else:
            assert same(got[1], first[1]), outcomes
    return first


# --- strategies ----------------------------------------------------------------

_SURROGATE_PAIR = re.compile("[\ud800-\udbff][\udc00-\udfff]")

BOUNDARY_INTS = [
    2**31 - 1,
    2**53 + 1,
    10**18 - 1,
    10**18,
    10**19 - 1,
    10**19,
    2**63 - 1,
    2**63,
    2**63 + 1,
    2**64 - 1,
    2**64,
    2**64 + 1,
    2**70,
    2**128,
    10**100,
    2**1000,
]

json_ints = st.one_of(
    st.integers(),
    st.sampled_from(BOUNDARY_INTS + [-n for n in BOUNDARY_INTS] + [-(2**63), -(2**63) - 1]),
    st.integers(min_value=2**63 - 50, max_value=2**64 + 50),
    st.integers(min_value=-(2**64) - 50, max_value=-(2**63) + 50),
    st.integers(min_value=-(10**60), max_value=10**60),
)

# Text with every code point, control characters and lone surrogates included.
# A high surrogate followed by a low one cannot survive JSON (the two \u
# escapes read back as one character), so such strings are left out here and
# covered by test_surrogate_pair_written_separately_reads_back_as_one.
json_text = st.one_of(
    st.text(),
    st.text(st.characters(codec=None, exclude_categories=())),
    st.text(st.characters(max_codepoint=0x1F)),
    st.lists(
        st.sampled_from(["\ud800", "\udfff", "\u2028", "\x7f", "null", "\\", '"', "é", "1" * 19])
    ).map("".join),
).filter(lambda s: _SURROGATE_PAIR.search(s) is None)

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    json_ints,
    st.floats(allow_nan=False, allow_infinity=False),
    json_text,
)

json_values = st.recursive(
    json_scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=5),
        st.lists(children, max_size=3).map(tuple),
        st.dictionaries(json_text, children, max_size=5),
    ),
    max_leaves=25,
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


@settings(max_examples=200, deadline=None)
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


@settings(max_examples=300, deadline=None)
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


@pytest.mark.parametrize("depth", [10, 254, 255, 500, 900, 1000, 1024, 1025, 1100, 5000])
@pytest.mark.parametrize("shape", ["array", "object"])
def test_deep_nesting_decodes_the_same(backend: str, depth: int, shape: str) -> None:
    frame = _deep_frame(shape, depth)
    # Never raises, under either backend; the same value or the same error.
    got = outcome_of_decode(frame)
    msg = parse_frame(frame)
    assert isinstance(msg, InvalidMessage)
    assert same_outcome(got, decode_everywhere(frame)), (shape, depth, got[0])
    if depth >= 5000:
        assert got[0] == "invalid"
        assert got[1] == PARSE_ERROR
        assert msg.error.code == PARSE_ERROR


def test_deep_nesting_inside_a_message_is_the_same(backend: str) -> None:
    frame = b'{"jsonrpc":"2.0","id":1,"method":"m","params":' + b"[" * 5000 + b"]" * 5000 + b"}"
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


# --- 3. encode edge cases --------------------------------------------------------

RAISES_VALUE = ("raises", ValueError)
RAISES_TYPE = ("raises", TypeError)


class Text(str):
    pass


class Number(int):
    pass


class Real(float):
    pass


class Mapping(dict):  # type: ignore[type-arg]
    pass


class Items(list):  # type: ignore[type-arg]
    pass


class Level(enum.IntEnum):
    HIGH = 3


class Flag(enum.IntFlag):
    A = 1
    B = 4


class Colour(enum.StrEnum):
    RED = "red"


class Weight(float, enum.Enum):
    LIGHT = 0.5


class Plain(enum.Enum):
    ONE = 1


@dataclasses.dataclass
class Point:
    x: int = 1
    y: int = 2


Pair = collections.namedtuple("Pair", "a b")


def _circular_list() -> list[Any]:
    items: list[Any] = [1]
    items.append(items)
    return items


def _circular_dict() -> dict[str, Any]:
    obj: dict[str, Any] = {"a": 1}
    obj["self"] = obj
    return obj


def _nested(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth):
        value = [value]
    return value


ENCODE_CASES: list[tuple[str, Callable[[], Any], Any]] = [
    ("nan", lambda: math.nan, RAISES_VALUE),
    ("inf", lambda: math.inf, RAISES_VALUE),
    ("-inf", lambda: -math.inf, RAISES_VALUE),
    ("nan-in-list", lambda: [1, math.nan], RAISES_VALUE),
    ("inf-deep", lambda: {"a": {"b": [0.5, math.inf]}}, RAISES_VALUE),
    ("-inf-in-dict", lambda: {"x": -math.inf}, RAISES_VALUE),
    ("nan-with-null", lambda: [None, math.nan], RAISES_VALUE),
    ("nan-key", lambda: {math.nan: 1}, RAISES_VALUE),
    ("int-key", lambda: {1: 2}, {"1": 2}),
    ("true-key", lambda: {True: 1}, {"true": 1}),
    ("false-key", lambda: {False: 1}, {"false": 1}),
    ("none-key", lambda: {None: 1}, {"null": 1}),
    ("float-key", lambda: {1.5: "x"}, {"1.5": "x"}),
    ("big-int-key", lambda: {2**70: 1}, {str(2**70): 1}),
    ("mixed-keys", lambda: {"a": 1, 2: [{3: None}]}, {"a": 1, "2": [{"3": None}]}),
    ("intenum-key", lambda: {Level.HIGH: 1}, {"3": 1}),
    ("str-subclass-key", lambda: {Text("k"): 1}, {"k": 1}),
    ("2**63", lambda: 2**63, 2**63),
    ("2**64-1", lambda: 2**64 - 1, 2**64 - 1),
    ("2**64", lambda: 2**64, 2**64),
    ("-(2**63)-1", lambda: -(2**63) - 1, -(2**63) - 1),
    ("2**70-nested", lambda: {"n": [2**70, -(2**70)]}, {"n": [2**70, -(2**70)]}),
    ("10**100", lambda: 10**100, 10**100),
    ("str-subclass", lambda: Text("héllo"), "héllo"),
    ("str-subclass-nested", lambda: {"a": [Text("x")]}, {"a": ["x"]}),
    ("int-subclass", lambda: Number(7), 7),
    ("big-int-subclass", lambda: Number(2**70), 2**70),
    ("float-subclass", lambda: Real(2.5), 2.5),
    ("intenum", lambda: Level.HIGH, 3),
    ("intenum-nested", lambda: {"level": [Level.HIGH]}, {"level": [3]}),
    ("intflag", lambda: Flag.A | Flag.B, 5),
    ("strenum", lambda: Colour.RED, "red"),
    ("float-enum", lambda: Weight.LIGHT, 0.5),
    ("bool", lambda: [True, False], [True, False]),
    ("dict-subclass", lambda: Mapping(a=1, b=[2]), {"a": 1, "b": [2]}),
    ("ordereddict", lambda: collections.OrderedDict([("z", 1), ("a", 2)]), {"z": 1, "a": 2}),
    ("defaultdict", lambda: collections.defaultdict(int, {"a": 1}), {"a": 1}),
    ("list-subclass", lambda: Items([1, "a", None]), [1, "a", None]),
    ("tuple", lambda: (1, (2, 3), "x"), [1, [2, 3], "x"]),
    ("namedtuple", lambda: Pair(1, 2), [1, 2]),
    ("set", lambda: {1}, RAISES_TYPE),
    ("frozenset", lambda: frozenset(), RAISES_TYPE),
    ("bytes", lambda: b"abc", RAISES_TYPE),
    ("bytearray", lambda: bytearray(b"a"), RAISES_TYPE),
    ("object", lambda: object(), RAISES_TYPE),
    ("object-nested", lambda: {"a": [1, object()]}, RAISES_TYPE),
    ("dataclass", lambda: Point(), RAISES_TYPE),
    ("dataclass-nested", lambda: [Point()], RAISES_TYPE),
    ("datetime", lambda: datetime.datetime(2024, 1, 2, 3, 4, 5), RAISES_TYPE),
    ("date", lambda: datetime.date(2024, 1, 2), RAISES_TYPE),
    ("time", lambda: datetime.time(1, 2), RAISES_TYPE),
    ("decimal", lambda: decimal.Decimal("1.5"), RAISES_TYPE),
    ("complex", lambda: 1j, RAISES_TYPE),
    ("tuple-key", lambda: {(1,): 1}, RAISES_TYPE),
    ("plain-enum-key", lambda: {Plain.ONE: 1}, RAISES_TYPE),
    ("circular-list", _circular_list, RAISES_VALUE),
    ("circular-dict", _circular_dict, RAISES_VALUE),
    ("too-deep", lambda: _nested(5000), RAISES_VALUE),
    ("deep-but-fine", lambda: _nested(300), json.loads("[" * 301 + "]" * 301)),
    ("lone-surrogate", lambda: "\ud800", "\ud800"),
    ("lone-surrogate-with-text", lambda: {"k": "é\udfffx😀"}, {"k": "é\udfffx😀"}),
    ("lone-surrogate-key", lambda: {"\udc00": 1}, {"\udc00": 1}),
    ("none", lambda: None, None),
    ("none-value", lambda: {"a": None}, {"a": None}),
    ("none-in-list", lambda: [None, 1], [None, 1]),
    ("null-text", lambda: {"null": "null"}, {"null": "null"}),
    ("newlines", lambda: {"a\nb": "c\r\nd\u2028"}, {"a\nb": "c\r\nd\u2028"}),
    (
        "control-chars",
        lambda: "".join(map(chr, range(32))) + "\x7f",
        "".join(map(chr, range(32))) + "\x7f",
    ),
    ("-0.0", lambda: -0.0, -0.0),
    (
        "floats",
        lambda: [0.1, 1e16, 1e-7, 5e-324, 1.7976931348623157e308],
        [0.1, 1e16, 1e-7, 5e-324, 1.7976931348623157e308],
    ),
]


@pytest.mark.parametrize(
    ("make", "expected"), [c[1:] for c in ENCODE_CASES], ids=[c[0] for c in ENCODE_CASES]
)
def test_encode_edge_cases(backend: str, make: Callable[[], Any], expected: Any) -> None:
    got = outcome_of_encode(make())
    if type(expected) is tuple and expected and expected[0] == "raises":
        assert got[0] == "raises", got
        # Exactly the stdlib's exception type, not a subclass from orjson.
        assert got[1] is expected[1], got
    else:
        assert got[0] == "frame", got
        assert same(got[1], expected), got
        # The codec itself reads its own frame back the same way.
        assert same(decode_frame(got[2][:-1]), expected)
    # ... and the same as under the other backend (error messages included).
    encode_everywhere(make())


def test_none_values_encode_to_the_same_bytes() -> None:
    for value in ({"a": None}, [None], None, {"a": {"b": None, "c": [1, "x"]}}):
        frames = under_each(lambda value=value: encode_frame(value))
        assert len(set(frames.values())) == 1, frames
    assert frames["stdlib"] == b'{"a":{"b":null,"c":[1,"x"]}}\n'


def test_big_ints_are_written_as_integers(backend: str) -> None:
    # Not as floats, not in exponent notation: the exact digits.
    for n in (2**63, 2**64 - 1, 2**64, -(2**63) - 1, 2**70, -(10**30)):
        assert encode_frame(n) == str(n).encode() + b"\n"
        assert encode_frame({"n": [n]}) == b'{"n":[' + str(n).encode() + b"]}\n"


def test_lone_surrogates_are_written_as_escapes(backend: str) -> None:
    frame = encode_frame({"s": "a\ud800b"})
    assert frame.isascii()
    assert b"\\ud800" in frame.lower()
    assert same(json.loads(frame), {"s": "a\ud800b"})


# --- 4. the documented divergence ------------------------------------------------


def test_plain_enum_and_uuid_encode_by_value_only_under_orjson(backend: str) -> None:
    ident = uuid.UUID("12345678-1234-5678-1234-567812345678")
    if backend == "orjson":
        assert encode_frame(Plain.ONE) == b"1\n"
        assert encode_frame({"e": [Plain.ONE]}) == b'{"e":[1]}\n'
        assert encode_frame(ident) == b'"12345678-1234-5678-1234-567812345678"\n'
        assert encode_frame({"u": ident}) == b'{"u":"12345678-1234-5678-1234-567812345678"}\n'
    else:
        for value in (Plain.ONE, {"e": [Plain.ONE]}, ident, {"u": ident}):
            with pytest.raises(TypeError, match="not JSON serializable"):
                encode_frame(value)


def test_enum_or_uuid_next_to_a_null_falls_back_to_the_stdlib(backend: str) -> None:
    # A frame with a null goes to the stdlib even under orjson, which then
    # refuses what it cannot write: the divergence does not hold there.
    for value in ({"e": Plain.ONE, "n": None}, [uuid.UUID(int=0), None]):
        with pytest.raises(TypeError, match="not JSON serializable"):
            encode_frame(value)


# --- 5. switching --------------------------------------------------------------


def test_unknown_backend_is_refused_and_changes_nothing(backend: str) -> None:
    for name in ("nope", "", "ORJSON", "json"):
        with pytest.raises(ValueError, match="unknown JSON backend"):
            use_json_backend(name)
        assert json_backend() == backend


def test_orjson_backend_needs_orjson(backend: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_messages, "_orjson", None)
    with pytest.raises(ValueError, match="orjson is not installed"):
        use_json_backend("orjson")
    assert json_backend() == backend


@needs_orjson
def test_switching_round_trips() -> None:
    import orjson

    previous = json_backend()
    try:
        use_json_backend("stdlib")
        assert json_backend() == "stdlib"
        assert _messages._fast_dumps is None
        assert encode_frame({"a": [1]}) == b'{"a":[1]}\n'
        use_json_backend("orjson")
        assert json_backend() == "orjson"
        # The orjson backend really is orjson, so the comparisons above compare.
        assert _messages._fast_dumps is orjson.dumps
        assert encode_frame({"a": [1]}) == b'{"a":[1]}\n'
        use_json_backend("orjson")
        assert json_backend() == "orjson"
        use_json_backend("stdlib")
        use_json_backend("stdlib")
        assert json_backend() == "stdlib"
    finally:
        use_json_backend(previous)
    assert json_backend() == previous


def test_fixture_restores_the_previous_backend(backend: str) -> None:
    other = "stdlib" if backend == "orjson" else BACKENDS[0]
    with using(other):
        assert json_backend() == other
    assert json_backend() == backend


# --- 6. the environment variable -------------------------------------------------


def _backend_in_subprocess(env_value: str | None) -> str:
    env = dict(os.environ)
    env.pop("ACP_TRIO_JSON", None)
    if env_value is not None:
        env["ACP_TRIO_JSON"] = env_value
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "from acp_trio._jsonrpc._messages import json_backend; print(json_backend())",
        ],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


@pytest.mark.parametrize("value", ["stdlib", " StdLib "])
def test_env_selects_stdlib_at_import(value: str) -> None:
    assert _backend_in_subprocess(value) == "stdlib"


@needs_orjson
@pytest.mark.parametrize("value", [None, "orjson"])
def test_orjson_is_the_default_when_installed(value: str | None) -> None:
    assert _backend_in_subprocess(value) == "orjson"


# --- 7. end to end ---------------------------------------------------------------

# Each call's params alone: a lone surrogate or a long digit run anywhere in a
# frame sends it all to the stdlib, which would hide what orjson does with
# the rest.
CALLS: list[Any] = [
    {
        "big": 2**70,
        "text": "héllo wörld ✓ 日本語 😀 \u2028",
        "nested": {"a": [1, 2.5, -0.0, {"b": None, "c": [True, False]}], "ключ": {"d": {}}},
    },
    {"negative_big": -(2**64) - 1, "u64": 2**64 - 1, "i64": [2**63 - 1, -(2**63)]},
    {"digits_in_text": "12345678901234567890123", "lone": "a\ud800b", "n": 2**200},
    [2**70, "ü", {"x": {"y": {"z": [0.1]}}}],
]


async def test_request_round_trip_end_to_end(backend: str) -> None:
    seen: list[Any] = []

    async def echo(ctx: RequestContext, params: Any) -> Any:
        seen.append(params)
        return {"echo": params, "extra": 2**65}

    results = []
    with trio.fail_after(5):
        async with connection_pair(None, FnHandler({"echo": echo})) as (a, _b, wire_a, wire_b):
            for params in CALLS:
                results.append(await a.call("echo", params))
    assert json_backend() == backend
    assert len(seen) == len(results) == len(CALLS)
    # What went over the wire (the trace parses it with the stdlib json module).
    sent = [m["params"] for m in wire_a.sent_requests()]
    answers = [m["result"] for m in wire_b.sent_responses()]
    for params, got, result, on_wire, answer in zip(
        CALLS, seen, results, sent, answers, strict=True
    ):
        assert same(got, params), got
        assert same(result, {"echo": params, "extra": 2**65}), result
        assert same(on_wire, params), on_wire
        assert same(answer, {"echo": params, "extra": 2**65}), answer


@needs_orjson
def test_orjson_decodes_ordinary_frames(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fast path is taken for the usual small frame, and skipped for a
    frame it could misread (whose value is then exact)."""
    from acp_trio._jsonrpc import _messages

    calls: list[bytes] = []

    with using("orjson"):
        real = _messages._fast_loads
        assert real is not None

        def counting(frame: bytes) -> Any:
            calls.append(frame)
            return real(frame)

        monkeypatch.setattr(_messages, "_fast_loads", counting)
        ordinary = b'{"jsonrpc":"2.0","id":7,"method":"fs/read_text_file","params":{"path":"/a"}}'
        assert decode_frame(ordinary) == json.loads(ordinary)
        assert calls == [ordinary]
        big = b'{"jsonrpc":"2.0","id":18446744073709551616,"method":"m"}'
        value = decode_frame(big)
        assert calls == [ordinary]
        assert value["id"] == 2**64
        assert type(value["id"]) is int
    with using("stdlib"):
        assert _messages._fast_loads is None


def test_a_frame_costs_about_its_size_in_memory(backend: str) -> None:
    """A frame waiting in the outbox holds only its bytes. (orjson builds its
    output in a 4 KiB buffer that it does not shrink, so its result is copied
    into a bytes object of the right size, with the newline.)"""
    message = {"jsonrpc": "2.0", "id": 1, "method": "session/cancel", "params": {"sessionId": "s"}}
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        frames = [encode_frame(message) for _ in range(100)]
        per_frame = (tracemalloc.get_traced_memory()[0] - before) / len(frames)
    finally:
        tracemalloc.stop()
    assert frames[0].endswith(b"\n")
    assert per_frame < 256, per_frame
