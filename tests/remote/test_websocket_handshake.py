"""Our WebSocket's client handshake (acp_trio.remote._websocket.client_handshake)
against a raw server: frames that come with the response, and handshakes
that fail, each saying why."""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Callable

import pytest
import trio
import trio.testing

from acp_trio.remote._websocket import (
    WebSocketClosed,
    WebSocketError,
    WebSocketRejected,
    client_handshake,
)

from .conftest import LIMIT
from .wsraw import GUID, encode, stream_pair


def response(key: bytes, *headers: bytes) -> bytes:
    accept = base64.b64encode(hashlib.sha1(key + GUID).digest())
    lines = [b"HTTP/1.1 101 Switching Protocols", b"Upgrade: websocket", b"Connection: Upgrade"]
    return b"\r\n".join([*lines, b"Sec-WebSocket-Accept: " + accept, *headers, b"", b""])


async def raw_server(stream: trio.abc.Stream, answer: Callable[[bytes], list[bytes]]) -> bytes:
    """Read the upgrade request, write each of ``answer(key)``, send EOF;
    returns the request head."""
    head = b""
    while b"\r\n\r\n" not in head:
        head += await stream.receive_some()
    match = re.search(rb"(?i)\r\nsec-websocket-key: *(\S+)", head)
    assert match is not None
    for part in answer(match.group(1)):
        await stream.send_all(part)
        await trio.testing.wait_all_tasks_blocked()
    await stream.send_eof()  # type: ignore[attr-defined]
    return head


@pytest.mark.parametrize("split", [False, True])
@pytest.mark.parametrize("kind", ["memory", "socketpair"])
async def test_frames_that_came_with_the_handshake_are_read(kind: str, split: bool) -> None:
    def answer(key: bytes) -> list[bytes]:
        data = response(key, b"Acp-Connection-Id: abc123") + encode(1, b"in the head", mask=False)
        data += encode(2, b"second", mask=False)
        return [data[:20], data[20:-3], data[-3:]] if split else [data]

    with trio.fail_after(LIMIT):
        async with stream_pair(kind) as (ours, theirs), trio.open_nursery() as nursery:
            heads: list[bytes] = []

            async def serve() -> None:
                heads.append(await raw_server(theirs, answer))

            nursery.start_soon(serve)
            extra = [(b"x-test", b"yes")]
            ws = await client_handshake(
                ours, nursery, "example.test", "/acp?x=1", headers=extra, max_message_size=1000
            )
            assert (b"acp-connection-id", b"abc123") in ws.handshake_headers
            assert await ws.get_message() == "in the head"
            assert await ws.get_message() == b"second"
            with pytest.raises(WebSocketClosed) as info:
                await ws.get_message()  # the server's EOF
            assert info.value.code == 1006
            await ws.aclose()
        request = heads[0]
        assert request.startswith(b"GET /acp?x=1 HTTP/1.1\r\n")
        assert re.search(rb"(?i)\r\nhost: example\.test\r\n", request)
        assert re.search(rb"(?i)\r\nx-test: yes\r\n", request)


R403 = b"HTTP/1.1 403 Forbidden\r\nX-Why: test\r\n"
FAILED_HANDSHAKES = {
    "403 in one write": [R403 + b"Content-Length: 5\r\n\r\nnope\n"],
    "403, body later": [R403 + b"Content-Length: 5\r\n\r\nno", b"pe\n"],
    "403, body to EOF": [R403 + b"\r\nnope", b"\n"],
    "not HTTP": [b"SSH-2.0-OpenSSH_9.6\r\n\r\n"],
    "wrong accept": [response(b"not the key")],
    "EOF in the head": [b"HTTP/1.1 101 Switching Pro"],
}


@pytest.mark.parametrize("parts", FAILED_HANDSHAKES.values(), ids=FAILED_HANDSHAKES)
async def test_a_failed_handshake_says_why(parts: list[bytes]) -> None:
    with trio.fail_after(LIMIT):
        async with stream_pair("memory") as (ours, theirs), trio.open_nursery() as nursery:
            nursery.start_soon(raw_server, theirs, lambda key: parts)
            with pytest.raises(WebSocketError) as info:
                await client_handshake(ours, nursery, "h", "/acp", max_message_size=1000)
    if parts[0].startswith(R403):
        assert isinstance(info.value, WebSocketRejected)
        assert info.value.status_code == 403
        assert info.value.body == b"nope\n"
        assert ("x-why", "test") in info.value.headers
    else:
        assert not isinstance(info.value, WebSocketRejected)


async def test_eof_in_the_response_head_is_seen_at_the_first_empty_read() -> None:
    reads: list[bytes | bytearray] = []
    with trio.fail_after(LIMIT):
        async with stream_pair("memory") as (ours, theirs), trio.open_nursery() as nursery:
            nursery.start_soon(raw_server, theirs, lambda key: [b"HTTP/1.1 101 Switching Pro"])
            receive = ours.receive_some

            async def counted(max_bytes: int | None = None) -> bytes | bytearray:
                reads.append(await receive(max_bytes))
                return reads[-1]

            ours.receive_some = counted  # type: ignore[method-assign]
            with pytest.raises(WebSocketError):
                await client_handshake(ours, nursery, "h", "/acp", max_message_size=1000)
    assert reads.count(b"") == 1
