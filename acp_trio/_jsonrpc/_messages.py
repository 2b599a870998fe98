"""JSON-RPC 2.0 messages: decode and classify one frame, encode one message.

:func:`parse_frame` turns the bytes of one line into exactly one of
:class:`Request`, :class:`Notification`, :class:`Response`,
:class:`ErrorResponse` or :class:`InvalidMessage`. It never raises for bad
input: what the peer sent wrong is described by an :class:`InvalidMessage`
carrying the error to answer with.

The rules (JSON-RPC 2.0, as ACP v1 uses it):

- Bytes that are not UTF-8, or not JSON (``NaN`` and ``Infinity`` included),
  are answered ``-32700`` with ``id: null``. A leading UTF-8 byte order mark
  is tolerated.
- A JSON value that is not a message object is answered ``-32600`` with
  ``id: null``. That includes arrays: ACP v1 does not use batches.
- Ids are integers, strings or ``null`` and are kept exactly as received:
  ``1`` and ``"1"`` are different ids, ``0`` is an id. Booleans and
  fractional numbers are not ids.
- An invalid object that still names a method and a valid id (say
  ``"jsonrpc": "1.0"``) is answered with that id, so its sender is not left
  waiting; otherwise the answer uses ``id: null``.
- An invalid *response* (both ``result`` and ``error``, a malformed error
  object) is reported with the id it carried, so that the pending call it
  was meant for can be failed instead of hanging.
"""

from __future__ import annotations

import json
import json.encoder
import os
from collections.abc import Callable, Iterable
from typing import Any, Final, TypeAlias

import attrs

from acp_trio._exceptions import RequestError

__all__ = [
    "ErrorResponse",
    "InvalidMessage",
    "Message",
    "Notification",
    "Request",
    "RequestId",
    "Response",
    "decode_frame",
    "encode_frame",
    "error_response",
    "is_request_id",
    "notification",
    "parse_frame",
    "request",
    "response",
]

RequestId: TypeAlias = int | str | None


def is_request_id(value: object) -> bool:
    """Whether ``value`` is a valid JSON-RPC id (int, str or None; not bool)."""
    return value is None or type(value) is int or type(value) is str


@attrs.frozen(slots=True)
class Request:
    id: RequestId
    method: str
    params: Any = None


@attrs.frozen(slots=True)
class Notification:
    method: str
    params: Any = None


@attrs.frozen(slots=True)
class Response:
    id: RequestId
    result: Any


@attrs.frozen(slots=True)
class ErrorResponse:
    id: RequestId
    error: RequestError


@attrs.frozen(slots=True)
class InvalidMessage:
    """A frame that is not a valid message.

    ``error`` is the answer to send to ``reply_id``, unless ``is_response``:
    a frame that looks like a response (no ``method``, and a ``result`` or an
    ``error``) is never answered, whatever is wrong with it (no ``id``, a bad
    ``id``, a bad envelope). ``response_id`` is set when such a frame names
    the id it answers (so the matching pending call can be failed).
    """

    error: RequestError
    reply_id: RequestId = None
    response_id: int | str | None = None
    is_response: bool = False


Message: TypeAlias = Request | Notification | Response | ErrorResponse

_BOM: Final = "\ufeff"


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


_decoder: Final = json.JSONDecoder(parse_constant=_reject_constant)
# The decoder's own scanner (what ``raw_decode`` calls), for the fast path.
_scan_once: Final[Callable[[str, int], tuple[Any, int]]] = _decoder.scan_once  # type: ignore[attr-defined]
_ascii_encoder: Final = json.JSONEncoder(
    ensure_ascii=True, allow_nan=False, separators=(",", ":"), check_circular=False
)


