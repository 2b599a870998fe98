"""Bridges for the command line: a remote connection to a stdio agent
process (``serve``), and stdio to a remote agent (``connect``). Messages
pass through unchanged (ids, cancellation and all)."""

from __future__ import annotations

import functools
import logging
import os
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence

import trio

from acp_trio._core._framed import FramedStream
from acp_trio._core._message_stream import MessageStream
from acp_trio._exceptions import RequestError
from acp_trio._jsonrpc import OversizedFrame, dropped_reply
from acp_trio._jsonrpc._messages import (
    InvalidMessage,
    decode_frame,
    encode_frame,
    error_response,
)
from acp_trio._transports import open_agent_process
from acp_trio._transports._stdio import open_stdio_stream
from acp_trio.remote._app import RemoteApp
from acp_trio.remote._limits import DEFAULT_MAX_MESSAGE_SIZE, REMOTE_MAX_MESSAGE_SIZE, ServerLimits
from acp_trio.remote._serve import Profile, open_remote_stream, serve_remote

__all__ = ["bridge", "connect_bridge", "connect_stdio", "serve_command"]

_log = logging.getLogger("acp_trio.remote")

#: The environment variable ``serve`` and ``connect`` read the token from;
#: never passed on to an agent.
TOKEN_ENV = "ACP_TRIO_TOKEN"


async def bridge(messages: MessageStream, framed: FramedStream) -> None:
    """Pass messages both ways between ``messages`` and the NDJSON stream
    ``framed`` until either side ends. A message over the cap on either
    side is dropped (and logged); one that ``messages`` dropped (over the
    cap, or refused for its JSON structure) is answered on ``messages``
    when it is a request, as a connection answers it."""
    async with trio.open_nursery() as nursery:

        async def outward() -> None:
            while (frame := await next_line(framed)) is not None:
                await messages.send_message(frame)
            nursery.cancel_scope.cancel()

        async def answer(reply: bytes) -> None:
            await messages.send_message(reply[:-1])

        nursery.start_soon(inward, messages, framed.send_frames, nursery.cancel_scope, None, answer)
        nursery.start_soon(outward)


async def next_line(framed: FramedStream) -> bytes | None:
    """The next line ``framed`` reads (``None`` at its end), a line over
    the cap dropped (and logged)."""
    while True:
        frame = await framed.receive_frame()
        if not isinstance(frame, OversizedFrame):
            return frame
        _log.warning("dropped %d bytes (cap %d)", frame.size, frame.limit)


async def inward(
    messages: MessageStream,
    write: Callable[[bytes], Awaitable[None]],
    done: trio.CancelScope,
    written: Callable[[bytes], bool] | None = None,
    answer: Callable[[bytes], Awaitable[None]] | None = None,
) -> None:
    """Write each message ``messages`` gives as a line (``write``), a
    message over the cap dropped (and logged; with ``answer``, a request's
    refusal given to it), until ``messages`` ends or ``written(message)``,
    asked once each is written, says the bridge is done; then cancel
    ``done``."""
    while True:
        message = await messages.receive_message()
        if message is None:
            break
        if isinstance(message, OversizedFrame):
            _log.warning("dropped a message of %d bytes (cap %d)", message.size, message.limit)
            reply = dropped_reply(message) if answer is not None else None
            if reply is not None:
                assert answer is not None
                await answer(reply)
            continue
        await write(message + b"\n")
        if written is not None and written(message):
            break
    done.cancel()


