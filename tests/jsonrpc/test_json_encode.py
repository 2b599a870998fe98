"""The JSON backends encode alike, and the one documented divergence.

(Split from one file; the shared helpers are in ``json_cases.py``.)
"""

from __future__ import annotations

import collections
import dataclasses
import datetime
import decimal
import enum
import json
import math
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from acp_trio._jsonrpc._messages import (
    decode_frame,
    encode_frame,
)
from jsonrpc.json_cases import (
    encode_everywhere,
    outcome_of_encode,
    same,
    under_each,
)

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
    # Deeper than any supported Python encodes (3.13's stdlib writes 5,000).
    ("too-deep", lambda: _nested(100_000), RAISES_VALUE),
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
