"""Our WebSocket's protocol core (acp_trio.remote._ws_core) decides as
wsproto's frame protocol does, on the same bytes, for the server and the
client side: hand-made sequences (each must agree exactly) and seeded
random ones (tests/remote/wsdiff.py; a long run: benchmarks/fuzz_websocket.py)."""

from __future__ import annotations

import struct

import pytest

from .wsdiff import compare, frame, run

OK_TEXT = "héllo wörld €".encode()


def cases(mask: bool) -> dict[str, bytes]:
    """Named byte sequences as a peer sends them (masked to a server)."""

    def f(opcode: int, payload: bytes = b"", **kw: object) -> bytes:
        return frame(opcode, payload, mask=kw.pop("mask", mask), **kw)  # type: ignore[arg-type]

    def close(code: int, reason: bytes = b"") -> bytes:
        return f(8, struct.pack("!H", code) + reason)

    found = {
        "text": f(1, OK_TEXT),
        "binary": f(2, b"\x00\xff" * 10),
        "empty text": f(1),
        "text in 3 fragments, a character split": f(1, OK_TEXT[:2], fin=False)
        + f(0, OK_TEXT[2:8], fin=False)
        + f(0, OK_TEXT[8:]),
        "empty fragments": f(2, fin=False) + f(0, fin=False) * 5 + f(0),
        "ping and pong inside fragments": f(1, b"ab", fin=False)
        + f(9, b"ping")
        + f(10, b"pong")
        + f(0, b"cd"),
        "close inside fragments": f(1, b"ab", fin=False) + close(1000),
        "continuation first": f(0, b"x"),
        "a message inside a message": f(1, b"a", fin=False) + f(2, b"b"),
        "a fragmented ping": f(9, b"p", fin=False),
        "a ping of 126 bytes": f(9, b"p" * 126),
        "a ping of 125 bytes": f(9, b"p" * 125),
        "a ping's length in 16 bits": f(9, b"p", form=16),
        "invalid UTF-8": f(1, b"ok \xc3\x28"),
        "truncated UTF-8 at the end": f(1, b"ok \xe2\x82"),
        "invalid UTF-8 in a middle fragment, then a ping": f(1, b"ok", fin=False)
        + f(0, b"\xff", fin=False)
        + f(9, b"p")
        + f(0, b"end"),
        "invalid UTF-8 in a fragment, then a bad opcode": f(1, b"\xc0", fin=False) + f(3),
        "a surrogate in UTF-8": f(1, b"\xed\xa0\x80"),
        "past U+10FFFF": f(1, b"\xf4\x90\x80\x80"),
        "binary not UTF-8": f(2, b"\xff\xfe"),
        "close reason not UTF-8": close(1000, b"\xff"),
        "close reason UTF-8": close(1000, "bye ü".encode()),
        "empty close": f(8),
        "close of one byte": f(8, b"\x03"),
        "masking the wrong way": f(1, b"hi", mask=not mask),
        "masking the wrong way, 16-bit length": f(2, b"x" * 200, mask=not mask),
    }
    for size in (0, 125, 126, 65535, 65536):
        found[f"{size} bytes, shortest form"] = f(2, b"y" * size)
    for size, form in ((5, 16), (5, 64), (125, 16), (0, 64), (65535, 64)):
        found[f"{size} bytes in {form} bits"] = f(2, b"y" * size, form=form)
    bit = 0x80 if mask else 0
    key = b"\x00\x00\x00\x00" if mask else b""
    found["64-bit length, top bit set"] = bytes([0x82, bit | 127]) + struct.pack("!Q", 1 << 63)
    found["64-bit length, top bit set, with bytes"] = (
        bytes([0x82, bit | 127]) + struct.pack("!Q", (1 << 63) | 5) + key + b"hello"
    )
    for rsv in (0x10, 0x20, 0x40):
        found[f"rsv {rsv:#x} on text"] = f(1, b"a", rsv=rsv)
        found[f"rsv {rsv:#x} on a ping"] = f(9, b"a", rsv=rsv)
        found[f"rsv {rsv:#x} on a continuation"] = f(1, b"a", fin=False) + f(0, b"b", rsv=rsv)
    for opcode in (3, 4, 5, 6, 7, 11, 12, 13, 14, 15):
        found[f"opcode {opcode}"] = f(opcode, b"z")
    for code in (0, 999, 1000, 1001, 1002, 1003, 1004, 1005, 1006, 1007, 1011, 1012, 1013):
        found[f"close {code}"] = close(code, b"why")
    for code in (1014, 1015, 1016, 1999, 2000, 2999, 3000, 3999, 4000, 4999, 5000, 65535):
        found[f"close {code}"] = close(code)
    return found


SIDES = [pytest.param(False, id="server"), pytest.param(True, id="client")]


@pytest.mark.parametrize("client", SIDES)
def test_hand_made_sequences_get_wsprotos_decisions(client: bool) -> None:
    disagreements = {}
    for name, data in cases(mask=not client).items():
        verdict = compare(data, client)
        if verdict != "agree":
            disagreements[name] = verdict
    assert disagreements == {}


@pytest.mark.parametrize("client", SIDES)
def test_hand_made_sequences_cut_anywhere_get_wsprotos_decisions(client: bool) -> None:
    """Every prefix: a frame cut short is waited for (or refused) alike."""
    disagreements = {}
    for name, data in cases(mask=not client).items():
        if len(data) > 300:
            continue
        for end in range(len(data)):
            verdict = compare(data[:end], client)
            if verdict not in ("agree", "tolerated"):
                disagreements[f"{name}[:{end}]"] = verdict
    assert disagreements == {}


def test_random_sequences_get_wsprotos_decisions() -> None:
    result = run(1500, seed=20261206)
    assert result["disagreements"] == []
    assert result["tally"]["disagree"] == 0
    assert result["tally"]["agree"] > 2500
