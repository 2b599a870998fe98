"""Our WebSocket's protocol core against wsproto's frame protocol: the same
bytes fed to both, the decisions compared (used by
test_websocket_differential.py, and by benchmarks/fuzz_websocket.py for a
long run).

A decision is ``("message", str | bytes)``, ``("ping", payload)`` (our
pong; wsproto's ping event), ``("close", code, reason)`` (the peer's close,
the last decision) or ``("fail", code)`` (the close code we send for a
broken protocol, the last decision).

Where the bytes end inside a frame, one side may already decide on the part
it has (wsproto checks a partial frame's UTF-8, ordering and masking as it
arrives; we look at some of it only once whole) while the other waits:
not a disagreement (the connection then ends 1006 either way), counted as
``tolerated``. Generated sequences end inside a frame only when a mutation
cut or bent them.
"""

from __future__ import annotations

import random
import struct
from typing import Any

from wsproto.frame_protocol import CloseReason, FrameProtocol, Opcode, ParseFailed

from acp_trio.remote._ws_core import WebSocketCore
from acp_trio.remote._ws_frames import FrameReader

Decision = tuple[Any, ...]
#: A cap no generated message reaches (the cap is our own rule, not wsproto's).
NO_CAP = (1 << 63) - 1


def ours(data: bytes, client: bool) -> tuple[list[Decision], bool]:
    """Our decisions for ``data`` received by the ``client`` (or server)
    side, and whether bytes of an unfinished frame are left."""
    decisions: list[Decision] = []
    replies = FrameReader(client, NO_CAP)  # our own frames, as the peer reads them

    def send(frame: bytes) -> None:
        replies.feed(frame)
        while (parsed := replies.next_frame()) is not None:
            if parsed[0] == 0xA:
                decisions.append(("ping", parsed[2]))

    core = WebSocketCore(client=client, max_message_size=NO_CAP, send=send)
    core.receive_data(data)
    while (message := core.next_message()) is not None:
        decisions.append(("message", message))
    if core.failed:
        assert core.close_code is not None
        decisions.append(("fail", core.close_code))
    elif core.peer_closed:
        decisions.append(("close", core.close_code, core.close_reason))
    return decisions, core.reader.buffered > 0


def wsprotos(data: bytes, client: bool) -> tuple[list[Decision], bool]:
    """wsproto's decisions for the same, and whether it holds a partial
    frame (or message)."""
    decisions: list[Decision] = []
    protocol = FrameProtocol(client=client, extensions=[])
    protocol.receive_bytes(data)
    parts: list[Any] = []
    try:
        for frame in protocol.received_frames():
            if frame.opcode is Opcode.PING:
                decisions.append(("ping", bytes(frame.payload)))
            elif frame.opcode is Opcode.CLOSE:
                code, reason = frame.payload
                decisions.append(("close", int(code), reason))
                return decisions, False
            elif frame.opcode in (Opcode.TEXT, Opcode.BINARY):
                parts.append(frame.payload)
                if frame.message_finished:
                    joined = "".join(parts) if frame.opcode is Opcode.TEXT else b"".join(parts)
                    decisions.append(("message", joined))
                    parts = []
    except ParseFailed as exc:
        decisions.append(("fail", int(exc.code)))
        return decisions, False
    decoder = protocol._frame_decoder
    return decisions, decoder.header is not None or len(decoder.buffer) > 0


def compare(data: bytes, client: bool) -> str:
    """``"agree"``, ``"tolerated"`` (see the module's docstring) or a
    description of the disagreement."""
    mine, my_partial = ours(data, client)
    theirs, their_partial = wsprotos(data, client)
    if mine == theirs:
        return "agree"
    # One side failed on the unfinished last frame, the other waits for it.
    if mine[:-1] == theirs and mine[-1][0] == "fail" and their_partial:
        return "tolerated"
    if theirs[:-1] == mine and theirs[-1][0] == "fail" and my_partial:
        return "tolerated"
    return f"ours {mine!r} != wsproto {theirs!r}"


# -- generating byte sequences ---------------------------------------------

