"""The Streamable HTTP profile over loopback, HTTP/2 (h2c) and HTTP/1.1:
acp_trio's server and client with the scenario agent and its test client:
commands, ordering, cancellation both ways and its cascade, deadlines."""

from __future__ import annotations

from typing import Any

import pytest
import trio

import acp_trio
from acp_trio import RequestError, schema
from acp_trio.remote import RemoteApp, agent_app, open_http_stream, open_remote_agent
from acp_trio.testing import ScenarioAgent, ScenarioClient

from .conftest import LIMIT, running, until

PROFILES = ["http", "http1"]


async def new_session(agent: acp_trio.AgentProxy) -> str:
    session = await agent.new_session(schema.NewSessionRequest(cwd="/", mcp_servers=[]))
    return session.session_id


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize(
    ("command", "texts"),
    [
        ("echo hello  world ", ["hello  world"]),
        ("stream 300 1", [str(i) for i in range(300)]),
        ("read 3 /tmp/notes.txt", ["read 3 192"]),
        ("write 2 /tmp/out.txt 5", []),
        ("dance", ["unknown command"]),
    ],
)
async def test_commands_end_their_turn_over_http(
    profile: str, command: str, texts: list[str]
) -> None:
    with trio.fail_after(LIMIT):
        async with running(agent_app(ScenarioAgent)) as base:
            client = ScenarioClient()
            async with open_remote_agent(client, base + "/acp", profile=profile) as agent:  # type: ignore[arg-type]
                await agent.initialize(client.initialize_request())
                session_id = await new_session(agent)
                result = await agent.prompt_text(session_id, command)
                assert result.stop_reason == "end_turn"
                # Every update arrived, in order, before the prompt's reply.
                assert client.texts(session_id) == texts
                with pytest.raises(RequestError) as info:
                    await agent.prompt_text(session_id, "fail -32002 nope")
                assert info.value.code == -32002


@pytest.mark.parametrize("profile", PROFILES)
async def test_the_client_speaks_the_http_version_asked_for(profile: str) -> None:
    with trio.fail_after(LIMIT):
        async with running(agent_app(ScenarioAgent)) as base:
            client = ScenarioClient()
            async with (
                open_http_stream(base + "/acp", http2=profile == "http") as stream,
                acp_trio.open_agent(client, stream) as agent,
            ):
                await agent.initialize(client.initialize_request())
                assert stream.connection_id is not None
                response = await stream.client.get(base + "/elsewhere")
                assert response.http_version == ("HTTP/2" if profile == "http" else "HTTP/1.1")


@pytest.mark.parametrize("profile", PROFILES)
async def test_session_cancel_cascades_to_every_nested_request(profile: str) -> None:
    with trio.fail_after(LIMIT):
        async with running(agent_app(ScenarioAgent)) as base:
            client = ScenarioClient()
            async with open_remote_agent(client, base + "/acp", profile=profile) as agent:  # type: ignore[arg-type]
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
                await until(lambda: len(client.cancelled) >= 3)
                assert sorted(client.cancelled) == [
                    "fs/read_text_file",
                    "session/request_permission",
                    "terminal/create",
                ]
                result = await agent.prompt_text(session_id, "echo still here")
                assert result.stop_reason == "end_turn"


@pytest.mark.parametrize("profile", PROFILES)
async def test_a_cancel_request_reaches_the_agent_which_cascades(profile: str) -> None:
    with trio.fail_after(LIMIT):
        async with running(agent_app(ScenarioAgent)) as base:
            client = ScenarioClient()
            async with open_remote_agent(client, base + "/acp", profile=profile) as agent:  # type: ignore[arg-type]
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
                        params = {
                            "sessionId": session_id,
                            "prompt": [{"type": "text", "text": "nested"}],
                        }
                        await agent.connection.call("session/prompt", params)
                assert scope.cancelled_caught
                await until(lambda: len(client.cancelled) >= 3)
                assert sorted(client.cancelled) == [
                    "fs/read_text_file",
                    "session/request_permission",
                    "terminal/create",
                ]
                result = await agent.prompt_text(session_id, "echo after")
                assert result.stop_reason == "end_turn"


@pytest.mark.parametrize("profile", PROFILES)
async def test_an_agent_deadline_cancels_its_nested_read_on_the_wire(profile: str) -> None:
    with trio.fail_after(LIMIT):
        async with running(agent_app(ScenarioAgent)) as base:
            client = ScenarioClient()
            async with open_remote_agent(client, base + "/acp", profile=profile) as agent:  # type: ignore[arg-type]
                await agent.initialize(client.initialize_request())
                session_id = await new_session(agent)
                with pytest.raises(RequestError) as info:
                    await agent.prompt_text(session_id, "deadline 200")
                assert info.value.code == -32800
                await until(lambda: bool(client.cancelled))
                assert client.cancelled == ["fs/read_text_file"]


class WebSocketRefused(RemoteApp):
    """A server offering Streamable HTTP only."""

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "websocket":
            await receive()
            await send({"type": "websocket.close", "code": 1008})  # a 403
            return
        await super().__call__(scope, receive, send)


