"""The pytest fixtures of ``acp_trio.testing.pytest_plugin``: used here
directly, and loaded as a plugin by a pytest run in a subprocess."""

from __future__ import annotations

import importlib.metadata
import sys
import textwrap
from pathlib import Path
from typing import Any

import trio

from acp_trio import Client
from acp_trio.testing import AgentClientPair, ScenarioClient, ScriptedPeer

from .conftest import LIMIT, REAL_LIMIT


async def test_acp_pair_is_initialized_and_ready(acp_pair: AgentClientPair[Any, Any]) -> None:
    with trio.fail_after(LIMIT):
        assert acp_pair.initialized is not None
        assert acp_pair.to_agent.protocol_version == 1
        session_id = await acp_pair.new_session()
        result = await acp_pair.to_agent.prompt_text(session_id, "echo fixture")
        assert result.stop_reason == "end_turn"
        assert acp_pair.client.texts(session_id) == ["fixture"]


async def test_acp_scripted_client_talks_to_acp_agent(acp_scripted_client: ScriptedPeer) -> None:
    with trio.fail_after(LIMIT):
        request_id = await acp_scripted_client.request("initialize", {"protocolVersion": 1})
        reply = await acp_scripted_client.receive_response(request_id)
        assert reply["result"]["agentInfo"]["name"] == "acp_trio-scenario-agent"
        await acp_scripted_client.notify("_unknown/notification")
        await acp_scripted_client.expect_silence(0.2)


async def test_acp_scripted_agent_talks_to_acp_client(
    acp_scripted_agent: ScriptedPeer, acp_client: Client
) -> None:
    assert isinstance(acp_client, ScenarioClient)
    with trio.fail_after(LIMIT):
        request_id = await acp_scripted_agent.request(
            "fs/write_text_file", {"sessionId": "s", "path": "/a", "content": "b"}
        )
        assert (await acp_scripted_agent.receive_response(request_id))["result"] == {}
        assert [p.path for p in acp_client.received("fs/write_text_file")] == ["/a"]


def test_the_scenario_agent_command_runs_this_python(acp_scenario_agent_command: list[str]) -> None:
    assert acp_scenario_agent_command == [sys.executable, "-m", "acp_trio", "scenario-agent"]


CONFTEST = """
import pytest
from acp_trio.testing import ScenarioAgent
from acp_trio.schema import PromptResponse


class ShoutingAgent(ScenarioAgent):
    async def run_command(self, session_id, text, words):
        if words and words[0] == "shout":
            await self.client.send_text(session_id, text[6:].upper())
            return PromptResponse(stop_reason="end_turn")
        return await super().run_command(session_id, text, words)


@pytest.fixture
def acp_agent():
    return ShoutingAgent()
"""

TESTS = """
import trio


async def test_my_agent(acp_pair):
    with trio.fail_after(10):
        session_id = await acp_pair.new_session()
        await acp_pair.to_agent.prompt_text(session_id, "shout hello")
        assert acp_pair.client.texts(session_id) == ["HELLO"]


async def test_raw(acp_scripted_client):
    with trio.fail_after(10):
        await acp_scripted_client.send(b"[]\\n")
        reply = await acp_scripted_client.receive()
        assert reply["error"]["code"] == -32600
"""


def _entry_point_installed() -> bool:
    points = importlib.metadata.entry_points(group="pytest11")
    return any(point.value == "acp_trio.testing.pytest_plugin" for point in points)


async def test_the_plugin_loads_in_a_project_that_overrides_acp_agent(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_mine.py").write_text(TESTS)
    (tmp_path / "pytest.ini").write_text(
        textwrap.dedent("""\
            [pytest]
            trio_mode = true
            filterwarnings = error
            """)
    )
    # With the entry point installed, naming the module again would
    # register it twice; without it, -p is how a project enables it.
    plugin = [] if _entry_point_installed() else ["-p", "acp_trio.testing.pytest_plugin"]
    with trio.fail_after(REAL_LIMIT):
        result = await trio.run_process(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *plugin],
            cwd=tmp_path,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    out = result.stdout.decode()
    assert result.returncode == 0, out + result.stderr.decode()
    assert "2 passed" in out
