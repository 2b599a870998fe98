"""Request smuggling on HTTP/1.1 (RFC 9112 §6.1, §6.3): a request with both
``Content-Length`` and ``Transfer-Encoding``, or two ``Content-Length``, is
answered 400 and its connection closed, so nothing pipelined behind it is
served; what came before it is. Over real loopback sockets, and the guard
(acp_trio.remote._http1_guard) on its own, fed in every split."""

from __future__ import annotations

import json
import re

import pytest
import trio

from acp_trio.remote import agent_app
from acp_trio.remote._http1_guard import POISON, RequestGuard
from acp_trio.testing import ScenarioAgent

from .conftest import LIMIT, running

INIT = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {"protocolVersion": 1, "clientCapabilities": {}},
    }
).encode()
NOT_FOUND = b"GET /nothing HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"


def post(headers: bytes, body: bytes) -> bytes:
    return (
        b"POST /acp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Accept: application/json, text/event-stream\r\n" + headers + b"\r\n" + body
    )


def chunked(body: bytes) -> bytes:
    return b"%x;ext=1\r\n%s\r\n0\r\nX-Trailer: yes\r\n\r\n" % (len(body), body)


SMUGGLED = {
    "Content-Length and Transfer-Encoding": post(
        b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n", chunked(INIT)
    ),
    "Transfer-Encoding and Content-Length": post(
        b"Transfer-Encoding: chunked\r\nContent-Length: 5\r\n", chunked(INIT)
    ),
    "two equal Content-Length": post(b"Content-Length: %d\r\n" % len(INIT) * 2, INIT),
    "Content-Length: n, n": post(b"Content-Length: %d, %d\r\n" % (len(INIT), len(INIT)), INIT),
}


async def exchange(base: str, data: bytes) -> bytes:
    """Send ``data``, then read until the server closes."""
    host, port = base.removeprefix("http://").rsplit(":", 1)
    async with await trio.open_tcp_stream(host, int(port)) as stream:
        await stream.send_all(data)
        received = b""
        while chunk := await stream.receive_some():
            received += chunk
        return received


def statuses(received: bytes) -> list[bytes]:
    return re.findall(rb"HTTP/1\.1 (\d{3}) ", received)


@pytest.mark.parametrize("request_data", SMUGGLED.values(), ids=SMUGGLED.keys())
async def test_a_smuggling_request_is_refused_and_the_connection_closed(
    request_data: bytes,
) -> None:
    with trio.fail_after(LIMIT):
        async with running(agent_app(ScenarioAgent)) as base:
            # A request served first, the forbidden one, one pipelined behind.
            received = await exchange(base, NOT_FOUND + request_data + NOT_FOUND)
    assert statuses(received) == [b"404", b"400"]  # (was 404, 400, 404: left open)


async def test_pipelined_requests_with_chunked_and_sized_bodies_are_all_served() -> None:
    first = post(b"Transfer-Encoding: chunked\r\n", chunked(b"not json"))
    second = post(b"Content-Length: 8\r\n", b"not json")
    last = b"GET /nothing HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    with trio.fail_after(LIMIT):
        async with running(agent_app(ScenarioAgent)) as base:
            received = await exchange(base, first + second + last)
    assert statuses(received) == [b"400", b"400", b"404"]  # each answered, in turn


VALID = (
    NOT_FOUND
    + post(b"Transfer-Encoding: Chunked\r\n", b"3\r\nabc\r\n10\r\n" + b"x" * 16 + b"\r\n0\r\n\r\n")
    + post(b"Content-Length: 4\r\n", b"GET ")  # (a body that looks like a head)
    + post(b"Content-Length: 0\r\n", b"")
    + NOT_FOUND
)


def fed(data: bytes, cuts: list[int]) -> tuple[bytes, bool]:
    guard = RequestGuard()
    out = b""
    for start, end in zip([0, *cuts], [*cuts, len(data)], strict=True):
        out += guard.feed(data[start:end])
    return out, guard.refused


def test_the_guard_hands_on_valid_requests_unchanged_in_every_split() -> None:
    for cut in range(len(VALID) + 1):
        assert fed(VALID, [cut]) == (VALID, False)
    assert fed(VALID, list(range(1, len(VALID)))) == (VALID, False)


@pytest.mark.parametrize("request_data", SMUGGLED.values(), ids=SMUGGLED.keys())
def test_the_guard_puts_a_refused_head_in_place_of_a_forbidden_request(
    request_data: bytes,
) -> None:
    data = VALID + request_data + NOT_FOUND
    for cut in range(0, len(data) + 1, 7):
        assert fed(data, [cut]) == (VALID + POISON, True)
    assert fed(data, list(range(1, len(data)))) == (VALID + POISON, True)


H2C_UPGRADE = b"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAAP__\r\n"


@pytest.mark.parametrize(
    "head",
    [b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", H2C_UPGRADE + b"\r\n"],
    ids=["h2c preface", "h2c upgrade"],
)
def test_the_guard_stands_aside_after_what_is_not_http1(head: bytes) -> None:
    rest = b"\x00\x00\x12\x04" + post(b"Content-Length: 1\r\nContent-Length: 1\r\n", b"x")
    assert fed(head + rest, [5]) == (head + rest, False)


@pytest.mark.parametrize(
    "head",
    [
        H2C_UPGRADE + b"Content-Length: 1\r\nContent-Length: 1\r\n\r\nx",
        post(b"Upgrade: foo\r\nContent-Length: 1\r\n", b"x"),
        post(b"Upgrade: h2c\r\nContent-Length: 1\r\n", b"x"),  # (no HTTP2-Settings)
        b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n",
    ],
    ids=["a forbidden h2c upgrade", "another upgrade", "h2c without settings", "CONNECT"],
)
def test_the_guard_goes_on_guarding_after_what_stays_http1(head: bytes) -> None:
    smuggling = SMUGGLED["Content-Length and Transfer-Encoding"]
    out, refused = fed(head + smuggling + NOT_FOUND, [])
    assert refused
    assert out.endswith(POISON)
