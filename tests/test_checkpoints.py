"""Every public async method of :class:`Connection`, :class:`PendingRequest`
and :class:`WebSocket` is a checkpoint (Trio's rule: it checks for
cancellation and yields to the scheduler), also where it could return at
once: a reply already in, a message already read, nothing left to write, a
connection already closed.

The cases are listed by name; a test checks that they name every public
async method of the three classes, so a new one needs a case."""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
import trio.testing

from acp_trio import RequestError
from acp_trio.lowlevel import Connection, Handler, PendingRequest, RequestContext
from acp_trio.remote import WebSocket, WebSocketClosed

LIMIT = 60


class _Peer(Handler):
    """Answers ``echo`` at once; ``slow`` only when cancelled (``-32800``)."""

    async def handle_request(self, ctx: RequestContext, method: str, params: Any) -> Any:
        if method == "slow":
            await trio.sleep_forever()
        return params


@asynccontextmanager
async def _pair() -> AsyncIterator[Connection]:
    """Our connection, facing a connection that runs :class:`_Peer`."""
    ours, theirs = trio.testing.memory_stream_pair()
    async with trio.open_nursery() as nursery:
        conn = Connection(ours)
        peer = Connection(theirs, _Peer())
        await nursery.start(conn.serve)
        await nursery.start(peer.serve)
        yield conn
        await conn.aclose()
        await peer.aclose()


@asynccontextmanager
async def _websockets() -> AsyncIterator[tuple[WebSocket, WebSocket]]:
    """A client WebSocket and the server WebSocket facing it, writers running."""
    ours, theirs = trio.testing.memory_stream_pair()
    async with trio.open_nursery() as nursery:
        client = WebSocket(ours, client=True, max_message_size=1 << 20)
        server = WebSocket(theirs, client=False, max_message_size=1 << 20)
        await nursery.start(client.run_writer)
        await nursery.start(server.run_writer)
        yield client, server
        nursery.cancel_scope.cancel()


async def _in_a_task(
    run: Callable[[], Awaitable[object]], stop: Callable[[trio.Nursery], object]
) -> None:
    """``await run()`` in a task of its own, checked there, until ``stop``
    (called once every task waits) ends it."""

    async def checked() -> None:
        with trio.testing.assert_checkpoints():
            await run()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(checked)
        await trio.testing.wait_all_tasks_blocked()
        stop(nursery)


# Connection


async def connection_call() -> None:
    async with _pair() as conn:
        with trio.testing.assert_checkpoints():
            assert await conn.call("echo", {"x": 1}) == {"x": 1}


async def connection_send_request() -> None:
    async with _pair() as conn:
        with trio.testing.assert_checkpoints():
            pending = await conn.send_request("echo", [1])
        assert await pending.result() == [1]


async def connection_open_request() -> None:
    async with _pair() as conn:
        with trio.testing.assert_checkpoints():
            async with conn.open_request("echo", [2]) as pending:
                assert await pending.result() == [2]


async def connection_notify() -> None:
    async with _pair() as conn:
        for n in range(3):
            with trio.testing.assert_checkpoints():
                await conn.notify("note", {"n": n})


async def connection_aclose() -> None:
    async with _pair() as conn:
        with trio.testing.assert_checkpoints():
            await conn.aclose()
        with trio.testing.assert_checkpoints():
            await conn.aclose()  # already closed


async def connection_wait_closed() -> None:
    async with _pair() as conn:
        conn.close_soon()
        with trio.testing.assert_checkpoints():
            await conn.wait_closed()
        with trio.testing.assert_checkpoints():
            await conn.wait_closed()  # already closed


async def connection_serve() -> None:
    ours, _theirs = trio.testing.memory_stream_pair()
    conn = Connection(ours)
    await _in_a_task(conn.serve, lambda _: conn.close_soon())


# PendingRequest


