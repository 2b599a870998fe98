"""Our WebSocket (acp_trio.remote._websocket) on its own, against a raw peer
that writes and reads frames with an encoder of its own (tests/remote/wsraw.py):
sizes, fragments and pings, protocol errors, the closing handshake, a lost
connection, write-behind backpressure, a reused descriptor."""

from __future__ import annotations

import contextlib
import functools
import os

import pytest
import trio
import trio.testing

from acp_trio.remote._websocket import (
    WebSocket,
    WebSocketClosed,
)

from .conftest import LIMIT
from .wsraw import KINDS, ROLES, Frame, Peer, close_payload, encode, text_of, websocket


@pytest.mark.parametrize("size", [0, 125, 126, 65535, 65536, 200000])
@pytest.mark.parametrize("client", ROLES)
@pytest.mark.parametrize("kind", KINDS)
async def test_messages_of_every_size_round_trip(kind: str, client: bool, size: int) -> None:
    text, data = text_of(size), os.urandom(size)
    header = (2 if size < 126 else 4 if size < 65536 else 10) + (4 if client else 0)
    with trio.fail_after(LIMIT):
        async with websocket(kind, client=client) as (ws, peer):
            for opcode, message in ((1, text), (2, data)):
                payload = message.encode() if isinstance(message, str) else message
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(peer.send, opcode, payload)
                    got = await ws.get_message()
                assert type(got) is type(message)
                assert got == message
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(ws.send_message, message)
                    frame = await peer.frame()
                assert frame == Frame(True, 0, opcode, client, header, payload)


@pytest.mark.parametrize("client", ROLES)
@pytest.mark.parametrize("kind", ["memory", "socketpair"])
async def test_a_fragmented_message_arrives_whole_and_a_ping_between_is_answered(
    kind: str, client: bool
) -> None:
    whole = "Hello wörld".encode()  # the ö is split between two fragments
    with trio.fail_after(LIMIT):
        async with websocket(kind, client=client) as (ws, peer):
            await peer.send(1, whole[:3], fin=False)
            await peer.send(0x9, b"are you there?")
            await peer.send(0, whole[3:8], fin=False)
            await peer.send(0, whole[8:])
            await peer.send(2, b"\x00\x01", fin=False)
            await peer.send(0, b"\x02")
            assert await ws.get_message() == "Hello wörld"
            assert await ws.get_message() == b"\x00\x01\x02"
            pong = Frame(True, 0, 0xA, client, 6 if client else 2, b"are you there?")
            assert await peer.frame() == pong


M = functools.partial(encode, mask=True)  # to a server
U = functools.partial(encode, mask=False)  # to a client
S, C = False, True  # our side: server, client
PROTOCOL_ERRORS = [
    ("reserved bits (server)", S, M(1, b"hi", rsv=0x40), 1002),
    ("reserved bits (client)", C, U(1, b"hi", rsv=0x10), 1002),
    ("unmasked to a server", S, U(1, b"hi"), 1002),
    ("masked to a client", C, M(1, b"hi"), 1002),
    ("ping over 125 bytes", S, M(9, b"p" * 126), 1002),
    ("close over 125 bytes", C, U(8, b"\x03\xe8" + b"r" * 124), 1002),
    ("fragmented ping", S, M(9, b"p", fin=False), 1002),
    ("continuation first", S, M(0, b"x"), 1002),
    ("message inside a message", S, M(1, b"a", fin=False) + M(1, b"b"), 1002),
    ("unknown data opcode", S, M(3, b""), 1002),
    ("unknown control opcode", C, U(0xB, b""), 1002),
    ("close of one byte", S, M(8, b"\x03"), 1002),
    ("invalid UTF-8", S, M(1, b"ok \xc3\x28"), 1007),
    ("invalid UTF-8 over fragments", C, U(1, b"\xe2\x82", fin=False) + U(0, b"("), 1007),
    ("close reason not UTF-8", S, M(8, b"\x03\xe8\xff"), 1007),
    ("a frame over the cap", S, M(2, b"b" * 1001), 1009),
    ("fragments over the cap", C, U(1, b"a" * 600, fin=False) + U(0, b"a" * 401), 1009),
]


