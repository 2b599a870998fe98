"""Running the app with hypercorn's Trio worker, and the typed entry points
(serve an :class:`~acp_trio.Agent`, talk to a remote agent as a
:class:`~acp_trio.Client`)."""

from __future__ import annotations

import ipaddress
from collections.abc import AsyncIterator, Callable, Collection, Mapping
from contextlib import asynccontextmanager
from typing import Any

import trio
from hypercorn.config import Config
from hypercorn.trio import serve

from acp_trio._agent import Agent, serve_agent
from acp_trio._client import AgentProxy, Client, open_client
from acp_trio._connection import ConnectionConfig
from acp_trio._message_stream import MessageStream
from acp_trio.remote._app import RemoteApp
from acp_trio.remote._limits import library_limit
from acp_trio.remote._ws_client import open_websocket_stream

__all__ = ["agent_app", "connect_remote_agent", "hypercorn_config", "serve_remote"]


def agent_app(
    agent: Callable[[], Agent],
    *,
    config: ConnectionConfig | None = None,
    path: str = "/acp",
    token: str | None = None,
    allowed_origins: Collection[str] = (),
) -> RemoteApp:
    """An ASGI app serving a new agent from the factory ``agent`` on each
    ACP connection. The message cap is ``config.max_message_size``."""
    config = config or ConnectionConfig()

    async def handle(stream: MessageStream) -> None:
        await serve_agent(agent, stream, config=config)

    return RemoteApp(
        handle,
        path=path,
        max_message_size=config.max_message_size,
        token=token,
        allowed_origins=allowed_origins,
    )


def is_loopback(host: str) -> bool:
    """Whether ``host`` names only this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


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
    return config


async def serve_remote(
    app: RemoteApp,
    port: int = 0,
    *,
    host: str = "127.0.0.1",
    allow_remote: bool = False,
    task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ``app`` with hypercorn's Trio worker on ``host:port``
    (HTTP/1.1, h2c and WebSocket on one port); reports the bound URLs
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
    # hypercorn types the app with its own TypedDicts; ours takes plain mappings.
    framework: Any = app
    await serve(framework, hypercorn_config(app, host, port), task_status=task_status)


@asynccontextmanager
async def connect_remote_agent(
    client: Client,
    url: str,
    *,
    config: ConnectionConfig | None = None,
    token: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> AsyncIterator[AgentProxy]:
    """Talk to the remote agent at ``url`` (``ws://host:port/acp``) for the
    duration of the block; yields the proxy to the agent, as
    :func:`~acp_trio.open_client` does. The message cap is
    ``config.max_message_size``; ``token`` is sent as a bearer token.
    """
    config = config or ConnectionConfig()
    async with (
        open_websocket_stream(
            url, max_message_size=config.max_message_size, token=token, headers=headers
        ) as stream,
        open_client(client, stream, config=config) as agent,
    ):
        yield agent
