"""What a frame may cost once parsed (acp_trio._jsonrpc._limits): values and
depth counted outside strings as a parser meets them, in steps; the peer
answers a refused frame as it answers an oversized one; requests held count
bytes (acp_trio._jsonrpc._state)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_trio._jsonrpc import (
    Peer,
    RefusedFrame,
    RequestReceived,
    SendFrame,
    StructureCheck,
    refused_frame,
    surely_within,
)
from acp_trio._jsonrpc._limits import too_deep, too_many_values


def check(frame: bytes, depth: int = 128, values: int = 65536, budget: int = 7) -> Any:
    """The refusal of ``frame`` as its error object (``None``: within), in
    steps of ``budget``."""
    checker = StructureCheck(frame, depth, values)
    steps = 0
    while not checker.step(budget):
        steps += 1
        assert steps < 10_000_000
    return None if checker.error is None else checker.error.to_error_object()


def deep(depth: int) -> Any:
    return too_deep(depth).to_error_object()


def many(values: int) -> Any:
    return too_many_values(values).to_error_object()


def count(value: Any) -> tuple[int, int]:
    """(values, depth) of a decoded value: what the check counts."""
    if isinstance(value, dict):
        inner = [count(v) for v in value.values()]
    elif isinstance(value, list):
        inner = [count(v) for v in value]
    else:
        return 1, 0
    return 1 + sum(n for n, _ in inner), 1 + max((d for _, d in inner), default=0)


def test_source_code_in_a_string_is_one_value() -> None:
    code = "def f(a, b):\n    return {'x': [a, b], \"y\": {}}\n" * 20_000
    frame = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "session/prompt",
            "params": {"sessionId": "s", "prompt": [{"type": "text", "text": code}]},
        }
    ).encode()
    assert not surely_within(frame, 128, 65536)  # (its brackets, counted as bytes)
    assert check(frame, 4, 16) is None  # (counted as parsed: 10 values, 4 deep)


def test_too_many_values_is_refused_32600() -> None:
    frame = b"[" + b"{}," * 1000 + b"{}]"
    assert check(frame, values=1001) == many(1001)
    assert check(frame, values=1002) is None
    assert check(frame, values=1001)["code"] == -32600


def test_too_deep_is_refused_32700() -> None:
    frame = b"[" * 129 + b"]" * 129
    assert check(frame) == deep(128)
    assert check(frame)["code"] == -32700
    assert check(b"[" * 128 + b"]" * 128) is None
    assert check(b'{"a":' * 129 + b"1" + b"}" * 129) == deep(128)


@pytest.mark.parametrize(
    "frame",
    [b"{nope", b"[1,2", b'{"a" 1}', b"[NaN]", b'"\xff"', b"", b"  ", b"[1]x", b"\xef\xbb\xbf[1]"],
)
def test_what_is_not_json_is_left_to_the_parser(frame: bytes) -> None:
    assert check(frame, 2, 3) is None


def test_the_quick_bound_never_passes_what_the_count_refuses() -> None:
    frame = b"[" + b"1," * 100 + b"1]"
    assert not surely_within(frame, 128, 100)
    assert surely_within(frame, 128, 103)
    assert not surely_within(b"[" * 20 + b"]" * 20, 19, 1000)
    assert surely_within(b"[" * 20 + b"]" * 20, 20, 1000)


def containers(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.lists(children, max_size=5) | st.dictionaries(
        st.text(max_size=4), children, max_size=5
    )


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=8)
    | st.sampled_from(["[", "{", ",", "]", "}", '"', "\\", "[{,"]),
    containers,
    max_leaves=40,
)


@settings(max_examples=300, deadline=None)
@given(
    value=json_values,
    depth=st.integers(1, 6),
    values=st.integers(1, 40),
    budget=st.integers(1, 5),
    indent=st.sampled_from([None, 1]),
)
def test_the_count_is_the_parsers(
    value: Any, depth: int, values: int, budget: int, indent: int | None
) -> None:
    frame = json.dumps(value, indent=indent).encode()
    n, d = count(value)
    error = check(frame, depth, values, budget)
    if d > depth and n <= values:
        assert error == deep(depth)
    elif n > values and d <= depth:
        assert error == many(values)
    elif n <= values and d <= depth:
        assert error is None
        assert surely_within(frame, depth, values) in (True, False)
    else:
        assert error in (deep(depth), many(values))
    if surely_within(frame, depth, values):
        assert n <= values
        assert d <= depth


def test_the_peer_answers_a_refused_request_with_its_id() -> None:
    peer: Peer[None, None] = Peer()
    frame = b'{"jsonrpc":"2.0","id":7,"method":"x","params":[' + b"{}," * 10 + b"{}]}"
    event = peer.receive(refused_frame(frame, 1 << 20, too_many_values(5)))
    assert isinstance(event, SendFrame)
    reply = json.loads(event.data)
    assert reply["id"] == 7
    assert reply["error"] == {
        "code": -32600,
        "message": "Request too complex",
        "data": {"maxValues": 5},
    }
    notification = b'{"jsonrpc":"2.0","method":"x","params":[' + b"{}," * 10 + b"{}]}"
    assert peer.receive(refused_frame(notification, 1 << 20, too_deep(3))) is None
    assert isinstance(refused_frame(frame, 1, too_deep(1)), RefusedFrame)


def request(n: int, size: int) -> bytes:
    head = b'{"jsonrpc":"2.0","id":%d,"method":"x","params":{"p":"' % n
    return head + b"z" * (size - len(head) - 3) + b'"}}'


def test_requests_held_count_bytes() -> None:
    peer: Peer[None, None] = Peer(max_held_bytes=250)
    first = peer.receive(request(1, 100))
    second = peer.receive(request(2, 100))
    assert isinstance(first, RequestReceived)
    assert isinstance(second, RequestReceived)
    third = peer.receive(request(3, 100))
    assert isinstance(third, SendFrame)
    error = json.loads(third.data)["error"]
    assert error["code"] == -32603
    assert error["data"] == {"heldRequestBytes": 200, "maxHeldRequestBytes": 250}
    # An answer frees its bytes.
    assert peer.respond(first.entry, {}) is not None
    assert isinstance(peer.receive(request(4, 100)), RequestReceived)
    # Alone, a request over the bound is served (the size cap admitted it).
    alone: Peer[None, None] = Peer(max_held_bytes=10)
    assert isinstance(alone.receive(request(1, 100)), RequestReceived)
