"""A Streamable HTTP connection outlives a thousand client messages: each is
a POST on the same HTTP connection, and hypercorn's default cap of 1000
requests per connection ended an HTTP/2 connection under the POST that
crossed it (a ``GOAWAY``; the connection was lost)."""

from __future__ import annotations

import pytest
import trio

from acp_trio import schema
from acp_trio.remote import agent_app, open_remote_agent
from acp_trio.testing import ScenarioAgent, ScenarioClient

from .conftest import LIMIT, running


@pytest.mark.timeout(5 * LIMIT)
@pytest.mark.parametrize("profile", ["http", "http1"])
async def test_more_than_a_thousand_posts_on_one_connection(profile: str) -> None:
    # 1,100 round trips: a watchdog for a busy machine (under coverage, beside
    # other workers), not a measure of their speed.
    with trio.fail_after(4 * LIMIT):
        async with running(agent_app(ScenarioAgent)) as base:
            client = ScenarioClient()
            async with open_remote_agent(client, base + "/acp", profile=profile) as agent:  # type: ignore[arg-type]
                await agent.initialize(client.initialize_request())
                session = await agent.new_session(schema.NewSessionRequest(cwd="/", mcp_servers=[]))
                # 1,100 reads: each answer is a POST.
                result = await agent.prompt_text(session.session_id, "read 1100 /x")
    assert result.stop_reason == "end_turn"
    assert client.texts() == [f"read 1100 {1100 * 64}"]
