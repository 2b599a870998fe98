"""WebSocket frames (RFC 6455 §5), built and parsed without a library:
the close codes, a frame built whole, masking keys, and the parser
(:class:`FrameReader`) our :class:`~acp_trio.remote.WebSocket` reads with."""

from __future__ import annotations

import os
import struct

__all__ = [
    "ABNORMAL",
    "INVALID_DATA",
    "NORMAL",
    "NO_STATUS",
    "PROTOCOL_ERROR",
    "TOO_BIG",
    "FrameReader",
    "Keys",
    "ProtocolFailure",
    "build_frame",
    "receivable",
    "sendable",
]

#: Close codes (RFC 6455 §7.4.1).
NORMAL = 1000
PROTOCOL_ERROR = 1002
NO_STATUS = 1005
ABNORMAL = 1006
INVALID_DATA = 1007
TOO_BIG = 1009


def sendable(code: int) -> bool:
    """Whether an endpoint may send close code ``code`` (RFC 6455 §7.4:
    1000-1003 and 1007-1014 of the registered ones, 3000-4999)."""
    return 1000 <= code <= 1003 or 1007 <= code <= 1014 or 3000 <= code <= 4999


def receivable(code: int) -> bool:
    """Whether a peer's close frame may carry close code ``code``: what
    wsproto accepts (1000-1003, 1007-1013, 3000-4999), so the two decide
    alike (tests/remote/test_websocket_differential.py)."""
    return 1000 <= code <= 1003 or 1007 <= code <= 1013 or 3000 <= code <= 4999


