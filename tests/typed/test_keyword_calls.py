"""The proxies' two call forms: the request object, or its fields.

Every method of the method table is on its proxy; the keyword form sends
exactly what the object form sends; bad arguments are a clear ``TypeError``
with nothing sent; the hand-written behaviours (capability checks, session
bookkeeping, the prompt turn) hold in both forms.
"""

from __future__ import annotations

import inspect
import re
import typing
from typing import Any

import attrs
import pytest
import trio

from acp_trio import Agent, AgentProxy, CapabilityError, Client, ClientProxy
from acp_trio.schema import (
    METHODS,
    PROTOCOL_VERSION,
    AgentCapabilities,
    AgentMessageChunk,
    CancelNotification,
    ClientCapabilities,
    CreateElicitationRequest,
    CreateElicitationResponse,
    CreateElicitationResponseDecline,
    ElicitationFormMode,
    ElicitationSchema,
    ElicitationSessionScope,
    ElicitationUrlMode,
    FileSystemCapabilities,
    Implementation,
    InitializeRequest,
    InitializeResponse,
    NewSessionRequest,
    NewSessionResponse,
    PromptRequest,
    PromptResponse,
    ReadTextFileRequest,
    ReadTextFileResponse,
    SessionNotification,
    SetSessionConfigOptionRequest,
    SetSessionConfigOptionRequestBoolean,
    SetSessionConfigOptionRequestValueId,
    SetSessionConfigOptionResponse,
    TextContent,
    WriteTextFileRequest,
    WriteTextFileResponse,
)
from acp_trio.schema._generated_proxies import (
    AGENT_METHOD_NAMES,
    CLIENT_METHOD_NAMES,
    AgentProxyMethods,
    ClientProxyMethods,
)
from acp_trio.schema._runtime import build_params
from acp_trio.testing import open_memory_pair

pytestmark = pytest.mark.timeout(30)


class RecordingAgent(Agent):
    def __init__(self) -> None:
        self.seen: list[Any] = []

    async def initialize(self, params: InitializeRequest) -> InitializeResponse:
        self.seen.append(params)
        return InitializeResponse(protocol_version=PROTOCOL_VERSION)

    async def new_session(self, params: NewSessionRequest) -> NewSessionResponse:
        self.seen.append(params)
        return NewSessionResponse(session_id=f"s{len(self.seen)}")

    async def prompt(self, params: PromptRequest) -> PromptResponse:
        self.seen.append(params)
        # Both forms of a client call, from inside the turn.
        a = await self.client.read_text_file(params.session_id, "/w/a.txt", line=2, limit=1)
        b = await self.client.read_text_file(
            ReadTextFileRequest(session_id=params.session_id, path="/w/a.txt", line=2, limit=1)
        )
        assert a == b
        await self.client.write_text_file(params.session_id, "/w/b.txt", a.content)
        await self.client.session_update(
            params.session_id, AgentMessageChunk(content=TextContent(text="done"))
        )
        return PromptResponse(stop_reason="end_turn")


class RecordingClient(Client):
    def __init__(self) -> None:
        self.seen: list[Any] = []

    async def read_text_file(self, params: ReadTextFileRequest) -> ReadTextFileResponse:
        self.seen.append(params)
        return ReadTextFileResponse(content=f"line {params.line}")

    async def write_text_file(self, params: WriteTextFileRequest) -> WriteTextFileResponse:
        self.seen.append(params)
        return WriteTextFileResponse()

    async def session_update(self, params: SessionNotification) -> None:
        self.seen.append(params)


def test_every_method_of_the_table_is_on_its_proxy_in_both_forms() -> None:
    for table, proxy, mixin, side in (
        (AGENT_METHOD_NAMES, AgentProxy, AgentProxyMethods, "agent"),
        (CLIENT_METHOD_NAMES, ClientProxy, ClientProxyMethods, "client"),
    ):
        wires = {m.name for m in METHODS.values() if m.handled_by == side}
        assert set(table) == wires
        for wire, name in table.items():
            assert callable(getattr(proxy, name)), (side, wire)
            assert hasattr(mixin, f"_send_{name}")
            info = METHODS[wire]
            overloads = typing.get_overloads(getattr(mixin, name))
            if not attrs.has(info.params):
                assert overloads == []  # a union of variants: the object form only
                continue
            object_form, keyword_form = overloads
            assert list(inspect.signature(object_form).parameters) == ["self", "params"]
            fields = {f.name for f in attrs.fields(info.params)} - {"extra_"}
            assert set(inspect.signature(keyword_form).parameters) - {"self"} == fields