def _not_serializable(value: Any) -> Any:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def _make_std_iterencode() -> Callable[[Any, int], Iterable[str]]:
    """The C encoder that ``JSONEncoder.encode`` builds on every call, built
    once: compact separators, UTF-8 text, NaN and infinities refused."""
    make: Any = getattr(json.encoder, "c_make_encoder", None)
    if make is not None:
        encoder: Callable[[Any, int], Iterable[str]] = make(
            None,  # markers: no circular check (RecursionError is caught)
            _not_serializable,
            json.encoder.encode_basestring,
            None,  # indent
            ":",
            ",",
            False,  # sort_keys
            False,  # skipkeys
            False,  # allow_nan
        )
        return encoder
    fallback = json.JSONEncoder(  # pragma: no cover - CPython has the C encoder
        ensure_ascii=False, allow_nan=False, separators=(",", ":"), check_circular=False
    )
    return lambda obj, _level: fallback.iterencode(obj)  # pragma: no cover


_std_iterencode: Final = _make_std_iterencode()


# The optional fast JSON library: orjson (the ``fast`` extra),
# unless ``ACP_TRIO_JSON=stdlib``. Whatever orjson would write differently or
# refuses goes to the standard library, so both give the same frames' values
# and the same errors (see encode_frame). Decoding likewise: what orjson
# refuses (a BOM, lone surrogates, NaN, bad UTF-8) goes to the standard
# library, which decides and words the error; and two kinds of frames go there
# first: one with a run of 19 digits, since orjson reads an integer beyond 64
# bits (19 digits at least) as a float, and one with 256 or more ``[``/``{``,
# which orjson might read deeper than the stdlib would. That check copies the
# frame, so only frames up to _FAST_DECODE_MAX bytes are tried: beyond, it
# costs more than orjson saves (on text-heavy frames, about what the stdlib
# decode costs).
_orjson: Any
_ORJSON_OPTIONS = 0
try:
    import orjson as _orjson
except ImportError:  # pragma: no cover - depends on the environment
    _orjson = None
else:
    # Types the standard library refuses go to ``default`` and so to the
    # stdlib encoder, which refuses them with its own error. orjson has no
    # such switch for enums and UUIDs: it writes those by value.
    _ORJSON_OPTIONS = (
        _orjson.OPT_PASSTHROUGH_DATACLASS
        | _orjson.OPT_PASSTHROUGH_DATETIME
        | _orjson.OPT_PASSTHROUGH_SUBCLASS
    )

_fast_dumps: Callable[..., bytes] | None = None
_fast_loads: Callable[[bytes], Any] | None = None
_FAST_DECODE_MAX: Final = 4096
# A frame's digits as b"0", its b"[" and b"{" as b"[", the rest as spaces.
_DIGITS_AND_OPENERS: Final = bytes(
    0x30 if 0x30 <= c <= 0x39 else 0x5B if c in (0x5B, 0x7B) else 0x20 for c in range(256)
)
_OTHER_BYTES: Final = bytes(c for c in range(256) if _DIGITS_AND_OPENERS[c] == 0x20)
_DIGIT_RUN: Final = b"0" * 19
# orjson reads 1,024 levels; the stdlib as many as Python's recursion limit
# leaves, fewer than 1,000. Frames with this many openers go to the stdlib.
_FAST_DECODE_OPENERS: Final = 256


def json_backend() -> str:
    """The JSON library that encodes and decodes messages: ``"orjson"`` or
    ``"stdlib"`` (with orjson, the standard library still takes what orjson
    would read or write differently)."""
    return "orjson" if _fast_dumps is not None else "stdlib"


def use_json_backend(name: str) -> None:
    """Choose the JSON library that encodes and decodes messages: ``"orjson"``
    (needs the ``fast`` extra) or ``"stdlib"``. The default is orjson when it
    is installed, unless the environment sets ``ACP_TRIO_JSON=stdlib``."""
    global _fast_dumps, _fast_loads
    if name == "stdlib":
        _fast_dumps = _fast_loads = None
    elif name == "orjson":
        if _orjson is None:
            raise ValueError(
                "orjson is not installed (the 'fast' extra: "
                "pip install '<acp_trio checkout or wheel>[fast]')"
            )
        _fast_dumps = _orjson.dumps
        _fast_loads = _orjson.loads
    else:
        raise ValueError(f"unknown JSON backend {name!r}: use 'orjson' or 'stdlib'")


if _orjson is not None and os.environ.get("ACP_TRIO_JSON", "").strip().lower() != "stdlib":
    use_json_backend("orjson")