_CODES = [0, 999, 1000, 1001, 1002, 1003, 1004, 1005, 1006, 1007, 1008, 1009, 1010, 1011]
_CODES += [1012, 1013, 1014, 1015, 1016, 1100, 2000, 2999, 3000, 3999, 4000, 4999, 5000, 65535]
_TEXTS = ["", "a", "hé", "€uro", "日本語", "𝄞 clef", "plain ascii text", "ü" * 70]
_BAD_UTF8 = [b"\xff", b"\xc3\x28", b"\xe2\x82", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xc0\xaf"]


def frame(
    opcode: int,
    payload: bytes,
    *,
    mask: bool,
    fin: bool = True,
    rsv: int = 0,
    form: int = 0,
    key: bytes = b"\x37\xfa\x21\x3d",
) -> bytes:
    """One frame; ``form`` 0: the shortest length form, else 7, 16 or 64."""
    size = len(payload)
    form = form or (7 if size < 126 else 16 if size < 65536 else 64)
    head = bytes([(0x80 if fin else 0) | rsv | opcode])
    bit = 0x80 if mask else 0
    if form == 7:
        head += bytes([bit | (size & 0x7F)])
    elif form == 16:
        head += bytes([bit | 126]) + struct.pack("!H", size & 0xFFFF)
    else:
        head += bytes([bit | 127]) + struct.pack("!Q", size)
    if not mask:
        return head + payload
    return head + key + bytes(b ^ key[i % 4] for i, b in enumerate(payload))


def _text(rng: random.Random) -> bytes:
    data = rng.choice(_TEXTS).encode()
    if rng.random() < 0.25:
        at = rng.randint(0, len(data))
        data = data[:at] + rng.choice(_BAD_UTF8) + data[at:]
    return data


def _split(rng: random.Random, data: bytes, pieces: int) -> list[bytes]:
    cuts = sorted(rng.randint(0, len(data)) for _ in range(pieces - 1))
    return [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]


def random_sequence(rng: random.Random, client: bool) -> bytes:
    """A few messages and control frames, mostly valid, as a peer of the
    ``client`` (or server) side sends them, then perhaps bent."""
    mask = not client
    out = bytearray()
    for _ in range(rng.randint(1, 5)):
        roll = rng.random()
        wrong_mask = rng.random() < 0.03
        rsv = rng.choice([0x10, 0x20, 0x40]) if rng.random() < 0.03 else 0
        form = 0
        if rng.random() < 0.05:
            form = rng.choice([7, 16, 64])
        if roll < 0.45:  # a message, perhaps fragmented, perhaps with pings inside
            text = rng.random() < 0.6
            if text:
                data = _text(rng)
            else:
                data = rng.randbytes(rng.choice([0, 1, 5, 125, 126, 127, 300, 65536]))
            pieces = _split(rng, data, rng.choice([1, 1, 2, 3, 5]))
            for i, piece in enumerate(pieces):
                opcode = (1 if text else 2) if i == 0 else 0
                if rng.random() < 0.03:  # an ordering error
                    opcode = rng.choice([0, 1, 2])
                out += frame(
                    opcode,
                    piece,
                    mask=mask ^ wrong_mask,
                    fin=i == len(pieces) - 1,
                    rsv=rsv,
                    form=form if len(piece) < 65536 else 0,
                )
                if rng.random() < 0.2:
                    out += frame(rng.choice([9, 10]), rng.randbytes(rng.randint(0, 8)), mask=mask)
        elif roll < 0.7:  # a ping or a pong
            size = rng.choice([0, 1, 4, 125, 125, 126])
            out += frame(
                rng.choice([9, 10]),
                rng.randbytes(size),
                mask=mask ^ wrong_mask,
                fin=rng.random() > 0.03,
                rsv=rsv,
                form=form,
            )
        elif roll < 0.8:  # a close
            kind = rng.random()
            if kind < 0.1:
                payload = b""
            elif kind < 0.15:
                payload = b"\x03"
            else:
                payload = struct.pack("!H", rng.choice(_CODES)) + _text(rng)[:100]
            out += frame(8, payload, mask=mask ^ wrong_mask, rsv=rsv, form=form)
        elif roll < 0.9:  # a reserved opcode
            opcode = rng.choice([3, 4, 5, 6, 7, 11, 12, 13, 14, 15])
            out += frame(opcode, rng.randbytes(rng.randint(0, 10)), mask=mask)
        else:  # a lone continuation, or a huge announced length
            if rng.random() < 0.5:
                out += frame(0, rng.randbytes(3), mask=mask, fin=rng.random() < 0.5)
            else:
                size = rng.choice([1 << 63, (1 << 63) - 1, 1 << 40, 65535, 70000])
                head = bytes([0x82, (0x80 if mask else 0) | 127]) + struct.pack("!Q", size)
                out += head + (b"\x00\x00\x00\x00" if mask else b"") + b"x" * 10
    data = bytes(out)
    bend = rng.random()
    if bend < 0.05 and data:  # a byte changed
        at = rng.randrange(len(data))
        data = data[:at] + bytes([rng.randrange(256)]) + data[at + 1 :]
    elif bend < 0.1 and data:  # cut short
        data = data[: rng.randrange(len(data))]
    elif bend < 0.12:  # noise
        data = rng.randbytes(rng.randint(1, 40))
    return data


def run(count: int, seed: int) -> dict[str, Any]:
    """Compare ``count`` random sequences for each side; the tallies and
    the first disagreements (data, side, description)."""
    rng = random.Random(seed)
    tally = {"agree": 0, "tolerated": 0, "disagree": 0}
    disagreements: list[tuple[bytes, bool, str]] = []
    for _ in range(count):
        for client in (False, True):
            data = random_sequence(rng, client)
            verdict = compare(data, client)
            if verdict in tally:
                tally[verdict] += 1
            else:
                tally["disagree"] += 1
                if len(disagreements) < 10:
                    disagreements.append((data, client, verdict))
    return {"tally": tally, "disagreements": disagreements}


__all__ = ["CloseReason", "compare", "frame", "ours", "random_sequence", "run", "wsprotos"]
