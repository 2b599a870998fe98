"""Capability checks on both sides (refused locally, nothing sent), calls
before ``initialize``, and protocol version negotiation."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import trio

from acp_trio import (
    Agent,
    AgentProxy,
    CapabilityError,
    ClientProxy,
    ConnectionClosed,
    LocalProtocolError,
    UnsupportedProtocolVersion,
)
from acp_trio.schema import (
    AgentAuthCapabilities,
    AgentCapabilities,
    AuthenticateRequest,
    ClientCapabilities,
    CloseSessionRequest,
    CompleteElicitationNotification,
    CreateTerminalRequest,
    DeleteSessionRequest,
    DeleteSessionResponse,
    ElicitationCapabilities,
    ElicitationFormCapabilities,
    ElicitationFormMode,
    ElicitationSchema,
    ElicitationSessionScope,
    ElicitationUrlCapabilities,
    ElicitationUrlMode,
    FileSystemCapabilities,
    InitializeRequest,
    InitializeResponse,
    KillTerminalRequest,
    ListSessionsRequest,
    ListSessionsResponse,
    LoadSessionRequest,
    LoadSessionResponse,
    LogoutCapabilities,
    LogoutRequest,
    LogoutResponse,
    PermissionOption,
    PromptRequest,
    PromptResponse,
    ReadTextFileRequest,
    ReleaseTerminalRequest,
    RequestPermissionRequest,
    ResumeSessionRequest,
    ResumeSessionResponse,
    SelectedPermissionOutcome,
    SessionCapabilities,
    SessionCloseCapabilities,
    SessionDeleteCapabilities,
    SessionListCapabilities,
    SessionResumeCapabilities,
    SetSessionModeRequest,
    TerminalOutputRequest,
    ToolCallUpdate,
    WaitForTerminalExitRequest,
    WriteTextFileRequest,
    converter,
)
from acp_trio.schema import RequestPermissionResponse as PermissionResponse

from .conftest import (
    LIMIT,
    NEW_SESSION,
    RecordingClient,
    ScriptedAgent,
    ok,
    open_pair,
    raw_client,
    req,
    settle,
)

SID = "sess-1"
TERM: dict[str, Any] = {"session_id": SID, "terminal_id": "term-1"}
FORM = ElicitationFormMode(
    message="Your name?",
    requested_schema=ElicitationSchema(),
    scope=ElicitationSessionScope(session_id=SID),
)
URL = ElicitationUrlMode(
    message="Sign in",
    elicitation_id="el-1",
    url="https://example.com/login",
    scope=ElicitationSessionScope(session_id=SID),
)

AgentCall = Callable[[ClientProxy], Awaitable[Any]]

#: Each gated agent→client call, and the client capabilities that allow it.
AGENT_CALLS: dict[str, tuple[AgentCall, ClientCapabilities]] = {
    "fs/read_text_file": (
        lambda c: c.read_text_file(ReadTextFileRequest(session_id=SID, path="/a")),
        ClientCapabilities(fs=FileSystemCapabilities(read_text_file=True)),
    ),
    "fs/write_text_file": (
        lambda c: c.write_text_file(WriteTextFileRequest(session_id=SID, path="/a", content="")),
        ClientCapabilities(fs=FileSystemCapabilities(write_text_file=True)),
    ),
    "terminal/create": (
        lambda c: c.create_terminal(CreateTerminalRequest(session_id=SID, command="ls")),
        ClientCapabilities(terminal=True),
    ),
    "terminal/output": (
        lambda c: c.terminal_output(TerminalOutputRequest(**TERM)),
        ClientCapabilities(terminal=True),
    ),
    "terminal/wait_for_exit": (
        lambda c: c.wait_for_terminal_exit(WaitForTerminalExitRequest(**TERM)),
        ClientCapabilities(terminal=True),
    ),
    "terminal/kill": (
        lambda c: c.kill_terminal(KillTerminalRequest(**TERM)),
        ClientCapabilities(terminal=True),
    ),
    "terminal/release": (
        lambda c: c.release_terminal(ReleaseTerminalRequest(**TERM)),
        ClientCapabilities(terminal=True),
    ),
    "elicitation/create (form)": (
        lambda c: c.create_elicitation(FORM),
        ClientCapabilities(elicitation=ElicitationCapabilities(form=ElicitationFormCapabilities())),
    ),
    "elicitation/create (url)": (
        lambda c: c.create_elicitation(URL),
        ClientCapabilities(elicitation=ElicitationCapabilities(url=ElicitationUrlCapabilities())),
    ),
}


async def initialized_agent_side(to_agent: AgentProxy, caps: ClientCapabilities) -> None:
    await to_agent.initialize(InitializeRequest(protocol_version=1, client_capabilities=caps))


@pytest.mark.parametrize("allowed", list(AGENT_CALLS))
async def test_agent_calls_need_the_client_capability(allowed: str, autojump_clock: Any) -> None:
    """With exactly one capability advertised, the calls it covers go out
    and are answered; every other gated call raises CapabilityError and
    sends nothing."""
    caps = AGENT_CALLS[allowed][1]
    client = RecordingClient()
    with trio.fail_after(LIMIT):
        async with open_pair(ScriptedAgent(), client) as (to_agent, to_client, awire, _):
            await initialized_agent_side(to_agent, caps)
            for name, (call, needs) in AGENT_CALLS.items():
                before = len(awire.sent())
                if needs == caps:
                    await call(to_client)
                    (sent,) = awire.sent()[before:]
                    assert sent["method"] == name.split(" ")[0]
                    if name.startswith("elicitation"):
                        assert sent["params"]["mode"] == name.split("(")[1].rstrip(")")
                else:
                    with pytest.raises(CapabilityError):
                        await call(to_client)
                    assert awire.sent()[before:] == []
    expected = {
        "fs/read_text_file": [("read", "/a")],
        "fs/write_text_file": [("write", "/a", "")],
        "elicitation/create (form)": [("elicitation", "ElicitationFormMode")],
        "elicitation/create (url)": [("elicitation", "ElicitationUrlMode")],
    }.get(
        allowed,
        [
            ("terminal", "ls"),
            ("output", "term-1"),
            ("wait", "term-1"),
            ("kill", "term-1"),
            ("release", "term-1"),
        ],
    )
    assert client.log == expected


async def test_agent_calls_follow_capabilities_replaced(autojump_clock: Any) -> None:
    """A call allowed once is checked again when the capabilities are
    replaced: refused (nothing sent) under capabilities without it, allowed
    again under ones with it."""
    call, caps = AGENT_CALLS["fs/read_text_file"]
    client = RecordingClient()
    with trio.fail_after(LIMIT):
        async with open_pair(ScriptedAgent(), client) as (to_agent, to_client, awire, _):
            await initialized_agent_side(to_agent, caps)
            await call(to_client)
            await call(to_client)
            to_client.capabilities = ClientCapabilities(terminal=True)
            before = len(awire.sent())
            with pytest.raises(CapabilityError):
                await call(to_client)
            assert awire.sent()[before:] == []
            to_client.capabilities = None
            with pytest.raises(CapabilityError):
                await call(to_client)
            to_client.capabilities = ClientCapabilities(
                fs=FileSystemCapabilities(read_text_file=True)
            )
            await call(to_client)
    assert client.log == [("read", "/a")] * 3


async def test_agent_calls_before_initialize(autojump_clock: Any) -> None:
    """Before the client's initialize the agent knows no capabilities: every
    gated call is refused; permission requests and notifications are not
    gated."""
    client = RecordingClient()
    client.permission = PermissionResponse(outcome=SelectedPermissionOutcome(option_id="ok"))
    with trio.fail_after(LIMIT):
        async with open_pair(ScriptedAgent(), client) as (_, to_client, awire, _w):
            assert to_client.capabilities is None
            for call, _caps in AGENT_CALLS.values():
                with pytest.raises(CapabilityError):
                    await call(to_client)
            assert awire.sent() == []
            answer = await to_client.request_permission(
                RequestPermissionRequest(
                    session_id=SID,
                    tool_call=ToolCallUpdate(tool_call_id="t"),
                    options=[PermissionOption(option_id="ok", name="OK", kind="allow_once")],
                )
            )
            assert answer.outcome == SelectedPermissionOutcome(option_id="ok")
            await to_client.complete_elicitation(
                CompleteElicitationNotification(elicitation_id="e")
            )
            await settle()
            assert [m["method"] for m in awire.sent()] == [
                "session/request_permission",
                "elicitation/complete",
            ]


class FullAgent(ScriptedAgent):
    """Implements every gated client→agent method."""

    async def load_session(self, params: LoadSessionRequest) -> LoadSessionResponse:
        return LoadSessionResponse()

    async def list_sessions(self, params: ListSessionsRequest) -> ListSessionsResponse:
        return ListSessionsResponse(sessions=[])

    async def resume_session(self, params: ResumeSessionRequest) -> ResumeSessionResponse:
        return ResumeSessionResponse()

    async def delete_session(self, params: DeleteSessionRequest) -> DeleteSessionResponse:
        return DeleteSessionResponse()

    async def logout(self, params: LogoutRequest) -> LogoutResponse:
        return LogoutResponse()


ClientCall = Callable[[AgentProxy], Awaitable[Any]]

#: Each gated client→agent call, and the agent capabilities that allow it.
CLIENT_CALLS: dict[str, tuple[ClientCall, AgentCapabilities]] = {
    "session/load": (
        lambda a: a.load_session(LoadSessionRequest(session_id=SID, cwd="/w", mcp_servers=[])),
        AgentCapabilities(load_session=True),
    ),
    "session/list": (
        lambda a: a.list_sessions(),
        AgentCapabilities(session_capabilities=SessionCapabilities(list=SessionListCapabilities())),
    ),
    "session/resume": (
        lambda a: a.resume_session(ResumeSessionRequest(session_id=SID, cwd="/w")),
        AgentCapabilities(
            session_capabilities=SessionCapabilities(resume=SessionResumeCapabilities())
        ),
    ),
    "session/close": (
        lambda a: a.close_session(CloseSessionRequest(session_id=SID)),
        AgentCapabilities(
            session_capabilities=SessionCapabilities(close=SessionCloseCapabilities())
        ),
    ),
    "session/delete": (
        lambda a: a.delete_session(DeleteSessionRequest(session_id=SID)),
        AgentCapabilities(
            session_capabilities=SessionCapabilities(delete=SessionDeleteCapabilities())
        ),
    ),
    "logout": (
        lambda a: a.logout(),
        AgentCapabilities(auth=AgentAuthCapabilities(logout=LogoutCapabilities())),
    ),
}


#: The Agent method of each gated client→agent call.
GATED_METHODS = {
    "session/load": "load_session",
    "session/list": "list_sessions",
    "session/resume": "resume_session",
    "session/close": "close_session",
    "session/delete": "delete_session",
    "logout": "logout",
}


def agent_implementing(allowed: str | None) -> type[Agent]:
    """A :class:`FullAgent` with every gated method but ``allowed`` put back
    to the default of :class:`Agent` (so not implemented)."""
    defaults = {
        attr: getattr(Agent, attr) for name, attr in GATED_METHODS.items() if name != allowed
    }
    return type("PartialAgent", (FullAgent,), defaults)


@pytest.mark.parametrize("allowed", [None, *CLIENT_CALLS])
async def test_client_calls_need_the_agent_capability(
    allowed: str | None, autojump_clock: Any
) -> None:
    """An agent implementing one gated method advertises exactly it (with no
    capabilities in its own answer); the client sends that call, and refuses
    the others locally."""
    caps = AgentCapabilities() if allowed is None else CLIENT_CALLS[allowed][1]
    with trio.fail_after(LIMIT):
        async with open_pair(agent_implementing(allowed)(), RecordingClient()) as (
            to_agent,
            _,
            _w,
            cwire,
        ):
            await to_agent.initialize()
            assert to_agent.capabilities == caps
            for name, (call, _needs) in CLIENT_CALLS.items():
                before = len(cwire.sent())
                if name == allowed:
                    await call(to_agent)
                    (sent,) = cwire.sent()[before:]
                    assert sent["method"] == name
                else:
                    with pytest.raises(CapabilityError):
                        await call(to_agent)
                    assert cwire.sent()[before:] == []


#: Every AgentProxy call but initialize and cancel.
BEFORE_INIT: dict[str, ClientCall] = {
    **{name: call for name, (call, _) in CLIENT_CALLS.items()},
    "authenticate": lambda a: a.authenticate(AuthenticateRequest(method_id="m")),
    "session/new": lambda a: a.new_session(NEW_SESSION),
    "session/set_mode": lambda a: a.set_session_mode(
        SetSessionModeRequest(session_id=SID, mode_id="m")
    ),
    "session/prompt": lambda a: a.prompt_text(SID, "hi"),
}


async def test_client_calls_before_initialize(autojump_clock: Any) -> None:
    with trio.fail_after(LIMIT):
        async with open_pair(FullAgent(), RecordingClient()) as (to_agent, _, _w, cwire):
            for name, call in BEFORE_INIT.items():
                with pytest.raises(LocalProtocolError) as info:
                    await call(to_agent)
                # Not a capability problem: the order of calls is wrong.
                assert not isinstance(info.value, CapabilityError), name
                assert "initialize" in str(info.value)
            assert cwire.sent() == []
            # After initialize, the same proxy works.
            await to_agent.initialize()
            assert (await to_agent.new_session(NEW_SESSION)).session_id == "sess-1"


@pytest.mark.parametrize("version", [0, 2])
async def test_unsupported_agent_version_closes_the_connection(
    version: int, autojump_clock: Any
) -> None:
    agent = ScriptedAgent(protocol_version=version)
    with trio.fail_after(LIMIT):
        async with open_pair(agent, RecordingClient()) as (to_agent, to_client, _, cwire):
            with pytest.raises(UnsupportedProtocolVersion) as info:
                await to_agent.initialize()
            assert (info.value.version, info.value.supported) == (version, 1)
            assert to_agent.connection.closed
            assert to_agent.protocol_version is None
            assert to_agent.capabilities is None
            with pytest.raises(ConnectionClosed):
                await to_agent.ext_method("_acme/ping")
            # The agent sees the connection end too.
            await to_client.connection.wait_closed()
    assert [m.get("method") for m in cwire.sent()] == ["initialize"]


async def test_default_initialize_answers_version_1(autojump_clock: Any) -> None:
    class Bare(ScriptedAgent):
        initialize = Agent.initialize
        close_session = Agent.close_session

    with trio.fail_after(LIMIT):
        async with open_pair(Bare(), RecordingClient()) as (to_agent, to_client, awire, _):
            result = await to_agent.initialize(
                InitializeRequest(protocol_version=1, client_capabilities=ClientCapabilities())
            )
            assert result.protocol_version == 1
            assert result.agent_capabilities == AgentCapabilities()
            assert result.auth_methods == []
            assert to_agent.protocol_version == 1
            assert to_client.capabilities == ClientCapabilities()
    assert awire.sent()[0]["result"]["protocolVersion"] == 1


async def test_raw_client_asking_a_newer_version_gets_1(autojump_clock: Any) -> None:
    class Bare(ScriptedAgent):
        initialize = Agent.initialize
        close_session = Agent.close_session

    with trio.fail_after(LIMIT):
        async with raw_client(Bare()) as (peer, to_client, _):
            await peer.send(
                req(1, "initialize", {"protocolVersion": 65535, "clientCapabilities": {}})
            )
            answer = await peer.receive()
            assert answer["id"] == 1
            assert answer["result"]["protocolVersion"] == 1
            assert to_client.capabilities == ClientCapabilities()
            # A string version is invalid params, not a crash.
            await peer.send(req(2, "initialize", {"protocolVersion": "1.0.0"}))
            answer = await peer.receive()
            assert answer["error"]["code"] == -32602
            await peer.send(req(3, "initialize", {"protocolVersion": 1}))
            assert await peer.receive() == ok(
                3, converter.unstructure(InitializeResponse(protocol_version=1))
            )


async def test_elicitation_refusals_send_nothing_even_mid_turn(autojump_clock: Any) -> None:
    """The refusal is an exception in the agent's code, before anything is
    written; the agent may catch it and carry on."""

    async def script(agent: ScriptedAgent, params: PromptRequest) -> PromptResponse:
        for request in (FORM, URL):
            try:
                await agent.client.create_elicitation(request)
            except CapabilityError as exc:
                agent.log.append(str(exc))
        return PromptResponse(stop_reason="end_turn")

    agent = ScriptedAgent(script)
    client = RecordingClient()
    caps = ClientCapabilities(
        elicitation=ElicitationCapabilities(form=ElicitationFormCapabilities())
    )
    with trio.fail_after(LIMIT):
        async with open_pair(agent, client) as (to_agent, _, awire, _w):
            await initialized_agent_side(to_agent, caps)
            sid = (await to_agent.new_session(NEW_SESSION)).session_id
            assert (await to_agent.prompt_text(sid, "x")).stop_reason == "end_turn"
    assert agent.log[1:] == [
        "the client did not advertise elicitation.url (needed for elicitation/create); "
        "nothing was sent"
    ]
    assert client.log == [("elicitation", "ElicitationFormMode")]
    assert [m.get("method") for m in awire.sent()].count("elicitation/create") == 1
