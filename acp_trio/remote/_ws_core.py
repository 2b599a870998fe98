"""The WebSocket's protocol, without I/O (RFC 6455 §5 to §7): bytes in,
messages out, control replies and closes handed to a ``send`` callable as
whole frames. :class:`~acp_trio.remote.WebSocket` drives it with Trio I/O;
tests/remote/test_websocket_differential.py feeds it the byte sequences it
feeds wsproto's frame protocol and expects the same decision each time.

Decisions: a message (``str`` for text, ``bytes`` for binary), a pong for
each ping, the peer's close (its code and reason, answered with a close
frame), or a failure: the close code we send (1002 a protocol error, 1007
text or a close reason not in UTF-8, 1009 over the cap), after which
nothing more is read.

The cap (``max_message_size``) counts a message's payload and, for each
fragment held, :data:`FRAGMENT_COST` bytes more; a frame announcing more
than what is left fails from its header.
"""

from __future__ import annotations

import codecs
from collections.abc import Callable

from acp_trio.remote._ws_frames import (
    ABNORMAL,
    INVALID_DATA,
    NO_STATUS,
    PROTOCOL_ERROR,
    TOO_BIG,
    FrameReader,
    Keys,
    ProtocolFailure,
    build_frame,
    receivable,
)

__all__ = ["FRAGMENT_COST", "WebSocketCore"]

#: What each fragment of a message counts toward the message size cap on
#: top of its payload (bytes): more than the memory a fragment held takes.
FRAGMENT_COST = 64


