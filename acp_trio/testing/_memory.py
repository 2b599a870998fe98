"""An agent and a client connected in memory, ready for a test."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Generic, TypeVar

import attrs

from acp_trio._core._connection import ConnectionConfig
from acp_trio._typed._agent import Agent, ClientProxy, _make_agent
from acp_trio._typed._client import AgentProxy, Client
from acp_trio._typed._pair import open_agent_client_pair
from acp_trio.schema import (
    PROTOCOL_VERSION,
    InitializeRequest,
    InitializeResponse,
    NewSessionRequest,
)
from acp_trio.testing._scenario import ScenarioAgent, ScenarioClient

__all__ = ["AgentClientPair", "open_memory_pair"]

A = TypeVar("A", bound=Agent)
C = TypeVar("C", bound=Client)


@attrs.define(eq=False)
class AgentClientPair(Generic[A, C]):
    """Both ends of :func:`open_memory_pair`.

    ``agent`` and ``client`` are your objects; ``to_agent`` is the proxy the
    client calls the agent with (``client.agent``), ``to_client`` the one the
    agent calls the client with (``agent.client``).
    """

    agent: A
    client: C
    to_agent: AgentProxy
    to_client: ClientProxy
    initialized: InitializeResponse | None = None

    async def new_session(self, cwd: str | None = None) -> str:
        """Open a session (``session/new``) and return its id.

        Raises :class:`~acp_trio.RequestError` for the agent's refusal.
        Cancelling the call sends ``$/cancel_request`` for it.
        """
        response = await self.to_agent.new_session(
            NewSessionRequest(cwd=cwd or os.sep, mcp_servers=[])
        )
        return response.session_id


def _default_initialize(client: Client) -> InitializeRequest:
    if isinstance(client, ScenarioClient):
        return client.initialize_request()
    # The capabilities the client implements (see AgentProxy.initialize).
    return InitializeRequest(protocol_version=PROTOCOL_VERSION)


@asynccontextmanager
async def open_memory_pair(
    agent: A | Callable[[], A] | None = None,
    client: C | None = None,
    *,
    initialize: InitializeRequest | bool = True,
    agent_config: ConnectionConfig | None = None,
    client_config: ConnectionConfig | None = None,
) -> AsyncIterator[AgentClientPair[A, C]]:
    """Serve ``agent`` to ``client`` over in-memory streams for the block.

    ``agent`` may be a factory (such as the class), called once here:
    ``pair.agent`` is what it made. Defaults: a :class:`ScenarioAgent` and
    a :class:`ScenarioClient`. With ``initialize=True`` the client sends
    ``initialize`` first (the scenario client's capabilities for a
    :class:`ScenarioClient`, otherwise those the client implements: ``fs``
    for the file methods it overrides, ``terminal``, elicitation); pass an
    :class:`InitializeRequest` to choose, or ``False`` to skip it. Works
    with the autojump clock.

    Raises what ``initialize`` raises (:class:`~acp_trio.RequestError`).
    Leaving the block, also by an exception or a cancellation, closes both
    connections: running handlers are cancelled and answered ``-32800``.
    """
    made = _make_agent(agent) if agent is not None else ScenarioAgent()
    the_agent: A = made  # type: ignore[assignment]
    the_client: C = client if client is not None else ScenarioClient()  # type: ignore[assignment]
    async with open_agent_client_pair(
        the_agent, the_client, agent_config=agent_config, client_config=client_config
    ) as (to_agent, to_client):
        pair = AgentClientPair(the_agent, the_client, to_agent, to_client)
        if initialize is not False:
            request = _default_initialize(the_client) if initialize is True else initialize
            pair.initialized = await to_agent.initialize(request)
        yield pair