async def connect_bridge(messages: MessageStream, framed: FramedStream) -> None:
    """:func:`bridge` for ``connect``: ``framed`` is an editor's stdio, and
    ``messages`` a remote agent. When stdin ends, every reply still owed to
    the editor's requests is delivered before the bridge ends (as a local
    agent answers what it read before its stdin closed). A line that is not
    JSON is answered ``-32700``, a JSON value that is not a message object
    ``-32600`` (``id: null``), here, as a local agent would, and the bridge
    goes on: a Streamable HTTP server refuses such a body with a ``400``
    that would otherwise end it."""
    owed: set[tuple[bool, object]] = set()  # (is a string, id): exact ids
    writing = trio.Lock()  # (both directions write to stdout)
    stdin_done = False

    async def write(frame: bytes) -> None:
        async with writing:
            await framed.send_frames(frame)

    def written(message: bytes) -> bool:
        # A reply owed, once written, is no longer owed (only then: the
        # bridge may end when none is); whether the bridge is done.
        if owed:
            value = decode_frame(message)
            if type(value) is dict and "method" not in value:
                reply_id = value.get("id")
                owed.discard((isinstance(reply_id, str), reply_id))
                return stdin_done and not owed
        return False

    async with trio.open_nursery() as nursery:

        async def outward() -> None:
            nonlocal stdin_done
            while (frame := await next_line(framed)) is not None:
                value = decode_frame(frame)
                if type(value) is InvalidMessage:
                    await write(encode_frame(error_response(None, value.error)))
                    continue
                if type(value) is not dict:
                    error = RequestError.invalid_request("not a JSON-RPC message object")
                    await write(encode_frame(error_response(None, error)))
                    continue
                request_id = value.get("id")
                if isinstance(value.get("method"), str) and type(request_id) in (int, str):
                    owed.add((isinstance(request_id, str), request_id))
                await messages.send_message(frame)
            stdin_done = True
            if not owed:
                nursery.cancel_scope.cancel()

        nursery.start_soon(inward, messages, write, nursery.cancel_scope, written)
        nursery.start_soon(outward)


def agent_environment() -> dict[str, str]:
    """Our environment without the token: an agent, and all it runs, never
    sees it."""
    return {key: value for key, value in os.environ.items() if key != TOKEN_ENV}


async def _serve_one(command: Sequence[str], max_message_size: int, stream: MessageStream) -> None:
    async with open_agent_process(command, env=agent_environment()) as process:
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
    max_message_size: int = REMOTE_MAX_MESSAGE_SIZE,
    idle_timeout: float | None = 300.0,
    limits: ServerLimits | None = None,
    task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve the stdio agent ``command`` over both profiles: one agent
    process per ACP connection (at most ``limits.max_agents``), stopped when
    it ends (DELETE, WebSocket closed, ``idle_timeout`` without a request or
    an open stream, server stopped). The agent's environment is ours
    without ``ACP_TRIO_TOKEN``."""
    app = RemoteApp(
        functools.partial(_serve_one, list(command), max_message_size),
        max_message_size=max_message_size,
        token=token,
        allowed_origins=allowed_origins,
        idle_timeout=idle_timeout,
        limits=limits,
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
    agent at ``url`` until either side ends. The editor closing its end of
    our stdout (it quit, or stopped reading) ends the bridge too, normally:
    what was still on its way to the editor has nobody to read it."""
    try:
        async with (
            open_remote_stream(
                url,
                profile=profile,
                max_message_size=max_message_size,
                token=token,
                headers=headers,
            ) as stream,
            open_stdio_stream() as stdio,
        ):
            out = _EditorOutput(stdio)
            framed = FramedStream(out, stdio, max_message_size=max_message_size)
            await connect_bridge(stream, framed)
    except* _EditorGone:
        pass
    sys.stdout.flush()


class _EditorGone(Exception):
    """Our stdout's reader is gone: the editor ended the session."""


class _EditorOutput(trio.abc.SendStream):
    """``connect``'s stdout: a write to a pipe whose reader is gone raises
    :class:`_EditorGone` (not a failure of the remote connection)."""

    def __init__(self, stream: trio.abc.SendStream) -> None:
        self._stream = stream

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        try:
            await self._stream.send_all(data)
        except trio.BrokenResourceError as exc:
            raise _EditorGone from exc

    async def wait_send_all_might_not_block(self) -> None:
        await self._stream.wait_send_all_might_not_block()

    async def aclose(self) -> None:
        await self._stream.aclose()
