"""Newline-delimited JSON framing, bytes in and frames out, with no I/O.

ACP's stdio transport puts one JSON-RPC message on each line. The decoder
takes arbitrary chunks (whatever ``receive_some`` returned) and yields whole
lines; it never looks inside them.

Properties the tests pin down:

- Linear in the input: each byte is scanned for ``\\n`` once and copied at
  most twice (into the partial-line buffer, then out as the frame).
- Any split of the same byte stream into chunks yields the same frames.
- ``\\r\\n`` line ends are accepted (the ``\\r`` is dropped), blank lines are
  skipped, and a final line with no ``\\n`` is delivered at end of input.
- A line longer than ``max_message_size`` (not counting its line end) is not
  buffered: its bytes are dropped as they arrive and a single
  :class:`OversizedFrame` reports it, with its first and last bytes kept so
  that the caller can try to find the request id (JSON puts no order on an
  object's keys: ``"id"`` often comes last). The verdict depends only on the
  line's length, never on how it was chunked.
"""

from __future__ import annotations

from typing import Final

import attrs

__all__ = ["DEFAULT_MAX_MESSAGE_SIZE", "LineDecoder", "OversizedFrame"]

DEFAULT_MAX_MESSAGE_SIZE: Final = 64 * 1024 * 1024
# How much of an oversized line is kept for error reporting: its start and
# its end.
_HEAD_SIZE: Final = 64 * 1024
_TAIL_SIZE: Final = 4 * 1024


@attrs.frozen
class OversizedFrame:
    """A line that was over the size limit and was dropped.

    ``size`` is its full length in bytes (without the line end); ``head``
    holds its first bytes and ``tail`` its last ones (they overlap when the
    line is shorter than both together).
    """

    size: int
    limit: int
    head: bytes
    tail: bytes = b""


def _strip_line_end(line: bytes) -> bytes:
    return line[:-1] if line.endswith(b"\r") else line


