"""route_of: what the HTTP front routes a message by, read without parsing
the whole message, must be what a full parse of it says, whatever order its
members come in."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest

from acp_trio.remote._http_connection import Route, route_of


def full_parse(message: dict[str, Any], incoming: bool) -> Route:
    """The route from the whole parsed message (the reference)."""
    method = message.get("method")
    params = message.get("params")
    result = message.get("result")
    holder = params if method is not None else result
    session = holder.get("sessionId") if isinstance(holder, dict) else None
    if method is None and incoming:
        return Route()  # a client's response routes by nothing
    return Route(
        method if isinstance(method, str) else None,
        "id" in message,
        message.get("id"),
        session if isinstance(session, str) else None,
    )


MESSAGES = {
    "request": {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "session/prompt",
        "params": {"sessionId": "s", "prompt": [{"type": "text", "text": "hi, [there]"}]},
    },
    "request with a string id": {
        "jsonrpc": "2.0",
        "id": "a",
        "method": "session/load",
        "params": {"sessionId": "s", "cwd": "/"},
    },
    "notification": {
        "jsonrpc": "2.0",
        "method": "session/cancel",
        "params": {"sessionId": "s"},
    },
    "response": {"jsonrpc": "2.0", "id": 7, "result": {"sessionId": "s"}},
    "error": {"jsonrpc": "2.0", "id": 7, "error": {"code": -32800, "message": "cancelled"}},
}


def orders(message: dict[str, Any]) -> list[bytes]:
    """The message compact, with its members in every order."""
    return [
        json.dumps(dict(order), separators=(",", ":")).encode()
        for order in itertools.permutations(message.items())
    ]


@pytest.mark.parametrize("incoming", [True, False], ids=["incoming", "outgoing"])
@pytest.mark.parametrize("name", MESSAGES)
def test_the_route_is_the_full_parses_in_any_member_order(name: str, incoming: bool) -> None:
    message = MESSAGES[name]
    expected = full_parse(message, incoming)
    for raw in orders(message):
        route = route_of(raw, incoming=incoming)
        if not incoming and expected.method is not None:
            # Sent requests and notifications: the id does not route them.
            assert (route.method, route.session_id) == (expected.method, expected.session_id), raw
        else:
            assert route == expected, raw


def test_a_client_request_with_its_id_last_is_a_request() -> None:
    # Found by the parsed-once test: the quick match took it for a notification.
    raw = (
        b'{"jsonrpc":"2.0","method":"session/prompt","params":{"sessionId":"s","prompt":[]},"id":2}'
    )
    assert route_of(raw, incoming=True) == Route("session/prompt", True, 2, "s")
