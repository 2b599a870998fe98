"""The three ways to run a :class:`~acp_trio._core._connection.Connection`,
in Trio's vocabulary: ``serve_connection`` runs until the connection closes
(readiness through ``task_status``), ``connect_connection`` starts it in the
caller's nursery, ``open_connection`` owns its tasks for an ``async with``
block."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import trio

from acp_trio._core._connection import Connection, HandlerArg
from acp_trio._core._framed import FramedStream
from acp_trio._core._groups import plain_exceptions
from acp_trio._core._handler import ConnectionConfig
from acp_trio._core._message_stream import MessageStream

__all__ = ["connect_connection", "open_connection", "serve_connection"]


async def serve_connection(
    stream: trio.abc.Stream | FramedStream | MessageStream,
    handler: HandlerArg = None,
    *,
    config: ConnectionConfig | None = None,
    task_status: trio.TaskStatus[Connection] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run a connection until it closes; report it through ``task_status``.
    Errors come out as one plain exception, never an ``ExceptionGroup``.

    Cancelling the call closes the connection: running handlers are
    cancelled and answered ``-32800``, pending calls fail with
    :class:`ConnectionClosed`, queued output is flushed (bounded by
    ``close_timeout``), then ``trio.Cancelled`` propagates.
    """
    with plain_exceptions():
        await Connection(stream, handler, config).serve(task_status=task_status)


async def connect_connection(
    nursery: trio.Nursery,
    stream: trio.abc.Stream | FramedStream | MessageStream,
    handler: HandlerArg = None,
    *,
    config: ConnectionConfig | None = None,
) -> Connection:
    """Start a connection in the caller's ``nursery`` and return it, once
    it runs. It lives until it closes or ``nursery`` is cancelled, which
    closes it as :meth:`Connection.aclose` does; cancelling this call while
    it starts the connection stops it again.
    """
    conn: Connection = await nursery.start(Connection(stream, handler, config).serve)
    return conn


@asynccontextmanager
async def open_connection(
    stream: trio.abc.Stream | FramedStream | MessageStream,
    handler: HandlerArg = None,
    *,
    config: ConnectionConfig | None = None,
) -> AsyncIterator[Connection]:
    """A connection that lives as long as the ``async with`` block.

    Leaving the block, also by an exception or a cancellation, closes it
    (see :meth:`Connection.aclose`: handlers cancelled and answered
    ``-32800``, pending calls failed, output flushed, bounded). Errors come
    out as one plain exception, never an ``ExceptionGroup`` of one.

    It is the block that ends the connection, not a cancel of the scope
    around it: when that scope is cancelled, the block's own cleanup (a
    turn's ``session/cancel`` and its bounded wait for the answer, say)
    still talks over a working connection, and the connection closes once
    the block is left. (Otherwise its reader, writer and handlers, cancelled
    at the same moment as the block, would race the cleanup and fail its
    calls first.)
    """
    with plain_exceptions():
        async with trio.open_nursery() as nursery:
            conn = Connection(stream, handler, config)
            await nursery.start(_serve_until_closed, conn)
            try:
                yield conn
            finally:
                conn.close_soon()


async def _serve_until_closed(
    conn: Connection, *, task_status: trio.TaskStatus[Connection] = trio.TASK_STATUS_IGNORED
) -> None:
    # Shielded: only close_soon() (the block left, or the peer gone) ends
    # it, and closing is bounded by close_timeout.
    with trio.CancelScope(shield=True):
        await conn.serve(task_status=task_status)