async def test_keyword_form_sends_what_the_object_form_sends() -> None:
    agent, client = RecordingAgent(), RecordingClient()
    async with open_memory_pair(agent, client, initialize=False) as pair:
        info = Implementation(name="kw", version="1")
        await pair.to_agent.initialize(client_info=info)
        await pair.to_agent.initialize(InitializeRequest(protocol_version=1, client_info=info))
        first, second = agent.seen
        assert first == second
        assert first.protocol_version == PROTOCOL_VERSION
        # The default capabilities (those the client implements) in both forms.
        assert first.client_capabilities.fs.read_text_file

        made = await pair.to_agent.new_session("/w")
        assert agent.seen[-1] == NewSessionRequest(cwd="/w", mcp_servers=[])
        assert made.session_id in pair.to_agent.known_sessions
        reply = await pair.to_agent.prompt(made.session_id, [TextContent(text="hi")])
        assert reply.stop_reason == "end_turn"
        assert agent.seen[-1] == PromptRequest(
            session_id=made.session_id, prompt=[TextContent(text="hi")]
        )
        read_a, read_b, write, update = client.seen
        assert update == SessionNotification(
            session_id=made.session_id, update=AgentMessageChunk(content=TextContent(text="done"))
        )
        assert (
            read_a
            == read_b
            == ReadTextFileRequest(session_id=made.session_id, path="/w/a.txt", line=2, limit=1)
        )
        assert write == WriteTextFileRequest(
            session_id=made.session_id, path="/w/b.txt", content="line 2"
        )


async def test_sequences_become_lists_on_the_wire() -> None:
    agent = RecordingAgent()
    async with open_memory_pair(agent, RecordingClient()) as pair:
        await pair.to_agent.new_session("/w", mcp_servers=(), additional_directories=("/x",))
        sent = agent.seen[-1]
        assert sent.mcp_servers == []
        assert sent.additional_directories == ["/x"]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda p: p.new_session(NewSessionRequest(cwd="/", mcp_servers=[]), cwd="/"), "not both"),
        (lambda p: p.new_session("/", "/"), "got 2 positional"),
        (lambda p: p.new_session(), "missing 'cwd'"),
        (lambda p: p.new_session("/", cwd="/"), "multiple values for 'cwd'"),
        (lambda p: p.new_session("/", mcp_server=[]), "new_session(): "),
        (lambda p: p.new_session("/", additional_directories="/x"), "takes a sequence"),
        (lambda p: p.prompt("s"), "missing 'prompt'"),
    ],
)
async def test_bad_arguments_are_a_type_error_and_send_nothing(call: Any, message: str) -> None:
    agent = RecordingAgent()
    async with open_memory_pair(agent, RecordingClient()) as pair:
        before = list(agent.seen)
        with pytest.raises(TypeError, match=re.escape(message)):
            await call(pair.to_agent)
        await trio.testing.wait_all_tasks_blocked()
        assert agent.seen == before


async def test_capability_checks_hold_in_the_keyword_form() -> None:
    class NoFiles(Agent):
        async def initialize(self, params: InitializeRequest) -> InitializeResponse:
            return InitializeResponse(
                protocol_version=PROTOCOL_VERSION, agent_capabilities=AgentCapabilities()
            )

        async def new_session(self, params: NewSessionRequest) -> NewSessionResponse:
            return NewSessionResponse(session_id="s")

        async def prompt(self, params: PromptRequest) -> PromptResponse:
            with pytest.raises(CapabilityError, match=r"fs\.readTextFile"):
                await self.client.read_text_file(params.session_id, "/a")
            return PromptResponse(stop_reason="end_turn")

    caps = ClientCapabilities(fs=FileSystemCapabilities(read_text_file=False))
    async with open_memory_pair(
        NoFiles(),
        RecordingClient(),
        initialize=InitializeRequest(protocol_version=1, client_capabilities=caps),
    ) as pair:
        with pytest.raises(CapabilityError, match=r"sessionCapabilities\.close"):
            await pair.to_agent.close_session("s")
        with pytest.raises(CapabilityError, match="loadSession"):
            await pair.to_agent.load_session("s", "/")
        assert (await pair.to_agent.prompt_text("s", "hi")).stop_reason == "end_turn"


