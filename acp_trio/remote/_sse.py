"""Server-sent events: the little of the format ACP needs (``data:`` lines,
``id:``, comments), decoded from raw bytes with a size bound."""

from __future__ import annotations

__all__ = ["SseDecoder", "SseTooLarge", "encode_event"]


class SseTooLarge(ValueError):
    """An event grew past the decoder's limit before it ended."""


def encode_event(data: bytes, event_id: str | None = None) -> bytes:
    """One event carrying ``data`` (a compact JSON text: no line ends)."""
    head = b"id: " + event_id.encode() + b"\n" if event_id is not None else b""
    return head + b"data: " + data + b"\n\n"


class SseDecoder:
    """Feed it the bytes of an ``text/event-stream`` response; it returns
    the ``data`` of each complete event. ``last_id`` is the ``id:`` of the
    last event returned that had one (as the SSE standard's "last event ID
    buffer": an id counts once its event is complete)."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._buffer = bytearray()
        self._data: list[bytes] = []
        self._id: str | None = None
        self.last_id: str | None = None

    def feed(self, chunk: bytes) -> list[bytes]:
        self._buffer += chunk
        events: list[bytes] = []
        while True:
            end = self._buffer.find(b"\n")
            if end < 0:
                break
            line = bytes(self._buffer[:end])
            del self._buffer[: end + 1]
            if line.endswith(b"\r"):
                line = line[:-1]
            if not line:
                if self._id is not None:
                    self.last_id, self._id = self._id, None
                if self._data:
                    events.append(b"\n".join(self._data))
                    self._data = []
                continue
            if line.startswith(b":"):
                continue
            name, _, value = line.partition(b":")
            if value.startswith(b" "):
                value = value[1:]
            if name == b"data":
                self._data.append(value)
            elif name == b"id" and b"\0" not in value:
                self._id = value.decode("utf-8", "replace")
        pending = len(self._buffer) + sum(len(d) for d in self._data)
        if pending > self._limit:
            raise SseTooLarge(f"an event over {self._limit} bytes")
        return events
