"""What each side advertises in ``initialize`` by default: what its class
implements. A client's explicit capability object wins; an agent's own
answer is kept, with what it implements added. And the errors of a call
the peer did not advertise say so, on both sides and on the wire."""

from __future__ import annotations

import pickle
from typing import Any

import pytest
import trio

from acp_trio import (
    Agent,
    CapabilityError,
    Client,
    RequestError,
)
from acp_trio.contrib import (
    TerminalsMixin,
    WorkspaceFiles,
    WorkspaceFilesMixin,
)
from acp_trio.schema import (
    AgentAuthCapabilities,
    AgentCapabilities,
    ClientCapabilities,
    CloseSessionRequest,
    CloseSessionResponse,
    CreateElicitationRequest,
    CreateElicitationResponse,
    CreateElicitationResponseDecline,
    DeleteSessionRequest,
    DeleteSessionResponse,
    ElicitationCapabilities,
    ElicitationFormCapabilities,
    ElicitationUrlCapabilities,
    FileSystemCapabilities,
    InitializeRequest,
    InitializeResponse,
    ListSessionsRequest,
    ListSessionsResponse,
    LoadSessionRequest,
    LoadSessionResponse,
    LogoutCapabilities,
    LogoutRequest,
    LogoutResponse,
    PromptCapabilities,
    PromptRequest,
    PromptResponse,
    ReadTextFileRequest,
    ReadTextFileResponse,
    ResumeSessionRequest,
    ResumeSessionResponse,
    SessionCapabilities,
    SessionCloseCapabilities,
    SessionDeleteCapabilities,
    SessionListCapabilities,
    SessionResumeCapabilities,
    WriteTextFileRequest,
)

from .conftest import LIMIT, NEW_SESSION, RecordingClient, ScriptedAgent, open_pair, start_session

FS_AND_TERMINAL = ClientCapabilities(
    fs=FileSystemCapabilities(read_text_file=True, write_text_file=True), terminal=True
)


class MixinClient(WorkspaceFilesMixin, TerminalsMixin, Client):
    """The mixins only (their helpers are never called here)."""

    def __init__(self) -> None:
        super().__init__()
        self.files = WorkspaceFiles(["/nonexistent-root"])


class ReadOnlyClient(Client):
    async def read_text_file(self, params: ReadTextFileRequest) -> ReadTextFileResponse:
        return ReadTextFileResponse(content=f"contents of {params.path}")


class ElicitingClient(Client):
    async def create_elicitation(
        self, params: CreateElicitationRequest
    ) -> CreateElicitationResponse:
        return CreateElicitationResponseDecline()


class SomeTerminalClient(Client):
    """Serves one terminal method of five: not the ``terminal`` capability,
    which promises all of them."""

    async def create_terminal(self, params: Any) -> Any:
        raise AssertionError("not called")


ADVERTISED = [
    (Client, ClientCapabilities()),
    (MixinClient, FS_AND_TERMINAL),
    (ReadOnlyClient, ClientCapabilities(fs=FileSystemCapabilities(read_text_file=True))),
    (SomeTerminalClient, ClientCapabilities()),
    (
        ElicitingClient,
        ClientCapabilities(
            elicitation=ElicitationCapabilities(
                form=ElicitationFormCapabilities(), url=ElicitationUrlCapabilities()
            )
        ),
    ),
    (
        RecordingClient,
        ClientCapabilities(
            fs=FileSystemCapabilities(read_text_file=True, write_text_file=True),
            terminal=True,
            elicitation=ElicitationCapabilities(
                form=ElicitationFormCapabilities(), url=ElicitationUrlCapabilities()
            ),
        ),
    ),
]


@pytest.mark.parametrize(("client_class", "expected"), ADVERTISED)
@pytest.mark.parametrize("how", ["no params", "params without capabilities"])
async def test_client_advertises_what_it_implements(
    client_class: type[Client], expected: ClientCapabilities, how: str, autojump_clock: Any
) -> None:
    with trio.fail_after(LIMIT):
        async with open_pair(ScriptedAgent(), client_class()) as (to_agent, to_client, _, cwire):
            if how == "no params":
                await to_agent.initialize()
            else:
                await to_agent.initialize(InitializeRequest(protocol_version=1))
            assert to_client.capabilities == expected
            assert to_agent.client_capabilities == expected
            (sent,) = cwire.sent_requests("initialize")
            assert "clientCapabilities" in sent["params"]