class WebSocketCore:
    """One WebSocket's protocol state; ``client``: our side is the client
    (it masks what it sends, and reads unmasked frames). ``send`` takes
    each frame we must send on our own (pongs, close frames), whole."""

    __slots__ = (
        "_decoder",
        "_max",
        "_opcode",
        "_parts",
        "_send",
        "_size",
        "close_code",
        "close_reason",
        "failed",
        "keys",
        "peer_closed",
        "reader",
        "sent_close",
    )

    def __init__(self, *, client: bool, max_message_size: int, send: Callable[[bytes], None]):
        self._send = send
        #: The masking keys of a client's frames (``None`` for a server).
        self.keys = Keys() if client else None
        self._max = max_message_size
        self.reader = FrameReader(not client, max_message_size)
        self._opcode: int | None = None  # of the message being received
        self._parts: list[bytes] = []
        self._size = 0
        self._decoder: codecs.IncrementalDecoder | None = None  # a fragmented text's
        #: Set once closing or closed: the code and reason.
        self.close_code: int | None = None
        self.close_reason = ""
        self.sent_close = False
        #: The peer broke the protocol: nothing more is read.
        self.failed = False
        #: The peer's close frame was read (or the connection lost).
        self.peer_closed = False

    # -- sending ---------------------------------------------------------

    def key(self) -> bytes | None:
        """A fresh masking key for a client's frame; ``None`` for a server's."""
        return None if self.keys is None else self.keys.next()

    def frame(self, opcode: int, payload: bytes) -> bytes:
        """A whole frame of ours (masked if we are the client)."""
        return build_frame(opcode, payload, None if self.keys is None else self.keys.next())

    def close(self, code: int, reason: str) -> None:
        """Start the closing handshake (once): send a close frame."""
        if not self.sent_close:
            self.sent_close = True
            self._send(self.frame(0x8, code.to_bytes(2, "big") + reason.encode("utf-8")[:123]))
        if self.close_code is None:
            self.close_code, self.close_reason = code, reason

    def connection_lost(self) -> None:
        """The byte stream ended (1006 unless closed already)."""
        if self.close_code is None:
            self.close_code, self.close_reason = ABNORMAL, "the connection was lost"
        self.peer_closed = True

    # -- receiving -------------------------------------------------------

    @property
    def reading(self) -> bool:
        """Whether what is read is still looked at (not after a failure
        or the peer's close)."""
        return not (self.failed or self.peer_closed)

    def receive_data(self, data: bytes | bytearray) -> None:
        self.reader.feed(data)

    def next_message(self) -> str | bytes | None:
        """The next whole message from what was fed, acting on control
        frames on the way; ``None`` if none is complete, or once the
        peer closed or failed (see :attr:`close_code`)."""
        if self.failed or self.peer_closed:
            return None
        reader = self.reader
        if self._opcode is None and not self.sent_close:
            # The common case first (see FrameReader.next_whole_data_frame);
            # anything else takes the general path below.
            whole = reader.next_whole_data_frame()
            if whole is not None:
                opcode, payload = whole
                if opcode == 2:
                    return payload
                try:
                    return payload.decode("utf-8")
                except UnicodeDecodeError:
                    self.failed = True
                    self.close(INVALID_DATA, "a text message not in UTF-8")
                    return None
        try:
            while (frame := reader.next_frame()) is not None:
                opcode, fin, payload = frame
                if opcode >= 8:
                    if self._control(opcode, payload):
                        return None  # the peer closed
                    continue
                if opcode == 0:
                    if self._opcode is None:
                        raise ProtocolFailure(
                            PROTOCOL_ERROR, "a continuation frame starts no message"
                        )
                elif self._opcode is not None:
                    raise ProtocolFailure(PROTOCOL_ERROR, "a new message inside a fragmented one")
                else:
                    self._opcode = opcode
                if not fin:
                    # Each fragment held counts its overhead too, so a message
                    # of empty or tiny fragments meets the cap. A text's
                    # UTF-8 is checked fragment by fragment.
                    if self._opcode == 1:
                        if self._decoder is None:
                            self._decoder = _utf8()
                        _check(self._decoder, payload, False)
                    self._parts.append(payload)
                    self._size += len(payload) + FRAGMENT_COST
                    if self._size > self._max:
                        raise ProtocolFailure(TOO_BIG, "message too big")
                    reader.limit = self._max - self._size
                    continue
                kind, self._opcode = self._opcode, None
                if self._parts:
                    decoder, self._decoder = self._decoder, None
                    if decoder is not None:
                        _check(decoder, payload, True)
                    self._parts.append(payload)
                    payload = b"".join(self._parts)
                    self._parts, self._size, reader.limit = [], 0, self._max
                if self.sent_close:
                    continue  # we are closing: what still comes is dropped
                if kind == 2:
                    return payload
                try:
                    return payload.decode("utf-8")
                except UnicodeDecodeError:
                    raise ProtocolFailure(INVALID_DATA, "a text message not in UTF-8") from None
        except ProtocolFailure as exc:
            self.failed = True
            self.close(exc.code, exc.reason)
        return None

    def _control(self, opcode: int, payload: bytes) -> bool:
        """Act on a control frame; whether it was the peer's close."""
        if opcode == 0x9:  # ping
            if not self.sent_close:
                self._send(self.frame(0xA, payload))
        elif opcode == 0x8:  # close
            if len(payload) == 1:
                raise ProtocolFailure(PROTOCOL_ERROR, "a close frame of one byte")
            code = int.from_bytes(payload[:2], "big") if payload else NO_STATUS
            if payload and not receivable(code):
                raise ProtocolFailure(PROTOCOL_ERROR, f"close code {code} may not be sent")
            try:
                reason = payload[2:].decode("utf-8")
            except UnicodeDecodeError:
                raise ProtocolFailure(INVALID_DATA, "a close reason not in UTF-8") from None
            if not self.sent_close:
                self.sent_close = True
                self._send(self.frame(0x8, payload[:2]))
            if self.close_code is None:
                self.close_code, self.close_reason = code, reason
            self.peer_closed = True
            return True
        # (A pong needs nothing; FrameReader refused every other opcode.)
        return False


def _utf8() -> codecs.IncrementalDecoder:
    return codecs.getincrementaldecoder("utf-8")()


def _check(decoder: codecs.IncrementalDecoder, data: bytes, final: bool) -> None:
    try:
        decoder.decode(data, final)
    except UnicodeDecodeError:
        raise ProtocolFailure(INVALID_DATA, "a text message not in UTF-8") from None
