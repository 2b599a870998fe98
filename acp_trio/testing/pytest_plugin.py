"""pytest fixtures for ACP tests (needs pytest-trio for the async ones).

Enabled for every project that installs acp_trio, through the ``pytest11``
entry point (or explicitly: ``-p acp_trio.testing.pytest_plugin``). Every
fixture name starts with ``acp_``; nothing is imported until one is used.

- ``acp_agent`` / ``acp_client``: a :class:`~acp_trio.testing.ScenarioAgent`
  and a :class:`~acp_trio.testing.ScenarioClient`. Override either in your
  ``conftest.py`` to put your own agent or client in the fixtures below.
- ``acp_pair``: ``acp_agent`` and ``acp_client`` connected in memory and
  initialized (an :class:`~acp_trio.testing.AgentClientPair`).
- ``acp_scripted_client``: a :class:`~acp_trio.testing.ScriptedPeer`
  playing the client of ``acp_agent``, byte by byte.
- ``acp_scripted_agent``: a :class:`~acp_trio.testing.ScriptedPeer` playing
  the agent of ``acp_client``.
- ``acp_scenario_agent_command``: the command serving the scenario agent on
  stdio (for tests of spawning clients, or of ``check_agent``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from acp_trio import Agent, Client
    from acp_trio.testing import AgentClientPair, ScriptedPeer

__all__ = [
    "acp_agent",
    "acp_client",
    "acp_pair",
    "acp_scenario_agent_command",
    "acp_scripted_agent",
    "acp_scripted_client",
]


@pytest.fixture
def acp_agent() -> Agent:
    """The agent of ``acp_pair`` and ``acp_scripted_client``: a scenario agent."""
    from acp_trio.testing import ScenarioAgent

    return ScenarioAgent()


@pytest.fixture
def acp_client() -> Client:
    """The client of ``acp_pair`` and ``acp_scripted_agent``: a scenario client."""
    from acp_trio.testing import ScenarioClient

    return ScenarioClient()


@pytest.fixture
async def acp_pair(
    acp_agent: Agent, acp_client: Client
) -> AsyncIterator[AgentClientPair[Any, Any]]:
    """``acp_agent`` and ``acp_client`` connected in memory, initialized."""
    from acp_trio.testing import open_memory_pair

    async with open_memory_pair(acp_agent, acp_client) as pair:
        yield pair


@pytest.fixture
async def acp_scripted_client(acp_agent: Agent) -> AsyncIterator[ScriptedPeer]:
    """A scripted raw client of ``acp_agent`` (not initialized)."""
    from acp_trio.testing import open_scripted_client

    async with open_scripted_client(acp_agent) as peer:
        yield peer


@pytest.fixture
async def acp_scripted_agent(acp_client: Client) -> AsyncIterator[ScriptedPeer]:
    """A scripted raw agent for ``acp_client`` (whose proxy is
    ``acp_client.agent``)."""
    from acp_trio.testing import open_scripted_agent

    async with open_scripted_agent(acp_client) as peer:
        yield peer


@pytest.fixture
def acp_scenario_agent_command() -> list[str]:
    """``python -m acp_trio scenario-agent`` with this interpreter."""
    from acp_trio.testing import SCENARIO_AGENT_COMMAND

    return list(SCENARIO_AGENT_COMMAND)


def pytest_addoption(parser: pytest.Parser) -> None:
    """``--acp-agent CMD`` and its options (see ``_pytest_conformance``)."""
    from acp_trio.testing._pytest_conformance import add_options

    add_options(parser)


def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    """With ``--acp-agent CMD``: one test item per agent check."""
    if config.getoption("--acp-agent", None):
        from acp_trio.testing._pytest_conformance import add_items

        add_items(session, items)
