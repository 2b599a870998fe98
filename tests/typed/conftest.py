"""Shared helpers for the tests of the typed Agent and Client APIs.

Rules: every test runs under ``trio.fail_after``; tests on memory streams use
the autojump clock (``autojump_clock`` or ``clock``), so their time limits and
delays are virtual seconds. Tests on real pipes and processes run on the real
clock (the autojump clock would jump while bytes sit in the kernel).

- :class:`Wire` records the frames one side sent and read (its ``trace``).
- :func:`raw_peer` is the shipped :class:`~acp_trio.testing.ScriptedPeer`,
  writing exact JSON for the cases a typed peer cannot produce (a cancel in
  the same chunk, garbage params).
- :class:`ScriptedAgent` and :class:`RecordingClient` are the typed sides:
  the agent's prompt runs a per-test script, the client records everything
  and holds requests open on demand.
- :func:`open_pair` connects them over memory (``open_agent_client_pair``)
  or over two real OS pipes (``open_client``/``open_agent``).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
import trio.lowlevel
import trio.testing
from connection.conftest import pipe_stream_pair
from frames import Message
from frames import notif as notif  # re-exported for the api tests
from frames import ok as ok
from frames import req as req

import acp_trio
from acp_trio import Agent, AgentProxy, Client, ClientProxy, ConnectionConfig
from acp_trio.schema import (
    AgentCapabilities,
    ClientCapabilities,
    CloseSessionRequest,
    CloseSessionResponse,
    CreateElicitationRequest,
    CreateElicitationResponse,
    CreateElicitationResponseDecline,
    CreateTerminalRequest,
    CreateTerminalResponse,
    FileSystemCapabilities,
    Implementation,
    InitializeRequest,
    InitializeResponse,
    KillTerminalRequest,
    KillTerminalResponse,
    NewSessionRequest,
    NewSessionResponse,
    PromptRequest,
    PromptResponse,
    ReadTextFileRequest,
    ReadTextFileResponse,
    ReleaseTerminalRequest,
    ReleaseTerminalResponse,
    RequestPermissionRequest,
    RequestPermissionResponse,
    SessionNotification,
    TerminalOutputRequest,
    TerminalOutputResponse,
    WaitForTerminalExitRequest,
    WaitForTerminalExitResponse,
    WriteTextFileRequest,
    WriteTextFileResponse,
)
from acp_trio.testing import ScriptedPeer

#: Virtual seconds a memory test may take.
LIMIT = 600
#: Real seconds a pipe or process test may take.
REAL_LIMIT = 20

FULL_CAPS = ClientCapabilities(
    fs=FileSystemCapabilities(read_text_file=True, write_text_file=True), terminal=True
)
INIT = InitializeRequest(protocol_version=1, client_capabilities=FULL_CAPS)
NEW_SESSION = NewSessionRequest(cwd="/work", mcp_servers=[])

#: What the typed client answers a cancelled permission request, on the wire.
CANCELLED_OUTCOME = {"outcome": {"outcome": "cancelled"}}


# ----------------------------------------------------------------------
# Clocks and transports


@pytest.fixture
def autojump_clock() -> trio.testing.MockClock:
    return trio.testing.MockClock(autojump_threshold=0)


@pytest.fixture(params=["memory", "pipe"])
def transport(request: pytest.FixtureRequest) -> str:
    param: str = request.param
    return param


@pytest.fixture
def clock(transport: str) -> trio.testing.MockClock | None:
    """The autojump clock on memory streams; the real clock on pipes."""
    return trio.testing.MockClock(autojump_threshold=0) if transport == "memory" else None


def limit(transport: str) -> float:
    return LIMIT if transport == "memory" else REAL_LIMIT


# ----------------------------------------------------------------------
# Wire observation


def is_response(msg: Any) -> bool:
    return isinstance(msg, dict) and "method" not in msg and ("result" in msg or "error" in msg)


def is_request(msg: Any) -> bool:
    return isinstance(msg, dict) and "method" in msg and "id" in msg


def is_notification(msg: Any) -> bool:
    return isinstance(msg, dict) and "method" in msg and "id" not in msg


class Wire:
    """A ``trace`` hook keeping every frame one side sent and read."""

    def __init__(self) -> None:
        self.frames: list[tuple[str, Any]] = []
        self._changed = trio.Event()

    def __call__(self, direction: str, frame: bytes) -> None:
        self.frames.append((direction, json.loads(frame)))
        self._changed.set()
        self._changed = trio.Event()

    async def wait_until(self, predicate: Callable[[], object]) -> None:
        """Wait until ``predicate()`` is true, checking at each new frame
        (for late frames, also on real pipes)."""
        while not predicate():
            await self._changed.wait()

    async def wait_for_response(self, request_id: Any) -> None:
        """Until this side has answered ``request_id``."""
        await self.wait_until(lambda: self.sent_responses(request_id))

    def sent(self) -> list[Any]:
        return [m for d, m in self.frames if d == "send"]

    def received(self) -> list[Any]:
        return [m for d, m in self.frames if d == "recv"]

    def sent_requests(self, method: str | None = None) -> list[Message]:
        return [m for m in self.sent() if is_request(m) and method in (None, m["method"])]

    def sent_notifications(self, method: str | None = None) -> list[Message]:
        return [m for m in self.sent() if is_notification(m) and method in (None, m["method"])]

    def sent_responses(self, request_id: Any = ...) -> list[Message]:
        return [m for m in self.sent() if is_response(m) and request_id in (..., m["id"])]

    def sent_cancels(self) -> list[Any]:
        return [m["params"]["requestId"] for m in self.sent_notifications("$/cancel_request")]

    def received_request_id(self, method: str) -> Any:
        """The id of the one request of ``method`` this side read."""
        (msg,) = [m for m in self.received() if is_request(m) and m["method"] == method]
        return msg["id"]

    def request_id(self, method: str) -> Any:
        """The id of the one request of ``method`` this side sent."""
        (msg,) = self.sent_requests(method)
        return msg["id"]

    def methods_sent(self) -> list[str]:
        """Method names of the sent messages, ``"<response>"`` for replies."""
        return [m.get("method", "<response>") for m in self.sent()]


def assert_one_response_each(a: Wire, b: Wire) -> None:
    """Every request either side sent got exactly one response from the
    other side, and no response answers anything else."""
    for asker, answerer in ((a, b), (b, a)):
        asked = [m["id"] for m in asker.sent_requests()]
        assert len(asked) == len(set(asked)), asked
        answered = [m["id"] for m in answerer.sent_responses()]
        assert sorted(answered, key=repr) == sorted(asked, key=repr), (asked, answered)


def error_code(msg: Message) -> int | None:
    error = msg.get("error")
    return None if error is None else int(error["code"])


async def settle() -> None:
    """Let every task run until all are blocked (memory streams only)."""
    await trio.testing.wait_all_tasks_blocked()


def raw_peer(stream: trio.abc.Stream) -> ScriptedPeer:
    """The shipped :class:`~acp_trio.testing.ScriptedPeer` on ``stream``, with
    the API tests' generous read timeout (virtual seconds)."""
    return ScriptedPeer(stream, timeout=30)