def _invalid(reason: str, obj: dict[str, Any] | None = None) -> InvalidMessage:
    reply_id: RequestId = None
    response_id: RequestId = None
    is_response = False
    if obj is not None:
        candidate = obj.get("id")
        is_response = "method" not in obj and ("result" in obj or "error" in obj)
        if is_request_id(candidate):
            if isinstance(obj.get("method"), str):
                reply_id = candidate
            elif is_response:
                # A response with a bad envelope (say "jsonrpc": "1.0"): let the
                # pending call it answers fail instead of hang.
                response_id = candidate
    return InvalidMessage(RequestError.invalid_request(reason), reply_id, response_id, is_response)


def parse_frame(frame: bytes) -> Message | InvalidMessage:
    """Decode and classify one frame (one line, without its line end)."""
    value = decode_frame(frame)
    if type(value) is InvalidMessage:
        return value
    return classify(value)


def decode_frame(frame: bytes) -> Any:
    """The JSON value of one frame, or the :class:`InvalidMessage` answering
    bytes that are not UTF-8 JSON (a decoded value is never one)."""
    loads = _fast_loads
    if loads is not None and len(frame) <= _FAST_DECODE_MAX:
        # The frame's digits (as b"0") and openers (as b"["), nothing else:
        # usually a handful. Fewer than 19: no integer orjson would turn into
        # a float, and no deep nesting. Otherwise look for a run of 19 digits.
        kept = frame.translate(_DIGITS_AND_OPENERS, _OTHER_BYTES)
        if len(kept) < 19 or (
            kept.count(b"[") < _FAST_DECODE_OPENERS
            and _DIGIT_RUN not in frame.translate(_DIGITS_AND_OPENERS)
        ):
            try:
                return loads(frame)
            except Exception:
                pass  # not plain JSON to orjson: the stdlib decides, words the error
    try:
        text = frame.decode("utf-8")
    except UnicodeDecodeError as exc:
        return InvalidMessage(RequestError.parse_error(f"invalid UTF-8: {exc.reason}"))
    # Fast path: the scanner alone, for a frame that is exactly one value
    # (the usual case). Anything else (a BOM, surrounding whitespace, bad
    # JSON) is left to the full decoder below, which also words the error.
    try:
        value, end = _scan_once(text, 0)
    except RecursionError:
        return InvalidMessage(RequestError.parse_error("JSON nested too deeply"))
    except Exception:  # StopIteration, JSONDecodeError: see below
        pass
    else:
        # One value, perhaps followed by JSON whitespace (a line end): done,
        # without reading it all again.
        if end == len(text) or not text[end:].strip(" \t\n\r"):
            return value
    if text.startswith(_BOM):
        text = text[1:]
    try:
        value = _decoder.decode(text)
    except ValueError as exc:  # JSONDecodeError is a ValueError
        return InvalidMessage(RequestError.parse_error(f"invalid JSON: {exc}"))
    except RecursionError:
        return InvalidMessage(RequestError.parse_error("JSON nested too deeply"))
    return value


#: What :func:`message_kind` tells of a decoded value.
REQUEST: Final = 0
NOTIFICATION: Final = 1
RESULT: Final = 2
ERROR_REPLY: Final = 3
INVALID: Final = 4


def message_kind(value: Any) -> int:
    """The one classifier: which kind of message a decoded JSON value is.

    :data:`REQUEST`, :data:`NOTIFICATION`, :data:`RESULT` (a successful
    response), :data:`ERROR_REPLY` (an error response with a well-formed
    error object) or :data:`INVALID`. It builds nothing, so the reader can
    route the bulk of the traffic (notifications, requests, replies) from the
    dict itself; :func:`classify` builds the message objects on top of it,
    and words what is wrong with an invalid value.
    """
    if type(value) is not dict or value.get("jsonrpc") != "2.0":
        return INVALID
    if "method" in value:
        if type(value["method"]) is not str:
            return INVALID
        params = value.get("params")
        if params is not None and type(params) is not dict and type(params) is not list:
            return INVALID
        if "id" not in value:
            return NOTIFICATION
        request_id = value["id"]
        if request_id is None or type(request_id) is int or type(request_id) is str:
            return REQUEST
        return INVALID
    if "id" not in value:
        return INVALID
    response_id = value["id"]
    if not (response_id is None or type(response_id) is int or type(response_id) is str):
        return INVALID
    if "result" in value:
        return INVALID if "error" in value else RESULT
    if "error" not in value:
        return INVALID
    error = value["error"]
    if type(error) is dict and type(error.get("code")) is int and type(error.get("message")) is str:
        return ERROR_REPLY
    return INVALID


