"""Over our WebSocket, as over a pipe, a caller waiting for its reply reads
it itself (``acp_trio/_core/_read_right.py``, through
``BufferedMessageStream``): the reply is read in the caller's task, and
closing the connection while a caller reads ends its call."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
import trio.testing

from acp_trio import ConnectionClosed, ConnectionConfig
from acp_trio.lowlevel import Connection, Handler, open_connection
from acp_trio.remote import WebSocket, WebSocketClosed, WebSocketMessages

from .conftest import LIMIT
from .wsraw import stream_pair


class Readers:
    """The ``trace`` hook: which task read each frame (it runs in the
    reading task)."""

    def __init__(self) -> None:
        self.read: list[tuple[Any, trio.lowlevel.Task]] = []

    def __call__(self, direction: str, frame: bytes) -> None:
        if direction == "recv":
            self.read.append((json.loads(frame).get("id"), trio.lowlevel.current_task()))

    def reader_of(self, request_id: Any) -> trio.lowlevel.Task:
        (task,) = [task for rid, task in self.read if rid == request_id]
        return task


@asynccontextmanager
async def over_a_websocket(
    kind: str, callers_read_replies: bool = True
) -> AsyncIterator[tuple[Connection, WebSocket, Readers]]:
    """A connection over our client WebSocket, and the server WebSocket the
    test speaks through."""
    readers = Readers()
    config = ConnectionConfig(trace=readers, callers_read_replies=callers_read_replies)
    async with stream_pair(kind) as (ours, theirs), trio.open_nursery() as nursery:
        client = WebSocket(ours, client=True, max_message_size=1 << 20)
        server = WebSocket(theirs, client=False, max_message_size=1 << 20)
        await nursery.start(client.run_writer)
        await nursery.start(server.run_writer)
        stream = WebSocketMessages(client, 1 << 20)
        async with open_connection(stream, Handler(), config=config) as conn:
            yield conn, server, readers
            # The server answers the closing handshake.
            nursery.start_soon(drain, server)
        nursery.cancel_scope.cancel()


async def drain(server: WebSocket) -> None:
    """Read (and drop) until the WebSocket closes."""
    with contextlib.suppress(WebSocketClosed):
        while True:
            await server.get_message()


async def answer(server: WebSocket, result: Any) -> Any:
    """Answer the next request; its id."""
    request = json.loads(await server.get_message())
    await server.send_text(
        json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": result}).encode()
    )
    return request["id"]


@pytest.mark.parametrize("kind", ["memory", "socketpair"])
@pytest.mark.parametrize("callers_read_replies", [True, False])
async def test_a_caller_reads_its_own_reply(kind: str, callers_read_replies: bool) -> None:
    with trio.fail_after(LIMIT):
        async with over_a_websocket(kind, callers_read_replies) as (conn, server, readers):
            caller: list[trio.lowlevel.Task] = []

            async def calls() -> None:
                caller.append(trio.lowlevel.current_task())
                for n in range(3):
                    assert await conn.call("m", {"n": n}) == n

            async with trio.open_nursery() as nursery:
                nursery.start_soon(calls)
                for n in range(3):
                    assert await answer(server, n) == n
        # The first reply wakes the caller from the reader task; the next
        # ones (the reader parked) the caller reads itself.
        assert readers.reader_of(0) is not caller[0]
        if callers_read_replies:
            assert readers.reader_of(1) is caller[0]
            assert readers.reader_of(2) is caller[0]
        else:
            assert readers.reader_of(2) is not caller[0]


async def one_answered_then_one_not(conn: Connection, outcome: list[BaseException]) -> None:
    """Call ``first`` (answered, so the reader parks), then a call never
    answered, read by this task itself; what ends it goes to ``outcome``."""
    assert await conn.call("first") == "one"
    try:
        await conn.call("never answered")
    except ConnectionClosed as exc:
        outcome.append(exc)


@pytest.mark.parametrize("kind", ["memory", "socketpair"])
async def test_closing_while_a_caller_reads_ends_its_call(kind: str) -> None:
    with trio.fail_after(LIMIT):
        async with over_a_websocket(kind) as (conn, server, _):
            outcome: list[BaseException] = []
            async with trio.open_nursery() as nursery:
                nursery.start_soon(one_answered_then_one_not, conn, outcome)
                await answer(server, "one")
                request = json.loads(await server.get_message())
                assert request["method"] == "never answered"
                await trio.testing.wait_all_tasks_blocked()  # the caller reads
                nursery.start_soon(drain, server)
                await conn.aclose()
            assert len(outcome) == 1
            assert "closed locally" in str(outcome[0])
            assert conn.closed


async def test_a_caller_reading_is_interrupted_when_the_peer_never_answers_the_close(
    autojump_clock: Any,
) -> None:
    # The connection wakes the reading caller as it closes: closing does not
    # wait out the closing handshake's timeout for it.
    with trio.fail_after(LIMIT):
        async with over_a_websocket("memory") as (conn, server, _):
            outcome: list[BaseException] = []
            async with trio.open_nursery() as nursery:
                nursery.start_soon(one_answered_then_one_not, conn, outcome)
                await answer(server, "one")
                await server.get_message()
                await trio.testing.wait_all_tasks_blocked()  # the caller reads
                start = trio.current_time()
                await conn.aclose()  # the server reads nothing more
                assert trio.current_time() - start < 1
            assert len(outcome) == 1