# ----------------------------------------------------------------------
# The typed sides

PromptScript = Callable[["ScriptedAgent", PromptRequest], Awaitable[PromptResponse]]


async def end_turn(agent: ScriptedAgent, params: PromptRequest) -> PromptResponse:
    await agent.client.send_text(params.session_id, "hello")
    return PromptResponse(stop_reason="end_turn")


class ScriptedAgent(Agent):
    """An agent whose prompt runs ``script``; it records what it was sent.

    ``new_session`` hands out ``sess-1``, ``sess-2``, ...
    """

    def __init__(
        self,
        script: PromptScript = end_turn,
        capabilities: AgentCapabilities | None = None,
        protocol_version: int = 1,
    ) -> None:
        super().__init__()
        self.script = script
        self.capabilities = capabilities or AgentCapabilities()
        self.protocol_version = protocol_version
        self.log: list[Any] = []
        self.prompts: list[PromptRequest] = []
        self.cancels: list[str] = []
        self.closed: list[str] = []
        self.sessions = 0

    async def initialize(self, params: InitializeRequest) -> InitializeResponse:
        self.log.append(("initialize", params.protocol_version))
        return InitializeResponse(
            protocol_version=self.protocol_version,
            agent_capabilities=self.capabilities,
            agent_info=Implementation(name="scripted-agent", version="1.0"),
        )

    async def new_session(self, params: NewSessionRequest) -> NewSessionResponse:
        self.sessions += 1
        return NewSessionResponse(session_id=f"sess-{self.sessions}")

    async def prompt(self, params: PromptRequest) -> PromptResponse:
        self.prompts.append(params)
        return await self.script(self, params)

    async def cancel(self, params: Any) -> None:
        self.cancels.append(params.session_id)

    async def close_session(self, params: CloseSessionRequest) -> CloseSessionResponse:
        self.closed.append(params.session_id)
        return CloseSessionResponse()


