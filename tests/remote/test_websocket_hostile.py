"""Our WebSocket against a hostile peer over real loopback sockets: pings
sent by a peer that never reads, messages of empty or tiny fragments,
payload lengths not in their shortest form."""

from __future__ import annotations

import socket

import pytest
import trio

from acp_trio.remote._websocket import WebSocketClosed

from .conftest import LIMIT, until
from .wsraw import ROLES, encode, websocket

KEY = b"\x5a\x13\xc7\x01"


def raw_frame(opcode: int, payload: bytes, *, mask: bool, form: int, length: int = -1) -> bytes:
    """A frame whose length is written in ``form`` (7, 16 or 64 bits),
    minimal or not; ``length`` overrides the length written."""
    size = len(payload) if length < 0 else length
    bit = 0x80 if mask else 0
    head = bytes([0x80 | opcode])
    if form == 7:
        head += bytes([bit | size])
    elif form == 16:
        head += bytes([bit | 126]) + size.to_bytes(2, "big")
    else:
        head += bytes([bit | 127]) + size.to_bytes(8, "big")
    if not mask:
        return head + payload
    return head + KEY + bytes(b ^ KEY[i % 4] for i, b in enumerate(payload))


def small_buffers(ws_stream: trio.abc.Stream, peer_stream: trio.abc.Stream) -> None:
    """Shrink the kernel's buffers, so little hides in them."""
    ws_stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 8192)  # type: ignore[attr-defined]
    peer_stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8192)  # type: ignore[attr-defined]


@pytest.mark.parametrize("client", ROLES)
async def test_pongs_to_a_peer_that_never_reads_stay_within_the_write_buffer(
    client: bool,
) -> None:
    """Pongs obey the write buffer's bound: once it is full, nothing more is
    read (so the peer's sends stop), where every pong used to be queued."""
    limit = 4096
    ping = encode(0x9, b"p" * 125, mask=not client)
    batch = ping * 100
    total = 4 * 1024 * 1024
    sent = 0
    done = False

    async def flood() -> None:
        nonlocal sent, done
        while sent < total:
            await peer.stream.send_all(batch)
            sent += len(batch)
        done = True

    async def read_forever() -> None:
        with pytest.raises(WebSocketClosed):
            await ws.get_message()

    last = -1
    same = 0

    def finished_or_stalled() -> bool:
        nonlocal last, same
        if done:
            return True
        same = same + 1 if sent == last else 0
        last = sent
        return same >= 100 and ws._out_size > limit

    with trio.fail_after(LIMIT):
        async with (
            websocket("tcp", client=client, write_buffer=limit) as (ws, peer),
            trio.open_nursery() as nursery,
        ):
            small_buffers(ws._stream, peer.stream)
            nursery.start_soon(flood)
            nursery.start_soon(read_forever)
            await until(finished_or_stalled)
            # At most one read's worth of pongs (64 KiB) past the bound.
            assert ws._out_size <= limit + 65536 + 256
            assert not done  # the flood was stopped, not absorbed
            nursery.cancel_scope.cancel()


@pytest.mark.parametrize("client", ROLES)
async def test_a_message_of_empty_fragments_meets_the_cap(client: bool) -> None:
    cap = 1 << 20
    count = cap // 8  # (each counts at least 8 bytes toward the cap)
    data = encode(1, b"", mask=not client, fin=False)
    data += encode(0, b"", mask=not client, fin=False) * count
    with trio.fail_after(LIMIT):
        async with websocket("tcp", client=client, max_message_size=cap) as (ws, peer):

            async def send() -> None:
                await peer.stream.send_all(data)
                await peer.stream.send_eof()  # type: ignore[attr-defined]

            async with trio.open_nursery() as nursery:
                nursery.start_soon(send)
                with pytest.raises(WebSocketClosed) as info:
                    await ws.get_message()
                nursery.cancel_scope.cancel()
            assert info.value.code == 1009  # (was 1006: EOF, the fragments all held)
            frame = await peer.frame()
            assert (frame.opcode, frame.payload[:2]) == (8, (1009).to_bytes(2))


@pytest.mark.parametrize("client", ROLES)
async def test_a_message_of_one_byte_fragments_counts_their_overhead(client: bool) -> None:
    cap = 100_000
    count = cap // 2  # half the cap in payload bytes, one byte a fragment
    data = encode(2, b"x", mask=not client, fin=False)
    data += encode(0, b"x", mask=not client, fin=False) * (count - 2)
    data += encode(0, b"x", mask=not client)
    with trio.fail_after(LIMIT):
        async with websocket("tcp", client=client, max_message_size=cap) as (ws, peer):
            async with trio.open_nursery() as nursery:
                # (Cancelled after: the rest is never read.)
                nursery.start_soon(peer.stream.send_all, data)
                with pytest.raises(WebSocketClosed) as info:
                    await ws.get_message()
                nursery.cancel_scope.cancel()
            assert info.value.code == 1009  # (was: the message, taken whole)


LENGTH_CASES = [
    ("5 bytes in 16 bits", b"hello", 16, -1),
    ("5 bytes in 64 bits", b"hello", 64, -1),
    ("125 bytes in 16 bits", b"x" * 125, 16, -1),
    ("65535 bytes in 64 bits", b"x" * 65535, 64, -1),
    ("64-bit length with its top bit set", b"", 64, 1 << 63),
]


@pytest.mark.parametrize(
    ("payload", "form", "length"), [pytest.param(*case[1:], id=case[0]) for case in LENGTH_CASES]
)
@pytest.mark.parametrize("client", ROLES)
async def test_a_payload_length_not_in_its_shortest_form_is_a_protocol_error(
    client: bool, payload: bytes, form: int, length: int
) -> None:
    data = raw_frame(1, payload, mask=not client, form=form, length=length)
    with trio.fail_after(LIMIT):
        async with websocket("tcp", client=client) as (ws, peer):
            await peer.stream.send_all(encode(1, b"before", mask=not client) + data)
            assert await ws.get_message() == "before"
            with pytest.raises(WebSocketClosed) as info:
                await ws.get_message()
            assert info.value.code == 1002
            frame = await peer.frame()
            assert (frame.opcode, frame.payload[:2]) == (8, (1002).to_bytes(2))


@pytest.mark.parametrize("client", ROLES)
async def test_every_length_in_its_shortest_form_is_accepted(client: bool) -> None:
    with trio.fail_after(LIMIT):
        async with websocket("tcp", client=client) as (ws, peer):
            for size, form in ((125, 7), (126, 16), (65535, 16), (65536, 64)):
                payload = b"y" * size
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(
                        peer.stream.send_all, raw_frame(2, payload, mask=not client, form=form)
                    )
                    assert await ws.get_message() == payload
