"""LineDecoder: newline-delimited framing with a size cap."""

from __future__ import annotations

import itertools

import pytest
from budget import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_trio._jsonrpc import DEFAULT_MAX_MESSAGE_SIZE, LineDecoder, OversizedFrame
from acp_trio._jsonrpc._framing import _HEAD_SIZE, _TAIL_SIZE

Frame = bytes | OversizedFrame


def feed_chunks(chunks: list[bytes], limit: int = DEFAULT_MAX_MESSAGE_SIZE) -> list[Frame]:
    dec = LineDecoder(limit)
    out: list[Frame] = []
    for chunk in chunks:
        out += dec.feed(chunk)
        # Never more than one line's worth (plus a possible b"\r") is held.
        assert dec.buffered <= limit + 1
    out += dec.feed_eof()
    assert dec.buffered == 0
    return out


def oversized(line: bytes, limit: int) -> OversizedFrame:
    """The frame reporting ``line`` (without its line end) as over ``limit``."""
    return OversizedFrame(len(line), limit, line[:_HEAD_SIZE], line[-_TAIL_SIZE:])


def split_at(data: bytes, cuts: list[int]) -> list[bytes]:
    bounds = [0, *sorted(cuts), len(data)]
    return [data[a:b] for a, b in itertools.pairwise(bounds)]


def reference(data: bytes, limit: int) -> list[Frame]:
    """The obviously correct, non-streaming splitter the decoder must agree with."""
    out: list[Frame] = []
    for line in data.split(b"\n"):
        if line.endswith(b"\r"):
            line = line[:-1]
        if len(line) > limit:
            out.append(oversized(line, limit))
        elif line and not line.isspace():
            out.append(line)
    return out


# Basic framing


def test_one_message_per_chunk() -> None:
    dec = LineDecoder()
    assert dec.feed(b'{"a":1}\n') == [b'{"a":1}']
    assert dec.feed(b'{"b":2}\n') == [b'{"b":2}']
    assert dec.feed_eof() == []


def test_many_messages_in_one_chunk() -> None:
    dec = LineDecoder()
    assert dec.feed(b"one\ntwo\nthree\nfour") == [b"one", b"two", b"three"]
    assert dec.buffered == 4
    assert dec.feed(b"\n") == [b"four"]
    assert dec.buffered == 0


def test_empty_chunk_is_a_no_op() -> None:
    dec = LineDecoder()
    assert dec.feed(b"") == []
    assert dec.feed(b"ab") == []
    assert dec.feed(b"") == []
    assert dec.feed(b"c\n") == [b"abc"]


def test_message_split_over_three_chunks() -> None:
    dec = LineDecoder()
    assert dec.feed(b'{"jsonrpc":') == []
    assert dec.feed(b'"2.0",') == []
    assert dec.buffered == len(b'{"jsonrpc":"2.0",')
    assert dec.feed(b'"id":1}\nnext') == [b'{"jsonrpc":"2.0","id":1}']
    assert dec.feed_eof() == [b"next"]


STREAM = b'{"id":1}\r\n\n  \t\r\n{"id":"\xc3\xa9"}\nx\r\n\r\n{"last":true}'
STREAM_FRAMES = [b'{"id":1}', b'{"id":"\xc3\xa9"}', b"x", b'{"last":true}']


def test_reference_stream_whole() -> None:
    assert feed_chunks([STREAM]) == STREAM_FRAMES


@pytest.mark.parametrize("cut", range(len(STREAM) + 1))
def test_split_at_every_byte_boundary(cut: int) -> None:
    assert feed_chunks([STREAM[:cut], STREAM[cut:]]) == STREAM_FRAMES


def test_split_at_every_pair_of_boundaries() -> None:
    n = len(STREAM)
    for i in range(n + 1):
        for j in range(i, n + 1):
            assert feed_chunks(split_at(STREAM, [i, j])) == STREAM_FRAMES, (i, j)