async def test_cancel_in_both_forms() -> None:
    async with open_memory_pair() as pair:
        session = await pair.new_session()
        await pair.to_agent.cancel(session)
        await pair.to_agent.cancel(CancelNotification(session_id=session))
        with pytest.raises(TypeError, match="not both"):
            await pair.to_agent.cancel(CancelNotification(session_id=session), meta={})


def test_the_hand_written_behaviour_is_in_the_public_docstring() -> None:
    prompt_doc = AgentProxy.prompt.__doc__ or ""
    assert "session/cancel" in prompt_doc
    assert "cancel_grace" in prompt_doc
    assert "Send ``session/prompt``" in prompt_doc
    assert "early" not in (ClientProxy.read_text_file.__doc__ or "early")
    assert "not lost" in (AgentProxy.new_session.__doc__ or "")
    assert "capabilities" in (AgentProxy.initialize.__doc__ or "")


def test_build_params_returns_the_object_itself() -> None:
    request = ReadTextFileRequest(session_id="s", path="/a")
    assert (
        build_params(ReadTextFileRequest, "f", ("session_id", "path"), (), (request,), {}, None)
        is request
    )
    made = build_params(
        NewSessionRequest,
        "new_session",
        ("cwd",),
        ("mcp_servers",),
        ("/",),
        {},
        {"mcp_servers": []},
    )
    assert made == NewSessionRequest(cwd="/", mcp_servers=[])


class OptionsAgent(RecordingAgent):
    async def set_session_config_option(
        self, params: SetSessionConfigOptionRequest
    ) -> SetSessionConfigOptionResponse:
        self.seen.append(params)
        return SetSessionConfigOptionResponse(config_options=[])

    async def prompt(self, params: PromptRequest) -> PromptResponse:
        scope = ElicitationSessionScope(session_id=params.session_id)
        form = await self.client.create_elicitation(
            "name?", scope, requested_schema=ElicitationSchema()
        )
        url = await self.client.create_elicitation(
            "sign in", scope, url="https://example.com", elicitation_id="e1"
        )
        self.seen += [form, url]
        for bad in (
            lambda: self.client.create_elicitation("x", scope),
            lambda: self.client.create_elicitation("x", scope, url="https://example.com"),
            lambda: self.client.create_elicitation(form_of(scope), scope),
        ):
            with pytest.raises(TypeError):
                await bad()
        return PromptResponse(stop_reason="end_turn")


def form_of(scope: Any) -> ElicitationFormMode:
    return ElicitationFormMode(message="m", requested_schema=ElicitationSchema(), scope=scope)


class ElicitingClient(RecordingClient):
    async def create_elicitation(
        self, params: CreateElicitationRequest
    ) -> CreateElicitationResponse:
        self.seen.append(params)
        return CreateElicitationResponseDecline()


async def test_union_params_take_their_fields_too() -> None:
    agent, client = OptionsAgent(), ElicitingClient()
    async with open_memory_pair(agent, client) as pair:
        await pair.to_agent.set_session_config_option("s", "auto", True)
        await pair.to_agent.set_session_config_option("s", "model", "fast", meta={"k": 1})
        assert agent.seen[-2:] == [
            SetSessionConfigOptionRequestBoolean(session_id="s", config_id="auto", value=True),
            SetSessionConfigOptionRequestValueId(
                session_id="s", config_id="model", value="fast", meta={"k": 1}
            ),
        ]
        for bad in (
            lambda: pair.to_agent.set_session_config_option("s", "auto"),
            lambda: pair.to_agent.set_session_config_option("s", "auto", 3),
            lambda: pair.to_agent.set_session_config_option(agent.seen[-1], "auto", True),
        ):
            with pytest.raises(TypeError):
                await bad()
        session = await pair.new_session()
        await pair.to_agent.prompt_text(session, "ask")
        form, url = client.seen
        assert isinstance(form, ElicitationFormMode)
        assert isinstance(url, ElicitationUrlMode)
        assert url.url == "https://example.com"
        assert url.elicitation_id == "e1"
