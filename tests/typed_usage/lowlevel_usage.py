"""Type-checked by ``make typecheck`` (``mypy --strict``), run by
``tests/connection/test_connection_api.py``: a handler that uses the
connection its request arrived on (``ctx.connection``, a
``ConnectionAPI``) for all a handler does with it, with no cast or ignore;
and a ``Connection`` is a ``ConnectionAPI``."""

from __future__ import annotations

from typing import Any

import trio

from acp_trio import ConnectionClosed
from acp_trio.lowlevel import (
    Connection,
    ConnectionAPI,
    ConnectionStatistics,
    Handler,
    RequestContext,
    RequestNode,
)


def as_api(conn: Connection) -> ConnectionAPI:
    """A Connection is what a handler sees of it."""
    return conn


async def report(conn: ConnectionAPI) -> dict[str, Any]:
    """Code of one's own that takes the connection a request arrived on."""
    stats: ConnectionStatistics = conn.statistics()
    tree: list[RequestNode] = conn.request_tree()
    closing: ConnectionClosed | None = conn.closed_error() if conn.closed else None
    return {
        "incoming": stats.incoming_in_flight,
        "tree": [node.method for node in tree],
        "dump": conn.dump_request_tree().splitlines()[0],
        "closing": closing,
    }


class ForwardingHandler(Handler):
    """Answers ``ask`` by asking the peer ``inner`` every way a handler can."""

    def __init__(self) -> None:
        self.ran_in_order = trio.Event()

    async def handle_request(self, ctx: RequestContext, method: str, params: Any) -> Any:
        if method != "ask":
            return {"echo": params}
        conn = ctx.connection
        first = await conn.call("inner", {"n": 1})
        pending = await conn.send_request("inner", {"n": 2})
        second = await pending.result()
        async with conn.open_request("inner", {"n": 3}) as opened:
            third = await opened.result()
        await conn.notify("note", {"n": 1})
        conn.notify_nowait("note", {"n": 2})
        assert conn.notify_past_limit_nowait("note", {"n": 3})

        async def in_order() -> None:
            self.ran_in_order.set()

        assert conn.run_in_notification_order_soon(in_order)
        conn.start_soon(trio.sleep, 0, name="a task of the connection's")
        assert not conn.fail_request(10**6, ConnectionClosed("no such request"))
        return {"answers": [first, second, third], "report": await report(conn)}
