"""``acp_trio.AgentSessions``: the SDK keeps an agent's per-session state,
made on ``session/new`` / load / resume, dropped on close / delete; an
unknown session id answers ``-32602`` naming it."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
import trio

import acp_trio
from acp_trio import AgentSessions, RequestError
from acp_trio.schema import (
    AgentCapabilities,
    CloseSessionRequest,
    CloseSessionResponse,
    DeleteSessionRequest,
    DeleteSessionResponse,
    LoadSessionRequest,
    LoadSessionResponse,
    NewSessionRequest,
    NewSessionResponse,
    PromptRequest,
    PromptResponse,
    SessionCapabilities,
    SessionCloseCapabilities,
    SessionDeleteCapabilities,
)

from .conftest import INIT, LIMIT, NEW_SESSION, RecordingClient, open_pair


@attrs.define
class State:
    session_id: str
    prompts: list[str] = attrs.Factory(list)


class StatefulAgent(acp_trio.Agent):
    def __init__(self) -> None:
        self.sessions: AgentSessions[State] = AgentSessions(State)
        self.count = 0
        self.seen_during_load: list[bool] = []

    async def new_session(self, params: NewSessionRequest) -> NewSessionResponse:
        self.count += 1
        return NewSessionResponse(session_id=f"s{self.count}")

    async def load_session(self, params: LoadSessionRequest) -> LoadSessionResponse:
        self.seen_during_load.append(params.session_id in self.sessions)
        if params.session_id == "missing":
            raise RequestError.invalid_params({"sessionId": "missing"})
        return LoadSessionResponse()

    async def prompt(self, params: PromptRequest) -> PromptResponse:
        state = self.sessions[params.session_id]
        state.prompts.append("prompt")
        return PromptResponse(stop_reason="end_turn")

    async def close_session(self, params: CloseSessionRequest) -> CloseSessionResponse:
        return CloseSessionResponse()

    async def delete_session(self, params: DeleteSessionRequest) -> DeleteSessionResponse:
        return DeleteSessionResponse()


async def test_the_sdk_keeps_each_sessions_state(autojump_clock: Any) -> None:
    agent = StatefulAgent()
    with trio.fail_after(LIMIT):
        async with open_pair(agent, RecordingClient()) as (to_agent, *_):
            init = await to_agent.initialize(INIT)
            caps: AgentCapabilities = init.agent_capabilities
            assert caps.load_session
            assert isinstance(caps.session_capabilities, SessionCapabilities)
            assert isinstance(caps.session_capabilities.close, SessionCloseCapabilities)
            assert isinstance(caps.session_capabilities.delete, SessionDeleteCapabilities)
            a = (await to_agent.new_session(NEW_SESSION)).session_id
            b = (await to_agent.new_session(NEW_SESSION)).session_id
            assert sorted(agent.sessions) == [a, b]
            await to_agent.prompt_text(a, "hi")
            await to_agent.prompt_text(a, "again")
            assert agent.sessions[a].prompts == ["prompt", "prompt"]
            assert agent.sessions[b].prompts == []
            # Loaded: the state exists while the load runs.
            await to_agent.load_session(
                LoadSessionRequest(session_id="old", cwd="/w", mcp_servers=[])
            )
            assert agent.seen_during_load == [True]
            assert "old" in agent.sessions
            # A failed load leaves nothing behind.
            with pytest.raises(RequestError):
                await to_agent.load_session(
                    LoadSessionRequest(session_id="missing", cwd="/w", mcp_servers=[])
                )
            assert "missing" not in agent.sessions
            await to_agent.close_session(CloseSessionRequest(session_id=a))
            await to_agent.delete_session(DeleteSessionRequest(session_id=b))
            assert sorted(agent.sessions) == ["old"]
            # A prompt for a session the agent does not have: -32602, named.
            with pytest.raises(RequestError) as info:
                await to_agent.prompt_text(a, "hi")
            assert info.value.code == -32602
            assert info.value.data == {"sessionId": a, "problem": "no such session"}
            assert len(agent.sessions) == 1
            assert agent.sessions.get(a) is None