@pytest.mark.parametrize(
    "explicit",
    [
        ClientCapabilities(),
        ClientCapabilities(fs=FileSystemCapabilities(read_text_file=True)),
        ClientCapabilities(terminal=True),
    ],
)
async def test_an_explicit_client_capability_object_wins(
    explicit: ClientCapabilities, autojump_clock: Any
) -> None:
    """Also an empty one: the application advertises less than it serves."""
    with trio.fail_after(LIMIT):
        async with open_pair(ScriptedAgent(), MixinClient()) as (to_agent, to_client, _, _w):
            await to_agent.initialize(
                InitializeRequest(protocol_version=1, client_capabilities=explicit)
            )
            assert to_client.capabilities == explicit
            assert to_agent.client_capabilities == explicit


async def test_a_bare_initialize_lets_the_agent_read_through_the_client(
    autojump_clock: Any,
) -> None:
    """The issue's case: ``await agent.initialize()`` with a client that
    serves reads; the agent's read works."""

    async def reads(agent: ScriptedAgent, params: PromptRequest) -> PromptResponse:
        read = await agent.client.read_text_file(
            ReadTextFileRequest(session_id=params.session_id, path="/a.txt")
        )
        agent.log.append(read.content)
        return PromptResponse(stop_reason="end_turn")

    agent = ScriptedAgent(reads)
    with trio.fail_after(LIMIT):
        async with open_pair(agent, ReadOnlyClient()) as (to_agent, _, _w, _c):
            await to_agent.initialize()
            session = await to_agent.new_session(NEW_SESSION)
            result = await to_agent.prompt_text(session.session_id, "go")
    assert result.stop_reason == "end_turn"
    assert agent.log[-1] == "contents of /a.txt"


# ----------------------------------------------------------------------
# The agent side


class LoadingAgent(ScriptedAgent):
    async def load_session(self, params: LoadSessionRequest) -> LoadSessionResponse:
        return LoadSessionResponse()


class EveryMethodAgent(LoadingAgent):
    async def list_sessions(self, params: ListSessionsRequest) -> ListSessionsResponse:
        return ListSessionsResponse(sessions=[])

    async def resume_session(self, params: ResumeSessionRequest) -> ResumeSessionResponse:
        return ResumeSessionResponse()

    async def close_session(self, params: CloseSessionRequest) -> CloseSessionResponse:
        return CloseSessionResponse()

    async def delete_session(self, params: DeleteSessionRequest) -> DeleteSessionResponse:
        return DeleteSessionResponse()

    async def logout(self, params: LogoutRequest) -> LogoutResponse:
        return LogoutResponse()


class PlainAgent(Agent):
    pass


EVERYTHING = AgentCapabilities(
    load_session=True,
    session_capabilities=SessionCapabilities(
        list=SessionListCapabilities(),
        resume=SessionResumeCapabilities(),
        close=SessionCloseCapabilities(),
        delete=SessionDeleteCapabilities(),
    ),
    auth=AgentAuthCapabilities(logout=LogoutCapabilities()),
)


@pytest.mark.parametrize(
    ("agent", "expected"),
    [
        (PlainAgent(), AgentCapabilities()),
        (
            LoadingAgent(),
            AgentCapabilities(
                load_session=True,
                # ScriptedAgent serves session/close.
                session_capabilities=SessionCapabilities(close=SessionCloseCapabilities()),
            ),
        ),
        (EveryMethodAgent(), EVERYTHING),
    ],
    ids=["plain", "load", "every"],
)
async def test_agent_advertises_the_session_methods_it_overrides(
    agent: Agent, expected: AgentCapabilities, autojump_clock: Any
) -> None:
    with trio.fail_after(LIMIT):
        async with open_pair(agent, Client()) as (to_agent, _, awire, _c):
            result = await to_agent.initialize()
            assert result.agent_capabilities == expected
            assert to_agent.capabilities == expected
            (answer,) = awire.sent_responses()
            if expected.load_session:
                assert answer["result"]["agentCapabilities"]["loadSession"] is True


async def test_the_agents_own_capabilities_are_kept_and_completed(autojump_clock: Any) -> None:
    """What the agent's initialize answers stays (its prompt capabilities,
    the ``_meta`` of its session capabilities, a loadSession it advertises
    without the method); what it implements is added next to it."""
    own = AgentCapabilities(
        load_session=True,
        prompt_capabilities=PromptCapabilities(image=True),
        session_capabilities=SessionCapabilities(
            list=SessionListCapabilities(meta={"paged": True})
        ),
        meta={"vendor": "x"},
    )

    class Partial(ScriptedAgent):
        async def list_sessions(self, params: ListSessionsRequest) -> ListSessionsResponse:
            return ListSessionsResponse(sessions=[])

    agent = Partial(capabilities=own)
    with trio.fail_after(LIMIT):
        async with open_pair(agent, Client()) as (to_agent, _, _a, _c):
            result = await to_agent.initialize()
    assert result.agent_capabilities == AgentCapabilities(
        load_session=True,
        prompt_capabilities=PromptCapabilities(image=True),
        session_capabilities=SessionCapabilities(
            list=SessionListCapabilities(meta={"paged": True}),
            close=SessionCloseCapabilities(),
        ),
        meta={"vendor": "x"},
    )
    # The agent's own answer object is not changed.
    assert agent.capabilities is own
    assert result.agent_info is not None
    assert result.agent_info.name == "scripted-agent"