class LineDecoder:
    """Turns a byte stream into frames: ``bytes`` (one message) or
    :class:`OversizedFrame`.

    Use :meth:`feed` with each chunk and :meth:`feed_eof` once at the end;
    both return the frames completed so far, in order.
    """

    __slots__ = (
        "_buf",
        "_discard_cr",
        "_discarded",
        "_discarding",
        "_eof",
        "_head",
        "_tail",
        "max_message_size",
    )

    def __init__(self, max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE) -> None:
        if max_message_size < 1:
            raise ValueError("max_message_size must be positive")
        self.max_message_size = max_message_size
        # Bytes of the current, unfinished line. Never holds a b"\n".
        self._buf = bytearray()
        # Set while skipping the rest of an oversized line.
        self._discarding = False
        self._discarded = 0
        self._discard_cr = False
        self._head = bytearray()
        self._tail = b""
        self._eof = False

    @property
    def buffered(self) -> int:
        """Bytes held for the unfinished line (for statistics)."""
        return len(self._buf)

    def feed_line(self, data: bytes) -> bytes | None:
        """The frame ``data`` completes when it is exactly one whole line
        (no ``b"\\r"``, within the limit, not blank) and nothing is held:
        the usual chunk of a request/reply exchange, taken without the
        general path. ``None`` otherwise, having consumed nothing: then call
        :meth:`feed`."""
        last = len(data) - 1
        if (
            last > 0
            and data.find(b"\n") == last
            and not self._buf
            and not self._discarding
            and not self._eof
            and last <= self.max_message_size
            and not data[:1].isspace()
            and b"\r" not in data
        ):
            return data[:last]
        return None

    def feed(self, data: bytes) -> list[bytes | OversizedFrame]:
        """Add a chunk; return the frames it completed."""
        if self._eof:
            raise RuntimeError("feed() after feed_eof()")
        out: list[bytes | OversizedFrame] = []
        if not data:
            return out
        limit = self.max_message_size
        start = 0
        n = len(data)
        bulk = n <= limit
        while start < n:
            nl = data.find(b"\n", start)
            end = n if nl < 0 else nl
            if self._discarding:
                if end > start:
                    self._discarded += end - start
                    self._discard_cr = data[end - 1] == 13
                    room = _HEAD_SIZE - len(self._head)
                    if room > 0:
                        # Keep the head independent of how the line was chunked.
                        self._head += data[start : min(end, start + room)]
                    # And the tail: the last bytes, however they came (one
                    # more, which may be the line end's b"\r").
                    piece = data[max(start, end - _TAIL_SIZE - 1) : end]
                    self._tail = (self._tail + piece)[-_TAIL_SIZE - 1 :]
            elif self._buf:
                self._buf += memoryview(data)[start:end]
                if len(self._buf) > limit + 1:
                    self._begin_discard(self._buf)
                    self._buf.clear()
            elif nl >= 0:
                if bulk:
                    # Fastest path, tried once: the chunk has no b"\r" and
                    # cannot hold a line over the limit, so split it at once
                    # (and drop the first line if it was just finished).
                    bulk = False
                    skip = 1 if start else 0
                    if (not skip or start == data.find(b"\n") + 1) and b"\r" not in data:
                        lines = data.split(b"\n")
                        tail = lines.pop()
                        if skip:
                            del lines[0]
                        out.extend([line for line in lines if line and not line.isspace()])
                        if tail:
                            self._buf += tail
                        return out
                # Fast path: a whole line inside this chunk, nothing buffered.
                line = data[start:end]
                if line.endswith(b"\r"):
                    line = line[:-1]
                if len(line) > limit:
                    out.append(
                        OversizedFrame(
                            len(line), limit, bytes(line[:_HEAD_SIZE]), bytes(line[-_TAIL_SIZE:])
                        )
                    )
                elif line and not line.isspace():
                    out.append(line)
                start = nl + 1
                continue
            else:
                piece = data[start:end]
                if len(piece) > limit + 1:
                    self._begin_discard(bytes(piece))
                else:
                    self._buf += piece
            if nl < 0:
                break
            # The line ended inside this chunk.
            self._finish_line(out)
            start = nl + 1
        return out

    def feed_eof(self) -> list[bytes | OversizedFrame]:
        """End of input: deliver a last line that had no ``\\n``."""
        out: list[bytes | OversizedFrame] = []
        if not self._eof:
            self._eof = True
            self._finish_line(out)
        return out

    def _begin_discard(self, first: bytes | bytearray) -> None:
        # A trailing b"\r" could still be a line end, so a line is only known
        # to be too long once it is more than limit + 1 bytes.
        self._discarding = True
        self._discarded = len(first)
        self._discard_cr = first.endswith(b"\r")
        self._head = bytearray(first[:_HEAD_SIZE])
        self._tail = bytes(first[-_TAIL_SIZE - 1 :])

    def _finish_line(self, out: list[bytes | OversizedFrame]) -> None:
        if self._discarding:
            size = self._discarded - self._discard_cr
            # A line dropped this way is at least limit + 2 bytes long, so
            # even without its final b"\r" it is over the limit.
            # The head and tail may hold the line's b"\r", not part of it.
            tail = self._tail[:-1] if self._discard_cr else self._tail
            out.append(
                OversizedFrame(
                    size, self.max_message_size, bytes(self._head[:size]), tail[-_TAIL_SIZE:]
                )
            )
            self._discarding = False
            self._discarded = 0
            self._head = bytearray()
            self._tail = b""
            return
        if not self._buf:
            return
        line = _strip_line_end(bytes(self._buf))
        self._buf.clear()
        if len(line) > self.max_message_size:
            out.append(
                OversizedFrame(
                    len(line), self.max_message_size, line[:_HEAD_SIZE], line[-_TAIL_SIZE:]
                )
            )
        elif line and not line.isspace():
            out.append(line)
