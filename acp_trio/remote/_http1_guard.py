"""Request smuggling's door shut on HTTP/1.1 (RFC 9112 §6.1, §6.3): a
request with both ``Content-Length`` and ``Transfer-Encoding``, or with
more than one ``Content-Length``, is answered ``400`` and its connection
closed, whatever came before it on the connection served first.

h11 (under hypercorn) reads such a request by its ``Transfer-Encoding``
and merges equal ``Content-Length`` values, then keeps the connection open,
so a request hidden behind it would be served. :class:`RequestGuard` sits
on the bytes hypercorn reads: it follows the requests' framing (heads
whole, bodies by their length or chunks) without copying bodies, holds a
head back until it is whole, and puts in place of a forbidden one a head
h11 itself refuses (two different ``Content-Length``) and nothing after it:
h11 answers ``400`` and hypercorn closes the connection.

It stands aside (passes everything) at what it does not follow: HTTP/2's
preface or an upgrade to h2c (``HTTP2-Settings`` given), a head or chunk
line it cannot parse or too long (h11 refuses those itself). Other upgrades
(a WebSocket reaches hypercorn only when refused) and ``CONNECT`` leave it
guarding: hypercorn goes on in HTTP/1.1 after them.

It also refuses a chunked body of chunks too small to be anything but an
attack on the server's time (each chunk an event through h11, hypercorn and
the app: past ``FREE_CHUNKS`` chunks, they must average ``MIN_CHUNK``
bytes): the connection ends with a 400.

Two more things ride on it. ``Expect: 100-continue`` is renamed
(:data:`EXPECT_CONTINUE`, a client's own such header dropped), so that h11
does not have hypercorn grant it before the app has judged the request: the
app grants it when it reads the body of a request it serves. And it tells
whether it holds part of a head (:attr:`RequestGuard.holding_head`), for
the head deadline.
"""

from __future__ import annotations

import re

__all__ = ["EXPECT_CONTINUE", "POISON", "RequestGuard"]

#: What stands for a forbidden request: a head h11 refuses with 400.
POISON = b"POST / HTTP/1.1\r\nHost: invalid\r\nContent-Length: 0\r\nContent-Length: 1\r\n\r\n"

#: The header ``Expect: 100-continue`` becomes, for the app to see.
EXPECT_CONTINUE = b"acp-trio-expect"
#: A chunked body may have this many chunks of any size; beyond, its chunks
#: must average at least MIN_CHUNK bytes (or the connection ends, 400).
FREE_CHUNKS = 64
MIN_CHUNK = 256

_END_OF_HEAD = re.compile(rb"\n\r?\n")
_MAX_HEAD = 64 * 1024
_MAX_LINE = 4096

_HEAD, _BODY, _CHUNK_SIZE, _CHUNK_DATA, _TRAILER, _OFF = range(6)