def test_one_byte_at_a_time() -> None:
    assert feed_chunks([STREAM[i : i + 1] for i in range(len(STREAM))]) == STREAM_FRAMES


def test_crlf_line_end_drops_only_the_cr() -> None:
    assert feed_chunks([b"a\r\nb\r\r\nc\rd\n"]) == [b"a", b"b\r", b"c\rd"]


def test_crlf_split_between_cr_and_lf() -> None:
    dec = LineDecoder()
    assert dec.feed(b"abc\r") == []
    assert dec.feed(b"\nxyz\r") == [b"abc"]
    assert dec.feed(b"\n") == [b"xyz"]


@pytest.mark.parametrize(
    "blank", [b"\n", b"\r\n", b"   \n", b"\t\r\n", b" \t \x0b\x0c \n", b"\r\r\n"]
)
def test_blank_and_whitespace_only_lines_are_skipped(blank: bytes) -> None:
    assert feed_chunks([b"a\n" + blank + b"b\n"]) == [b"a", b"b"]
    assert feed_chunks([blank * 3]) == []


def test_leading_and_trailing_spaces_are_kept_in_a_frame() -> None:
    assert feed_chunks([b"  {} \n"]) == [b"  {} "]


def test_final_message_without_newline_is_delivered_at_eof() -> None:
    dec = LineDecoder()
    assert dec.feed(b'{"a":1}\n{"b":') == [b'{"a":1}']
    assert dec.feed(b"2}") == []
    assert dec.feed_eof() == [b'{"b":2}']


def test_eof_mid_line_delivers_the_partial_line_as_is() -> None:
    # The framer never looks inside: the truncated JSON is the parser's problem.
    dec = LineDecoder()
    assert dec.feed(b'{"jsonrpc":"2.0","id"') == []
    assert dec.feed_eof() == [b'{"jsonrpc":"2.0","id"']


def test_eof_after_cr_strips_it_like_a_line_end() -> None:
    assert feed_chunks([b"abc\r"]) == [b"abc"]


def test_eof_with_whitespace_only_tail_delivers_nothing() -> None:
    assert feed_chunks([b"a\n  \r"]) == [b"a"]


def test_feed_eof_twice_returns_nothing_more() -> None:
    dec = LineDecoder()
    dec.feed(b"tail")
    assert dec.feed_eof() == [b"tail"]
    assert dec.feed_eof() == []


def test_feed_after_feed_eof_raises() -> None:
    dec = LineDecoder()
    dec.feed_eof()
    with pytest.raises(RuntimeError, match=r"feed\(\) after feed_eof\(\)"):
        dec.feed(b"x\n")
    with pytest.raises(RuntimeError):
        dec.feed(b"")


@pytest.mark.parametrize("limit", [0, -1])
def test_max_message_size_must_be_positive(limit: int) -> None:
    with pytest.raises(ValueError, match="positive"):
        LineDecoder(limit)


def test_default_limit() -> None:
    assert DEFAULT_MAX_MESSAGE_SIZE == 64 * 1024 * 1024
    assert LineDecoder().max_message_size == DEFAULT_MAX_MESSAGE_SIZE


# Size cap

LIMIT = 16


def _chunkings(data: bytes) -> list[list[bytes]]:
    """Whole, at every single cut, and byte by byte."""
    out = [[data], [data[i : i + 1] for i in range(len(data))]]
    out += [[data[:i], data[i:]] for i in range(1, len(data))]
    return out


@pytest.mark.parametrize("end", [b"\n", b"\r\n", b""], ids=["lf", "crlf", "eof"])
def test_exactly_at_limit_is_accepted(end: bytes) -> None:
    line = b"x" * LIMIT
    for chunks in _chunkings(line + end):
        assert feed_chunks(chunks, LIMIT) == [line], chunks
    if end:
        for chunks in _chunkings(line + end + b"ok\n"):
            assert feed_chunks(chunks, LIMIT) == [line, b"ok"], chunks