@pytest.mark.parametrize(
    ("client", "data", "code"), [pytest.param(*case[1:], id=case[0]) for case in PROTOCOL_ERRORS]
)
async def test_a_protocol_error_closes_with_its_code(client: bool, data: bytes, code: int) -> None:
    with trio.fail_after(LIMIT):
        async with websocket("memory", client=client, max_message_size=1000) as (ws, peer):
            # What came before the bad frame is delivered first.
            await peer.stream.send_all(encode(1, b"before", mask=not client) + data)
            assert await ws.get_message() == "before"
            with pytest.raises(WebSocketClosed) as info:
                await ws.get_message()
            assert info.value.code == code
            assert ws.closed is not None
            assert ws.closed.code == code
            frame = await peer.frame()
            assert (frame.opcode, frame.masked, frame.payload[:2]) == (8, client, code.to_bytes(2))
            with pytest.raises(WebSocketClosed):
                await ws.send_text(b"more")
            await ws.aclose()
            assert await peer.at_eof()


@pytest.mark.parametrize("client", ROLES)
@pytest.mark.parametrize("kind", ["memory", "socketpair"])
async def test_a_huge_announced_size_fails_from_the_header_alone(kind: str, client: bool) -> None:
    with trio.fail_after(LIMIT):
        async with websocket(kind, client=client, max_message_size=1000) as (ws, peer):
            # Only the header (no mask key, no payload), then EOF: a reader
            # waiting for the payload would see the connection lost (1006).
            mask_bit = 0 if client else 0x80
            await peer.stream.send_all(bytes([0x82, mask_bit | 127]) + (1 << 40).to_bytes(8, "big"))
            await peer.stream.send_eof()  # type: ignore[attr-defined]
            with pytest.raises(WebSocketClosed) as info:
                await ws.get_message()
            assert info.value.code == 1009
            frame = await peer.frame()
            assert (frame.opcode, frame.payload[:2]) == (8, (1009).to_bytes(2))


@pytest.mark.parametrize("client", ROLES)
async def test_the_peer_closes_with_a_code_and_a_reason(client: bool) -> None:
    with trio.fail_after(LIMIT):
        async with websocket("memory", client=client) as (ws, peer):
            await peer.send(1, b"last words")
            await peer.send(8, close_payload(4001, "going away, bye"))
            assert await ws.get_message() == "last words"
            with pytest.raises(WebSocketClosed) as info:
                await ws.get_message()
            assert (info.value.code, info.value.reason) == (4001, "going away, bye")
            reply = await peer.frame()
            assert (reply.opcode, reply.masked, reply.payload) == (8, client, (4001).to_bytes(2))
            with pytest.raises(WebSocketClosed):
                await ws.send_message("too late")
            await ws.aclose()
            assert await peer.at_eof()  # no second close frame


@pytest.mark.parametrize("code", [999, 1005, 1006, 1015])
async def test_a_close_with_a_code_no_endpoint_may_send_is_a_protocol_error(code: int) -> None:
    with trio.fail_after(LIMIT):
        async with websocket("memory", client=False) as (ws, peer):
            await peer.send(8, close_payload(code))
            with pytest.raises(WebSocketClosed) as info:
                await ws.get_message()
            reply = await peer.frame()
            assert (reply.opcode, reply.payload[:2]) == (8, (1002).to_bytes(2, "big"))
            assert info.value.code == 1002


@pytest.mark.parametrize("kind", ["memory", "socketpair"])
async def test_we_close_first_and_the_peer_answers(kind: str) -> None:
    returned = trio.Event()

    async def close(ws: WebSocket) -> None:
        await ws.aclose(1000, "done here")
        returned.set()

    with trio.fail_after(LIMIT):
        async with websocket(kind, client=True) as (ws, peer), trio.open_nursery() as nursery:
            nursery.start_soon(close, ws)
            frame = await peer.frame()
            assert frame.payload == close_payload(1000, "done here")
            assert (frame.opcode, frame.masked) == (8, True)
            await trio.testing.wait_all_tasks_blocked()
            assert not returned.is_set()  # it waits for the peer's close
            await peer.send(1, b"dropped: we are closing")
            await peer.send(8, close_payload(1000))
            assert await peer.at_eof()  # our side closed the byte stream
            await returned.wait()
            assert ws.closed is not None
            assert ws.closed.code == 1000
            await ws.aclose()  # idempotent
            with pytest.raises(WebSocketClosed):
                await ws.get_message()
            with pytest.raises(WebSocketClosed):
                await ws.send_text(b"after")
            assert not ws.send_text_nowait(b"after")


