"""How :class:`FramedStream` reads a pipe: after a read that emptied the pipe
it waits before trying again (no read that finds nothing), and what arrives
meanwhile is still read at once, whole and in order."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

import acp_trio._core._framed as framed
from acp_trio._core._framed import RECEIVE_SIZE, FramedStream

LIMIT = 10  # real seconds: these tests use real pipes and no virtual clock


class CountingOs:
    """Stands in for ``os`` in ``acp_trio._core._framed``: counts reads, and the
    ones that found the pipe empty."""

    def __init__(self) -> None:
        self.reads = 0
        self.empty = 0
        self.sizes: set[int] = set()

    def read(self, fd: int, n: int) -> bytes:
        self.reads += 1
        self.sizes.add(n)
        try:
            return os.read(fd, n)
        except BlockingIOError:
            self.empty += 1
            raise

    def write(self, fd: int, data: bytes) -> int:
        return os.write(fd, data)

    def __getattr__(self, name: str) -> Any:
        return getattr(os, name)  # fstat and the rest, as they are


class FstatFails:
    """Stands in for ``os`` in ``acp_trio._core._framed``: ``fstat`` tells
    nothing (it fails); the rest is the real ``os``."""

    def fstat(self, fd: int) -> os.stat_result:
        raise OSError(5, "fstat refused (test)")

    def __getattr__(self, name: str) -> Any:
        return getattr(os, name)


@pytest.fixture
def counting(monkeypatch: pytest.MonkeyPatch) -> CountingOs:
    fake = CountingOs()
    monkeypatch.setattr(framed, "os", fake)
    return fake


class Writer:
    """The write end of the pipe a test's stream reads."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


@pytest.fixture
def pipe() -> Iterator[tuple[FramedStream, Writer]]:
    """A FramedStream reading a pipe, and the pipe's write end."""
    read_fd, write_fd = os.pipe()
    other_read, other_write = os.pipe()  # (the send side, unused)
    stream = FramedStream(trio.lowlevel.FdStream(other_write), trio.lowlevel.FdStream(read_fd))
    writer = Writer(write_fd)
    yield stream, writer
    writer.close()
    os.close(other_read)


async def test_after_a_short_read_the_next_read_waits_first(
    counting: CountingOs, pipe: tuple[FramedStream, Writer]
) -> None:
    stream, writer = pipe
    write_fd = writer.fd
    with trio.fail_after(LIMIT):
        os.write(write_fd, b'{"n":0}\n')
        assert await stream.receive_frame() == b'{"n":0}'
        assert (counting.reads, counting.empty) == (1, 0)
        for n in range(1, 20):
            async with trio.open_nursery() as nursery:
                # The frame comes while the reader waits...
                nursery.start_soon(write_later, write_fd, b'{"n":%d}\n' % n)
                assert await stream.receive_frame() == b'{"n":%d}' % n
            # ... or was there before it asked (epoll reports it at once).
            os.write(write_fd, b'{"m":%d}\n' % n)
            assert await stream.receive_frame() == b'{"m":%d}' % n
        assert counting.empty == 0
        assert counting.reads == 1 + 2 * 19
        await stream.aclose()


async def test_no_read_asks_for_a_buffer_the_allocator_would_map(
    counting: CountingOs, pipe: tuple[FramedStream, Writer]
) -> None:
    """Each read allocates the size it asks for before shrinking it to what
    came. From 128 KiB (glibc's initial mmap threshold) that allocation is a
    fresh mapping per read: three system calls on every small message."""
    stream, writer = pipe
    with trio.fail_after(LIMIT):
        for n in range(3):
            os.write(writer.fd, b'{"n":%d}\n' % n)
            assert await stream.receive_frame() == b'{"n":%d}' % n
        await stream.aclose()
    assert counting.sizes
    assert max(counting.sizes) < 128 * 1024


async def write_later(fd: int, data: bytes) -> None:
    await trio.sleep(0.01)
    os.write(fd, data)


