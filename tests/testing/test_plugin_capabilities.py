"""The ``acp_pair`` fixture with the project's own agent and client: the
client advertises what it implements, the agent the session methods it
overrides (nothing to pass to the fixture)."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from acp_trio import Agent, Client
from acp_trio.contrib import WorkspaceFiles, WorkspaceFilesMixin
from acp_trio.schema import (
    ClientCapabilities,
    FileSystemCapabilities,
    LoadSessionRequest,
    LoadSessionResponse,
    NewSessionRequest,
    NewSessionResponse,
    PromptRequest,
    PromptResponse,
    ReadTextFileRequest,
)
from acp_trio.testing import AgentClientPair

from .conftest import LIMIT


class ReadingAgent(Agent):
    def __init__(self) -> None:
        super().__init__()
        self.paths: list[str] = []
        self.read: list[str] = []

    async def new_session(self, params: NewSessionRequest) -> NewSessionResponse:
        return NewSessionResponse(session_id="s")

    async def load_session(self, params: LoadSessionRequest) -> LoadSessionResponse:
        return LoadSessionResponse()

    async def prompt(self, params: PromptRequest) -> PromptResponse:
        for path in self.paths:
            answer = await self.client.read_text_file(
                ReadTextFileRequest(session_id=params.session_id, path=path)
            )
            self.read.append(answer.content)
        return PromptResponse(stop_reason="end_turn")


class FilesClient(WorkspaceFilesMixin, Client):
    def __init__(self, root: str) -> None:
        super().__init__()
        self.files = WorkspaceFiles([root])


@pytest.fixture
def acp_agent() -> Agent:
    return ReadingAgent()


@pytest.fixture
def acp_client(tmp_path: Any) -> Client:
    (tmp_path / "a.txt").write_text("hello\n")
    return FilesClient(str(tmp_path))


async def test_acp_pair_advertises_what_each_side_implements(
    acp_pair: AgentClientPair[Any, Any], tmp_path: Any
) -> None:
    with trio.fail_after(LIMIT):
        assert acp_pair.to_client.capabilities == ClientCapabilities(
            fs=FileSystemCapabilities(read_text_file=True, write_text_file=True)
        )
        assert acp_pair.to_agent.capabilities is not None
        assert acp_pair.to_agent.capabilities.load_session is True
        acp_pair.agent.paths = [str(tmp_path / "a.txt")]
        session_id = await acp_pair.new_session()
        result = await acp_pair.to_agent.prompt_text(session_id, "read")
        assert result.stop_reason == "end_turn"
        assert acp_pair.agent.read == ["hello\n"]