async def test_auto_falls_back_to_http_when_websocket_is_refused() -> None:
    async def handle(stream: Any) -> None:
        await acp_trio.serve_agent(ScenarioAgent, stream)

    app = WebSocketRefused(handle)
    with trio.fail_after(LIMIT):
        async with running(app) as base:
            client = ScenarioClient()
            async with open_remote_agent(client, base + "/acp") as agent:
                await agent.initialize(client.initialize_request())
                assert len(app.http.connections) == 1
                session_id = await new_session(agent)
                await agent.prompt_text(session_id, "echo via http")
                assert client.texts() == ["via http"]
            # DELETE on leaving: the connection is gone.
            await until(lambda: not app.http.connections)


@pytest.mark.parametrize("profile", PROFILES)
async def test_the_client_reopens_a_dropped_stream_and_the_turn_goes_on(profile: str) -> None:
    app = agent_app(ScenarioAgent)
    with trio.fail_after(LIMIT):
        async with running(app) as base:
            client = ScenarioClient()
            async with (
                open_http_stream(base + "/acp", http2=profile == "http") as stream,
                acp_trio.open_agent(client, stream) as agent,
            ):
                await agent.initialize(client.initialize_request())
                session_id = await new_session(agent)
                results: list[schema.PromptResponse] = []
                async with trio.open_nursery() as nursery:

                    async def run() -> None:
                        results.append(await agent.prompt_text(session_id, "permission"))

                    nursery.start_soon(run)
                    await client.wait_for_requests("session/request_permission")
                    # The server ends the session's SSE stream in the middle
                    # of the turn (as a proxy timing out would).
                    (connection,) = app.http.connections.values()
                    reader = connection.outboxes[session_id].reader
                    assert reader is not None
                    reader.cancel()
                    await until(lambda: stream.reconnects >= 1)
                    # The turn was not cancelled: the cancel goes through and
                    # the agent's answer comes on the reopened stream.
                    await agent.cancel(session_id)
                assert results[0].stop_reason == "cancelled"
                result = await agent.prompt_text(session_id, "echo after the drop")
                assert result.stop_reason == "end_turn"
                assert client.texts(session_id)[-1] == "after the drop"


async def test_an_h2c_connection_carries_more_than_a_thousand_posts() -> None:
    # Every message the client sends is a POST of its own: hypercorn's
    # default of 1000 requests per connection ended the h2c connection
    # (GOAWAY) in the middle of a long turn.
    with trio.fail_after(LIMIT * 2):
        async with running(agent_app(ScenarioAgent)) as base:
            client = ScenarioClient()
            async with open_remote_agent(client, base + "/acp", profile="http") as agent:
                await agent.initialize(client.initialize_request())
                session_id = await new_session(agent)
                result = await agent.prompt_text(session_id, "read 1100 /tmp/notes.txt")
                assert result.stop_reason == "end_turn"
                assert client.texts(session_id) == ["read 1100 70400"]


@pytest.mark.parametrize("profile", ["http", "http1"], ids=["h2c", "http1"])
async def test_two_sessions_on_one_connection_then_prompts_never_stall(profile: str) -> None:
    """Issue 37: over h2c, two sessions (three SSE streams on one HTTP/2
    connection) then a prompt used to hang in most runs: httpcore2 read a
    stream's reply for it, and that stream then waited for the read lock
    behind another stream blocked reading the socket. Repeated, since it
    was a race (it hung within 8 rounds in every run seen)."""
    with trio.fail_after(LIMIT):
        async with running(agent_app(ScenarioAgent)) as base:
            for _ in range(12):
                client = ScenarioClient()
                async with open_remote_agent(client, base + "/acp", profile=profile) as agent:  # type: ignore[arg-type]
                    await agent.initialize(client.initialize_request())
                    new = schema.NewSessionRequest(cwd="/", mcp_servers=[])
                    first = await agent.new_session(new)
                    second = await agent.new_session(new)
                    for session in (first, second, first):
                        result = await agent.prompt_text(session.session_id, "echo hi")
                        assert result.stop_reason == "end_turn"


@pytest.mark.parametrize("profile", ["http", "http1"], ids=["h2c", "http1"])
async def test_leaving_with_a_full_queue_unread_raises_nothing(profile: str) -> None:
    """Issue 37: a prompt streaming more than the client reads, cancelled,
    then the block left: the SSE reader waiting for room in the full queue
    used to raise trio.ClosedResourceError out of the block when the stream
    was closed under it."""
    with trio.fail_after(LIMIT):
        async with running(agent_app(ScenarioAgent)) as base:
            for _ in range(3):
                client = ScenarioClient()
                async with open_remote_agent(client, base + "/acp", profile=profile) as agent:  # type: ignore[arg-type]
                    await agent.initialize(client.initialize_request())
                    new = schema.NewSessionRequest(cwd="/", mcp_servers=[])
                    session = await agent.new_session(new)
                    with trio.move_on_after(0.3):
                        await agent.prompt_text(session.session_id, "stream 1000000 1")
