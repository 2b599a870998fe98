"""Version routers: one agent entry point for v1 and v2 clients, and a client
that offers v2 and falls back to v1.

Agent side (:func:`serve_router`, :func:`run_router`): the router reads the
connection's first frames itself, up to the first valid ``initialize``.
Before it, every other request is answered ``-32600``, a JSON array (a batch)
one ``-32600`` with ``id: null``, unparsable JSON ``-32700``, and
notifications and stray responses are dropped; nothing closes the connection.
The ``initialize`` picks the side by its ``protocolVersion`` alone, never by
the message's shape: v2 if it asks for 2 or more and a v2 agent is served,
else v1 if it asks for 1 or more and a v1 agent is served, else ``-32022``
with ``{requested, supported}`` (and the router reads on). Once chosen, the
whole connection, that ``initialize`` first, goes to that side, for good: a
repeated ``initialize`` goes there too.

Client side (:func:`open_any_agent`, :func:`open_any_spawned_agent`): ``initialize``
offers version 2; if the agent answers 1, the v1 client takes over on a fresh
connection (its own ``initialize`` carries v1 capabilities, which the first
one could not).
"""

from __future__ import annotations

import json
import os
import signal
import threading
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import attrs
import trio

from acp_trio._core._connection import Connection, ConnectionConfig
from acp_trio._core._groups import plain_exceptions
from acp_trio._exceptions import ErrorCode, UnsupportedProtocolVersion
from acp_trio._jsonrpc import DEFAULT_MAX_MESSAGE_SIZE
from acp_trio._transports import open_agent_process, open_stdio_stream
from acp_trio._typed._agent import Agent as V1AgentClass
from acp_trio._typed._agent import serve_agent as serve_agent_v1
from acp_trio._typed._agent_proxy import AgentProxy as V1AgentProxy
from acp_trio._typed._client import Client as V1Client
from acp_trio._typed._client import open_agent as open_client_v1
from acp_trio._version import __version__
from acp_trio.schema import InitializeResponse as V1InitializeResponse
from acp_trio.schema import v2 as schema_v2
from acp_trio.v2 import _agent as agent_v2
from acp_trio.v2 import _client as client_v2
from acp_trio.v2._agent import UNSUPPORTED_PROTOCOL_VERSION

__all__ = [
    "UNSUPPORTED_PROTOCOL_VERSION",
    "Negotiated",
    "choose_version",
    "open_any_spawned_agent",
    "open_any_agent",
    "run_router",
    "serve_router",
]


V1Agent = V1AgentClass | Callable[[], V1AgentClass]
V2Agent = agent_v2.Agent | Callable[[], agent_v2.Agent]


def choose_version(requested: int, supported: Sequence[int]) -> int | None:
    """The side an ``initialize`` asking for ``requested`` goes to: 2 if
    ``requested >= 2`` and 2 is served, else 1 if ``requested >= 1`` and 1
    is served, else ``None`` (answer ``-32022``)."""
    if requested >= 2 and 2 in supported:
        return 2
    if requested >= 1 and 1 in supported:
        return 1
    return None


def _error(request_id: Any, code: int, message: str, data: Any = None) -> bytes:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "error": error}).encode() + b"\n"


def _requested_version(params: Any) -> int | None:
    if not isinstance(params, dict):
        return None
    version = params.get("protocolVersion")
    if isinstance(version, bool) or not isinstance(version, int) or not 0 <= version <= 65535:
        return None
    return version


def route_frame(frame: bytes, supported: Sequence[int]) -> tuple[int | None, bytes | None]:
    """One frame read before the choice: ``(version, None)`` for the
    ``initialize`` that chooses, else ``(None, reply or None)``."""
    try:
        message = json.loads(frame)
    except (ValueError, UnicodeDecodeError):
        return None, _error(None, ErrorCode.PARSE_ERROR, "Parse error")
    if isinstance(message, list):
        return None, _error(
            None, ErrorCode.INVALID_REQUEST, "Invalid request: batches are not supported"
        )
    if not isinstance(message, dict):
        return None, _error(None, ErrorCode.INVALID_REQUEST, "Invalid request")
    method = message.get("method")
    request_id = message.get("id")
    if method is None or "id" not in message:
        return None, None  # a response or a notification: nothing to answer
    if isinstance(request_id, bool) or not isinstance(request_id, int | str):
        return None, _error(None, ErrorCode.INVALID_REQUEST, "Invalid request id")
    if method != "initialize":
        return None, _error(
            request_id, ErrorCode.INVALID_REQUEST, "Invalid request: initialize first"
        )
    requested = _requested_version(message.get("params"))
    if requested is None:
        return None, _error(
            request_id, ErrorCode.INVALID_PARAMS, "Invalid params: protocolVersion must be 0..65535"
        )
    version = choose_version(requested, supported)
    if version is None:
        data = {"requested": requested, "supported": sorted(supported)}
        return None, _error(
            request_id, UNSUPPORTED_PROTOCOL_VERSION, "Unsupported protocol version", data
        )
    return version, None