@pytest.mark.parametrize("end", [b"\n", b"\r\n", b""], ids=["lf", "crlf", "eof"])
def test_limit_plus_one_is_refused(end: bytes) -> None:
    line = b"y" * (LIMIT + 1)
    expected = [oversized(line, LIMIT)]
    for chunks in _chunkings(line + end):
        assert feed_chunks(chunks, LIMIT) == expected, chunks


@pytest.mark.parametrize("end", [b"\n", b"\r\n"], ids=["lf", "crlf"])
@pytest.mark.parametrize("size", [LIMIT - 1, LIMIT, LIMIT + 1, LIMIT + 2, LIMIT + 3, 5 * LIMIT])
def test_message_after_an_oversized_one_still_arrives(end: bytes, size: int) -> None:
    line = bytes(range(65, 65 + 26)) * 10
    line = line[:size]
    data = b"first" + end + line + end + b"after" + end
    if size > LIMIT:
        expected: list[Frame] = [b"first", oversized(line, LIMIT), b"after"]
    else:
        expected = [b"first", line, b"after"]
    for chunks in _chunkings(data):
        assert feed_chunks(chunks, LIMIT) == expected, chunks


def test_line_with_cr_at_limit_plus_one_is_accepted() -> None:
    # limit bytes followed by b"\r" where the b"\n" arrives in a later chunk:
    # the decoder must not decide "too long" before it knows the b"\r" is a line end.
    line = b"z" * LIMIT
    dec = LineDecoder(LIMIT)
    assert dec.feed(line + b"\r") == []
    assert dec.feed(b"\n") == [line]


def test_trailing_cr_without_lf_counts_at_eof() -> None:
    # At EOF a trailing b"\r" is stripped like a line end, in both paths.
    line = b"z" * (LIMIT + 1)
    assert feed_chunks([line + b"\r"], LIMIT) == [oversized(line, LIMIT)]
    assert feed_chunks([line[:3], line[3:] + b"\r"], LIMIT) == [oversized(line, LIMIT)]


def test_double_cr_is_part_of_the_line() -> None:
    line = b"q" * LIMIT + b"\r"  # LIMIT + 1 bytes once one b"\r" is stripped
    for chunks in _chunkings(line + b"\r\n"):
        assert feed_chunks(chunks, LIMIT) == [oversized(line, LIMIT)], chunks


def test_oversized_frame_size_and_head() -> None:
    line = bytes(range(256)).replace(b"\n", b"N") * 1000  # 256,000 bytes
    limit = 1000
    expected = oversized(line, limit)
    assert len(line) > _HEAD_SIZE
    for chunk_size in (1 << 16, 4096, 999, 1001, len(line)):
        chunks = [line[i : i + chunk_size] for i in range(0, len(line), chunk_size)]
        for end in (b"\n", b"\r\n", b""):
            frames = feed_chunks([*chunks, end], limit)
            assert frames == [expected], (chunk_size, end)
            (frame,) = frames
            assert isinstance(frame, OversizedFrame)
            assert frame.size == len(line)
            assert frame.limit == limit
            assert frame.head == line[: len(frame.head)]
            assert len(frame.head) == _HEAD_SIZE
            assert frame.tail == line[-_TAIL_SIZE:]


def test_oversized_head_never_includes_the_cr() -> None:
    line = b"0123456789"
    dec = LineDecoder(8)
    assert dec.feed(line + b"\r") == []
    (frame,) = dec.feed(b"\n")
    assert frame == oversized(line, 8)


def test_oversized_head_does_not_depend_on_chunking() -> None:
    line = b"0123456789abcdef"
    whole = feed_chunks([line + b"\n"], 8)
    split = feed_chunks([line[:10], line[10:], b"\n"], 8)
    assert whole == split == [oversized(line, 8)]