class CountingWaits:
    """Counts ``trio.lowlevel.wait_readable`` calls made by the stream."""

    def __init__(self) -> None:
        self.waits = 0
        self._real = trio.lowlevel.wait_readable

    async def __call__(self, fd: Any) -> None:
        self.waits += 1
        await self._real(fd)


@pytest.fixture
def waits(monkeypatch: pytest.MonkeyPatch) -> CountingWaits:
    counter = CountingWaits()
    monkeypatch.setattr(trio.lowlevel, "wait_readable", counter)
    return counter


@pytest.mark.parametrize("frame_size", [100, 1024, 3000])
async def test_a_read_that_emptied_a_full_pipe_is_followed_by_a_read_without_waiting(
    counting: CountingOs,
    waits: CountingWaits,
    pipe: tuple[FramedStream, Writer],
    frame_size: int,
) -> None:
    """A big read may have left more behind (the writer was blocked on the
    full pipe): the next read tries the pipe first. The pipe is filled as a
    peer fills it, a frame per write, until the writer would block (a pipe
    of 3,000-byte writes blocks at 48 KB of its 64 KB)."""
    stream, writer = pipe
    write_fd = writer.fd
    frame = b'{"x":"' + b"y" * (frame_size - 9) + b'"}\n'
    assert len(frame) == frame_size
    with trio.fail_after(LIMIT):
        os.set_blocking(write_fd, False)
        count = 0
        with contextlib.suppress(BlockingIOError):
            while True:
                assert os.write(write_fd, frame) == frame_size
                count += 1
        for _ in range(count):
            assert await stream.receive_frame() == frame[:-1]
        assert (counting.reads, waits.waits) == (1, 0)
        # More came after the big read: taken with no wait.
        os.write(write_fd, b'{"more":1}\n')
        assert await stream.receive_frame() == b'{"more":1}'
        assert (counting.reads, counting.empty, waits.waits) == (2, 0, 0)
        # That read was small: the next one waits first, and finds its data.
        os.write(write_fd, b'{"more":2}\n')
        assert await stream.receive_frame() == b'{"more":2}'
        assert (counting.reads, counting.empty, waits.waits) == (3, 0, 1)
        await stream.aclose()


@pytest.mark.skipif(getattr(framed, "_F_GETPIPE_SZ", None) is None, reason="pipe sizes are Linux's")
async def test_a_pipe_bigger_than_one_read_is_read_without_waiting_until_it_is_empty(
    counting: CountingOs, waits: CountingWaits
) -> None:
    """A pipe enlarged beyond one read (F_SETPIPE_SZ) can hold several reads'
    worth: every full read is followed by another try, not by a wait, until
    the pipe is empty."""
    import fcntl

    read_fd, write_fd = os.pipe()
    other_read, other_write = os.pipe()  # (the send side, unused)
    writer = Writer(write_fd)
    try:
        try:
            fcntl.fcntl(write_fd, fcntl.F_SETPIPE_SZ, 1024 * 1024)
        except OSError:
            os.close(read_fd)
            os.close(other_write)
            pytest.skip("this system refuses a 1 MiB pipe")
        stream = FramedStream(trio.lowlevel.FdStream(other_write), trio.lowlevel.FdStream(read_fd))
        frame = b'{"x":"' + b"y" * 1015 + b'"}\n'
        count = (4 * RECEIVE_SIZE) // len(frame)
        with trio.fail_after(LIMIT):
            for _ in range(count):
                assert os.write(write_fd, frame) == len(frame)
            for _ in range(count):
                assert await stream.receive_frame() == frame[:-1]
            assert counting.reads >= 4
            assert (counting.empty, waits.waits) == (0, 0)
            await stream.aclose()
    finally:
        writer.close()
        os.close(other_read)