class _ReplayStream(trio.abc.Stream):
    """``stream`` with ``prefix`` read back first."""

    def __init__(self, stream: trio.abc.Stream, prefix: bytes) -> None:
        self._stream = stream
        self._prefix = prefix

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        if self._prefix:
            n = len(self._prefix) if max_bytes is None else max_bytes
            data, self._prefix = self._prefix[:n], self._prefix[n:]
            await trio.lowlevel.checkpoint()
            return data
        return await self._stream.receive_some(max_bytes)

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self._stream.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self._stream.wait_send_all_might_not_block()

    async def aclose(self) -> None:
        await self._stream.aclose()


async def _read_until_initialize(
    stream: trio.abc.Stream, supported: Sequence[int], limit: int
) -> tuple[int, bytes] | None:
    """Answer what comes before the choosing ``initialize``; return the
    chosen version and everything read from that ``initialize`` on, or
    ``None`` at end of input."""
    buffer = bytearray()
    skipping = False  # inside an oversized frame: drop up to its newline
    while True:
        newline = buffer.find(b"\n")
        if newline < 0:
            if len(buffer) > limit:
                if not skipping:
                    await stream.send_all(
                        _error(None, ErrorCode.INVALID_REQUEST, "Invalid request: too large")
                    )
                skipping = True
                buffer.clear()
            data = await stream.receive_some()
            if not data:
                return None
            buffer += data
            continue
        frame = bytes(buffer[:newline]).strip()
        if skipping:
            skipping = False
            del buffer[: newline + 1]
            continue
        if not frame:
            del buffer[: newline + 1]
            continue
        version, reply = route_frame(frame, supported)
        if version is not None:
            return version, bytes(buffer)
        del buffer[: newline + 1]
        if reply is not None:
            await stream.send_all(reply)