def classify(value: Any) -> Message | InvalidMessage:
    """Classify an already decoded JSON value (with :func:`message_kind`)."""
    kind = message_kind(value)
    if kind == NOTIFICATION:
        return Notification(value["method"], value.get("params"))
    if kind == REQUEST:
        return Request(value["id"], value["method"], value.get("params"))
    if kind == RESULT:
        return Response(value["id"], value["result"])
    if kind == ERROR_REPLY:
        return ErrorResponse(value["id"], RequestError.from_error_object(value["error"]))
    return _explain_invalid(value)


def _explain_invalid(value: Any) -> InvalidMessage:
    """What is wrong with a value :func:`message_kind` found INVALID, and the
    id to answer (or the response id it carried)."""
    if type(value) is not dict:
        if type(value) is list:
            return _invalid("batch arrays are not supported by ACP v1")
        return _invalid("a message must be a JSON object")
    obj: dict[str, Any] = value
    if obj.get("jsonrpc") != "2.0":
        return _invalid('"jsonrpc" must be "2.0"', obj)
    if "method" in obj:
        if type(obj["method"]) is not str:
            return _invalid('"method" must be a string', obj)
        params = obj.get("params")
        if params is not None and type(params) is not dict and type(params) is not list:
            return _invalid('"params" must be an object, an array or null', obj)
        return _invalid('"id" must be an integer, a string or null', obj)
    if "id" not in obj:
        return _invalid('a message needs "method" or "id"', obj)
    response_id = obj["id"]
    if not is_request_id(response_id):
        return _invalid('"id" must be an integer, a string or null', obj)
    if ("result" in obj) == ("error" in obj):
        return InvalidMessage(
            RequestError.invalid_request('a response needs exactly one of "result" and "error"'),
            None,
            response_id,
            True,
        )
    return InvalidMessage(
        RequestError.invalid_request('an error needs an integer "code" and a string "message"'),
        None,
        response_id,
        True,
    )


def encode_frame(obj: Any) -> bytes:
    """Compact UTF-8 JSON for one message, with its ``\\n``.

    JSON escapes every newline inside strings, so the frame holds exactly one
    line. Raises ``ValueError``/``TypeError`` for values JSON cannot express
    (``NaN``, sets, circular or too deeply nested values, ...).
    """
    dumps = _fast_dumps
    if dumps is not None:
        try:
            data = dumps(obj, _not_serializable, _ORJSON_OPTIONS)
        except Exception:
            pass  # big integers, non-string keys, subclasses...: the stdlib decides
        else:
            # orjson writes NaN and the infinities as null: let the stdlib
            # refuse them (a null in the frame is rare enough to pay for it).
            if b"null" not in data:
                # A copy, and that is the point: orjson's result sits in a
                # 4 KiB allocation it does not shrink, which a frame queued
                # in the outbox would keep (so no OPT_APPEND_NEWLINE).
                return data + b"\n"
    try:
        text = "".join(_std_iterencode(obj, 0))
    except RecursionError:
        raise ValueError("value is circular or nested too deeply for JSON") from None
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        # Lone surrogates: write them as \\u escapes, which is valid JSON.
        data = _ascii_encoder.encode(obj).encode("ascii")
    return data + b"\n"


def request(request_id: RequestId, method: str, params: Any = None) -> dict[str, Any]:
    """The wire object of a request (``params`` omitted when ``None``)."""
    msg: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        msg["params"] = params
    return msg


def notification(method: str, params: Any = None) -> dict[str, Any]:
    """The wire object of a notification (``params`` omitted when ``None``)."""
    msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        msg["params"] = params
    return msg


