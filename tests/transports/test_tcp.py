"""TCP: an agent listening on a loopback port, a client connecting to it."""

from __future__ import annotations

import functools

import trio

import acp_trio
from acp_trio import schema
from acp_trio.testing import ScenarioAgent, ScenarioClient


async def test_a_client_talks_to_an_agent_over_tcp() -> None:
    served: list[acp_trio.Agent] = []

    async def serve_one(stream: trio.SocketStream) -> None:
        agent = ScenarioAgent()
        served.append(agent)
        await acp_trio.serve_agent(agent, stream)

    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            listeners = await nursery.start(acp_trio.serve_tcp, serve_one, 0)
            host, port = listeners[0].socket.getsockname()[:2]
            assert host == "127.0.0.1"
            stream = await acp_trio.lowlevel.open_tcp_stream(host, port)
            client = ScenarioClient()
            async with acp_trio.open_agent(client, stream) as agent:
                await agent.initialize(client.initialize_request())
                session = await agent.new_session(schema.NewSessionRequest(cwd="/", mcp_servers=[]))
                result = await agent.prompt_text(session.session_id, "echo over tcp")
                assert result.stop_reason == "end_turn"
                assert client.texts() == ["over tcp"]
            nursery.cancel_scope.cancel()
    assert len(served) == 1


async def test_a_factory_serves_each_tcp_connection_its_own_agent() -> None:
    made: list[acp_trio.Agent] = []

    def factory() -> acp_trio.Agent:
        made.append(ScenarioAgent())
        return made[-1]

    async def talk(port: int, text: str, texts: dict[str, list[str]]) -> None:
        stream = await acp_trio.lowlevel.open_tcp_stream("127.0.0.1", port)
        client = ScenarioClient()
        async with acp_trio.open_agent(client, stream) as agent:
            await agent.initialize(client.initialize_request())
            session = await agent.new_session(schema.NewSessionRequest(cwd="/", mcp_servers=[]))
            result = await agent.prompt_text(session.session_id, f"echo {text} {text}")
            assert result.stop_reason == "end_turn"
        texts[text] = client.texts()

    texts: dict[str, list[str]] = {}
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            serve = functools.partial(acp_trio.serve_agent, factory)
            listeners = await nursery.start(acp_trio.serve_tcp, serve, 0)
            port = listeners[0].socket.getsockname()[1]
            async with trio.open_nursery() as clients:
                for text in ("alpha", "beta"):
                    clients.start_soon(talk, port, text, texts)
            nursery.cancel_scope.cancel()
    assert len(made) == 2
    assert texts == {"alpha": ["alpha alpha"], "beta": ["beta beta"]}
