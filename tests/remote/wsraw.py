"""A raw WebSocket peer for the tests of our WebSocket: its own frame
encoder and decoder, stream pairs of each kind, and a WebSocket of ours
wired to a raw peer."""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import NamedTuple

import pytest
import trio
import trio.testing

from acp_trio.remote._websocket import (
    WebSocket,
)

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
KEY = b"\x5a\x13\xc7\x01"


def encode(opcode: int, payload: bytes, *, mask: bool, fin: bool = True, rsv: int = 0) -> bytes:
    """One raw frame, masked with a fixed key when ``mask``."""
    size, bit = len(payload), 0x80 if mask else 0
    head = bytes([(0x80 if fin else 0) | rsv | opcode])
    if size < 126:
        head += bytes([bit | size])
    elif size < 1 << 16:
        head += bytes([bit | 126]) + size.to_bytes(2, "big")
    else:
        head += bytes([bit | 127]) + size.to_bytes(8, "big")
    if not mask:
        return head + payload
    return head + KEY + bytes(b ^ k for b, k in zip(payload, itertools.cycle(KEY)))


def close_payload(code: int, reason: str = "") -> bytes:
    return code.to_bytes(2, "big") + reason.encode()


class Frame(NamedTuple):
    fin: bool
    rsv: int
    opcode: int
    masked: bool
    header_size: int
    payload: bytes


class Peer:
    """The raw other end: sends bytes, reads frames (decoded here)."""

    def __init__(self, stream: trio.abc.Stream, mask: bool, buffer: bytes = b"") -> None:
        self.stream = stream
        self.mask = mask
        self.buffer = bytearray(buffer)

    async def send(self, opcode: int, payload: bytes, fin: bool = True) -> None:
        await self.stream.send_all(encode(opcode, payload, mask=self.mask, fin=fin))

    async def _fill(self, size: int) -> None:
        while len(self.buffer) < size:
            data = await self.stream.receive_some()
            if not data:
                raise EOFError(f"EOF with {bytes(self.buffer)!r} buffered")
            self.buffer += data

    async def frame(self) -> Frame:
        await self._fill(2)
        first, second = self.buffer[0], self.buffer[1]
        size, pos = second & 0x7F, 2
        if size >= 126:
            pos = 4 if size == 126 else 10
            await self._fill(pos)
            size = int.from_bytes(self.buffer[2:pos], "big")
        masked = bool(second & 0x80)
        key = b""
        if masked:
            await self._fill(pos + 4)
            key, pos = bytes(self.buffer[pos : pos + 4]), pos + 4
        await self._fill(pos + size)
        payload = bytes(self.buffer[pos : pos + size])
        del self.buffer[: pos + size]
        if masked:
            payload = bytes(b ^ k for b, k in zip(payload, itertools.cycle(key)))
        return Frame(bool(first & 0x80), first & 0x70, first & 0x0F, masked, pos, payload)

    async def at_eof(self) -> bool:
        """Whether the stream ends with nothing more buffered."""
        if self.buffer:
            return False
        with contextlib.suppress(trio.BrokenResourceError):
            return await self.stream.receive_some() == b""
        return True


@asynccontextmanager
async def stream_pair(kind: str) -> AsyncIterator[tuple[trio.abc.Stream, trio.abc.Stream]]:
    """Two connected byte streams: ``memory``, ``lockstep``, ``socketpair``
    (a Unix socket pair) or ``tcp`` (loopback)."""
    ours: trio.abc.Stream
    theirs: trio.abc.Stream
    if kind == "memory":
        ours, theirs = trio.testing.memory_stream_pair()
    elif kind == "lockstep":
        ours, theirs = trio.testing.lockstep_stream_pair()
    elif kind == "socketpair":
        a, b = trio.socket.socketpair()
        ours, theirs = trio.SocketStream(a), trio.SocketStream(b)
    else:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        port = listeners[0].socket.getsockname()[1]
        ours = await trio.open_tcp_stream("127.0.0.1", port)
        theirs = await listeners[0].accept()
        await listeners[0].aclose()
    try:
        yield ours, theirs
    finally:
        await ours.aclose()
        await theirs.aclose()


@asynccontextmanager
async def websocket(
    kind: str, *, client: bool, max_message_size: int = 1 << 20, write_buffer: int = 65536
) -> AsyncIterator[tuple[WebSocket, Peer]]:
    """Our WebSocket (its writer running) and the raw peer facing it."""
    async with stream_pair(kind) as (ours, theirs), trio.open_nursery() as nursery:
        ws = WebSocket(
            ours, client=client, max_message_size=max_message_size, write_buffer=write_buffer
        )
        await nursery.start(ws.run_writer)
        yield ws, Peer(theirs, mask=not client)
        nursery.cancel_scope.cancel()


def text_of(size: int) -> str:
    """A text of exactly ``size`` UTF-8 bytes, mostly two-byte characters."""
    return "é" * (size // 2) + "a" * (size % 2)


KINDS = ["memory", "socketpair", "tcp"]
ROLES = [pytest.param(True, id="client"), pytest.param(False, id="server")]