async def test_the_memory_pair_advertises_what_the_client_implements(
    autojump_clock: Any,
) -> None:
    from acp_trio.testing import open_memory_pair

    with trio.fail_after(LIMIT):
        async with open_memory_pair(LoadingAgent(), MixinClient()) as pair:
            assert pair.to_client.capabilities == FS_AND_TERMINAL
            assert pair.initialized is not None
            assert pair.initialized.agent_capabilities.load_session is True
        # An explicit InitializeRequest still wins.
        explicit = InitializeRequest(protocol_version=1, client_capabilities=ClientCapabilities())
        async with open_memory_pair(ScriptedAgent(), MixinClient(), initialize=explicit) as pair:
            assert pair.to_client.capabilities == ClientCapabilities()


# ----------------------------------------------------------------------
# Errors that say what was missing


async def test_agent_side_capability_error_names_capability_and_method(
    autojump_clock: Any,
) -> None:
    with trio.fail_after(LIMIT):
        async with open_pair(ScriptedAgent(), Client()) as (to_agent, to_client, awire, _c):
            await to_agent.initialize()
            before = len(awire.sent())
            with pytest.raises(CapabilityError) as info:
                await to_client.write_text_file(
                    WriteTextFileRequest(session_id="s", path="/a", content="")
                )
            assert awire.sent()[before:] == []
    error = info.value
    assert (error.capability, error.method, error.peer) == (
        "fs.writeTextFile",
        "fs/write_text_file",
        "client",
    )
    assert "fs.writeTextFile" in str(error)
    assert "fs/write_text_file" in str(error)
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.capability, copy.method, str(copy)) == (error.capability, error.method, str(error))


async def test_client_side_capability_error_names_capability_and_method(
    autojump_clock: Any,
) -> None:
    with trio.fail_after(LIMIT):
        async with open_pair(ScriptedAgent(), Client()) as (to_agent, _, _a, _c):
            await to_agent.initialize()
            with pytest.raises(CapabilityError) as info:
                await to_agent.load_session(
                    LoadSessionRequest(session_id="s", cwd="/", mcp_servers=[])
                )
    error = info.value
    assert (error.capability, error.method, error.peer) == ("loadSession", "session/load", "agent")
    assert "loadSession" in str(error)
    assert "session/load" in str(error)


async def test_a_capability_error_let_through_is_a_32603_that_says_so(
    autojump_clock: Any,
) -> None:
    """The agent reads from a client that advertised no ``fs``: the prompt's
    ``-32603`` carries the capability and method, and the client-side
    exception shows them."""

    async def reads(agent: ScriptedAgent, params: PromptRequest) -> PromptResponse:
        await agent.client.read_text_file(
            ReadTextFileRequest(session_id=params.session_id, path="/a.txt")
        )
        return PromptResponse(stop_reason="end_turn")  # pragma: no cover

    explicit = InitializeRequest(protocol_version=1, client_capabilities=ClientCapabilities())
    with trio.fail_after(LIMIT):
        async with open_pair(ScriptedAgent(reads), RecordingClient()) as (to_agent, _, _a, _c):
            sid = await start_session(to_agent, explicit)
            with pytest.raises(RequestError) as info:
                await to_agent.prompt_text(sid, "go")
    error = info.value
    assert error.code == -32603
    assert error.data["error"] == "CapabilityError"
    assert error.data["capability"] == "fs.readTextFile"
    assert error.data["method"] == "fs/read_text_file"
    assert error.data["peer"] == "client"
    assert "fs.readTextFile" in error.data["reason"]
    assert "fs.readTextFile" in str(error)
    assert "fs/read_text_file" in str(error)


def test_a_capability_error_made_by_hand_still_works() -> None:
    error = CapabilityError("no")
    assert str(error) == "no"
    assert (error.capability, error.method, error.peer) == (None, None, None)


async def test_initialize_response_of_the_agent_is_sent_whole(autojump_clock: Any) -> None:
    """Fields besides the capabilities pass through the merge unchanged."""

    class Answering(LoadingAgent):
        async def initialize(self, params: InitializeRequest) -> InitializeResponse:
            return InitializeResponse(protocol_version=1, meta={"a": 1})

    with trio.fail_after(LIMIT):
        async with open_pair(Answering(), Client()) as (to_agent, _, awire, _c):
            result = await to_agent.initialize()
            (answer,) = awire.sent_responses()
    assert result.meta == {"a": 1}
    assert answer["result"]["_meta"] == {"a": 1}
    assert result.agent_capabilities.load_session is True
