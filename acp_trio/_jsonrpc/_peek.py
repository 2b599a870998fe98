"""Best-effort peeking into frames that cannot be parsed whole (cut short,
or too large to keep): is it a request, a notification or a response, and
what is its top-level ``id``? Used to answer an oversized request with its
id, and to fail the call an unparsable or oversized reply was meant for."""

from __future__ import annotations

from typing import Any, Final

from acp_trio._jsonrpc._messages import _BOM, RequestId, _decoder, is_request_id

__all__ = ["peek_id", "peek_oversized"]


def peek_id(head: bytes) -> tuple[str, RequestId] | None:
    """Best effort: find the top-level ``id`` in the first bytes of a message
    that was too large to parse whole.

    Returns ``("request", id)`` or ``("response", id)`` when the head shows a
    top-level ``id`` together with ``method`` (a request) or with ``result``
    or ``error`` (a response); ``None`` when it cannot tell. Only top-level
    keys count, so an ``"id"`` nested in ``params`` is never mistaken for the
    message's own.
    """
    kind, found_id, request_id = _peek_head(head)
    if found_id and kind is not None:
        return kind, request_id
    return None


def peek_oversized(head: bytes, tail: bytes) -> tuple[str | None, bool, RequestId]:
    """What can be told of a message too large to parse from its first and
    last bytes: ``(kind, found, id)``.

    ``kind`` is ``"request"``, ``"notification"``, ``"response"`` or ``None``
    (cannot tell); ``found`` whether a top-level ``id`` was seen. The head
    gives the members before the one it was cut in; the tail, the members
    after the last big value (the longest run of whole members that ends the
    message). A message with ``method`` and no ``id`` in either is taken for
    a notification: it would take two members too big to keep around the
    ``id`` to hide it, and a notification must never be answered.
    """
    kind, found_id, request_id = _peek_head(head)
    if not found_id:
        trailing = _trailing_members(tail)
        if trailing is not None:
            if "id" in trailing and is_request_id(trailing["id"]):
                found_id, request_id = True, trailing["id"]
            if kind is None:
                if "method" in trailing:
                    kind = "request"
                elif "result" in trailing or "error" in trailing:
                    kind = "response"
    if kind == "request" and not found_id:
        kind = "notification"
    return kind, found_id, request_id


# How many of the tail's commas are tried as the start of its last members.
_TAIL_TRIES: Final = 256


def _trailing_members(tail: bytes) -> dict[str, Any] | None:
    """The top-level members that end a message, from its last bytes: those
    after the earliest comma from which the rest reads as the end of one
    object (a nested object's end would leave a brace over)."""
    text = tail.decode("utf-8", "replace").rstrip(" \t\r\n")
    if not text.endswith("}"):
        return None
    start = 0
    for _ in range(_TAIL_TRIES):
        comma = text.find(",", start)
        if comma < 0:
            return None
        start = comma + 1
        try:
            members = _decoder.decode("{" + text[start:])
        except (ValueError, RecursionError):
            continue
        if type(members) is dict:
            return members
    return None


def _peek_head(head: bytes) -> tuple[str | None, bool, RequestId]:
    text = head.decode("utf-8", "replace")
    if text.startswith(_BOM):
        text = text[1:]
    ws = " \t\r\n"
    n = len(text)
    i = 0
    while i < n and text[i] in ws:
        i += 1
    if i >= n or text[i] != "{":
        return None, False, None
    i += 1
    found_id = False
    request_id: RequestId = None
    kind: str | None = None
    try:
        while True:
            while i < n and text[i] in ws:
                i += 1
            if i >= n or text[i] != '"':
                break
            key, i = _decoder.raw_decode(text, i)
            while i < n and text[i] in ws:
                i += 1
            if i >= n or text[i] != ":":
                break
            i += 1
            while i < n and text[i] in ws:
                i += 1
            if key == "method":
                kind = "request"
            elif key in ("result", "error"):
                kind = "response"
            if found_id and kind is not None:
                break
            value, i = _decoder.raw_decode(text, i)
            if key == "id" and is_request_id(value):
                if type(value) is int and (i >= n or text[i] not in ",} \t\r\n"):
                    # A number the head cut short ("12" of "123", "12" of "12.5")
                    # must not be mistaken for the id.
                    break
                found_id = True
                request_id = value
                if kind is not None:
                    break
            while i < n and text[i] in ws:
                i += 1
            if i < n and text[i] == "}":
                # Every top-level key seen: a "method" without an "id" is
                # a notification.
                if kind == "request" and not found_id:
                    kind = "notification"
                break
            if i >= n or text[i] != ",":
                break
            i += 1
    except (ValueError, RecursionError):
        pass  # the head ends inside a value (or nests too deeply): stop looking
    return kind, found_id, request_id
