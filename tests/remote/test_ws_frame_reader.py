"""``FrameReader.next_whole_data_frame``, the WebSocket's fast path
(acp_trio/remote/_ws_frames.py): on any bytes, what it takes is exactly
what ``next_frame`` would have read (a whole final text or binary frame),
and when it declines it takes nothing, so that ``next_frame`` decides."""

from __future__ import annotations

from typing import TypeVar

from hypothesis import given, settings
from hypothesis import strategies as st

from acp_trio.remote._ws_frames import FrameReader, ProtocolFailure

LIMIT = 150  # (the cap; a frame over it is refused from its header)
KEY = b"\x01\x02\x03\x04"


T = TypeVar("T")


def often(common: T, *rare: T) -> st.SearchStrategy[T]:
    """``common`` three times in four, else one of ``rare``."""
    return st.sampled_from([common, common, common, *rare])


@st.composite
def frames(draw: st.DrawFn, masked: bool) -> bytes:
    """A frame of any opcode, fin, reserved bits, mask and size (around
    the 7-bit length form and the cap, each size in any length form that
    holds it), mostly
    what the fast path takes; or bytes of no frame at all."""
    if not draw(often(True, False)):
        return draw(st.binary(max_size=12))
    opcode = draw(st.sampled_from([1, 2, 1, 2, 0, 3, 8, 9, 10]))
    first = (0x80 if draw(often(True, False)) else 0) | draw(often(0, 0x40)) | opcode
    size = draw(st.sampled_from([0, 1, 125, 126, 127, LIMIT, LIMIT + 1]))
    mask = draw(often(masked, not masked))
    bit = 0x80 if mask else 0
    form = draw(st.sampled_from([f for f in (7, 16, 64) if size < 1 << f or f == 64]))
    if form == 7 and size < 126:
        head = bytes([first, bit | size])
    elif form == 16:
        head = bytes([first, bit | 126]) + size.to_bytes(2, "big")
    else:
        head = bytes([first, bit | 127]) + size.to_bytes(8, "big")
    payload = bytes(range(256)) * (size // 256) + bytes(range(size % 256))
    if mask:
        payload = KEY + bytes(b ^ KEY[i % 4] for i, b in enumerate(payload))
    return head + payload


@settings(max_examples=400)
@given(masked=st.booleans(), data=st.data(), cut=often(0, 1, 4, 20))
def test_the_fast_path_takes_what_next_frame_reads_or_nothing(
    masked: bool, data: st.DataObject, cut: int
) -> None:
    frame, rest = data.draw(frames(masked)), data.draw(frames(masked))
    fed = (frame + rest)[: len(frame) - cut] if cut else frame + rest
    fast, slow = FrameReader(masked, LIMIT), FrameReader(masked, LIMIT)
    fast.feed(fed)
    slow.feed(fed)
    whole = fast.next_whole_data_frame()
    try:
        read = slow.next_frame()
    except ProtocolFailure:
        read = None
    if whole is None:
        assert fast.buffered == len(fed)  # nothing taken
        return
    opcode, payload = whole
    assert read == (opcode, True, payload)
    assert opcode in (1, 2)
    assert fast.buffered == slow.buffered
