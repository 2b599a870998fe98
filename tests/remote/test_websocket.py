"""The WebSocket profile over loopback: acp_trio's server (hypercorn, Trio
worker) and acp_trio's client (trio-websocket), with the scenario agent and
its test client: commands, ordering, cancellation both ways and its
cascade, deadlines, one connection per WebSocket."""

from __future__ import annotations

import pytest
import trio
import trio.testing

import acp_trio
from acp_trio import RequestError, schema
from acp_trio.remote import agent_app, open_remote_agent, open_websocket_stream
from acp_trio.testing import ScenarioAgent, ScenarioClient

from .conftest import LIMIT, running, until, ws_url


async def new_session(agent: acp_trio.AgentProxy) -> str:
    session = await agent.new_session(schema.NewSessionRequest(cwd="/", mcp_servers=[]))
    return session.session_id


@pytest.mark.parametrize(
    ("command", "texts"),
    [
        ("echo hello  world ", ["hello  world"]),
        ("stream 3 4", ["0...", "1...", "2..."]),
        ("stream 300 1", [str(i) for i in range(300)]),
        ("read 3 /tmp/notes.txt", ["read 3 192"]),
        ("write 2 /tmp/out.txt 5", []),
        ("dance", ["unknown command"]),
        ("sleep 10", []),
    ],
)
async def test_commands_end_their_turn_over_websocket(command: str, texts: list[str]) -> None:
    made: list[ScenarioAgent] = []

    def factory() -> ScenarioAgent:
        made.append(ScenarioAgent())
        return made[-1]

    with trio.fail_after(LIMIT):
        async with running(agent_app(factory)) as base:
            client = ScenarioClient()
            async with open_remote_agent(client, ws_url(base)) as agent:
                await agent.initialize(client.initialize_request())
                session_id = await new_session(agent)
                result = await agent.prompt_text(session_id, command)
                assert result.stop_reason == "end_turn"
                # Every update arrived, in order, before the prompt's reply.
                assert client.texts(session_id) == texts
    assert len(made) == 1


async def test_fail_answers_the_error_asked_for() -> None:
    with trio.fail_after(LIMIT):
        async with running(agent_app(ScenarioAgent)) as base:
            client = ScenarioClient()
            async with open_remote_agent(client, ws_url(base)) as agent:
                await agent.initialize(client.initialize_request())
                session_id = await new_session(agent)
                with pytest.raises(RequestError) as info:
                    await agent.prompt_text(session_id, "fail -32002 no such   file")
                assert (info.value.code, info.value.message) == (-32002, "no such   file")


async def test_each_websocket_is_its_own_connection_with_an_id() -> None:
    made: list[ScenarioAgent] = []

    def factory() -> ScenarioAgent:
        made.append(ScenarioAgent())
        return made[-1]

    app = agent_app(factory)
    texts: dict[str, list[str]] = {}
    ids: list[str | None] = []

    async def talk(url: str, word: str) -> None:
        client = ScenarioClient()
        async with open_websocket_stream(url) as stream:
            ids.append(stream.connection_id)
            async with acp_trio.open_agent(client, stream) as agent:
                await agent.initialize(client.initialize_request())
                session_id = await new_session(agent)
                await agent.prompt_text(session_id, f"echo {word} {word}")
        texts[word] = client.texts()

    with trio.fail_after(LIMIT):
        async with running(app) as base:
            async with trio.open_nursery() as nursery:
                for word in ("alpha", "beta", "gamma"):
                    nursery.start_soon(talk, ws_url(base), word)
            # Each connection is gone from the app once its WebSocket closed.
            await until(lambda: not app.connections)
    assert texts == {"alpha": ["alpha alpha"], "beta": ["beta beta"], "gamma": ["gamma gamma"]}
    assert len(made) == 3
    assert len(set(ids)) == 3
    assert all(i and len(i) == 32 for i in ids)


