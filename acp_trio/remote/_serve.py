"""Running the app with hypercorn's Trio worker, and the typed entry points
(serve an :class:`~acp_trio.Agent`, talk to a remote agent as a
:class:`~acp_trio.Client`)."""

from __future__ import annotations

import ipaddress
from collections.abc import AsyncIterator, Callable, Collection, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Literal

import trio
from hypercorn.config import Config

from acp_trio._core._connection import ConnectionConfig
from acp_trio._core._message_stream import MessageStream
from acp_trio._typed._agent import Agent, serve_agent
from acp_trio._typed._client import AgentProxy, Client, open_agent
from acp_trio.remote._app import RemoteApp
from acp_trio.remote._front import serve_front
from acp_trio.remote._http_client import open_http_stream
from acp_trio.remote._limits import (
    DEFAULT_MAX_MESSAGE_SIZE,
    REMOTE_MAX_MESSAGE_SIZE,
    ServerLimits,
    library_limit,
)
from acp_trio.remote._reconnect import Reconnect, open_reconnecting
from acp_trio.remote._websocket import WebSocketError
from acp_trio.remote._ws_client import open_websocket_stream

__all__ = [
    "Profile",
    "agent_app",
    "open_remote_agent",
    "hypercorn_config",
    "open_remote_stream",
    "serve_remote",
]


def agent_app(
    agent: Callable[[], Agent],
    *,
    config: ConnectionConfig | None = None,
    path: str = "/acp",
    token: str | None = None,
    allowed_origins: Collection[str] = (),
    resumable: bool = False,
    limits: ServerLimits | None = None,
) -> RemoteApp:
    """An ASGI app serving a new agent from the factory ``agent`` on each
    ACP connection. The message cap is ``config.max_message_size``: by
    default (no ``config``) 16 MiB, a remote connection's cap (see
    :class:`RemoteApp`), and the requests an agent holds at once count at
    most twice that; ``resumable`` and ``limits`` as for
    :class:`RemoteApp`."""
    config = config or ConnectionConfig(max_message_size=REMOTE_MAX_MESSAGE_SIZE)

    async def handle(stream: MessageStream) -> None:
        await serve_agent(agent, stream, config=config)

    return RemoteApp(
        handle,
        path=path,
        max_message_size=config.max_message_size,
        token=token,
        allowed_origins=allowed_origins,
        resumable=resumable,
        limits=limits,
    )


def is_loopback(host: str) -> bool:
    """Whether ``host`` names only this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


#: The listen backlog of :func:`serve_remote`'s sockets.
BACKLOG = 4096


#: Seconds the server keeps an idle HTTP connection (see hypercorn_config).
KEEP_ALIVE_TIMEOUT = 30.0


def hypercorn_config(app: RemoteApp, host: str, port: int) -> Config:
    """A hypercorn configuration for ``app`` on ``host:port``, its limits
    set from the app's message cap."""
    config = Config()
    bind_host = f"[{host.strip('[]')}]" if ":" in host else host
    config.bind = [f"{bind_host}:{port}"]
    config.websocket_max_message_size = library_limit(app.max_message_size)
    config.accesslog = None
    config.graceful_timeout = 1.0
    # WebSocket pings are left to the peers (no server-initiated pings).
    config.websocket_ping_interval = None
    # Every client message is a POST on one long-lived HTTP connection, so no
    # cap on requests per connection: hypercorn's default (1000) ends an
    # HTTP/2 connection under the request that crosses it, losing that POST.
    config.keep_alive_max_requests = 2**62
    # An idle HTTP connection is kept 30 s, well past the clients' own idle
    # expiry (4 s for ours, httpx2's 5 s, Node's 4 s): with hypercorn's 5 s,
    # a client whose event loop lagged sent its next POST just as the server
    # closed the connection, and lost it to a broken pipe (h2c, 1,000
    # clients at once, benchmarks/bench_scale.py).
    config.keep_alive_timeout = KEEP_ALIVE_TIMEOUT
    # Room for bursts of connections (each Streamable HTTP client opens
    # three): with hypercorn's default (100), a busy server's accept queue
    # overflowed under 1,000 clients and the connections it dropped were
    # reset mid-request (benchmarks/bench_scale.py). The kernel caps it
    # (net.core.somaxconn).
    config.backlog = BACKLOG
    return config


