"""What a message may cost once parsed: its nesting depth and the number of
values in it, checked before it is parsed.

A JSON parser builds a Python object for every value: an empty object costs
64 bytes for its 3 on the wire (``{},``), a two-letter string about 57 for
its 5, so a message well within the size cap can cost tens of times its
size (10 MB of ``[{},{},...]``: 240 MB, and half a second of one event
loop). Within ``max_values`` values and ``max_depth`` levels, a message costs
at most about 100 bytes a value beyond its strings, which cost what they
weigh.

Values are counted as a parser meets them, outside strings: a prompt full of
source code, all its brackets and commas inside one string, is one value
(what a count of bytes would get wrong). Nothing is built. Two stages:

- :func:`surely_within`: one pass in C over the frame (``bytes.translate``)
  counts every ``[``, ``{`` and ``,``, strings included; a frame with fewer
  than the limits allow is within them (the usual case: about a nanosecond a
  byte).
- :class:`StructureCheck`: the exact count, for the others, token by token
  (strings skipped by the standard library's C string scanner, so a long
  string costs what parsing it costs), in steps of a given number of values:
  an async caller yields between steps, so a hostile message never holds
  its event loop for long.

Bytes that are not JSON are not refused here: the check stops where the
parser will (having counted what comes before), and the parser words the
error.
"""

from __future__ import annotations

import json.decoder
import json.scanner
import re
from collections.abc import Callable
from typing import Final

import attrs

from acp_trio._exceptions import ErrorCode, RequestError
from acp_trio._jsonrpc._framing import _HEAD_SIZE, _TAIL_SIZE, OversizedFrame
from acp_trio._jsonrpc._messages import encode_frame, error_response
from acp_trio._jsonrpc._peek import peek_oversized

__all__ = [
    "DEFAULT_MAX_DEPTH",
    "DEFAULT_MAX_VALUES",
    "RefusedFrame",
    "StructureCheck",
    "dropped_reply",
    "refused_frame",
    "surely_within",
]

#: Levels of arrays and objects one inside another.
DEFAULT_MAX_DEPTH: Final = 128
#: Values (scalars, arrays and objects; object keys are not counted).
DEFAULT_MAX_VALUES: Final = 65536


@attrs.frozen
class RefusedFrame(OversizedFrame):
    """A frame dropped before it was parsed (too deep, or too many values):
    answered with ``error`` as an oversized frame is answered (a request
    with its id, found in its first and last bytes; a notification never;
    a response fails the call it answers)."""

    error: RequestError = attrs.field(kw_only=True)


def refused_frame(frame: bytes, limit: int, error: RequestError) -> RefusedFrame:
    """The marker of ``frame`` refused with ``error`` (``limit``: the size cap
    it was within)."""
    return RefusedFrame(
        len(frame), limit, bytes(frame[:_HEAD_SIZE]), bytes(frame[-_TAIL_SIZE:]), error=error
    )


def dropped_reply(frame: OversizedFrame) -> bytes | None:
    """The answer (a whole frame, with its line end) to a frame dropped
    whole (too large, or a :class:`RefusedFrame`), for a layer that passes
    messages on without a peer of its own (a bridge): a request is answered
    as :class:`~acp_trio._jsonrpc.Peer` answers it (with its id when its
    first or last bytes show it); a notification or a response, never."""
    kind, found, request_id = peek_oversized(frame.head, frame.tail)
    if kind in ("notification", "response"):
        return None
    if isinstance(frame, RefusedFrame):
        error = frame.error
    else:
        error = RequestError(
            ErrorCode.INVALID_REQUEST,
            "Request too large",
            {"size": frame.size, "limit": frame.limit},
        )
    return encode_frame(error_response(request_id if found else None, error))


def too_deep(max_depth: int) -> RequestError:
    return RequestError(
        ErrorCode.PARSE_ERROR,
        None,
        f"JSON nested too deeply (more than {max_depth} levels)",
    )


def too_many_values(max_values: int) -> RequestError:
    return RequestError(
        ErrorCode.INVALID_REQUEST,
        "Request too complex",
        {"maxValues": max_values},
    )


_NOT_STRUCTURE: Final = bytes(c for c in range(256) if c not in b"[{,")
_SLICE: Final = 1 << 20