async def pending_request_result() -> None:
    async with _pair() as conn:
        pending = await conn.send_request("echo", [3])
        with trio.testing.assert_checkpoints():
            assert await pending.result() == [3]
        fresh: PendingRequest = await conn.send_request("echo", [4])
        await trio.testing.wait_all_tasks_blocked()
        assert fresh.done
        with trio.testing.assert_checkpoints():
            assert await fresh.result() == [4]  # answered already


async def pending_request_cancel_and_wait() -> None:
    async with _pair() as conn:
        pending = await conn.send_request("slow")
        with trio.testing.assert_checkpoints(), pytest.raises(RequestError) as info:
            await pending.cancel_and_wait()
        assert info.value.code == -32800


# WebSocket


async def websocket_run_writer() -> None:
    ours, _theirs = trio.testing.memory_stream_pair()
    ws = WebSocket(ours, client=True, max_message_size=1 << 20)
    await _in_a_task(ws.run_writer, lambda nursery: nursery.cancel_scope.cancel())


async def websocket_send_message() -> None:
    async with _websockets() as (client, server):
        for message in ("text", b"binary"):
            with trio.testing.assert_checkpoints():
                await client.send_message(message)
            assert await server.get_message() == message


async def websocket_send_text() -> None:
    async with _websockets() as (client, server):
        with trio.testing.assert_checkpoints():
            await client.send_text(b"hello")
        assert await server.get_message() == "hello"


async def websocket_flush() -> None:
    async with _websockets() as (client, _):
        with trio.testing.assert_checkpoints():
            await client.flush()  # nothing to write
        await client.send_message("x")
        with trio.testing.assert_checkpoints():
            await client.flush()


async def websocket_get_message() -> None:
    async with _websockets() as (client, server):
        await client.send_message("one")
        await client.send_message("two")
        with trio.testing.assert_checkpoints():
            assert await server.get_message() == "one"
        with trio.testing.assert_checkpoints():
            assert await server.get_message() == "two"  # read with the first


async def websocket_aclose() -> None:
    async with _websockets() as (client, server):

        async def answer_close() -> None:
            with pytest.raises(WebSocketClosed):
                await server.get_message()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(answer_close)
            with trio.testing.assert_checkpoints():
                await client.aclose()
        with trio.testing.assert_checkpoints():
            await client.aclose()  # already closed


CASES: dict[str, Callable[[], Awaitable[None]]] = {
    "Connection.call": connection_call,
    "Connection.send_request": connection_send_request,
    "Connection.open_request": connection_open_request,
    "Connection.notify": connection_notify,
    "Connection.aclose": connection_aclose,
    "Connection.wait_closed": connection_wait_closed,
    "Connection.serve": connection_serve,
    "PendingRequest.result": pending_request_result,
    "PendingRequest.cancel_and_wait": pending_request_cancel_and_wait,
    "WebSocket.run_writer": websocket_run_writer,
    "WebSocket.send_message": websocket_send_message,
    "WebSocket.send_text": websocket_send_text,
    "WebSocket.flush": websocket_flush,
    "WebSocket.get_message": websocket_get_message,
    "WebSocket.aclose": websocket_aclose,
}


@pytest.mark.parametrize("case", sorted(CASES))
async def test_every_public_async_method_is_a_checkpoint(case: str) -> None:
    with trio.fail_after(LIMIT):
        await CASES[case]()


def _public_async_methods(cls: type) -> set[str]:
    names: set[str] = set()
    for name, value in vars(cls).items():
        if name.startswith("_"):
            continue
        function = getattr(value, "__wrapped__", value)  # asynccontextmanager
        if inspect.iscoroutinefunction(function) or inspect.isasyncgenfunction(function):
            names.add(f"{cls.__name__}.{name}")
    return names


def test_the_cases_name_every_public_async_method() -> None:
    methods = set().union(
        *(_public_async_methods(cls) for cls in (Connection, PendingRequest, WebSocket))
    )
    assert "Connection.open_request" in methods
    assert set(CASES) == methods
