"""``ClientProxy.send_text_nowait`` / ``session_update_nowait``: an agent
streams a burst without a checkpoint per chunk, falling back to the
awaiting form when the output queue is full; the client gets every chunk,
in order."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from acp_trio import ConnectionClosed, build
from acp_trio.schema import AgentMessageChunk, AgentThoughtChunk, PromptRequest, PromptResponse

from .conftest import INIT, NEW_SESSION, RecordingClient, ScriptedAgent, open_pair

N = 3000  # more than the output queue holds (1024)


@pytest.mark.parametrize("transport", ["memory", "pipes"])
async def test_a_burst_arrives_whole_and_in_order(
    transport: str, request: pytest.FixtureRequest
) -> None:
    if transport == "memory":
        request.getfixturevalue("autojump_clock")
    refused: list[int] = []

    async def script(agent: ScriptedAgent, params: PromptRequest) -> PromptResponse:
        sid = params.session_id
        agent.client.session_update_nowait(sid, build.agent_thought("thinking"))
        for n in range(N):
            try:
                agent.client.send_text_nowait(sid, f"{n} ")
            except trio.WouldBlock:
                refused.append(n)
                await agent.client.send_text(sid, f"{n} ")
        return PromptResponse(stop_reason="end_turn")

    client = RecordingClient()
    with trio.fail_after(60):
        async with open_pair(ScriptedAgent(script), client, transport) as (to_agent, *_):
            await to_agent.initialize(INIT)
            sid = (await to_agent.new_session(NEW_SESSION)).session_id
            assert (await to_agent.prompt_text(sid, "go")).stop_reason == "end_turn"
    updates = [n.update for n in client.updates]
    assert isinstance(updates[0], AgentThoughtChunk)
    assert all(isinstance(u, AgentMessageChunk) for u in updates[1:])
    assert client.texts()[1:] == [f"{n} " for n in range(N)]
    if transport == "memory":
        assert refused  # the queue filled: the fallback was used


async def test_after_the_connection_ends_it_raises(autojump_clock: Any) -> None:
    proxies: list[Any] = []

    async def script(agent: ScriptedAgent, params: PromptRequest) -> PromptResponse:
        proxies.append(agent.client)
        return PromptResponse(stop_reason="end_turn")

    async with open_pair(ScriptedAgent(script), RecordingClient()) as (to_agent, *_):
        await to_agent.initialize(INIT)
        sid = (await to_agent.new_session(NEW_SESSION)).session_id
        await to_agent.prompt_text(sid, "go")
    with pytest.raises(ConnectionClosed):
        proxies[0].send_text_nowait(sid, "late")
