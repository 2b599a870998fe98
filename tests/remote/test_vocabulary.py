"""The scenario agent's whole vocabulary (docs/scenario-agent.md) over
each remote profile: WebSocket, Streamable HTTP over HTTP/2 (h2c) and over
HTTP/1.1; acp_trio's server and client. Each command's outcome, and
cancellation whichever way it starts (``session/cancel``,
``$/cancel_request``, the agent's own deadline) with its cascade to every
nested request."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import attrs
import pytest
import trio

import acp_trio
from acp_trio import RequestError, schema
from acp_trio.remote import agent_app, open_remote_agent
from acp_trio.testing import ScenarioAgent, ScenarioClient

from .conftest import LIMIT, running, until

PROFILES = ["websocket", "http", "http1"]
NESTED = ["fs/read_text_file", "session/request_permission", "terminal/create"]


@attrs.define
class Ends:
    """Both ends of one remote connection, one session open."""

    agent: acp_trio.AgentProxy
    client: ScenarioClient
    session_id: str
    #: The agent objects the server made (one per connection).
    served: list[ScenarioAgent]

    def turn_running(self) -> bool:
        """Whether the server's agent is running a prompt turn."""
        tree = self.served[-1].client.connection.request_tree()
        return any(node.method == "session/prompt" for node in tree)

    async def prompt(self, text: str) -> schema.PromptResponse:
        return await self.agent.prompt_text(self.session_id, text)


@asynccontextmanager
async def connected(profile: str) -> AsyncIterator[Ends]:
    served: list[ScenarioAgent] = []

    def make() -> ScenarioAgent:
        served.append(ScenarioAgent())
        return served[-1]

    async with running(agent_app(make)) as base:
        client = ScenarioClient()
        async with open_remote_agent(client, base + "/acp", profile=profile) as agent:  # type: ignore[arg-type]
            await agent.initialize(client.initialize_request())
            session = await agent.new_session(schema.NewSessionRequest(cwd="/", mcp_servers=[]))
            yield Ends(agent, client, session.session_id, served)


Scenario = Callable[[Ends], Awaitable[None]]
SCENARIOS: dict[str, Scenario] = {}


def scenario(function: Scenario) -> Scenario:
    SCENARIOS[function.__name__] = function
    return function


async def ends_its_turn(ends: Ends, command: str, texts: list[str]) -> None:
    result = await ends.prompt(command)
    assert result.stop_reason == "end_turn"
    assert ends.client.texts(ends.session_id) == texts


@scenario
async def echo(ends: Ends) -> None:
    await ends_its_turn(ends, "echo hello  world ", ["hello  world"])


@scenario
async def stream(ends: Ends) -> None:
    await ends_its_turn(ends, "stream 300 1", [str(i) for i in range(300)])


@scenario
async def stream_padded(ends: Ends) -> None:
    await ends_its_turn(ends, "stream 3", [str(i).ljust(16, ".") for i in range(3)])


@scenario
async def read(ends: Ends) -> None:
    await ends_its_turn(ends, "read 3 /tmp/notes.txt", ["read 3 192"])


@scenario
async def write(ends: Ends) -> None:
    await ends_its_turn(ends, "write 2 /tmp/out.txt 5", [])
    assert len(ends.client.received("fs/write_text_file")) == 2


@scenario
async def sleep(ends: Ends) -> None:
    await ends_its_turn(ends, "sleep 20", [])


@scenario
async def unknown(ends: Ends) -> None:
    await ends_its_turn(ends, "dance", ["unknown command"])


@scenario
async def fail(ends: Ends) -> None:
    with pytest.raises(RequestError) as info:
        await ends.prompt("fail -32002 no such thing")
    assert (info.value.code, info.value.message) == (-32002, "no such thing")


async def cancelled_by_session_cancel(ends: Ends, command: str) -> schema.PromptResponse:
    results: list[schema.PromptResponse] = []
    async with trio.open_nursery() as nursery:

        async def run() -> None:
            results.append(await ends.prompt(command))

        nursery.start_soon(run)
        await until(ends.turn_running)
        if command == "nested":
            for method in NESTED:
                await ends.client.wait_for_requests(method)
        await ends.agent.cancel(ends.session_id)
    return results[0]


@scenario
async def wait_for_cancel_then_session_cancel(ends: Ends) -> None:
    result = await cancelled_by_session_cancel(ends, "wait_for_cancel")
    assert result.stop_reason == "cancelled"
    await ends_its_turn(ends, "echo after", ["after"])


@scenario
async def wait_for_cancel_then_cancel_request(ends: Ends) -> None:
    with trio.CancelScope() as scope:
        async with trio.open_nursery() as nursery:

            async def cancel_when_running() -> None:
                await until(ends.turn_running)
                scope.cancel()

            nursery.start_soon(cancel_when_running)
            await ends.prompt("wait_for_cancel")
    assert scope.cancelled_caught
    # The agent saw $/cancel_request: its turn ended.
    await until(lambda: not ends.turn_running())
    await ends_its_turn(ends, "echo after", ["after"])


@scenario
async def permission_then_session_cancel(ends: Ends) -> None:
    result = await cancelled_by_session_cancel(ends, "permission")
    assert result.stop_reason == "cancelled"


@scenario
async def nested_then_session_cancel_cascades(ends: Ends) -> None:
    result = await cancelled_by_session_cancel(ends, "nested")
    assert result.stop_reason == "cancelled"
    await until(lambda: len(ends.client.cancelled) >= 3)
    assert sorted(ends.client.cancelled) == NESTED
    await ends_its_turn(ends, "echo after", ["after"])


@scenario
async def nested_then_cancel_request_cascades(ends: Ends) -> None:
    with trio.CancelScope() as scope:
        async with trio.open_nursery() as nursery:

            async def cancel_when_held() -> None:
                for method in NESTED:
                    await ends.client.wait_for_requests(method)
                scope.cancel()

            nursery.start_soon(cancel_when_held)
            await ends.prompt("nested")
    assert scope.cancelled_caught
    await until(lambda: len(ends.client.cancelled) >= 3)
    assert sorted(ends.client.cancelled) == NESTED
    await ends_its_turn(ends, "echo after", ["after"])


@scenario
async def deadline_cancels_its_nested_read(ends: Ends) -> None:
    with pytest.raises(RequestError) as info:
        await ends.prompt("deadline 200")
    assert info.value.code == -32800
    await until(lambda: bool(ends.client.cancelled))
    assert ends.client.cancelled == ["fs/read_text_file"]


@scenario
async def a_stray_cancel_request_changes_nothing(ends: Ends) -> None:
    await ends_its_turn(ends, "echo one", ["one"])
    for request_id in (1, 2, 10**6, "nope"):
        await ends.agent.connection.notify("$/cancel_request", {"requestId": request_id})
    await ends_its_turn(ends, "echo two", ["one", "two"])


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("name", sorted(SCENARIOS))
async def test_the_vocabulary_over_each_profile(profile: str, name: str) -> None:
    with trio.fail_after(LIMIT):
        async with connected(profile) as ends:
            await SCENARIOS[name](ends)
