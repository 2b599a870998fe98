"""The server's SSE stream sends a burst of queued messages as one body
chunk, in order, bounded in size; a lone message goes out at once."""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

import trio

from acp_trio.remote._http_connection import Outbox, ReplayBuffer
from acp_trio.remote._http_server import _BATCH_BYTES, _events
from acp_trio.remote._sse import SseDecoder


def decode(chunk: bytes) -> list[bytes]:
    return SseDecoder(1 << 24).feed(chunk)


async def test_queued_messages_go_out_in_one_chunk_in_order() -> None:
    box = Outbox(64)
    for i in range(10):
        box.send.send_nowait(b'{"n":%d}' % i)
    first = await box.receive.receive()
    chunk, count = await _events(box, first)
    assert decode(chunk) == [b'{"n":%d}' % i for i in range(10)]
    assert count == 10


async def test_a_resumable_burst_gives_each_event_its_cursor_and_keeps_it() -> None:
    box = Outbox(64)
    replay = ReplayBuffer(16)
    for i in range(6):
        box.send.send_nowait(b'{"n":%d}' % i)
    first = await box.receive.receive()
    chunk, count = await _events(box, first, replay=replay)
    assert count == 6
    ids = [line for line in chunk.split(b"\n") if line.startswith(b"id:")]
    assert ids == [b"id: %d" % n for n in range(1, 7)]
    assert decode(chunk) == [b'{"n":%d}' % i for i in range(6)]
    # Every event of the chunk is kept before it is sent: a stream dropped
    # during the send resumes after cursor 2 with the other four.
    assert replay.after("2") == [(n, b'{"n":%d}' % (n - 1)) for n in range(3, 7)]


async def test_messages_queued_while_gathering_keep_their_order() -> None:
    box = Outbox(4)
    received: list[bytes] = []

    async def producer() -> None:
        for i in range(1, 50):
            await box.send.send(b'{"n":%d}' % i)
        box.send.close()

    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(producer)
            burst = True
            async for message in box.receive:
                chunk, count = await _events(box, message, burst=burst)
                burst = count > 1
                assert len(decode(chunk)) == count
                received += decode(chunk)
    assert received == [b'{"n":%d}' % i for i in range(1, 50)]


async def test_a_chunk_is_bounded_and_the_rest_waits_in_order() -> None:
    box = Outbox(64)
    big = b'"' + b"x" * (_BATCH_BYTES // 4) + b'"'
    for _ in range(8):
        box.send.send_nowait(big)
    chunk, count = await _events(box, await box.receive.receive())
    assert 1 < count == len(decode(chunk)) < 8
    assert len(chunk) < 2 * _BATCH_BYTES


async def test_a_lone_message_goes_out_at_once() -> None:
    box = Outbox(4)

    async def producer() -> None:
        await box.send.send(b'{"n":1}')

    async with trio.open_nursery() as nursery:
        nursery.start_soon(producer)
        # Outside a burst, nothing is gathered: the message queued in the
        # next round goes in the next chunk.
        chunk, count = await _events(box, b'{"n":0}')
    assert (decode(chunk), count) == ([b'{"n":0}'], 1)
    assert box.receive.receive_nowait() == b'{"n":1}'


async def test_the_stream_sends_a_burst_as_one_body_chunk() -> None:
    # Through the ASGI request: the messages queued before the GET are one
    # http.response.body event after the opening comment.
    from acp_trio.remote._http_server import HttpProfile

    async def handle(stream: Any) -> None:
        await trio.sleep_forever()

    profile = HttpProfile(handle, max_message_size=1 << 20, body_limit=1 << 20, queue_size=64)
    box = Outbox(64)
    for i in range(5):
        box.send.send_nowait(b'{"n":%d}' % i)
    box.send.close()
    bodies: list[bytes] = []

    async def receive() -> MutableMapping[str, Any]:
        await trio.sleep_forever()
        raise AssertionError

    async def send(event: MutableMapping[str, Any]) -> None:
        if event["type"] == "http.response.body":
            bodies.append(event["body"])

    with trio.fail_after(5):
        await profile._stream({}, box, [], receive, send)
    assert bodies[0].startswith(b":")
    assert decode(bodies[1]) == [b'{"n":%d}' % i for i in range(5)]
    assert bodies[2:] == [b""]
