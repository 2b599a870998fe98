"""An :class:`Agent` or :class:`Client` object is on one connection at a
time (``agent.client`` / ``client.agent`` is that connection's proxy). A
factory serves one agent per connection; the same object on a second
connection at once is a ``RuntimeError`` naming the fix, not cross-talk."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

import acp_trio
from acp_trio.schema import PromptRequest, PromptResponse
from acp_trio.testing import open_memory_pair

from .conftest import LIMIT, RecordingClient, ScriptedAgent, start_session


def streaming_agent(both_prompting: trio.Event, prompting: list[str]) -> ScriptedAgent:
    """An agent that streams each prompt's text back once both connections'
    prompts are running (so both connections are open while it streams)."""

    async def script(agent: ScriptedAgent, params: PromptRequest) -> PromptResponse:
        text = params.prompt[0].text  # type: ignore[union-attr]
        prompting.append(text)
        if len(prompting) == 2:
            both_prompting.set()
        await both_prompting.wait()
        for word in (text, text):
            await agent.client.send_text(params.session_id, word)
        return PromptResponse(stop_reason="end_turn")

    return ScriptedAgent(script)


async def run_client(client: RecordingClient, stream: trio.abc.Stream, text: str) -> None:
    async with acp_trio.open_agent(client, stream) as to_agent:
        sid = await start_session(to_agent)
        result = await to_agent.prompt_text(sid, text)
        assert result.stop_reason == "end_turn"


async def test_a_factory_serves_each_connection_its_own_agent(autojump_clock: Any) -> None:
    both_prompting = trio.Event()
    prompting: list[str] = []
    made: list[ScriptedAgent] = []

    def factory() -> ScriptedAgent:
        made.append(streaming_agent(both_prompting, prompting))
        return made[-1]

    clients = {"alpha": RecordingClient(), "beta": RecordingClient()}
    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            for text, client in clients.items():
                client_end, agent_end = trio.testing.memory_stream_pair()
                nursery.start_soon(acp_trio.serve_agent, factory, agent_end)
                nursery.start_soon(run_client, client, client_end, text)
    assert len(made) == 2
    assert made[0] is not made[1]
    # Both sessions are "sess-1" (one agent each): only the connection tells.
    for text, client in clients.items():
        assert [n.session_id for n in client.updates] == ["sess-1", "sess-1"]
        assert client.texts() == [text, text]


async def test_the_class_is_a_factory_too(autojump_clock: Any) -> None:
    with trio.fail_after(LIMIT):
        async with open_memory_pair(ScriptedAgent, RecordingClient()) as pair:
            assert isinstance(pair.agent, ScriptedAgent)
            assert pair.agent.client is pair.to_client
            result = await pair.to_agent.prompt_text(await pair.new_session(), "hi")
    assert result.stop_reason == "end_turn"
    assert pair.client.texts() == ["hello"]


async def test_a_factory_must_make_an_agent(autojump_clock: Any) -> None:
    _client_end, agent_end = trio.testing.memory_stream_pair()
    with trio.fail_after(LIMIT), pytest.raises(TypeError, match="not an Agent"):
        await acp_trio.serve_agent(lambda: "an agent", agent_end)  # type: ignore[arg-type,return-value]


async def test_one_agent_object_on_two_connections_at_once_is_an_error(
    autojump_clock: Any,
) -> None:
    """The second connection is refused before anything is read from it;
    the first one goes on, and once it is over the object may serve again."""
    agent = ScriptedAgent()
    with trio.fail_after(LIMIT):
        first_client, first_end = trio.testing.memory_stream_pair()
        async with acp_trio.open_client(agent, first_end) as to_first:
            _, second_end = trio.testing.memory_stream_pair()
            with pytest.raises(RuntimeError, match="pass a factory") as caught:
                await acp_trio.serve_agent(agent, second_end)
            assert type(caught.value) is RuntimeError
            assert "serve_agent(ScriptedAgent, stream)" in str(caught.value)
            with pytest.raises(RuntimeError, match="pass a factory"):
                async with acp_trio.open_client(agent, second_end):
                    pass  # pragma: no cover
            assert agent.client is to_first
            client = RecordingClient()
            await run_client(client, first_client, "go")
            assert client.texts() == ["hello"]
        # Its connection is over: the object is free again.
        async with open_memory_pair(agent, RecordingClient()) as pair:
            assert agent.client is pair.to_client


async def test_one_client_object_on_two_connections_at_once_is_an_error(
    autojump_clock: Any,
) -> None:
    client = RecordingClient()
    with trio.fail_after(LIMIT):
        async with open_memory_pair(ScriptedAgent(), client) as pair:
            _, stream = trio.testing.memory_stream_pair()
            with pytest.raises(RuntimeError, match="one client object per connection"):
                async with acp_trio.open_agent(client, stream):
                    pass  # pragma: no cover
            assert client.agent is pair.to_agent
        async with open_memory_pair(ScriptedAgent(), client) as pair:
            assert client.agent is pair.to_agent
