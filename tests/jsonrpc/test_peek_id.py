"""peek_id: find the top-level id in the head of an oversized message."""

from __future__ import annotations

import json
from typing import Any

import pytest
from budget import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_trio._jsonrpc import (
    LineDecoder,
    OversizedFrame,
    encode_frame,
    peek_id,
    peek_oversized,
    request,
)
from acp_trio._jsonrpc._framing import _HEAD_SIZE


@pytest.mark.parametrize(
    ("head", "expected"),
    [
        # id before method
        (b'{"jsonrpc":"2.0","id":5,"method":"session/prompt","params":{"a":"xxxx', ("request", 5)),
        # id after method
        (b'{"jsonrpc":"2.0","method":"m","id":"abc","params":[1,2', ("request", "abc")),
        (b'{"method":"m","id":0}', ("request", 0)),
        (b'{"method":"m","id":12 ', ("request", 12)),  # whitespace ends the number
        (b'{"method":"m","id":"12"', ("request", "12")),  # a string ends at its quote
        (b'{"method":"m","id":null', ("request", None)),
        (b'{"id":-7,"method":', ("request", -7)),  # method value itself cut off
        (b'{"jsonrpc":"2.0","method":"m","id":null,"params":{', ("request", None)),
        # responses
        (b'{"jsonrpc":"2.0","id":7,"result":{"content":"xxxx', ("response", 7)),
        (b'{"jsonrpc":"2.0","id":"7","error":{"code":-1,"message":"', ("response", "7")),
        (b'{"jsonrpc":"2.0","error":{"code":-1,"message":"m"},"id":8}', ("response", 8)),
        # exact id types
        (b'{"id":"1","method":"m"', ("request", "1")),
        (b'{"id":1,"method":"m"', ("request", 1)),
        # only the key "id" itself counts
        (b'{"xid":5,"requestId":6,"method":"m","id":7}', ("request", 7)),
    ],
)
def test_finds_the_id(head: bytes, expected: tuple[str, Any]) -> None:
    found = peek_id(head)
    assert found == expected
    assert found is not None
    assert type(found[1]) is type(expected[1])


def test_ignores_an_id_nested_in_params() -> None:
    # Complete params with a nested id, then the real id.
    head = b'{"jsonrpc":"2.0","method":"m","params":{"id":99,"x":{"id":98}},"id":4,"z":"...'
    assert peek_id(head) == ("request", 4)
    # Nested id only, params cut off: the nested id must not be taken.
    assert peek_id(b'{"jsonrpc":"2.0","method":"m","params":{"id":99,"text":"xxxx') is None
    # Nested id only, no top-level id at all (a notification).
    assert peek_id(b'{"jsonrpc":"2.0","method":"m","params":{"id":99}}') is None
    # A nested "id" inside a result.
    assert peek_id(b'{"jsonrpc":"2.0","result":{"id":3},"id":11}') == ("response", 11)


def test_none_when_params_precedes_the_id_and_is_cut_off() -> None:
    assert peek_id(b'{"jsonrpc":"2.0","method":"m","params":{"text":"aaaaaaaa') is None
    assert peek_id(b'{"jsonrpc":"2.0","result":[1,2,3') is None


@pytest.mark.parametrize(
    "head",
    [
        b"",
        b"   ",
        b"[",
        b'[{"id":1,"method":"m"}',
        b'"id"',
        b"{",
        b'{"id":1',  # no method/result/error seen yet
        b'{"id":1,"params":{}',
        b'{"method":"m"',  # no id seen yet
        b'{"id":1.5,"method":"m"',  # not an id
        b'{"id":true,"method":"m"',
        b'{"id":{"a":1},"method":"m"',
        b'{"id" 1,"method":"m"',  # malformed
        b'{"id":1 "method":"m"',
        b'{id:1,"method":"m"',
        b'{"id":1,,"method":"m"',
        b'{"requestId":5,"method":"m","params":{',
    ],
)
def test_none_when_it_cannot_tell(head: bytes) -> None:
    assert peek_id(head) is None


@pytest.mark.parametrize(
    "head",
    [
        b'{"method":"m","id":12',  # could be 123
        b'{"method":"m","id":-1',
        b'{"method":"m","id":12.',  # could be 12.5
        b'{"method":"m","id":12e',
        b'{"method":"m","id":0',
        b'{"id":12',
    ],
)
def test_number_cut_short_is_not_an_id(head: bytes) -> None:
    assert peek_id(head) is None


@pytest.mark.parametrize(
    "message",
    [
        {"jsonrpc": "2.0", "method": "m", "id": 1234567, "params": {"id": 7654321}},
        {"jsonrpc": "2.0", "id": -98765, "method": "m", "params": [1]},
        {"jsonrpc": "2.0", "method": "m", "id": "ab\u00e9cd", "params": None},
        {"jsonrpc": "2.0", "result": {"id": 5}, "id": 31337},
        {"jsonrpc": "2.0", "id": 31337, "error": {"code": 1, "message": "m"}},
    ],
)
def test_every_cut_gives_the_right_id_or_none(message: dict[str, Any]) -> None:
    data = json.dumps(message, ensure_ascii=False).encode()
    kind = "request" if "method" in message else "response"
    expected = (kind, message["id"])
    results = [peek_id(data[:cut]) for cut in range(len(data) + 1)]
    assert all(found in (None, expected) for found in results), results
    assert results[-1] == expected


