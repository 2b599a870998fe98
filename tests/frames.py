"""One set of JSON-RPC frame builders for every test (``from frames import
...``): messages as dicts, :func:`line` for the NDJSON bytes and
:func:`frame` for one frame without its line end. Written
here, not taken from the code under test."""

from __future__ import annotations

import json
from typing import Any

Message = dict[str, Any]


def line(obj: Message | bytes, *, ensure_ascii: bool = True) -> bytes:
    """One NDJSON frame: a dict is JSON-encoded, bytes are sent as they are."""
    if isinstance(obj, bytes):
        return obj if obj.endswith(b"\n") else obj + b"\n"
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=ensure_ascii).encode() + b"\n"


def frame(obj: Message | bytes, *, ensure_ascii: bool = True) -> bytes:
    """One frame as the framing layer hands it on (:func:`line` without its
    line end): what the sans-IO peer's ``receive`` takes."""
    return line(obj, ensure_ascii=ensure_ascii)[:-1]


def req(request_id: Any, method: str, params: Any = None) -> Message:
    msg: Message = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        msg["params"] = params
    return msg


def notif(method: str, params: Any = None) -> Message:
    msg: Message = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        msg["params"] = params
    return msg


def cancel(request_id: Any) -> Message:
    return notif("$/cancel_request", {"requestId": request_id})


def session_cancel(session_id: str) -> Message:
    return notif("session/cancel", {"sessionId": session_id})


def ok(request_id: Any, result: Any) -> Message:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def err(request_id: Any, code: int, message: str, *data: Any) -> Message:
    error: dict[str, Any] = {"code": code, "message": message}
    if data:
        (error["data"],) = data
    return {"jsonrpc": "2.0", "id": request_id, "error": error}


def cancelled(request_id: Any) -> Message:
    """The exact -32800 reply the connection sends."""
    return err(request_id, -32800, "Request cancelled")
