"""The message-stream seam: a connection over whole messages (no NDJSON),
with the size cap enforced as on a byte stream."""

from __future__ import annotations

import json
from typing import Any

import trio
import trio.lowlevel
import trio.testing

from acp_trio import ConnectionConfig
from acp_trio._core._message_stream import MessageStream
from acp_trio._jsonrpc import OversizedFrame
from acp_trio.lowlevel import Handler, RequestContext, open_connection


class MemoryMessages:
    """One end of an in-memory message pipe."""

    def __init__(
        self,
        send: trio.MemorySendChannel[bytes],
        receive: trio.MemoryReceiveChannel[bytes],
        limit: int = 1024,
    ) -> None:
        self._send = send
        self._receive = receive
        self.max_message_size = limit
        self.sent: list[bytes] = []

    async def receive_message(self) -> bytes | OversizedFrame | None:
        try:
            return await self._receive.receive()
        except trio.EndOfChannel:
            return None

    async def send_message(self, message: bytes) -> None:
        self.sent.append(message)
        await self._send.send(message)

    async def aclose(self) -> None:
        await self._send.aclose()


def message_pair(limit: int = 1024) -> tuple[MemoryMessages, MemoryMessages]:
    a_send, b_receive = trio.open_memory_channel[bytes](100)
    b_send, a_receive = trio.open_memory_channel[bytes](100)
    return MemoryMessages(a_send, a_receive, limit), MemoryMessages(b_send, b_receive, limit)


class Echo(Handler):
    async def handle_request(self, ctx: RequestContext, method: str, params: Any) -> Any:
        if method == "sleep":
            await trio.sleep_forever()
        return {"echo": params}


def test_memory_messages_are_a_message_stream() -> None:
    a, _ = message_pair()
    assert isinstance(a, MessageStream)


async def test_calls_and_cancels_over_whole_messages() -> None:
    a, b = message_pair()
    with trio.fail_after(30):
        async with open_connection(a) as client, open_connection(b, Echo()):
            assert await client.call("echo", {"x": 1}) == {"echo": {"x": 1}}
            async with trio.open_nursery() as nursery:

                async def sleep() -> None:
                    await client.call("sleep", {})

                nursery.start_soon(sleep)
                await trio.testing.wait_all_tasks_blocked()
                nursery.cancel_scope.cancel()
            assert await client.call("echo", [2]) == {"echo": [2]}
            # Every message sent whole, never with a line end.
            assert all(not m.endswith(b"\n") for m in a.sent + b.sent)
            methods = [json.loads(m).get("method") for m in a.sent]
            assert methods == ["echo", "sleep", "$/cancel_request", "echo"]
            # One reply per request (replies to different requests may come
            # in any order: the last echo can answer before the cancelled
            # sleep does).
            replies = {json.loads(m)["id"]: json.loads(m) for m in b.sent}
            assert len(b.sent) == 3
            assert [replies[i].get("error", {}).get("code") for i in (0, 1, 2)] == [
                None,
                -32800,
                None,
            ]


async def test_a_message_over_the_cap_is_answered_as_on_stdio() -> None:
    a, b = message_pair(limit=64)
    with trio.fail_after(30):
        async with open_connection(b, Echo()):
            big = json.dumps(
                {"jsonrpc": "2.0", "id": 7, "method": "echo", "params": {"x": "y" * 100}}
            ).encode()
            await a.send_message(big)
            reply = json.loads(await a.receive_message())  # type: ignore[arg-type]
            assert reply["id"] == 7
            assert reply["error"]["code"] == -32600
            assert reply["error"]["data"] == {"size": len(big), "limit": 64}


class Mixed(Handler):
    """Answers ``now`` without waiting (run eagerly in the reader), and
    ``later`` after a checkpoint (then in a task of its own); records the
    task each ran in and whether its scope was its own."""

    def __init__(self) -> None:
        self.tasks: list[tuple[str, str]] = []

    async def handle_request(self, ctx: RequestContext, method: str, params: Any) -> Any:
        if method == "later":
            await trio.lowlevel.checkpoint()
        self.tasks.append((method, trio.lowlevel.current_task().name))
        return params


async def test_a_burst_of_messages_each_sent_whole_and_answered_once() -> None:
    a, b = message_pair()
    handler = Mixed()
    with trio.fail_after(30):
        async with open_connection(a) as client, open_connection(b, handler):
            results: dict[int, Any] = {}
            async with trio.open_nursery() as nursery:
                for i in range(40):

                    async def one(i: int = i) -> None:
                        results[i] = await client.call("now" if i % 2 else "later", {"i": i})

                    nursery.start_soon(one)
            assert results == {i: {"i": i} for i in range(40)}
    # One message per frame, none with a line end, exactly one reply per id.
    assert all(not m.endswith(b"\n") and b"\n" not in m for m in a.sent + b.sent)
    replies = [json.loads(m)["id"] for m in b.sent]
    assert sorted(replies) == sorted(json.loads(m)["id"] for m in a.sent)
    assert sorted(m for m, _ in handler.tasks) == ["later"] * 20 + ["now"] * 20


async def test_a_handler_that_answers_at_once_runs_in_the_reader() -> None:
    # The message transport is read like the NDJSON one: a handler that does
    # not wait runs in the task that read its request (eagerly), one that
    # waits ends in another task than the reader's.
    a, b = message_pair()
    ran_in: dict[str, trio.lowlevel.Task] = {}
    read_by: dict[str, trio.lowlevel.Task] = {}

    class Recording(Handler):
        async def handle_request(self, ctx: RequestContext, method: str, params: Any) -> Any:
            if method == "later":
                await trio.lowlevel.checkpoint()
            ran_in[method] = trio.lowlevel.current_task()
            return params

    def trace(direction: str, frame: bytes) -> None:
        if direction == "recv":
            read_by[json.loads(frame)["method"]] = trio.lowlevel.current_task()

    with trio.fail_after(30):
        async with (
            open_connection(a) as client,
            open_connection(b, Recording(), config=ConnectionConfig(trace=trace)),
        ):
            assert await client.call("now", [1]) == [1]
            assert await client.call("later", [2]) == [2]
            assert await client.call("now", [3]) == [3]
    # "later" started in the reader and went on in that task once it waited;
    # a new reader read the last "now", and ran it.
    assert ran_in["later"] is read_by["later"]
    assert read_by["now"] is not read_by["later"]
    assert ran_in["now"] is read_by["now"]
