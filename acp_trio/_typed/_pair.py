"""An agent and a client connected in one process, over memory streams."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from acp_trio._core._connection import ConnectionConfig
from acp_trio._typed._agent import Agent, ClientProxy, open_client
from acp_trio._typed._client import AgentProxy, Client, open_agent

__all__ = ["open_agent_client_pair"]


@asynccontextmanager
async def open_agent_client_pair(
    agent: Agent | Callable[[], Agent],
    client: Client,
    *,
    agent_config: ConnectionConfig | None = None,
    client_config: ConnectionConfig | None = None,
) -> AsyncIterator[tuple[AgentProxy, ClientProxy]]:
    """Serve ``agent`` (or a new one from the factory ``agent``) to
    ``client`` in this process, for tests and embedding. Yields
    ``(client.agent, agent.client)``: the proxy a client uses, and the one
    the agent uses. Not initialized yet.

    Raises ``RuntimeError`` if either object is already on a connection.
    Leaving the block, also by an exception or a cancellation, closes both
    connections: running handlers are cancelled and answered ``-32800``.
    """
    import trio.testing  # not at import time: it costs every `import acp_trio`

    client_end, agent_end = trio.testing.memory_stream_pair()
    async with (
        open_client(agent, agent_end, config=agent_config) as to_client,
        open_agent(client, client_end, config=client_config) as to_agent,
    ):
        yield to_agent, to_client
