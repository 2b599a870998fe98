"""The Streamable HTTP client's message stream is a ``BufferedMessageStream``:
the connection takes the events of an SSE chunk together, without a pass of
the scheduler for each, and a task waiting to read can be interrupted (the
connection closing)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx2
import pytest
import trio

from acp_trio._core._message_stream import BufferedMessageStream
from acp_trio.lowlevel import Handler, open_connection
from acp_trio.remote._http_client import HttpMessages

from .conftest import LIMIT


@asynccontextmanager
async def messages(queue_size: int = 64) -> AsyncIterator[HttpMessages]:
    """An ``HttpMessages`` that is never connected: what it received is put
    in by hand, as its SSE reader puts the events of a chunk."""
    async with (
        httpx2.AsyncClient() as client,
        httpx2.AsyncClient() as sse,
        trio.open_nursery() as nursery,
    ):
        stream = HttpMessages(
            client, sse, "http://127.0.0.1:9/acp", nursery, 1 << 20, queue_size, 1.0
        )
        try:
            yield stream
        finally:
            stream._inbound_send.close()


async def test_it_is_a_buffered_message_stream_that_gives_what_it_holds_without_waiting() -> None:
    async with messages() as stream:
        assert isinstance(stream, BufferedMessageStream)
        assert not stream.messages_pending
        assert stream.receive_message_nowait() is None
        for i in range(3):
            await stream._received(b'{"n":%d}' % i)
        assert stream.messages_pending
        assert [stream.receive_message_nowait() for _ in range(4)] == [
            b'{"n":0}',
            b'{"n":1}',
            b'{"n":2}',
            None,
        ]
        assert not stream.send_message_nowait(b"{}")  # a POST always waits


async def test_interrupting_a_wait_ends_it_and_nothing_is_read_after() -> None:
    async with messages() as stream:
        failed: list[BaseException] = []

        async def reader() -> None:
            try:
                await stream.receive_message()
            except trio.ClosedResourceError as exc:
                failed.append(exc)

        with trio.fail_after(LIMIT):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(reader)
                await trio.testing.wait_all_tasks_blocked()
                stream.interrupt_reading()
        assert len(failed) == 1
        await stream._received(b'{"n":1}')
        assert stream.receive_message_nowait() is None
        with pytest.raises(trio.ClosedResourceError):
            await stream.receive_message()


class Count(trio.abc.Instrument):
    def __init__(self) -> None:
        self.steps = 0

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        self.steps += 1


class Updates(Handler):
    def __init__(self, expected: int) -> None:
        self.seen = 0
        self.expected = expected
        self.done = trio.Event()

    async def handle_notification(self, method: str, params: object) -> None:
        self.seen += 1
        if self.seen == self.expected:
            self.done.set()


async def test_a_chunk_of_events_is_taken_without_a_task_step_for_each() -> None:
    """60 updates queued together (the events of one SSE chunk) reach the
    handler in a few task steps, not one or more for each update."""
    n = 60
    update = b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","n":%d}}'
    async with messages(queue_size=n) as stream:
        handler = Updates(n)
        with trio.fail_after(LIMIT):
            async with open_connection(stream, handler) as conn:
                await trio.testing.wait_all_tasks_blocked()
                count = Count()
                trio.lowlevel.add_instrument(count)
                for i in range(n):
                    await stream._received(update % i)
                await handler.done.wait()
                trio.lowlevel.remove_instrument(count)
                conn.close_soon()
        assert handler.seen == n
        assert count.steps < n // 4