def test_oversized_line_is_not_buffered() -> None:
    limit = 1024
    dec = LineDecoder(limit)
    assert dec.feed(b"x" * 100) == []
    assert dec.buffered == 100
    for _ in range(100):
        assert dec.feed(b"x" * 4096) == []
        assert dec.buffered <= limit + 1
    assert dec.buffered == 0
    size = 100 + 100 * 4096
    assert dec.feed(b"\nnext\n") == [
        OversizedFrame(size, limit, b"x" * _HEAD_SIZE, b"x" * _TAIL_SIZE),
        b"next",
    ]
    assert dec.feed(b"more\n") == [b"more"]


def test_whitespace_only_oversized_line_is_reported() -> None:
    # The verdict is by length alone: the decoder cannot look inside a dropped line.
    assert feed_chunks([b" " * 20 + b"\n"], 8) == [oversized(b" " * 20, 8)]
    assert feed_chunks([b" " * 10, b" " * 10 + b"\n"], 8) == [oversized(b" " * 20, 8)]


# Properties

_pieces = st.one_of(
    st.sampled_from([b"\n", b"\r\n", b"\r", b" ", b"\t", b"{", b"}", b"\xc3\xa9", b"\x00"]),
    st.binary(max_size=8),
    st.integers(0, 80).map(lambda n: b"x" * n),
)
_streams = st.lists(_pieces, max_size=40).map(b"".join)


@st.composite
def _stream_and_chunks(draw: st.DrawFn) -> tuple[bytes, list[bytes]]:
    data = draw(_streams)
    cuts = draw(st.lists(st.integers(0, len(data)), max_size=12))
    return data, split_at(data, cuts)


@settings(max_examples=examples(400), deadline=None)
@given(case=_stream_and_chunks(), limit=st.integers(8, 64))
def test_any_chunking_gives_the_same_frames(case: tuple[bytes, list[bytes]], limit: int) -> None:
    data, chunks = case
    assert b"".join(chunks) == data
    assert feed_chunks(chunks, limit) == feed_chunks([data], limit)


@settings(max_examples=examples(400), deadline=None)
@given(case=_stream_and_chunks(), limit=st.integers(1, 64))
def test_frames_equal_the_reference_splitter(case: tuple[bytes, list[bytes]], limit: int) -> None:
    data, chunks = case
    assert feed_chunks(chunks, limit) == reference(data, limit)


@st.composite
def _one_line_around_the_limit(draw: st.DrawFn) -> tuple[int, bytes, bytes, list[bytes]]:
    limit = draw(st.integers(8, 64))
    size = draw(st.integers(limit - 3, limit + 4))
    # Never blank, no b"\n" inside, and no trailing b"\r" (that would be a line end).
    body = draw(st.binary(min_size=size - 2, max_size=size - 2)).replace(b"\n", b"_")
    line = b"{" + body + b"}"
    end = draw(st.sampled_from([b"\n", b"\r\n", b"\r\r\n", b""]))
    data = line + end + b"after\n"
    cuts = draw(st.lists(st.integers(0, len(data)), max_size=8))
    return limit, line, end, split_at(data, cuts)


@settings(max_examples=examples(400), deadline=None)
@given(case=_one_line_around_the_limit())
def test_size_verdict_does_not_depend_on_chunking(
    case: tuple[int, bytes, bytes, list[bytes]],
) -> None:
    limit, line, end, chunks = case
    if end == b"\r\r\n":
        line += b"\r"  # only one b"\r" belongs to the line end
    if not end:
        line += b"after"  # without a line end the next message joins the line
    expected: list[Frame] = [oversized(line, limit) if len(line) > limit else line]
    if end:
        expected.append(b"after")
    frames = feed_chunks(chunks, limit)
    assert frames == expected
    if len(line) > limit:
        assert isinstance(frames[0], OversizedFrame)
        assert frames[0].size == len(line)