async def serve_router(
    stream: trio.abc.Stream,
    *,
    v1: V1Agent | None = None,
    v2: V2Agent | None = None,
    config: ConnectionConfig | None = None,
    task_status: trio.TaskStatus[Connection | None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve a v1 agent and/or a v2 agent (each an object or a factory) on
    ``stream``: the first valid ``initialize`` chooses the side by its
    protocol version (see the module doc), which then serves the whole
    connection until it closes; ``task_status.started()`` gets that
    connection once chosen, or ``None`` if the input ends before any
    ``initialize`` chose (then this returns). Cancelling it closes the
    stream (after the choice: the connection, running requests answered
    ``-32800``)."""
    if v1 is None and v2 is None:
        raise ValueError("serve_router needs a v1 agent, a v2 agent or both")
    supported = [n for n, side in ((1, v1), (2, v2)) if side is not None]
    limit = (config.max_message_size if config is not None else None) or DEFAULT_MAX_MESSAGE_SIZE
    try:
        chosen = await _read_until_initialize(stream, supported, limit)
    except BaseException:
        await trio.aclose_forcefully(stream)
        raise
    if chosen is None:
        await trio.aclose_forcefully(stream)
        task_status.started(None)
        return
    version, rest = chosen
    replay = _ReplayStream(stream, rest)
    if version == 2:
        assert v2 is not None
        await agent_v2.serve_agent(v2, replay, config=config, task_status=task_status)
    else:
        assert v1 is not None
        await serve_agent_v1(v1, replay, config=config, task_status=task_status)


async def run_router(
    *,
    v1: V1Agent | None = None,
    v2: V2Agent | None = None,
    config: ConnectionConfig | None = None,
    handle_signals: bool = True,
) -> None:
    """:func:`serve_router` on this process's stdin and stdout, until the
    client closes them; cancelling it closes the connection (running
    requests answered ``-32800``).

    With ``handle_signals`` (and called from the main thread), SIGTERM and
    SIGINT shut down in order, as :func:`acp_trio.run_agent` does: the
    connection is closed (running requests answered ``-32800``, output
    flushed), then this returns; after SIGINT it raises ``KeyboardInterrupt``.
    """
    received: list[int] = []
    chosen = _Chosen()
    with plain_exceptions():
        async with open_stdio_stream() as stream, trio.open_nursery() as nursery:
            if handle_signals and threading.current_thread() is threading.main_thread():
                await nursery.start(_close_on_signal, chosen, received, nursery.cancel_scope)
            await serve_router(stream, v1=v1, v2=v2, config=config, task_status=chosen)
            nursery.cancel_scope.cancel()
    if signal.SIGINT in received:
        raise KeyboardInterrupt


class _Chosen:
    """A task status that keeps the connection the router chose."""

    connection: Connection | None = None

    def started(self, value: Connection | None = None) -> None:
        self.connection = value


async def _close_on_signal(
    chosen: _Chosen,
    received: list[int],
    reading: trio.CancelScope,
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        task_status.started()
        async for signum in signals:
            received.append(signum)
            if chosen.connection is None:
                reading.cancel()  # still before the choice: stop reading
            else:
                chosen.connection.close_soon()


@attrs.frozen
class Negotiated:
    """The outcome of :func:`open_any_agent`: the version spoken, the proxy
    to the agent (a :class:`acp_trio.v2.AgentProxy` for 2, an
    :class:`acp_trio.AgentProxy` for 1) and the agent's ``initialize``
    answer."""

    version: int
    agent: client_v2.AgentProxy | V1AgentProxy
    initialize: schema_v2.InitializeResponse | V1InitializeResponse


@asynccontextmanager
async def open_any_agent(
    connect: Callable[[], AbstractAsyncContextManager[trio.abc.Stream]],
    v2: client_v2.Client,
    v1: V1Client | None = None,
    *,
    info: schema_v2.Implementation | None = None,
    config: ConnectionConfig | None = None,
) -> AsyncIterator[Negotiated]:
    """Connect (``connect()`` gives a stream, e.g. a spawned agent's),
    offer protocol version 2 with the ``v2`` client, and, if the agent
    answers version 1 and a ``v1`` client is given, continue with it on a
    fresh connection (``connect()`` again). Raises
    :class:`~acp_trio.UnsupportedProtocolVersion` if no version fits. Leaving
    the block, also by an exception or a cancellation, closes the connection
    (and whatever ``connect()`` opened)."""
    params = schema_v2.InitializeRequest(
        protocol_version=schema_v2.PROTOCOL_VERSION,
        info=info or schema_v2.Implementation(name="acp_trio", version=__version__),
        capabilities=v2.capabilities(),
    )
    answered: int | None = None
    async with connect() as stream, client_v2.open_agent(v2, stream, config=config) as agent:
        try:
            result = await agent.initialize(params)
        except UnsupportedProtocolVersion as exc:
            answered = exc.version
        else:
            yield Negotiated(2, agent, result)
            return
    if answered != 1 or v1 is None:
        raise UnsupportedProtocolVersion(answered, schema_v2.PROTOCOL_VERSION)
    async with connect() as stream, open_client_v1(v1, stream, config=config) as agent1:
        result1 = await agent1.initialize()
        yield Negotiated(1, agent1, result1)


@asynccontextmanager
async def open_any_spawned_agent(
    command: Sequence[str],
    v2: client_v2.Client,
    v1: V1Client | None = None,
    *,
    cwd: str | os.PathLike[str] | None = None,
    env: dict[str, str] | None = None,
    config: ConnectionConfig | None = None,
) -> AsyncIterator[Negotiated]:
    """:func:`open_any_agent` with a spawned agent ``command`` (spawned
    again for a v1 fallback). Leaving the block, also by an exception or a
    cancellation, closes the connection and stops the process."""

    @asynccontextmanager
    async def connect() -> AsyncIterator[trio.abc.Stream]:
        async with open_agent_process(command, cwd=cwd, env=env) as process:
            yield process.stream

    async with open_any_agent(connect, v2, v1, config=config) as negotiated:
        yield negotiated