class RecordingClient(Client):
    """A client that records every call in :attr:`log`.

    Requests are held open (until cancelled) when asked to: a permission
    request unless :attr:`permission` is set, a read of a path starting with
    ``/hold``, a terminal whose command is ``hold``. :attr:`started` has one
    event per method name, set when a call of it starts.
    """

    def __init__(self) -> None:
        super().__init__()
        self.log: list[Any] = []
        self.updates: list[SessionNotification] = []
        self.permission: RequestPermissionResponse | None = None
        self.started: dict[str, trio.Event] = {}

    def event(self, name: str) -> trio.Event:
        return self.started.setdefault(name, trio.Event())

    async def _hold(self, name: str) -> None:
        self.event(name).set()
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            self.log.append((name, "cancelled"))
            raise

    async def session_update(self, params: SessionNotification) -> None:
        self.updates.append(params)

    async def request_permission(
        self, params: RequestPermissionRequest
    ) -> RequestPermissionResponse:
        self.log.append(("permission", params.tool_call.tool_call_id))
        if self.permission is None:
            await self._hold("permission")
        else:
            self.event("permission").set()
        assert self.permission is not None
        return self.permission

    async def read_text_file(self, params: ReadTextFileRequest) -> ReadTextFileResponse:
        self.log.append(("read", params.path))
        if params.path.startswith("/hold"):
            await self._hold("read")
        return ReadTextFileResponse(content=f"contents of {params.path}")

    async def write_text_file(self, params: WriteTextFileRequest) -> WriteTextFileResponse:
        self.log.append(("write", params.path, params.content))
        return WriteTextFileResponse()

    async def create_terminal(self, params: CreateTerminalRequest) -> CreateTerminalResponse:
        self.log.append(("terminal", params.command))
        if params.command == "hold":
            await self._hold("terminal")
        return CreateTerminalResponse(terminal_id="term-1")

    async def terminal_output(self, params: TerminalOutputRequest) -> TerminalOutputResponse:
        self.log.append(("output", params.terminal_id))
        return TerminalOutputResponse(output="ok\n", truncated=False)

    async def wait_for_terminal_exit(
        self, params: WaitForTerminalExitRequest
    ) -> WaitForTerminalExitResponse:
        self.log.append(("wait", params.terminal_id))
        return WaitForTerminalExitResponse(exit_code=0)

    async def kill_terminal(self, params: KillTerminalRequest) -> KillTerminalResponse:
        self.log.append(("kill", params.terminal_id))
        return KillTerminalResponse()

    async def release_terminal(self, params: ReleaseTerminalRequest) -> ReleaseTerminalResponse:
        self.log.append(("release", params.terminal_id))
        return ReleaseTerminalResponse()

    async def create_elicitation(
        self, params: CreateElicitationRequest
    ) -> CreateElicitationResponse:
        self.log.append(("elicitation", type(params).__name__))
        return CreateElicitationResponseDecline()

    def texts(self) -> list[str]:
        """The text of every agent message chunk received, in order."""
        out: list[str] = []
        for note in self.updates:
            content = getattr(note.update, "content", None)
            text = getattr(content, "text", None)
            if isinstance(text, str):
                out.append(text)
        return out


@asynccontextmanager
async def open_pair(
    agent: Agent,
    client: Client,
    transport: str = "memory",
    *,
    agent_config: dict[str, Any] | None = None,
    client_config: dict[str, Any] | None = None,
) -> AsyncIterator[tuple[AgentProxy, ClientProxy, Wire, Wire]]:
    """``(client.agent, agent.client, agent_wire, client_wire)``: a typed
    agent and client over memory or over OS pipes, both sides traced."""
    agent_wire, client_wire = Wire(), Wire()
    a_cfg = ConnectionConfig(trace=agent_wire, **(agent_config or {}))
    c_cfg = ConnectionConfig(trace=client_wire, **(client_config or {}))
    if transport == "memory":
        async with acp_trio.open_agent_client_pair(
            agent, client, agent_config=a_cfg, client_config=c_cfg
        ) as (to_agent, to_client):
            yield to_agent, to_client, agent_wire, client_wire
    else:
        agent_end, client_end = pipe_stream_pair()
        async with (
            acp_trio.open_client(agent, agent_end, config=a_cfg) as to_client,
            acp_trio.open_agent(client, client_end, config=c_cfg) as to_agent,
        ):
            yield to_agent, to_client, agent_wire, client_wire


@asynccontextmanager
async def raw_client(
    agent: Agent, **config: Any
) -> AsyncIterator[tuple[ScriptedPeer, ClientProxy, Wire]]:
    """A typed agent facing a :class:`ScriptedPeer` as its client."""
    wire = Wire()
    ours, theirs = trio.testing.memory_stream_pair()
    async with acp_trio.open_client(
        agent, ours, config=ConnectionConfig(trace=wire, **config)
    ) as to_client:
        yield raw_peer(theirs), to_client, wire


@asynccontextmanager
async def raw_agent(
    client: Client, **config: Any
) -> AsyncIterator[tuple[ScriptedPeer, AgentProxy, Wire]]:
    """A typed client facing a :class:`ScriptedPeer` as its agent."""
    wire = Wire()
    ours, theirs = trio.testing.memory_stream_pair()
    async with acp_trio.open_agent(
        client, ours, config=ConnectionConfig(trace=wire, **config)
    ) as to_agent:
        yield raw_peer(theirs), to_agent, wire


async def start_session(to_agent: AgentProxy, init: InitializeRequest = INIT) -> str:
    """Initialize (full client capabilities) and open one session."""
    await to_agent.initialize(init)
    session = await to_agent.new_session(NEW_SESSION)
    return session.session_id
