"""The Streamable HTTP client's TLS context: left to verify as by default,
every HTTP client of every connection shares one context, made once (each
made its own, loading the certificate store each time: some 20 to 60 ms of
CPU, two or three times a connection, ``http://`` too)."""

from __future__ import annotations

from typing import Any

import httpcore2
import pytest
import trio

from acp_trio import schema
from acp_trio.remote import _http_client, agent_app, open_remote_agent
from acp_trio.testing import ScenarioAgent, ScenarioClient

from .conftest import LIMIT, running

pytestmark = pytest.mark.timeout(LIMIT)


async def test_connections_share_one_default_tls_context(monkeypatch: Any) -> None:
    made: list[object] = []
    default_ssl_context = httpcore2.default_ssl_context

    def counted(*args: Any, **kwargs: Any) -> Any:
        context = default_ssl_context(*args, **kwargs)
        made.append(context)
        return context

    monkeypatch.setattr(httpcore2, "default_ssl_context", counted)
    monkeypatch.setattr(_http_client, "_default_tls", None, raising=False)
    async with running(agent_app(ScenarioAgent)) as base:
        for profile in ("http1", "http", "http1"):
            client = ScenarioClient()
            async with open_remote_agent(client, base + "/acp", profile=profile) as agent:
                await agent.initialize(client.initialize_request())
                for _ in range(2):  # (over h2c, each session's stream a client of its own)
                    session = await agent.new_session(
                        schema.NewSessionRequest(cwd="/", mcp_servers=[])
                    )
                    reply = await agent.prompt_text(session.session_id, "echo shared")
                    assert reply.stop_reason == "end_turn"
            assert client.texts() == ["shared", "shared"]
    assert len(made) == 1, f"{len(made)} TLS contexts made for 3 connections"


async def test_a_context_given_is_used_as_given() -> None:
    import ssl

    context = ssl.create_default_context()
    assert _http_client.tls_context(context) is context
    assert _http_client.tls_context(False) is False
    first = _http_client.tls_context(True)
    assert isinstance(first, ssl.SSLContext)
    assert _http_client.tls_context(True) is first
    await trio.lowlevel.checkpoint()
