"""``session/update`` for a session the client does not know yet.

An agent may send updates for a new session before it answers
``session/new`` (ACP allows it; real adapters send commands and modes
early). The client application learns the id from that answer, so the SDK
holds those updates back and delivers them, in order, once ``new_session``
has returned; nothing is lost, memory stays bounded, and sessions the
client names itself (load, resume) get their updates as they come.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
import trio
import trio.lowlevel

import acp_trio
from acp_trio import Agent, Client
from acp_trio.schema import (
    AgentCapabilities,
    InitializeRequest,
    InitializeResponse,
    LoadSessionRequest,
    LoadSessionResponse,
    NewSessionRequest,
    NewSessionResponse,
    SessionNotification,
)

from .conftest import INIT, LIMIT, NEW_SESSION, limit, notif, ok, open_pair, raw_agent


class SessionTable(Client):
    """A client as applications write them: a table of its sessions, filled
    in when ``new_session`` returns, and updates looked up in it."""

    def __init__(self) -> None:
        self.sessions: dict[str, list[str]] = {}
        #: (session id, text, whether the session was in the table).
        self.seen: list[tuple[str, str, bool]] = []

    async def session_update(self, params: SessionNotification) -> None:
        content: Any = getattr(params.update, "content", None)
        text = getattr(content, "text", "?")
        known = params.session_id in self.sessions
        self.seen.append((params.session_id, text, known))
        self.sessions[params.session_id].append(text)  # KeyError when unknown

    async def new_session(self, params: NewSessionRequest = NEW_SESSION) -> str:
        session = await self.agent.new_session(params)
        self.sessions[session.session_id] = []
        return session.session_id


def chunk(session_id: str, text: str) -> dict[str, Any]:
    return notif(
        "session/update",
        {
            "sessionId": session_id,
            "update": {
                "sessionUpdate": "agent_message_chunk",
                "content": {"type": "text", "text": text},
            },
        },
    )


INIT_REPLY = {"protocolVersion": 1, "agentCapabilities": {"loadSession": True}}


async def initialized(peer: Any, to_agent: Any, nursery: trio.Nursery) -> None:
    nursery.start_soon(to_agent.initialize, INIT)
    request = await peer.receive()
    await peer.send(ok(request["id"], INIT_REPLY))


async def settle() -> None:
    for _ in range(20):
        await trio.lowlevel.checkpoint()


async def test_updates_sent_before_the_session_new_reply_arrive_after_it_in_order(
    autojump_clock: trio.abc.Clock,
) -> None:
    client = SessionTable()
    with trio.fail_after(LIMIT):
        async with raw_agent(client) as (peer, to_agent, _wire), trio.open_nursery() as nursery:
            await initialized(peer, to_agent, nursery)
            await settle()
            result: list[str] = []

            async def create() -> None:
                result.append(await client.new_session())

            nursery.start_soon(create)
            request = await peer.receive()
            assert request["method"] == "session/new"
            # Two updates before the answer, one after it, in one chunk.
            await peer.send(
                chunk("s1", "commands"),
                chunk("s1", "modes"),
                ok(request["id"], {"sessionId": "s1"}),
                chunk("s1", "after"),
            )
            await settle()
            assert result == ["s1"]
            assert client.seen == [
                ("s1", "commands", True),
                ("s1", "modes", True),
                ("s1", "after", True),
            ]
            assert client.sessions == {"s1": ["commands", "modes", "after"]}
            assert to_agent.known_sessions == {"s1"}
            nursery.cancel_scope.cancel()


async def test_an_update_read_after_the_reply_waits_behind_the_held_ones(
    autojump_clock: trio.abc.Clock,
) -> None:
    client = SessionTable()
    with trio.fail_after(LIMIT):
        async with raw_agent(client) as (peer, to_agent, _wire), trio.open_nursery() as nursery:
            await initialized(peer, to_agent, nursery)
            await settle()
            nursery.start_soon(client.new_session)
            request = await peer.receive()
            await peer.send(chunk("s1", "early"), ok(request["id"], {"sessionId": "s1"}))
            # A later update sent as a separate chunk, as soon as possible.
            await peer.send(chunk("s1", "late"))
            await settle()
            assert [text for _, text, _ in client.seen] == ["early", "late"]
            assert all(known for *_, known in client.seen)
            nursery.cancel_scope.cancel()


class EarlyAgent(Agent):
    """A typed agent that streams three updates for a new session before it
    answers ``session/new``, and one right after (outside any turn)."""

    def __init__(self) -> None:
        self.count = 0

    async def initialize(self, params: InitializeRequest) -> InitializeResponse:
        return InitializeResponse(protocol_version=1, agent_capabilities=AgentCapabilities())

    async def new_session(self, params: NewSessionRequest) -> NewSessionResponse:
        self.count += 1
        session_id = f"session-{self.count}"
        for text in ("one", "two", "three"):
            await self.client.send_text(session_id, text)
        return NewSessionResponse(session_id=session_id)


@pytest.mark.parametrize("transport", ["memory", "pipes"])
async def test_a_typed_agent_streaming_before_its_answer(
    transport: str, request: pytest.FixtureRequest
) -> None:
    if transport == "memory":
        request.getfixturevalue("autojump_clock")
    client = SessionTable()
    with trio.fail_after(limit(transport)):
        async with open_pair(EarlyAgent(), client, transport) as (to_agent, to_client, *_):
            await to_agent.initialize(INIT)
            first = await client.new_session()
            second = await client.new_session()
            # An update outside any turn, for a session the client knows.
            await to_client.send_text(first, "idle")
            while len(client.seen) < 7:  # noqa: ASYNC110 (polling a plain list)
                await trio.sleep(0.01)
    assert (first, second) == ("session-1", "session-2")
    assert client.sessions == {
        "session-1": ["one", "two", "three", "idle"],
        "session-2": ["one", "two", "three"],
    }
    assert all(known for *_, known in client.seen)


async def test_updates_for_a_session_never_created_are_delivered_not_lost(
    autojump_clock: trio.abc.Clock,
) -> None:
    client = SessionTable()
    client.sessions["other"] = []
    with trio.fail_after(LIMIT):
        async with raw_agent(client) as (peer, to_agent, _wire), trio.open_nursery() as nursery:
            await initialized(peer, to_agent, nursery)
            await settle()
            nursery.start_soon(client.new_session)
            request = await peer.receive()
            await peer.send(chunk("other", "a"), chunk("s1", "b"), chunk("other", "c"))
            await settle()
            # Held while session/new may be about to create them.
            assert client.seen == []
            await peer.send(ok(request["id"], {"sessionId": "s1"}))
            await settle()
            assert client.sessions == {"other": ["a", "c"], "s1": ["b"]}
            nursery.cancel_scope.cancel()


@pytest.mark.parametrize("ending", ["error", "cancelled"])
async def test_held_updates_are_delivered_when_session_new_fails(
    ending: str, autojump_clock: trio.abc.Clock
) -> None:
    client = SessionTable()
    client.sessions["s1"] = []  # the application knows it some other way
    with trio.fail_after(LIMIT):
        async with raw_agent(client) as (peer, to_agent, _wire), trio.open_nursery() as nursery:
            await initialized(peer, to_agent, nursery)
            await settle()
            scope = trio.CancelScope()

            async def create() -> None:
                with scope:
                    if ending == "error":
                        with pytest.raises(acp_trio.RequestError, match="no"):
                            await to_agent.new_session(NEW_SESSION)
                    else:
                        await to_agent.new_session(NEW_SESSION)
                        raise AssertionError("new_session should have been cancelled")

            nursery.start_soon(create)
            request = await peer.receive()
            await peer.send(chunk("s1", "early"))
            await settle()
            assert client.seen == []
            if ending == "error":
                await peer.send(
                    {
                        "jsonrpc": "2.0",
                        "id": request["id"],
                        "error": {"code": -32603, "message": "no"},
                    }
                )
            else:
                scope.cancel()
            await settle()
            assert client.seen == [("s1", "early", True)]
            assert to_agent.known_sessions == set()
            nursery.cancel_scope.cancel()


async def test_the_bound_delivers_instead_of_growing(
    autojump_clock: trio.abc.Clock, caplog: pytest.LogCaptureFixture
) -> None:
    client = SessionTable()
    client.sessions["s1"] = []
    with trio.fail_after(LIMIT):
        async with raw_agent(client) as (peer, to_agent, _wire), trio.open_nursery() as nursery:
            to_agent.early_update_limit = 3
            await initialized(peer, to_agent, nursery)
            await settle()
            nursery.start_soon(to_agent.new_session, NEW_SESSION)
            request = await peer.receive()
            held: list[int] = []
            for i in range(10):
                await peer.send(chunk("s1", str(i)))
                await settle()
                # Held back: sent, and not delivered to the client yet.
                held.append(i + 1 - len(client.sessions["s1"]))
            assert max(held) == 3
            # Past the bound, updates were delivered before the answer, in order.
            early = client.sessions["s1"]
            assert early == [str(i) for i in range(len(early))]
            assert len(early) >= 7
            await peer.send(ok(request["id"], {"sessionId": "s1"}))
            await settle()
            assert client.sessions["s1"] == [str(i) for i in range(10)]
            nursery.cancel_scope.cancel()
    assert any(
        "held back" in r.getMessage() for r in caplog.records if r.levelno == logging.WARNING
    )
    with pytest.raises(ValueError, match="negative"):
        to_agent.early_update_limit = -1


async def test_no_session_new_pending_means_no_holding(autojump_clock: trio.abc.Clock) -> None:
    client = SessionTable()
    client.sessions["elsewhere"] = []
    with trio.fail_after(LIMIT):
        async with raw_agent(client) as (peer, to_agent, _wire), trio.open_nursery() as nursery:
            await initialized(peer, to_agent, nursery)
            await settle()
            await peer.send(chunk("elsewhere", "now"))
            await settle()
            assert client.seen == [("elsewhere", "now", True)]
            nursery.cancel_scope.cancel()


async def test_a_loaded_session_gets_its_replay_while_loading(
    autojump_clock: trio.abc.Clock,
) -> None:
    """A session the client names itself is known from the request: its
    history replayed before the load answer is delivered as it comes, even
    while a session/new is pending."""
    client = SessionTable()
    client.sessions["old"] = []
    with trio.fail_after(LIMIT):
        async with raw_agent(client) as (peer, to_agent, _wire), trio.open_nursery() as nursery:
            await initialized(peer, to_agent, nursery)
            await settle()
            nursery.start_soon(to_agent.new_session, NEW_SESSION)
            new_request = await peer.receive()
            loaded: list[LoadSessionResponse] = []

            async def load() -> None:
                loaded.append(
                    await to_agent.load_session(
                        LoadSessionRequest(session_id="old", cwd="/work", mcp_servers=[])
                    )
                )

            nursery.start_soon(load)
            load_request = await peer.receive()
            assert load_request["method"] == "session/load"
            await peer.send(chunk("old", "history 1"), chunk("old", "history 2"))
            await settle()
            assert client.seen == [("old", "history 1", True), ("old", "history 2", True)]
            assert loaded == []
            await peer.send(ok(load_request["id"], {}), ok(new_request["id"], {"sessionId": "n"}))
            await settle()
            assert len(loaded) == 1
            assert to_agent.known_sessions == {"old", "n"}
            nursery.cancel_scope.cancel()
