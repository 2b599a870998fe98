"""TCP: for agents that listen on a port instead of speaking on stdio."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import trio

from acp_trio._core._groups import plain_exceptions

__all__ = ["open_tcp_stream", "serve_tcp"]


async def open_tcp_stream(host: str, port: int) -> trio.SocketStream:
    """Connect to an agent listening on ``host:port``.

    Raises ``OSError`` if no connection can be made. Cancelling the call
    abandons the attempt and closes any socket it opened.
    """
    return await trio.open_tcp_stream(host, port)


async def serve_tcp(
    handle: Callable[[trio.SocketStream], Awaitable[None]],
    port: int,
    *,
    host: str = "127.0.0.1",
    task_status: trio.TaskStatus[list[trio.SocketListener]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Accept connections on ``host:port`` (loopback by default), running
    ``handle(stream)`` for each in its own task; reports the listeners
    through ``task_status`` (use port 0 to pick a free port).

    To serve an agent, give :func:`~acp_trio.serve_agent` a factory, so
    that each connection has an agent of its own:
    ``serve_tcp(functools.partial(serve_agent, MyAgent), port)``. (With one
    agent object, the second connection raises ``RuntimeError``.)

    An error of ``handle`` ends the server, as one plain exception.
    Cancelling the call stops accepting and cancels every running
    ``handle`` (each serving agent then closes its connection).
    """
    with plain_exceptions():
        await trio.serve_tcp(handle, port, host=host, task_status=task_status)