async def serve_remote(
    app: RemoteApp,
    port: int = 0,
    *,
    host: str = "127.0.0.1",
    allow_remote: bool = False,
    task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ``app`` on ``host:port``: HTTP/1.1 and h2c with hypercorn's
    Trio worker, WebSocket upgrades with our own WebSocket (frames written
    in batches), all on one port, within ``app.limits`` (see
    :class:`ServerLimits`); reports the bound URLs
    (``http://127.0.0.1:PORT``) through ``task_status`` (port 0 picks a free
    port). Cancelling the call stops the server and every connection.

    Binding anything but a loopback address needs ``allow_remote=True``
    (else ``ValueError``); see the README's SECURITY section first.
    """
    if not allow_remote and not is_loopback(host):
        raise ValueError(
            f"refusing to bind {host!r}: not a loopback address (pass allow_remote=True, "
            f"and protect the server with a token)"
        )
    await serve_front(
        app, hypercorn_config(app, host, port), limits=app.limits, task_status=task_status
    )


#: Which remote profile a client uses: ``"websocket"``, ``"http"`` (Streamable
#: HTTP over HTTP/2, h2c on ``http://``), ``"http1"`` (Streamable HTTP over
#: HTTP/1.1), or ``"auto"`` (WebSocket first, then Streamable HTTP).
Profile = Literal["auto", "websocket", "http", "http1"]


@asynccontextmanager
async def open_remote_stream(
    url: str,
    *,
    profile: Profile = "auto",
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
    token: str | None = None,
    headers: Mapping[str, str] | None = None,
    resumable: bool = False,
) -> AsyncIterator[MessageStream]:
    """A message stream to the ACP server at ``url`` for the block.

    ``profile``: ``"websocket"`` (``ws://``/``wss://`` URLs, or ``http(s)://``
    turned into them), ``"http"`` (Streamable HTTP over HTTP/2, h2c on
    ``http://``), ``"http1"`` (Streamable HTTP over HTTP/1.1), or ``"auto"``:
    a ``ws(s)://`` URL is WebSocket; an ``http(s)://`` one tries WebSocket
    first and falls back to Streamable HTTP if the server refuses the
    upgrade. ``resumable``: resume a dropped SSE stream with
    ``Last-Event-ID``, a lost WebSocket with ``stream/resume`` (for a server
    serving resumable streams; see :func:`open_http_stream` and
    :func:`open_websocket_stream`).
    Leaving the block, also by an exception or a cancellation,
    closes the stream (see :func:`open_websocket_stream` and
    :func:`open_http_stream`).
    """
    ws_url = url.replace("http://", "ws://", 1).replace("https://", "wss://", 1)
    http_url = url.replace("ws://", "http://", 1).replace("wss://", "https://", 1)
    options: dict[str, Any] = {
        "max_message_size": max_message_size,
        "token": token,
        "headers": headers,
        "resumable": resumable,
    }
    if profile == "auto" and not url.startswith(("ws://", "wss://")):
        try:
            websocket = open_websocket_stream(ws_url, **options)
            stream: MessageStream = await websocket.__aenter__()
        except WebSocketError:
            profile = "http"
        else:
            try:
                yield stream
            except BaseException as exc:
                if not await websocket.__aexit__(type(exc), exc, exc.__traceback__):
                    raise
            else:
                await websocket.__aexit__(None, None, None)
            return
    if profile in ("auto", "websocket"):
        async with open_websocket_stream(ws_url, **options) as stream:
            yield stream
    else:
        async with open_http_stream(http_url, http2=profile == "http", **options) as stream:
            yield stream


@asynccontextmanager
async def open_remote_agent(
    client: Client,
    url: str,
    *,
    profile: Profile = "auto",
    config: ConnectionConfig | None = None,
    token: str | None = None,
    headers: Mapping[str, str] | None = None,
    resumable: bool = False,
    reconnect: Reconnect | None = None,
) -> AsyncIterator[AgentProxy]:
    """Talk to the remote agent at ``url`` (``ws://host:port/acp`` or
    ``http://host:port/acp``) for the duration of the block; yields the
    proxy to the agent, as :func:`~acp_trio.open_agent` does. ``profile``
    and ``resumable`` as for :func:`open_remote_stream`. The message cap is
    ``config.max_message_size``; ``token`` is sent as a bearer token.

    ``reconnect``: when the transport is lost beyond repair (the WebSocket
    closed, the HTTP connection gone, a resumed stream refused), open
    another as the policy says (backoff with jitter), send ``initialize``
    again, and take up each session: ``session/resume`` if the agent
    offers it, else ``session/load`` (its history replay is not passed
    on), else the session is lost. A call in flight on the lost transport
    raises :class:`ReplyLost`; a call naming a lost session raises
    :class:`SessionLost`; out of attempts, calls raise
    :class:`~acp_trio.ConnectionClosed`. ``None`` (the default): a lost
    transport ends the connection.

    Leaving the block, also by an exception or a cancellation, closes the
    connection (running handlers cancelled and answered ``-32800``) and then
    the stream.
    """
    config = config or ConnectionConfig()

    def open_stream() -> AbstractAsyncContextManager[MessageStream]:
        return open_remote_stream(
            url,
            profile=profile,
            max_message_size=config.max_message_size,
            token=token,
            headers=headers,
            resumable=resumable,
        )

    if reconnect is None:
        async with open_stream() as stream, open_agent(client, stream, config=config) as agent:
            yield agent
        return
    async with (
        open_reconnecting(open_stream, reconnect, config.max_message_size) as stream,
        open_agent(client, stream, config=config) as agent,
    ):
        stream.fail_request = agent.connection.fail_request
        yield agent
