"""Bridges for the command line: a remote connection to a stdio agent
process (``serve``), and stdio to a remote agent (``connect``). Messages
pass through unchanged (ids, cancellation and all)."""

from __future__ import annotations

import functools
import logging
import sys
from collections.abc import Mapping, Sequence

import trio

from acp_trio._core._framed import FramedStream
from acp_trio._core._message_stream import MessageStream
from acp_trio._jsonrpc import OversizedFrame
from acp_trio._transports import open_agent_process
from acp_trio._transports._stdio import open_stdio_stream
from acp_trio.remote._app import RemoteApp
from acp_trio.remote._limits import DEFAULT_MAX_MESSAGE_SIZE
from acp_trio.remote._serve import Profile, open_remote_stream, serve_remote

__all__ = ["bridge", "connect_stdio", "serve_command"]

_log = logging.getLogger("acp_trio.remote")


async def bridge(messages: MessageStream, framed: FramedStream) -> None:
    """Pass messages both ways between ``messages`` and the NDJSON stream
    ``framed`` until either side ends. A message over the cap on either
    side is dropped (and logged)."""
    async with trio.open_nursery() as nursery:

        async def inward() -> None:
            while True:
                message = await messages.receive_message()
                if message is None:
                    break
                if isinstance(message, OversizedFrame):
                    _log.warning(
                        "dropped a message of %d bytes (cap %d)", message.size, message.limit
                    )
                    continue
                await framed.send_frames(message + b"\n")
            nursery.cancel_scope.cancel()

        async def outward() -> None:
            while True:
                frame = await framed.receive_frame()
                if frame is None:
                    break
                if isinstance(frame, OversizedFrame):
                    _log.warning("dropped %d bytes (cap %d)", frame.size, frame.limit)
                    continue
                await messages.send_message(frame)
            nursery.cancel_scope.cancel()

        nursery.start_soon(inward)
        nursery.start_soon(outward)


async def _serve_one(command: Sequence[str], max_message_size: int, stream: MessageStream) -> None:
    async with open_agent_process(command) as process:
        framed = FramedStream(process.stream, process.stream, max_message_size=max_message_size)
        try:
            await bridge(stream, framed)
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            _log.info("connection ended: %s", exc)


async def serve_command(
    command: Sequence[str],
    host: str,
    port: int,
    *,
    allow_remote: bool = False,
    token: str | None = None,
    allowed_origins: Sequence[str] = (),
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
    idle_timeout: float | None = 300.0,
    task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve the stdio agent ``command`` over both profiles: one agent
    process per ACP connection, stopped when it ends (DELETE, WebSocket
    closed, ``idle_timeout`` without a request or an open stream, server
    stopped)."""
    app = RemoteApp(
        functools.partial(_serve_one, list(command), max_message_size),
        max_message_size=max_message_size,
        token=token,
        allowed_origins=allowed_origins,
        idle_timeout=idle_timeout,
    )
    await serve_remote(app, port, host=host, allow_remote=allow_remote, task_status=task_status)


async def connect_stdio(
    url: str,
    *,
    profile: Profile = "auto",
    token: str | None = None,
    headers: Mapping[str, str] | None = None,
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
) -> None:
    """Bridge this process's stdio (an editor speaking ACP) to the remote
    agent at ``url`` until either side ends."""
    async with (
        open_remote_stream(
            url, profile=profile, max_message_size=max_message_size, token=token, headers=headers
        ) as stream,
        open_stdio_stream() as stdio,
    ):
        framed = FramedStream(stdio, stdio, max_message_size=max_message_size)
        await bridge(stream, framed)
    sys.stdout.flush()