def build_frame(opcode: int, payload: bytes, key: bytes | None) -> bytes:
    """One whole (FIN) frame; masked with ``key`` (4 bytes) if given."""
    size = len(payload)
    flag = 0x80 if key is not None else 0
    if size < 126:
        head = bytes((0x80 | opcode, flag | size))
    elif size < 65536:
        head = struct.pack("!BBH", 0x80 | opcode, flag | 126, size)
    else:
        head = struct.pack("!BBQ", 0x80 | opcode, flag | 127, size)
    if key is None:
        return head + payload
    stream = (key * (size // 4 + 1))[:size]
    masked = (int.from_bytes(payload, "little") ^ int.from_bytes(stream, "little")).to_bytes(
        size, "little"
    )
    return head + key + masked


class Keys:
    """Masking keys for a client's frames, from the system's random source
    (RFC 6455 §5.3: unpredictable), drawn 1,024 at a time."""

    __slots__ = ("_pool", "_pos")

    def __init__(self) -> None:
        self._pool = b""
        self._pos = 0

    def next(self) -> bytes:
        if self._pos >= len(self._pool):
            self._pool, self._pos = os.urandom(4096), 0
        key = self._pool[self._pos : self._pos + 4]
        self._pos += 4
        return key


class ProtocolFailure(Exception):
    """The peer broke the protocol: close with ``code``."""

    def __init__(self, code: int, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason


class FrameReader:
    """Frames parsed from bytes fed in: ``(opcode, fin, payload)``, the
    payload unmasked. ``masked``: whether frames must be masked (a server
    reads a client's) or must not be. A data frame announcing more than
    ``limit`` bytes fails before its payload is read."""

    __slots__ = ("_buffer", "_masked", "_pos", "limit")

    def __init__(self, masked: bool, limit: int) -> None:
        self._buffer = bytearray()
        self._pos = 0
        self._masked = masked
        self.limit = limit

    def feed(self, data: bytes | bytearray) -> None:
        if self._pos:
            del self._buffer[: self._pos]
            self._pos = 0
        self._buffer += data

    @property
    def buffered(self) -> int:
        return len(self._buffer) - self._pos

    def next_whole_data_frame(self) -> tuple[int, bytes] | None:
        """The next frame if it is the common case: a whole unfragmented
        text or binary frame of under 64 KiB, masked as its direction
        requires, in its shortest length form, within :attr:`limit`:
        ``(opcode, payload)``, the payload unmasked. ``None`` for anything
        else (a frame not yet whole too), with nothing taken:
        :meth:`next_frame` decides it, the same way as it would have this
        one. (A message reader's fast path: one test per header byte.)"""
        buffer, pos = self._buffer, self._pos
        available = len(buffer) - pos
        if available < 2:
            return None
        first, second = buffer[pos], buffer[pos + 1]
        if (first != 0x81 and first != 0x82) or (second & 0x80 != 0) != self._masked:
            return None
        size = second & 0x7F
        start = pos + 2
        if size == 126:
            if available < 4:
                return None
            size = (buffer[pos + 2] << 8) | buffer[pos + 3]
            if size < 126:
                return None
            start = pos + 4
        elif size == 127:
            return None
        if size > self.limit:
            return None
        if self._masked:
            key_at, start = start, start + 4
        end = start + size
        if end > len(buffer):
            return None
        self._pos = end
        if self._masked and size:
            # (From the buffer's slices: no copy of the payload or the key.)
            stream = (buffer[key_at : key_at + 4] * (size // 4 + 1))[:size]
            unmasked = int.from_bytes(buffer[start:end], "little") ^ int.from_bytes(
                stream, "little"
            )
            return first & 0x0F, unmasked.to_bytes(size, "little")
        return first & 0x0F, bytes(buffer[start:end])

    def next_frame(self) -> tuple[int, bool, bytes] | None:
        """The next whole frame, or ``None`` until more bytes come. Raises
        :class:`ProtocolFailure` on a frame the protocol forbids."""
        buffer, pos = self._buffer, self._pos
        available = len(buffer) - pos
        if available < 2:
            return None
        first, second = buffer[pos], buffer[pos + 1]
        # (Checked in wsproto's order, so that a frame cut short is refused
        # after as many bytes as there.)
        opcode = first & 0x0F
        if opcode >= 8:
            if opcode > 10:
                raise ProtocolFailure(PROTOCOL_ERROR, f"unknown control opcode {opcode}")
            if not first & 0x80 or second & 0x7F > 125:
                raise ProtocolFailure(
                    PROTOCOL_ERROR, "a control frame fragmented or over 125 bytes"
                )
        elif opcode > 2:
            raise ProtocolFailure(PROTOCOL_ERROR, f"unknown opcode {opcode}")
        size = second & 0x7F
        start = pos + 2
        if size == 126:
            if available < 4:
                return None
            size = int.from_bytes(buffer[pos + 2 : pos + 4], "big")
            start = pos + 4
            if size < 126:
                raise ProtocolFailure(PROTOCOL_ERROR, "a payload length not in its shortest form")
        elif size == 127:
            if available < 10:
                return None
            size = int.from_bytes(buffer[pos + 2 : pos + 10], "big")
            start = pos + 10
            if size < 65536 or size >> 63:
                raise ProtocolFailure(
                    PROTOCOL_ERROR,
                    "a payload length not in its shortest form"
                    if size < 65536
                    else "a 64-bit payload length with its top bit set",
                )
        if first & 0x70:
            raise ProtocolFailure(PROTOCOL_ERROR, "reserved bits set (no extension was agreed)")
        masked = second & 0x80
        if bool(masked) != self._masked:
            raise ProtocolFailure(
                PROTOCOL_ERROR, "a client frame not masked" if self._masked else "a masked frame"
            )
        if size > self.limit and opcode < 8:
            raise ProtocolFailure(TOO_BIG, "message too big")
        if masked:
            key = bytes(buffer[start : start + 4])
            start += 4
        end = start + size
        if len(buffer) < end:
            return None
        payload = bytes(buffer[start:end])
        self._pos = end
        if masked and size:
            stream = (key * (size // 4 + 1))[:size]
            payload = (
                int.from_bytes(payload, "little") ^ int.from_bytes(stream, "little")
            ).to_bytes(size, "little")
        return opcode, bool(first & 0x80), payload
