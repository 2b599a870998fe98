"""``open_remote_agent(reconnect=...)``: when the transport is lost beyond
repair, the client reconnects, initializes again and takes up its sessions
(``session/resume``, else ``session/load``, else the session is lost); what
was in flight fails with a clear error instead of hanging."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import attrs
import pytest
import trio

import acp_trio
from acp_trio import schema, serve_agent
from acp_trio._jsonrpc import OversizedFrame
from acp_trio.lowlevel import MessageStream
from acp_trio.remote import (
    Reconnect,
    RemoteApp,
    ReplyLost,
    SessionLost,
    open_remote_agent,
    serve_remote,
)
from acp_trio.testing import ScenarioAgent, ScenarioClient

from .conftest import LIMIT, running, until

PROFILES = ["websocket", "http", "http1"]
FAST = Reconnect(initial_delay=0.01, max_delay=0.1)


@attrs.define
class Store:
    """What the agent keeps beyond one connection (as on disk)."""

    sessions: set[str] = attrs.Factory(set)
    taken_up: list[tuple[str, str]] = attrs.Factory(list)
    #: Each connection served (the last one: ``cut()``).
    connections: list[Cuttable] = attrs.Factory(list)

    def cut(self) -> None:
        self.connections[-1].cut()


class Cuttable:
    """The server's side of one connection, which the test can cut as a
    network failure would: nothing more is sent (not even the answers of
    the handlers it cancels), the transport closes."""

    def __init__(self, inner: MessageStream) -> None:
        self.inner = inner
        self.scope = trio.CancelScope()
        self._cut = False

    def cut(self) -> None:
        self._cut = True
        self.scope.cancel()

    @property
    def max_message_size(self) -> int:
        return self.inner.max_message_size

    async def receive_message(self) -> bytes | OversizedFrame | None:
        return await self.inner.receive_message()

    async def send_message(self, message: bytes) -> None:
        if self._cut:
            raise trio.BrokenResourceError("cut")
        await self.inner.send_message(message)

    async def aclose(self) -> None:
        await self.inner.aclose()


class ForgetfulAgent(ScenarioAgent):
    """Sessions with ids unique across connections, nothing to take them up."""

    def __init__(self, store: Store) -> None:
        super().__init__()
        self.store = store

    async def new_session(self, params: schema.NewSessionRequest) -> schema.NewSessionResponse:
        session_id = f"durable-{uuid.uuid4().hex[:8]}"
        self.sessions.add(session_id)
        self.store.sessions.add(session_id)
        return schema.NewSessionResponse(session_id=session_id)

    def take_up(self, method: str, session_id: str) -> None:
        if session_id not in self.store.sessions:
            raise acp_trio.RequestError.resource_not_found(session_id)
        self.sessions.add(session_id)
        self.store.taken_up.append((method, session_id))


class ResumingAgent(ForgetfulAgent):
    async def resume_session(
        self, params: schema.ResumeSessionRequest
    ) -> schema.ResumeSessionResponse:
        self.take_up("session/resume", params.session_id)
        return schema.ResumeSessionResponse()


class LoadingAgent(ForgetfulAgent):
    async def load_session(self, params: schema.LoadSessionRequest) -> schema.LoadSessionResponse:
        self.take_up("session/load", params.session_id)
        await self.client.send_text(params.session_id, "history")
        return schema.LoadSessionResponse()


def durable_app(agent: type[ForgetfulAgent], store: Store, **options: Any) -> RemoteApp:
    async def handle(stream: MessageStream) -> None:
        cuttable = Cuttable(stream)
        store.connections.append(cuttable)
        with cuttable.scope:
            await serve_agent(lambda: agent(store), cuttable)

    return RemoteApp(handle, idle_timeout=None, **options)


@asynccontextmanager
async def connected(
    base: str, client: ScenarioClient, profile: str, reconnect: Reconnect | None = FAST
) -> AsyncIterator[tuple[acp_trio.AgentProxy, str]]:
    async with open_remote_agent(
        client,
        base + "/acp",
        profile=profile,  # type: ignore[arg-type]
        reconnect=reconnect,
    ) as agent:
        await agent.initialize(client.initialize_request())
        session = await agent.new_session(schema.NewSessionRequest(cwd="/", mcp_servers=[]))
        yield agent, session.session_id


async def lose_mid_turn(
    agent: acp_trio.AgentProxy, client: ScenarioClient, session_id: str, store: Store
) -> BaseException:
    """Drop the server's side of the connection while a prompt waits on a
    permission request to the client; what the prompt raised."""
    failures: list[BaseException] = []
    async with trio.open_nursery() as nursery:

        async def run() -> None:
            try:
                await agent.prompt_text(session_id, "permission")
            except BaseException as exc:
                failures.append(exc)
                if not isinstance(exc, acp_trio.ACPError):
                    raise

        nursery.start_soon(run)
        await client.wait_for_requests("session/request_permission")
        store.cut()
    (failure,) = failures
    return failure


@pytest.mark.parametrize("profile", PROFILES)
async def test_a_lost_connection_is_reconnected_and_its_session_resumed(profile: str) -> None:
    store = Store()
    with trio.fail_after(LIMIT):
        async with running(durable_app(ResumingAgent, store)) as base:
            client = ScenarioClient()
            async with connected(base, client, profile) as (agent, session_id):
                await agent.prompt_text(session_id, "echo before")
                failure = await lose_mid_turn(agent, client, session_id, store)
                # The prompt's reply is lost: a clear error, not a hang.
                assert isinstance(failure, ReplyLost)
                assert failure.method == "session/prompt"
                assert failure.session_id == session_id
                # The agent's request our handler was holding was cancelled.
                await until(lambda: not agent.connection.request_tree())
                result = await agent.prompt_text(session_id, "echo after")
                assert result.stop_reason == "end_turn"
                assert client.texts(session_id)[-1] == "after"
                assert store.taken_up == [("session/resume", session_id)]
                assert len(store.connections) == 2
                # A second loss, between turns: once the client has seen it
                # and reconnected, nothing is lost.
                store.cut()
                await until(lambda: len(store.taken_up) == 2)
                result = await agent.prompt_text(session_id, "read 2 /tmp/x")
                assert result.stop_reason == "end_turn"
                assert client.texts(session_id)[-1] == "read 2 128"


@pytest.mark.parametrize("profile", PROFILES)
async def test_without_resume_a_session_is_loaded_and_its_history_not_repeated(
    profile: str,
) -> None:
    store = Store()
    with trio.fail_after(LIMIT):
        async with running(durable_app(LoadingAgent, store)) as base:
            client = ScenarioClient()
            async with connected(base, client, profile) as (agent, session_id):
                await agent.prompt_text(session_id, "echo before")
                store.cut()
                await until(lambda: len(store.connections) == 2)
                result = await agent.prompt_text(session_id, "echo after")
                assert result.stop_reason == "end_turn"
                assert store.taken_up == [("session/load", session_id)]
                texts = client.texts(session_id)
                if profile == "websocket":
                    assert texts == ["before", "after"]
                else:
                    # The RFD puts load's reply on the connection's stream and
                    # the history on the session's: no order between them, so
                    # the history may come after the reply, and is passed on.
                    assert texts in (["before", "after"], ["before", "history", "after"])


@pytest.mark.parametrize("profile", PROFILES)
async def test_a_session_the_agent_cannot_take_up_is_lost(profile: str) -> None:
    store = Store()
    with trio.fail_after(LIMIT):
        async with running(durable_app(ForgetfulAgent, store)) as base:
            client = ScenarioClient()
            async with connected(base, client, profile) as (agent, session_id):
                store.cut()
                await until(lambda: len(store.connections) == 2)
                with pytest.raises(SessionLost) as info:
                    await agent.prompt_text(session_id, "echo after")
                assert info.value.session_id == session_id
                assert "neither session/resume nor session/load" in info.value.reason
                # The connection itself is back: a new session works.
                session = await agent.new_session(schema.NewSessionRequest(cwd="/", mcp_servers=[]))
                result = await agent.prompt_text(session.session_id, "echo new")
                assert result.stop_reason == "end_turn"


@pytest.mark.parametrize("profile", PROFILES)
async def test_out_of_attempts_calls_fail_with_connection_closed(profile: str) -> None:
    store = Store()
    policy = Reconnect(attempts=2, initial_delay=0.01, max_delay=0.02)
    client = ScenarioClient()
    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            server = trio.CancelScope()

            async def serve(task_status: trio.TaskStatus[list[str]]) -> None:
                with server:
                    await serve_remote(
                        durable_app(ResumingAgent, store), 0, task_status=task_status
                    )

            (base,) = await nursery.start(serve)
            async with connected(base, client, profile, policy) as (agent, session_id):
                # The server stops for good: every try fails, then calls do.
                server.cancel()
                # (A prompt sent before the client saw the loss: ReplyLost.)
                failure: acp_trio.ConnectionClosed | None = None
                while failure is None:
                    try:
                        await agent.prompt_text(session_id, "echo again")
                    except ReplyLost:
                        pass
                    except acp_trio.ConnectionClosed as exc:
                        failure = exc


@pytest.mark.parametrize("profile", PROFILES)
async def test_without_reconnect_a_lost_transport_ends_the_connection(profile: str) -> None:
    store = Store()
    with trio.fail_after(LIMIT):
        async with running(durable_app(ResumingAgent, store)) as base:
            client = ScenarioClient()
            async with connected(base, client, profile, None) as (agent, session_id):
                failure = await lose_mid_turn(agent, client, session_id, store)
                assert isinstance(failure, acp_trio.ConnectionClosed)
                assert not isinstance(failure, ReplyLost)
            assert store.taken_up == []


async def test_the_first_transport_failing_to_open_is_raised_at_once() -> None:
    with trio.fail_after(LIMIT):
        listener = (await trio.open_tcp_listeners(0, host="127.0.0.1"))[0]
        port = listener.socket.getsockname()[1]
        await listener.aclose()  # a port nobody listens on
        with pytest.raises(OSError, match="connect"):
            async with open_remote_agent(
                ScenarioClient(), f"ws://127.0.0.1:{port}/acp", reconnect=FAST
            ):
                pass  # pragma: no cover


class StuckAgent(ForgetfulAgent):
    async def resume_session(
        self, params: schema.ResumeSessionRequest
    ) -> schema.ResumeSessionResponse:
        await trio.sleep_forever()
        raise AssertionError  # pragma: no cover


async def test_a_reconnection_the_agent_never_completes_gives_up() -> None:
    store = Store()
    policy = Reconnect(attempts=2, initial_delay=0.01, max_delay=0.02, timeout=0.2)
    with trio.fail_after(LIMIT):
        async with running(durable_app(StuckAgent, store)) as base:
            client = ScenarioClient()
            async with connected(base, client, "websocket", policy) as (agent, session_id):
                store.cut()
                failure: acp_trio.ConnectionClosed | None = None
                while failure is None:
                    try:
                        await agent.prompt_text(session_id, "echo again")
                    except ReplyLost:
                        pass
                    except acp_trio.ConnectionClosed as exc:
                        failure = exc
                # The first connection, then one per try.
                assert len(store.connections) == 1 + 2


@pytest.mark.parametrize("profile", ["http", "http1"])
async def test_a_resumed_stream_refused_409_falls_back_to_session_resume(profile: str) -> None:
    store = Store()
    app = durable_app(ResumingAgent, store, resumable=True, replay_size=1)
    with trio.fail_after(LIMIT):
        async with running(app) as base:
            client = ScenarioClient()
            async with open_remote_agent(
                client,
                base + "/acp",
                profile=profile,  # type: ignore[arg-type]
                resumable=True,
                reconnect=FAST,
            ) as agent:
                await agent.initialize(client.initialize_request())
                new = schema.NewSessionRequest(cwd="/", mcp_servers=[])
                session_id = (await agent.new_session(new)).session_id
                # The connection's stream moves past what the client holds,
                # then drops: its resume gets 409.
                (connection,) = app.http.connections.values()
                box = connection.outboxes[None]
                assert box.replay is not None
                assert box.reader is not None
                box.replay.add(b"{}")
                box.replay.add(b"{}")
                box.reader.cancel()
                await until(lambda: len(store.taken_up) == 1)
                result = await agent.prompt_text(session_id, "echo after")
                assert result.stop_reason == "end_turn"
                assert store.taken_up == [("session/resume", session_id)]
                # The old HTTP connection was ended (DELETE), the new one serves.
                await until(lambda: connection.id not in app.http.connections)
                assert len(app.http.connections) == 1


async def test_a_websocket_connection_the_server_ended_is_reconnected() -> None:
    # Resumable on both ends: the server ended the connection, so resuming
    # the WebSocket gets 4404, and reconnect takes over.
    store = Store()
    app = durable_app(ResumingAgent, store, resumable=True)
    with trio.fail_after(LIMIT):
        async with running(app) as base:
            client = ScenarioClient()
            async with open_remote_agent(
                client, base + "/acp", profile="websocket", resumable=True, reconnect=FAST
            ) as agent:
                await agent.initialize(client.initialize_request())
                new = schema.NewSessionRequest(cwd="/", mcp_servers=[])
                session_id = (await agent.new_session(new)).session_id
                store.cut()
                await until(lambda: len(store.taken_up) == 1)
                result = await agent.prompt_text(session_id, "echo after")
                assert result.stop_reason == "end_turn"
                assert store.taken_up == [("session/resume", session_id)]