def response(request_id: RequestId, result: Any) -> dict[str, Any]:
    """The wire object of a successful response."""
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def error_response(request_id: RequestId, error: RequestError) -> dict[str, Any]:
    """The wire object of an error response."""
    return {"jsonrpc": "2.0", "id": request_id, "error": error.to_error_object()}


def cancelled_reply_frame(request_id: RequestId) -> bytes:
    """The encoded ``-32800`` reply (no data) to ``request_id``: what a
    cancelled handler answers. Made from a template for an integer id, the
    bytes :func:`encode_frame` would make of the same message."""
    if type(request_id) is int:
        return _CANCELLED_REPLY % request_id
    return encode_frame(error_response(request_id, RequestError.request_cancelled()))


_CANCELLED_REPLY: Final = (
    b'{"jsonrpc":"2.0","id":%d,"error":'
    + encode_frame(RequestError.request_cancelled().to_error_object())[:-1].replace(b"%", b"%%")
    + b"}\n"
)

#: The method of the generic per-request cancellation notification.
CANCEL_REQUEST_METHOD: Final = "$/cancel_request"

_CANCEL_REQUEST: Final = encode_frame(
    notification(CANCEL_REQUEST_METHOD, {"requestId": 0})
).replace(b":0}", b":%d}")


def cancel_request_frame(request_id: int) -> bytes:
    """The encoded ``$/cancel_request`` for one of our requests (their ids
    are integers): the bytes :func:`encode_frame` makes of it."""
    return _CANCEL_REQUEST % request_id


# Reading those two frames back. A peer speaking acp_trio (or writing JSON
# the same compact way) sends exactly these bytes; a cascade of cancels is
# mostly made of them. Anything else, however equivalent, takes the general
# path (decode_frame, then the message's tests), which has the same outcome.
_CANCEL_HEAD, _, _CANCEL_TAIL = _CANCEL_REQUEST.rstrip(b"\n").partition(b"%d")
_CANCELLED_HEAD, _, _CANCELLED_TAIL = _CANCELLED_REPLY.rstrip(b"\n").partition(b"%d")

#: No frame longer than this matches either template (15-digit ids at most).
TEMPLATE_FRAME_MAX: Final = 15 + max(
    len(_CANCEL_HEAD) + len(_CANCEL_TAIL), len(_CANCELLED_HEAD) + len(_CANCELLED_TAIL)
)


#: Where the two templates first differ: ``m`` (``"method"``) in the cancel,
#: ``i`` (``"id"``) in the reply; a frame is tried against one of them only.
TEMPLATE_FORK: Final = len(b'{"jsonrpc":"2.0","')
assert _CANCEL_HEAD[TEMPLATE_FORK : TEMPLATE_FORK + 1] == b"m"
assert _CANCELLED_HEAD[TEMPLATE_FORK : TEMPLATE_FORK + 1] == b"i"
assert _CANCEL_HEAD[:TEMPLATE_FORK] == _CANCELLED_HEAD[:TEMPLATE_FORK]


def _template_matcher(head: bytes, tail: bytes) -> Callable[[bytes], int | None]:
    """A function taking the integer id out of a frame made from the template
    ``head + id + tail``, or giving ``None`` for any other frame. (One call per
    frame: the reader tries these on every short frame.)"""
    cut = len(tail)

    def match(frame: bytes) -> int | None:
        if frame.startswith(head) and frame.endswith(tail):
            digits = frame[len(head) : len(frame) - cut]
            # A JSON integer: no sign, no leading zero, short enough that every
            # JSON decoder reads it exactly.
            if 0 < len(digits) <= 15 and digits.isdigit() and (digits[0] != 48 or len(digits) == 1):
                return int(digits)
        return None

    return match


match_cancel_request: Final = _template_matcher(_CANCEL_HEAD, _CANCEL_TAIL)
"""The integer ``requestId`` if a frame (without its newline) is exactly the
bytes of :func:`cancel_request_frame`; ``None`` otherwise."""

match_cancelled_reply: Final = _template_matcher(_CANCELLED_HEAD, _CANCELLED_TAIL)
"""The integer id if a frame (without its newline) is exactly the bytes of
:func:`cancelled_reply_frame` for an integer id; ``None`` otherwise."""
