"""A cancelled fan-out over pipes writes its cancels, and the peer its
``-32800`` replies, in a few writes, not one write per frame; every request
is still cancelled on the wire and answered exactly once."""

from __future__ import annotations

import os
from collections import Counter
from typing import Any

import pytest
import trio
import trio.testing

from acp_trio import ConnectionConfig
from acp_trio.lowlevel import Connection, RequestContext, open_connection

from .conftest import FnHandler, Wire, pipe_stream_pair, sleep_forever_handler

N = 200


def idle(conn: Connection) -> bool:
    stats = conn.statistics()
    return stats.incoming_in_flight + stats.outgoing_pending == 0


async def test_a_cancelled_fan_out_writes_in_bursts(monkeypatch: pytest.MonkeyPatch) -> None:
    writes: Counter[int] = Counter()
    real_write = os.write

    def counting_write(fd: int, data: Any) -> int:
        writes[fd] += 1
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", counting_write)

    async def fan(ctx: RequestContext, params: Any) -> Any:
        async with trio.open_nursery() as nursery:
            for _ in range(N):
                nursery.start_soon(ctx.connection.call, "hold", None)

    client_wire, agent_wire = Wire(), Wire()
    client_stream, agent_stream = pipe_stream_pair()
    client_fd = client_stream.send_stream.fileno()
    agent_fd = agent_stream.send_stream.fileno()
    client_handler = FnHandler({"hold": sleep_forever_handler})
    async with (
        open_connection(
            client_stream, client_handler, config=ConnectionConfig(trace=client_wire)
        ) as client,
        open_connection(
            agent_stream, FnHandler({"fan": fan}), config=ConnectionConfig(trace=agent_wire)
        ) as agent,
    ):
        with trio.move_on_after(5):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(client.call, "fan", None)
                while client.statistics().incoming_in_flight < N:  # noqa: ASYNC110
                    await trio.sleep(0.001)
                await trio.testing.wait_all_tasks_blocked()
                writes.clear()
                nursery.cancel_scope.cancel()
        with trio.fail_after(5):
            while not (idle(client) and idle(agent)):  # noqa: ASYNC110
                await trio.sleep(0.001)
        assert client_handler.running == 0
    # Every nested call was cancelled on the wire and answered -32800, once.
    cancels = agent_wire.sent_cancels()
    assert sorted(cancels) == sorted(set(cancels))
    assert len(cancels) == N
    replies = client_wire.sent_responses()
    assert sorted(m["id"] for m in replies) == sorted(cancels)
    assert all(m["error"]["code"] == -32800 for m in replies)
    # The agent's N cancels (and its one -32800), the client's cancel and N
    # replies: a handful of writes each way, not one per frame.
    assert writes[agent_fd] <= 4, writes
    assert writes[client_fd] <= 8, writes
