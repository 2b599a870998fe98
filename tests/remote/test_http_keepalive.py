"""An idle HTTP connection is let go by the client well before the server
closes it. Both sides used to keep one for 5 s (httpx2's default and
hypercorn's), so a request sent as the server closed its idle connection
was lost to a broken pipe: h2c, 1,000 clients opening at once
(benchmarks/bench_scale.py), 36 to 657 connections lost. Now our client
lets go after 4 s (below the 5 s of hypercorn's, uvicorn's and Node's
defaults) and our server keeps one 30 s (past every common client's)."""

from __future__ import annotations

import functools
from typing import Any

import pytest
import trio
from hypercorn.config import Config

import acp_trio
from acp_trio import schema
from acp_trio.remote import agent_app, open_http_stream
from acp_trio.remote._http_client import KEEPALIVE_EXPIRY
from acp_trio.remote._serve import hypercorn_config, serve_front
from acp_trio.testing import ScenarioAgent, ScenarioClient

from .conftest import LIMIT

pytestmark = pytest.mark.timeout(LIMIT)


class PostsSeen:
    """The app, noting the client port of every POST (its TCP connection)."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.max_message_size = app.max_message_size
        self.ports: list[int] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            self.ports.append(scope["client"][1])
        await self.app(scope, receive, send)


def test_the_client_lets_go_of_an_idle_connection_before_the_server_does() -> None:
    assert Config().keep_alive_timeout > KEEPALIVE_EXPIRY  # a hypercorn server of defaults
    ours = hypercorn_config(agent_app(ScenarioAgent), "127.0.0.1", 0)
    assert ours.keep_alive_timeout >= 6 * 5.0  # past httpx2's 5 s with room for a lagging loop


@pytest.mark.parametrize("profile", ["http", "http1"])
async def test_a_connection_idle_past_the_expiry_is_not_used_again(profile: str) -> None:
    app = PostsSeen(agent_app(ScenarioAgent))
    config = hypercorn_config(app, "127.0.0.1", 0)  # type: ignore[arg-type]
    assert config.keep_alive_timeout >= 5  # the server keeps an idle connection longer
    client = ScenarioClient()
    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            binds = await nursery.start(functools.partial(serve_front, app, config))
            async with (
                open_http_stream(
                    binds[0] + "/acp", http2=profile == "http", keepalive_expiry=5.0
                ) as stream,
                acp_trio.open_agent(client, stream) as agent,
            ):
                await agent.initialize(client.initialize_request())
                request = schema.NewSessionRequest(cwd="/", mcp_servers=[])
                session = (await agent.new_session(request)).session_id
                await agent.prompt_text(session, "echo a")
                before = app.ports[-1]
                await agent.prompt_text(session, "echo b")
                assert app.ports[-1] == before  # in use: kept
                await trio.sleep(7.0)  # idle past the client's 5 s, short of the server's 30 s
                await agent.prompt_text(session, "echo c")
                assert app.ports[-1] != before  # a new connection, not the old one
            nursery.cancel_scope.cancel()
    assert client.texts() == ["a", "b", "c"]
