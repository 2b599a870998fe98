"""Throughput of the sans-IO framing layer (``LineDecoder``) and of ``parse_frame``.

The byte stream is fed in 64 KiB chunks, the way a pipe delivers it, for three
message sizes: 1 KB (many messages), 1 MB and 50 MB. Framing must be linear in
the input, so the 50 MB figure should be in the same range as the 1 MB one.

A 1 MB line stays in the CPU caches and in memory the allocator reuses, while a
50 MB line is copied through DRAM into freshly mapped pages, so some drop from
1 MB to 50 MB is expected even for linear code. The scaling table separates the
two effects. For single lines of 1, 20, 50 and 100 MB it prints the decoder's time
per MB next to the "copy floor": appending the same chunks to a bytearray and
taking ``bytes()`` of it, the two copies any buffering reader makes. Linear time
means a flat time per MB, close to the floor; a quadratic decoder would take
5x longer per MB at 100 MB than at 20 MB.

    python benchmarks/bench_framing.py           # about 20 s
    python benchmarks/bench_framing.py --quick   # a few seconds
"""

from __future__ import annotations

import argparse
import functools
import gc
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

from acp_trio._jsonrpc import (
    DEFAULT_MAX_MESSAGE_SIZE,
    LineDecoder,
    Request,
    encode_frame,
    parse_frame,
    request,
)

CHUNK = 64 * 1024
KB = 1000
MB = 1000 * 1000


def make_message(request_id: int, size: int) -> bytes:
    """One encoded request (with its ``\\n``) of exactly ``size`` bytes."""
    empty = encode_frame(request(request_id, "session/prompt", {"text": ""}))
    pad = size - len(empty)
    if pad < 0:
        raise ValueError(f"size {size} is too small for a message")
    frame = encode_frame(request(request_id, "session/prompt", {"text": "x" * pad}))
    assert len(frame) == size
    return frame


def make_stream(size: int, count: int) -> bytes:
    return b"".join(make_message(i, size) for i in range(count))


def feed_stream(data: bytes, limit: int = DEFAULT_MAX_MESSAGE_SIZE) -> int:
    """Feed ``data`` in CHUNK-sized pieces; return the number of messages."""
    decoder = LineDecoder(limit)
    frames = 0
    for start in range(0, len(data), CHUNK):
        # Slicing copies the chunk, as reading it from a pipe would.
        for frame in decoder.feed(data[start : start + CHUNK]):
            frames += type(frame) is bytes
    for frame in decoder.feed_eof():
        frames += type(frame) is bytes
    return frames


def best_time(fn: Callable[[], object], repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        gc.collect()
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


@dataclass
class Row:
    name: str
    message_size: int
    count: int
    seconds: float

    @property
    def total(self) -> int:
        return self.message_size * self.count

    @property
    def mb_per_s(self) -> float:
        return self.total / MB / self.seconds

    @property
    def msgs_per_s(self) -> float:
        return self.count / self.seconds


def human(size: int) -> str:
    if size >= MB:
        return f"{size / MB:g} MB"
    return f"{size / KB:g} KB"


def bench_framing(name: str, size: int, count: int, repeats: int) -> Row:
    data = make_stream(size, count)
    frames = feed_stream(data)  # warm up, and check the result
    if frames != count:
        raise AssertionError(f"{name}: expected {count} frames, got {frames}")
    seconds = best_time(lambda: feed_stream(data), repeats)
    return Row(name, size, count, seconds)


def bench_parse(size: int, count: int, repeats: int) -> Row:
    frames = [make_message(i, size)[:-1] for i in range(count)]
    if not all(type(parse_frame(frame)) is Request for frame in frames[:10]):
        raise AssertionError("parse_frame did not return requests")

    def parse_all() -> None:
        for frame in frames:
            parse_frame(frame)

    seconds = best_time(parse_all, repeats)
    # Sizes include the line end, as in the framing rows.
    return Row("parse_frame", size, count, seconds)


def copy_floor(data: bytes) -> bytes:
    """Buffer the stream the simplest way: what the decoder cannot beat."""
    buf = bytearray()
    for start in range(0, len(data), CHUNK):
        buf += memoryview(data[start : start + CHUNK])
    return bytes(buf)


def bench_scaling(sizes: list[int], repeats: int) -> list[tuple[int, float, float]]:
    """(size, decoder ms/MB, copy floor ms/MB) for one line of each size."""
    out = []
    for size in sizes:
        data = make_message(0, size)
        limit = max(size, DEFAULT_MAX_MESSAGE_SIZE)
        if feed_stream(data, limit) != 1:
            raise AssertionError(f"expected one frame of {size} bytes")
        decoder = best_time(functools.partial(feed_stream, data, limit), repeats)
        floor = best_time(functools.partial(copy_floor, data), repeats)
        out.append((size, decoder * 1000 / (size / MB), floor * 1000 / (size / MB)))
        del data
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help="smaller inputs and fewer repeats (a smoke run)"
    )
    args = parser.parse_args(argv)

    if args.quick:
        repeats, small_total, mid_count, big_count = 2, 8 * MB, 8, 1
    else:
        repeats, small_total, mid_count, big_count = 3, 64 * MB, 64, 2

    small_count = small_total // KB
    print(
        f"Python {sys.version.split()[0]}, chunk {CHUNK // 1024} KiB, "
        f"best of {repeats}{' (quick)' if args.quick else ''}"
    )
    rows = [
        bench_framing("LineDecoder", 1 * KB, small_count, repeats),
        bench_framing("LineDecoder", 1 * MB, mid_count, repeats),
        bench_framing("LineDecoder", 50 * MB, big_count, repeats),
        bench_parse(1 * KB, small_count // 4, repeats),
    ]

    header = f"{'benchmark':<12} {'message':>8} {'count':>8} {'total':>9} {'time':>9} "
    header += f"{'MB/s':>9} {'msgs/s':>11}"
    print(header)
    print("-" * len(header))
    for row in rows:
        print(
            f"{row.name:<12} {human(row.message_size):>8} {row.count:>8} "
            f"{human(row.total):>9} {row.seconds * 1000:>7.1f}ms "
            f"{row.mb_per_s:>9.0f} {row.msgs_per_s:>11,.0f}"
        )
    ratio = rows[2].mb_per_s / rows[1].mb_per_s
    print(f"\n50 MB / 1 MB throughput ratio: {ratio:.2f}")

    print("\nscaling, one line each:")
    print(f"  {'line':>8} {'decoder':>13} {'copy floor':>13}")
    scaling = bench_scaling([1 * MB, 20 * MB, 50 * MB, 100 * MB], repeats)
    for size, decoder, floor in scaling:
        print(f"  {human(size):>8} {decoder:>7.2f} ms/MB {floor:>7.2f} ms/MB")
    growth = scaling[-1][1] / scaling[1][1]
    print(f"  decoder time per MB, 100 MB vs 20 MB: x{growth:.2f} (1 = linear, 5 = quadratic)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