class RequestGuard:
    """Feed it what is read (:meth:`feed`); hand on what it returns."""

    __slots__ = (
        "_buffer",
        "_chunked_bytes",
        "_chunks",
        "_http2",
        "_remaining",
        "_state",
        "http2_start",
        "refused",
    )

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._state = _HEAD
        self._remaining = 0
        # The chunks of the current chunked body, and their bytes.
        self._chunks = 0
        self._chunked_bytes = 0
        #: A forbidden request was met: nothing after it is handed on.
        self.refused = False
        # Set by _head: HTTP/2 begins with this head ("preface") or after it
        # ("upgrade", an h2c upgrade without a body, which hypercorn takes).
        self._http2 = ""
        #: Where HTTP/2 began in what the last :meth:`feed` returned (then
        #: the guard stands aside for good); ``None`` until it does.
        self.http2_start: int | None = None

    @property
    def holding_head(self) -> bool:
        """Whether part of a request head is held (the rest not come yet)."""
        return self._state == _HEAD and bool(self._buffer)

    def feed(self, data: bytes) -> bytes:
        """What of ``data`` (and what was held before) to hand on now."""
        if self._state == _OFF:
            return data
        if self.refused:
            return b""
        buffer = self._buffer
        buffer += data
        out = bytearray()
        pos = 0
        while pos < len(buffer):
            state = self._state
            if state == _OFF:
                break
            if state in (_BODY, _CHUNK_DATA):
                take = min(self._remaining, len(buffer) - pos)
                out += buffer[pos : pos + take]
                pos += take
                self._remaining -= take
                if not self._remaining:
                    if state == _BODY:
                        self._state = _HEAD
                    else:  # the chunk's CRLF, then the next chunk's size
                        self._state, self._remaining = _CHUNK_SIZE, -2
                continue
            if state == _CHUNK_SIZE and self._remaining < 0:  # the CRLF after data
                take = min(-self._remaining, len(buffer) - pos)
                out += buffer[pos : pos + take]
                pos += take
                self._remaining += take
                continue
            if state == _HEAD:
                match = _END_OF_HEAD.search(buffer, pos)
                if match is None:
                    if len(buffer) - pos > _MAX_HEAD:
                        self._state = _OFF
                    break
                end = match.end()
                head = self._head(bytes(buffer[pos:end]))
                if head is None:  # forbidden
                    out += POISON
                    self.refused = True
                    buffer.clear()
                    return bytes(out)
                if self._http2:
                    self.http2_start = len(out) + (len(head) if self._http2 == "upgrade" else 0)
                out += head
                pos = end
                continue
            # A line: a chunk's size, or a trailer.
            newline = buffer.find(b"\n", pos)
            if newline < 0:
                if len(buffer) - pos > _MAX_LINE:
                    self._state = _OFF
                break
            line = bytes(buffer[pos:newline]).rstrip(b"\r")
            if state == _TRAILER:
                out += buffer[pos : newline + 1]
                pos = newline + 1
                if not line:
                    self._state = _HEAD
                continue
            try:
                size = int(line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                out += buffer[pos:]
                buffer.clear()
                self._state = _OFF
                return bytes(out)
            self._chunks += 1 if size else 0
            self._chunked_bytes += size
            if self._chunks > FREE_CHUNKS and self._chunked_bytes < self._chunks * MIN_CHUNK:
                # Chunks this small cost the server far more than the client
                # (an event each through h11, hypercorn and the app): a
                # chunk size h11 refuses ends the connection (400).
                out += b"x\r\n"
                self.refused = True
                buffer.clear()
                return bytes(out)
            out += buffer[pos : newline + 1]
            pos = newline + 1
            if size:
                self._state, self._remaining = _CHUNK_DATA, size
            else:
                self._state = _TRAILER
        if self._state == _OFF:
            out += buffer[pos:]
            buffer.clear()
            return bytes(out)
        del buffer[:pos]
        return bytes(out)

    def _head(self, head: bytes) -> bytes | None:
        """Read a whole request head, setting what follows it; the head to
        hand on (``Expect: 100-continue`` renamed), ``None`` if it is
        forbidden."""
        request_line, *lines = head.rstrip(b"\r\n").split(b"\n")
        if request_line.startswith(b"PRI ") or not request_line.strip():
            self._state = _OFF
            if request_line.startswith(b"PRI "):
                self._http2 = "preface"
            return head
        lengths: list[bytes] = []
        encoded = False
        upgrade = b""
        settings = False
        renamed = False
        for index, line in enumerate(lines):
            name, colon, value = line.partition(b":")
            if not colon:
                continue
            name = name.strip().lower()
            if name == b"expect" and value.strip().lower() == b"100-continue":
                end = b"\r" if line.endswith(b"\r") else b""
                lines[index] = EXPECT_CONTINUE + b": 100-continue" + end
                renamed = True
            elif name == EXPECT_CONTINUE:
                lines[index] = b"x-dropped: " + (b"\r" if line.endswith(b"\r") else b"")
                renamed = True
            elif name == b"content-length":
                lengths += value.split(b",")
            elif name == b"transfer-encoding":
                encoded = True
                if value.strip().lower() != b"chunked":
                    self._state = _OFF  # (h11 refuses it: 501)
            elif name == b"upgrade":
                upgrade = value.strip().lower()
            elif name == b"http2-settings":
                settings = True
        if (encoded and lengths) or len(lengths) > 1:
            return None
        if renamed:
            head = b"\n".join([request_line, *lines]) + b"\r\n\r\n"
        if upgrade == b"h2c" and settings:
            self._state = _OFF  # (hypercorn goes on in HTTP/2 after it)
            if not lengths and not encoded:
                self._http2 = "upgrade"
        if self._state == _OFF:
            return head
        if encoded:
            self._state, self._remaining = _CHUNK_SIZE, 0
            self._chunks = self._chunked_bytes = 0
        elif lengths:
            try:
                self._remaining = int(lengths[0].strip())
            except ValueError:
                self._state = _OFF
                return head
            self._state = _BODY if self._remaining > 0 else _HEAD
        return head