def test_whitespace_everywhere() -> None:
    head = b' \r\n\t{ \n"jsonrpc" : "2.0" ,\r\n "id"\t:\t12 , "method" :"m", "params": {"x'
    assert peek_id(head) == ("request", 12)


def test_bom() -> None:
    assert peek_id(b'\xef\xbb\xbf{"id":1,"method":"m","params":[') == ("request", 1)
    assert peek_id(b'\xef\xbb\xbf  {"result":1,"id":"r"}') == ("response", "r")


def test_head_cut_inside_a_multibyte_char() -> None:
    snowman = "\u2603".encode()  # 3 bytes
    # Cut inside params, after the id was seen: still found.
    head = b'{"id":"\xc3\xa9","method":"m","params":"' + snowman * 3 + snowman[:2]
    assert peek_id(head) == ("request", "\u00e9")
    # Cut inside the id string itself: cannot tell.
    assert peek_id(b'{"method":"m","id":"ab' + snowman[:1]) is None
    # Cut inside a value before the id: cannot tell.
    assert peek_id(b'{"method":"' + snowman + snowman[:2]) is None


def test_deeply_nested_head_does_not_raise() -> None:
    assert peek_id(b'{"jsonrpc":"2.0","method":"m","params":' + b"[" * 60_000) is None
    assert peek_id(b'{"id":3,"method":"m","params":' + b"[" * 60_000) == ("request", 3)


def test_oversized_frame_head_to_peek_id() -> None:
    limit = 1024
    big = request(42, "session/prompt", {"prompt": [{"type": "text", "text": "x" * 200_000}]})
    dec = LineDecoder(limit)
    frame = encode_frame(big)
    frames = [f for i in range(0, len(frame), 4096) for f in dec.feed(frame[i : i + 4096])]
    assert len(frames) == 1
    oversized = frames[0]
    assert isinstance(oversized, OversizedFrame)
    assert oversized.size == len(frame) - 1
    assert len(oversized.head) == _HEAD_SIZE
    assert peek_id(oversized.head) == ("request", 42)


_ids = st.one_of(st.none(), st.integers(), st.text(max_size=10))


@settings(max_examples=examples(300), deadline=None)
@given(
    request_id=_ids,
    method=st.text(max_size=10),
    params=st.dictionaries(st.sampled_from(["id", "a", "method"]), st.integers(), max_size=3),
    id_first=st.booleans(),
    cut=st.integers(0, 200),
)
def test_peek_id_never_lies(
    request_id: Any, method: str, params: dict[str, Any], id_first: bool, cut: int
) -> None:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "params": params}
    if id_first:
        msg.update(id=request_id, method=method)
    else:
        msg.update(method=method, id=request_id)
    data = json.dumps(msg, ensure_ascii=False).encode()
    found = peek_id(data[:cut])
    assert found is None or found == ("request", request_id)
    if found is not None:
        assert type(found[1]) is type(request_id)
    assert peek_id(data) == ("request", request_id)


# peek_oversized: the head and the tail of a message too large to parse.

_BIG = b"A" * 100_000


def _peek(frame: bytes) -> tuple[Any, bool, Any]:
    return peek_oversized(frame[:4096], frame[-4096:])


@pytest.mark.parametrize(
    ("frame", "expected"),
    [
        (b'{"jsonrpc":"2.0","id":3,"method":"m","params":"%s"}', ("request", True, 3)),
        (
            b'{"jsonrpc":"2.0","method":"m","params":{"t":"%s"},"id":"a\\"b"}',
            ("request", True, 'a"b'),
        ),
        (b'{"method":"m","params":["%s"],"id":3,"jsonrpc":"2.0"}\r', ("request", True, 3)),
        (b'{"params":{"t":"%s"},"method":"m","id":null}', ("request", True, None)),
        (b'{"jsonrpc":"2.0","method":"m","params":{"t":"%s"}}', ("notification", False, None)),
        (
            b'{"jsonrpc":"2.0","method":"m","params":{"t":"%s","id":4}}',
            ("notification", False, None),
        ),
        (b'{"jsonrpc":"2.0","result":{"t":"%s"},"id":5}', ("response", True, 5)),
        (b'{"result":{"t":"%s"},"jsonrpc":"2.0","id":5}', ("response", True, 5)),
        (b'{"params":{"t":"%s"}}', (None, False, None)),
        (b'[{"x":"%s"}]', (None, False, None)),
        (b"%s", (None, False, None)),
    ],
)
def test_peek_oversized(frame: bytes, expected: tuple[Any, bool, Any]) -> None:
    assert _peek(frame % _BIG) == expected


def test_peek_oversized_never_takes_a_nested_id_for_the_message_s() -> None:
    frame = b'{"jsonrpc":"2.0","method":"m","params":{"t":"%s","x":{"id":9}}}' % _BIG
    assert _peek(frame) == ("notification", False, None)
    # An id inside the big string, near its end, is not a member either.
    frame = b'{"jsonrpc":"2.0","method":"m","params":{"t":"%s,\\"id\\":9}"}}' % _BIG
    assert _peek(frame) == ("notification", False, None)