async def test_aclose_gives_up_on_a_silent_peer_after_close_timeout(
    autojump_clock: trio.testing.MockClock,
) -> None:
    with trio.fail_after(LIMIT):
        async with websocket("memory", client=False) as (ws, peer):
            ws.close_timeout = 7.0
            start = trio.current_time()
            with trio.CancelScope() as scope:
                scope.cancel()  # shielded: a cancelled close still closes
                await ws.aclose(1001, "bye")
            assert trio.current_time() - start >= 7.0
            frame = await peer.frame()
            assert (frame.opcode, frame.payload) == (8, close_payload(1001, "bye"))
            assert await peer.at_eof()


@pytest.mark.parametrize("partial", [b"", encode(1, b"half a frame", mask=True)[:5]])
@pytest.mark.parametrize("kind", KINDS)
async def test_a_lost_connection_is_1006(kind: str, partial: bytes) -> None:
    with trio.fail_after(LIMIT):
        async with websocket(kind, client=False) as (ws, peer):
            await peer.stream.send_all(encode(1, b"whole", mask=True) + partial)
            await peer.stream.aclose()
            assert await ws.get_message() == "whole"
            with pytest.raises(WebSocketClosed) as info:
                await ws.get_message()
            assert info.value.code == 1006
            with pytest.raises(WebSocketClosed) as info:
                await ws.send_text(b"anyone?")
            assert info.value.code == 1006
            await ws.aclose()


def numbered(i: int, size: int) -> bytes:
    return f"{i:05d}".encode().ljust(size, b".")


@pytest.mark.parametrize(
    ("kind", "count", "size"), [("lockstep", 200, 100), ("socketpair", 5000, 1000)]
)
async def test_a_peer_that_stops_reading_stops_the_sender(kind: str, count: int, size: int) -> None:
    sent = 0

    async def sender(ws: WebSocket) -> None:
        nonlocal sent
        for i in range(count):
            await ws.send_text(numbered(i, size))
            sent += 1

    with trio.fail_after(LIMIT):
        async with (
            websocket(kind, client=False, write_buffer=1000) as (ws, peer),
            trio.open_nursery() as nursery,
        ):
            nursery.start_soon(sender, ws)
            await trio.testing.wait_all_tasks_blocked()
            assert 0 < sent < count  # the sender waits
            if kind == "lockstep":  # held: the frame being written + write_buffer
                assert sent <= 1000 // (size + 2) + 1
            assert not ws.send_text_nowait(b"no room")
            for i in range(count):
                frame = await peer.frame()
                assert (frame.opcode, frame.payload) == (1, numbered(i, size))
        assert sent == count


async def test_send_text_nowait_refuses_once_the_buffer_is_over_write_buffer() -> None:
    frame_size = 2 + 100
    with trio.fail_after(LIMIT):
        async with websocket("lockstep", client=False, write_buffer=1000) as (ws, peer):
            results = [ws.send_text_nowait(numbered(i, 100)) for i in range(20)]
            accepted = 1000 // frame_size + 1  # each accepted while <= 1000 bytes wait
            assert results == [True] * accepted + [False] * (20 - accepted)
            for i in range(accepted):
                assert (await peer.frame()).payload == numbered(i, 100)
            await ws.flush()
            assert ws.send_text_nowait(b"room again")
            assert (await peer.frame()).payload == b"room again"


async def test_a_reused_descriptor_gets_nothing_from_the_old_websocket() -> None:
    a, b = trio.socket.socketpair()
    ours, theirs = trio.SocketStream(a), trio.SocketStream(b)
    fresh: list[trio.socket.SocketType] = []
    with trio.fail_after(LIMIT):
        async with ours, theirs, trio.open_nursery() as nursery:
            ws = WebSocket(ours, client=False, max_message_size=1000)
            await nursery.start(ws.run_writer)
            await ws.send_text(b"direct")
            assert (await Peer(theirs, mask=True).frame()).payload == b"direct"
            old = a.fileno()
            await ours.aclose()  # as a network failure would
            try:
                while not any(s.fileno() == old for s in fresh) and len(fresh) < 40:
                    fresh.extend(trio.socket.socketpair())
                index = next(i for i, s in enumerate(fresh) if s.fileno() == old)
                other = fresh[index ^ 1]  # the reused descriptor's peer
                with contextlib.suppress(WebSocketClosed):
                    await ws.send_text(b"to the old socket")
                    await ws.send_text(b"again")
                await ws.aclose()
                with trio.move_on_after(0.5):
                    leaked = await other.recv(65536)
                    pytest.fail(f"the new socket received {leaked!r}")
            finally:
                for s in fresh:
                    s.close()
            nursery.cancel_scope.cancel()