async def test_a_stream_bigger_than_the_pipe_comes_through_whole_and_in_order(
    counting: CountingOs, pipe: tuple[FramedStream, Writer]
) -> None:
    stream, writer = pipe
    write_fd = writer.fd
    frame = b'{"x":"' + b"y" * 1000 + b'"}\n'
    count = (3 * RECEIVE_SIZE) // len(frame)
    data = frame * count + b'{"last":1}\n'
    got: list[Any] = []
    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:

            async def fill() -> None:
                os.set_blocking(write_fd, False)
                view = memoryview(data)
                while view:
                    await trio.lowlevel.wait_writable(write_fd)
                    try:
                        written = os.write(write_fd, view)
                    except BlockingIOError:
                        continue
                    view = view[written:]

            nursery.start_soon(fill)
            while True:
                item = await stream.receive_frame()
                got.append(item)
                if item == b'{"last":1}':
                    break
        assert got == [frame[:-1]] * count + [b'{"last":1}']
        await stream.aclose()


@pytest.mark.parametrize("recognised", [True, False], ids=["by-fstat", "by-epoll-refusal"])
async def test_a_regular_file_is_read_to_its_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, waits: CountingWaits, recognised: bool
) -> None:
    """A regular file behind an FdStream (a saved transcript, say) never
    blocks and cannot be waited on with epoll: it is read directly, to a
    clean end of stream, unterminated last frame included. Should fstat not
    tell, epoll's refusal (EPERM) does, once."""
    if not recognised:
        monkeypatch.setattr(framed, "os", FstatFails())
    path = tmp_path / "transcript.jsonl"
    path.write_bytes(b'{"n":1}\n{"n":2}\n{"n":3}')
    read_fd = os.open(path, os.O_RDONLY)
    other_read, other_write = os.pipe()
    stream = FramedStream(trio.lowlevel.FdStream(other_write), trio.lowlevel.FdStream(read_fd))
    with trio.fail_after(LIMIT):
        frames = []
        while (item := await stream.receive_frame()) is not None:
            frames.append(item)
        assert frames == [b'{"n":1}', b'{"n":2}', b'{"n":3}']
        await stream.aclose()
    os.close(other_read)
    assert waits.waits == (0 if recognised else 1)


async def test_a_descriptor_that_can_neither_be_waited_on_nor_read_is_broken(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """epoll refuses it and reading it says "try again": reading fails at
    once instead of spinning without a schedule point."""

    class AlwaysEmpty(CountingOs):
        def read(self, fd: int, n: int) -> bytes:
            self.reads += 1
            if self.reads > 100:
                raise AssertionError("reading spins")  # (no checkpoint: fail_after cannot fire)
            raise BlockingIOError

    fake = AlwaysEmpty()
    monkeypatch.setattr(framed, "os", fake)
    path = tmp_path / "device"
    path.write_bytes(b"")
    read_fd = os.open(path, os.O_RDONLY)
    other_read, other_write = os.pipe()
    stream = FramedStream(trio.lowlevel.FdStream(other_write), trio.lowlevel.FdStream(read_fd))
    with trio.fail_after(LIMIT), pytest.raises(trio.BrokenResourceError, match="neither"):
        await stream.receive_frame()
    assert fake.reads == 1
    await stream.aclose()
    os.close(other_read)


async def test_a_waiting_read_is_cancellable_and_loses_nothing(
    counting: CountingOs, pipe: tuple[FramedStream, Writer]
) -> None:
    stream, writer = pipe
    write_fd = writer.fd
    with trio.fail_after(LIMIT):
        os.write(write_fd, b"1\n")
        assert await stream.receive_frame() == b"1"
        with trio.move_on_after(0.01) as scope:
            await stream.receive_frame()
        assert scope.cancelled_caught
        os.write(write_fd, b"2\n")
        assert await stream.receive_frame() == b"2"
        assert counting.empty == 0
        await stream.aclose()


async def test_end_of_stream_after_a_short_read(pipe: tuple[FramedStream, Writer]) -> None:
    stream, writer = pipe
    write_fd = writer.fd
    with trio.fail_after(LIMIT):
        os.write(write_fd, b"1\n2")
        assert await stream.receive_frame() == b"1"
        async with trio.open_nursery() as nursery:

            async def close_later() -> None:
                await trio.sleep(0.01)
                writer.close()

            nursery.start_soon(close_later)
            assert await stream.receive_frame() == b"2"  # the unterminated rest, at EOF
        assert await stream.receive_frame() is None
        await stream.aclose()