def feed_chunks_line_first(chunks: list[bytes], limit: int) -> list[bytes | OversizedFrame]:
    """As a FramedStream reads: each chunk through ``feed_line`` first, and
    through ``feed`` when that declines; then ``feed_eof``."""
    decoder = LineDecoder(limit)
    out: list[bytes | OversizedFrame] = []
    for chunk in chunks:
        line = decoder.feed_line(chunk)
        if line is None:
            out.extend(decoder.feed(chunk))
        else:
            out.append(line)
    out.extend(decoder.feed_eof())
    return out


@st.composite
def _stream_cut_at_line_ends(draw: st.DrawFn) -> list[bytes]:
    """A stream cut after some (often all) of its b"\n": chunks that are
    whole lines, as a request/reply exchange reads them."""
    line = st.one_of(
        st.sampled_from([b'{"a":1}', b"x", b" x", b"", b"  ", b"\r", b"y\r", b"x" * 70]),
        st.binary(max_size=12).map(lambda b: b.replace(b"\n", b"")),
    )
    lines = draw(st.lists(line, max_size=12))
    data = b"\n".join(lines) + draw(st.sampled_from([b"", b"\n"]))
    ends = [i + 1 for i, byte in enumerate(data) if byte == 0x0A]
    keep = draw(st.lists(st.booleans(), min_size=len(ends), max_size=len(ends)))
    extra = draw(st.lists(st.integers(0, len(data)), max_size=3))
    return split_at(data, [e for e, k in zip(ends, keep, strict=True) if k] + extra)


@settings(max_examples=examples(600), deadline=None)
@given(case=_stream_and_chunks(), limit=st.integers(1, 64))
def test_feed_line_first_gives_the_same_frames(case: tuple[bytes, list[bytes]], limit: int) -> None:
    _data, chunks = case
    assert feed_chunks_line_first(chunks, limit) == feed_chunks(chunks, limit)


@settings(max_examples=examples(600), deadline=None)
@given(chunks=_stream_cut_at_line_ends(), limit=st.integers(1, 64))
def test_feed_line_first_gives_the_same_frames_cut_at_line_ends(
    chunks: list[bytes], limit: int
) -> None:
    assert feed_chunks_line_first(chunks, limit) == feed_chunks(chunks, limit)


@pytest.mark.parametrize(
    ("chunk", "expected"),
    [
        (b'{"a":1}\n', b'{"a":1}'),
        (b"x\n", b"x"),
        (b"\n", None),  # blank: feed() skips it
        (b" \n", None),
        (b' {"a":1}\n', None),  # leading space: left to feed(), which keeps it
        (b'{"a":1}\r\n', None),
        (b'{"a":1}', None),  # no line end yet
        (b'{"a":1}\n{"b":2}\n', None),  # two lines
        (b"12345678\n", b"12345678"),  # exactly at the limit of 8
        (b"123456789\n", None),  # over it: feed() reports it
    ],
)
def test_feed_line_takes_only_one_plain_whole_line(chunk: bytes, expected: bytes | None) -> None:
    decoder = LineDecoder(8)
    assert decoder.feed_line(chunk) == expected
    if expected is None:
        # Nothing was consumed: feed() sees the chunk as if feed_line had not run.
        assert decoder.feed(chunk) == LineDecoder(8).feed(chunk)


def test_feed_line_declines_while_a_line_is_held_or_after_eof() -> None:
    decoder = LineDecoder(64)
    assert decoder.feed(b'{"a"') == []
    assert decoder.feed_line(b":1}\n") is None
    assert decoder.feed(b":1}\n") == [b'{"a":1}']
    assert decoder.feed_line(b"y\n") == b"y"
    decoder.feed_eof()
    assert decoder.feed_line(b"z\n") is None
    with pytest.raises(RuntimeError):
        decoder.feed(b"z\n")
