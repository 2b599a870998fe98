"""What the JSON backend tests share: helpers that run a value or a frame
through each backend, and the Hypothesis strategies."""

from __future__ import annotations

import importlib.util
import json
import math
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from budget import examples
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from acp_trio._jsonrpc._messages import (
    InvalidMessage,
    decode_frame,
    encode_frame,
    json_backend,
    use_json_backend,
)

HAVE_ORJSON = importlib.util.find_spec("orjson") is not None
needs_orjson = pytest.mark.skipif(not HAVE_ORJSON, reason="orjson is not installed")
BACKENDS = ["orjson", "stdlib"] if HAVE_ORJSON else ["stdlib"]

PARSE_ERROR = -32700
REPO = Path(__file__).resolve().parents[2]

FUZZ = settings(
    max_examples=examples(120),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


# --- helpers -----------------------------------------------------------------


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