def surely_within(frame: bytes, max_depth: int, max_values: int) -> bool:
    """Whether ``frame`` is certainly within the limits, counting every
    bracket and comma, strings included (an over-estimate); ``False``: the
    exact count (:class:`StructureCheck`) must decide."""
    if len(frame) <= max_depth:
        return True  # (a value is at least a byte, a level one more)
    # values <= commas + openers + 1; depth <= openers. (In slices: what is
    # kept of a slice is at most its size, and a hostile frame stops early.)
    kept = openers = 0
    for start in range(0, len(frame), _SLICE):
        part = (frame if len(frame) <= _SLICE else frame[start : start + _SLICE]).translate(
            None, _NOT_STRUCTURE
        )
        kept += len(part)
        openers += len(part) - part.count(b",")
        if kept >= max_values:
            return False
    return openers <= max_depth


_WHITESPACE: Final = re.compile(r"[ \t\n\r]*")
_NUMBER: Final = json.scanner.NUMBER_RE
# The standard library's C string scanner: (text, index after the opening
# quote, strict) -> (the string, index after its closing quote).
_scanstring: Final[Callable[..., tuple[str, int]]] = json.decoder.scanstring  # type: ignore[attr-defined]

# What comes next.
_VALUE: Final = 0
_VALUE_OR_END: Final = 1  # after "["
_KEY: Final = 2  # after "," in an object
_KEY_OR_END: Final = 3  # after "{"
_AFTER_VALUE: Final = 4


class StructureCheck:
    """The exact count of one frame's values and depth, in steps.

    Call :meth:`step` until it returns ``True``; then :attr:`error` is
    ``None`` (within the limits, as far as the frame is JSON) or the
    refusal (``-32700`` too deep, ``-32600`` too many values).
    """

    __slots__ = (
        "_expect",
        "_pos",
        "_stack",
        "_text",
        "_values",
        "error",
        "max_depth",
        "max_values",
    )

    def __init__(self, frame: bytes, max_depth: int, max_values: int) -> None:
        self.max_depth = max_depth
        self.max_values = max_values
        self.error: RequestError | None = None
        try:
            text = frame.decode("utf-8")
        except UnicodeDecodeError:
            text = ""  # not UTF-8: the parser refuses it before building anything
        self._text = text[1:] if text.startswith("\ufeff") else text
        self._pos = 0
        self._stack: list[str] = []
        self._values = 0
        self._expect = _VALUE

    def step(self, budget: int) -> bool:
        """Count up to ``budget`` more values; ``True`` once finished."""
        s = self._text
        i = self._pos
        stack = self._stack
        expect = self._expect
        whitespace = _WHITESPACE.match
        while True:
            i = whitespace(s, i).end()  # type: ignore[union-attr]
            c = s[i : i + 1]
            if expect == _AFTER_VALUE:
                if not stack:
                    return True  # one whole value: what follows is the parser's
                top = stack[-1]
                if c == ",":
                    i += 1
                    expect = _VALUE if top == "[" else _KEY
                    continue
                if (c == "]" and top == "[") or (c == "}" and top == "{"):
                    stack.pop()
                    i += 1
                    continue
                return True  # not JSON: the parser stops here too
            if expect == _VALUE_OR_END and c == "]":
                stack.pop()
                i += 1
                expect = _AFTER_VALUE
                continue
            if expect == _KEY_OR_END and c == "}":
                stack.pop()
                i += 1
                expect = _AFTER_VALUE
                continue
            if expect in (_KEY, _KEY_OR_END):
                if c != '"':
                    return True
                try:
                    i = _scanstring(s, i + 1, True)[1]
                except ValueError:
                    return True
                i = whitespace(s, i).end()  # type: ignore[union-attr]
                if s[i : i + 1] != ":":
                    return True
                i += 1
                expect = _VALUE
                continue
            # A value.
            self._values += 1
            if self._values > self.max_values:
                self.error = too_many_values(self.max_values)
                return True
            if c == '"':
                try:
                    i = _scanstring(s, i + 1, True)[1]
                except ValueError:
                    return True
                expect = _AFTER_VALUE
            elif c == "[" or c == "{":
                if len(stack) >= self.max_depth:
                    self.error = too_deep(self.max_depth)
                    return True
                stack.append(c)
                i += 1
                expect = _VALUE_OR_END if c == "[" else _KEY_OR_END
            elif (match := _NUMBER.match(s, i)) is not None:
                i = match.end()
                expect = _AFTER_VALUE
            elif s.startswith(("true", "null"), i):
                i += 4
                expect = _AFTER_VALUE
            elif s.startswith("false", i):
                i += 5
                expect = _AFTER_VALUE
            else:
                return True  # not a JSON value (NaN included): the parser refuses it
            budget -= 1
            if budget <= 0:
                self._pos, self._expect = i, expect
                return False
