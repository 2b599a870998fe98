"""Every async method of a connection is a checkpoint (Trio's rule: it checks
for cancellation and yields to the scheduler), whatever the state of its
queues."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from .conftest import LIMIT, FnHandler, echo_handler, raw_connection, req


async def test_notify_is_a_checkpoint_every_time(autojump_clock: Any) -> None:
    with trio.fail_after(LIMIT):
        async with raw_connection() as (conn, peer, _):
            for n in range(200):  # more than the outbox's batch between yields
                with trio.testing.assert_checkpoints():
                    await conn.notify("note", {"n": n})
            frames = [await peer.receive() for _ in range(200)]
            assert [f["params"]["n"] for f in frames] == list(range(200))


async def test_notify_raises_cancelled_at_once_when_cancelled(autojump_clock: Any) -> None:
    with trio.fail_after(LIMIT):
        async with raw_connection() as (conn, peer, wire):
            with trio.CancelScope() as scope:
                scope.cancel()
                with pytest.raises(trio.Cancelled):
                    await conn.notify("never")
            await peer.expect_silence(5)
            assert wire.sent() == []


async def test_call_and_aclose_are_checkpoints(autojump_clock: Any) -> None:
    with trio.fail_after(LIMIT):
        async with raw_connection(FnHandler({"echo": echo_handler})) as (conn, peer, _):
            async with trio.open_nursery() as nursery:

                async def answer() -> None:
                    assert await peer.receive() == req(0, "x")
                    await peer.send({"jsonrpc": "2.0", "id": 0, "result": 1})

                nursery.start_soon(answer)
                with trio.testing.assert_checkpoints():
                    assert await conn.call("x") == 1
            with trio.testing.assert_checkpoints():
                await conn.aclose()
            with trio.testing.assert_checkpoints():
                await conn.aclose()  # already closed