async def test_session_cancel_cascades_to_every_nested_request() -> None:
    with trio.fail_after(LIMIT):
        async with running(agent_app(ScenarioAgent)) as base:
            client = ScenarioClient()
            async with open_remote_agent(client, ws_url(base)) as agent:
                await agent.initialize(client.initialize_request())
                session_id = await new_session(agent)
                results: list[schema.PromptResponse] = []
                async with trio.open_nursery() as nursery:

                    async def run() -> None:
                        results.append(await agent.prompt_text(session_id, "nested"))

                    nursery.start_soon(run)
                    for method in (
                        "fs/read_text_file",
                        "terminal/create",
                        "session/request_permission",
                    ):
                        await client.wait_for_requests(method)
                    await agent.cancel(session_id)
                assert results[0].stop_reason == "cancelled"
                # Each held request was cancelled on the wire, none answered.
                await until(lambda: len(client.cancelled) >= 3)
                assert sorted(client.cancelled) == [
                    "fs/read_text_file",
                    "session/request_permission",
                    "terminal/create",
                ]
                assert client.texts(session_id) == []
                # The connection goes on.
                result = await agent.prompt_text(session_id, "echo still here")
                assert result.stop_reason == "end_turn"


async def test_a_cancelled_call_sends_cancel_request_and_the_agent_cascades() -> None:
    with trio.fail_after(LIMIT):
        async with running(agent_app(ScenarioAgent)) as base:
            client = ScenarioClient()
            async with open_remote_agent(client, ws_url(base)) as agent:
                await agent.initialize(client.initialize_request())
                session_id = await new_session(agent)
                with trio.CancelScope() as scope:

                    async def cancel_when_held() -> None:
                        # All three held: one still on its way when its cancel
                        # comes never runs its handler, and is not counted.
                        await client.wait_for_requests("session/request_permission")
                        await client.wait_for_requests("fs/read_text_file")
                        await client.wait_for_requests("terminal/create")
                        scope.cancel()

                    async with trio.open_nursery() as nursery:
                        nursery.start_soon(cancel_when_held)
                        # Raw, so the cancel is a $/cancel_request (the typed
                        # prompt sends session/cancel instead).
                        params = {
                            "sessionId": session_id,
                            "prompt": [{"type": "text", "text": "nested"}],
                        }
                        await agent.connection.call("session/prompt", params)
                assert scope.cancelled_caught
                # The agent saw $/cancel_request for the prompt and cancelled
                # its nested requests on the wire in turn.
                await until(lambda: len(client.cancelled) >= 3)
                assert sorted(client.cancelled) == [
                    "fs/read_text_file",
                    "session/request_permission",
                    "terminal/create",
                ]
                stats = agent.connection.statistics()
                assert stats.outgoing_pending == 0
                result = await agent.prompt_text(session_id, "echo after")
                assert result.stop_reason == "end_turn"


async def test_an_agent_deadline_cancels_its_nested_read_on_the_wire() -> None:
    with trio.fail_after(LIMIT):
        async with running(agent_app(ScenarioAgent)) as base:
            client = ScenarioClient()
            async with open_remote_agent(client, ws_url(base)) as agent:
                await agent.initialize(client.initialize_request())
                session_id = await new_session(agent)
                with pytest.raises(RequestError) as info:
                    await agent.prompt_text(session_id, "deadline 200")
                assert info.value.code == -32800
                await until(lambda: bool(client.cancelled))
                assert client.cancelled == ["fs/read_text_file"]


async def test_closing_the_websocket_mid_turn_ends_the_agents_connection() -> None:
    served: list[acp_trio.lowlevel.Connection] = []
    ended = trio.Event()

    app = agent_app(ScenarioAgent)
    inner = app.handle

    async def tracking(stream: object) -> None:
        try:
            await inner(stream)  # type: ignore[arg-type]
        finally:
            ended.set()

    app.handle = tracking
    with trio.fail_after(LIMIT):
        async with running(app) as base:
            client = ScenarioClient()
            async with open_remote_agent(client, ws_url(base)) as agent:
                await agent.initialize(client.initialize_request())
                session_id = await new_session(agent)

                async def run() -> None:
                    with pytest.raises(acp_trio.ConnectionClosed):
                        await agent.prompt_text(session_id, "nested")

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(run)
                    await client.wait_for_requests("session/request_permission")
                    await agent.connection.aclose()
            await ended.wait()
            assert not app.connections
    assert not served
