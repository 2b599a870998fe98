"""The message-stream seam: a connection over whole messages (no NDJSON),
with the size cap enforced as on a byte stream."""

from __future__ import annotations

import json
from typing import Any

import trio
import trio.testing

from acp_trio._jsonrpc import OversizedFrame
from acp_trio._message_stream import MessageStream
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
            replies = [json.loads(m) for m in b.sent]
            assert [r.get("error", {}).get("code") for r in replies] == [None, -32800, None]


async def test_a_message_over_the_cap_is_answered_as_on_stdio() -> None:
    a, b = message_pair(limit=64)
    with trio.fail_after(30):
        async with open_connection(b, Echo()):
            big = json.dumps(
                {"jsonrpc": "2.0", "id": 7, "method": "echo", "params": {"x": "y" * 100}}
            ).encode()
            await a.send_message(big)
            reply = json.loads(await a._receive.receive())
            assert reply["id"] == 7
            assert reply["error"]["code"] == -32600
            assert reply["error"]["data"] == {"size": len(big), "limit": 64}
