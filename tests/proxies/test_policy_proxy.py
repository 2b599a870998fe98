"""The policy proxy refuses what it can see: ``examples/coding_agent.py``
asks permission for its edit with the tool call's handle, which sends what
the call is about (its kind, title, content); through the conductor,
``policy_proxy.py --reject edit`` refuses it, and neither the permission
request nor the write reaches the client."""

from __future__ import annotations

import sys

import trio

import acp_trio
from acp_trio import schema

from .test_conductor import LIMIT, POLICY, ROOT, chain_of

CODING_AGENT = [sys.executable, str(ROOT / "examples" / "coding_agent.py")]
SOURCE = "prnt('hi')\n"


class Workspace(acp_trio.Client):
    """Serves one file, refuses every permission, and records what the agent
    asked of it."""

    def __init__(self) -> None:
        self.methods: list[str] = []
        self.permissions: list[schema.RequestPermissionRequest] = []
        self.tool_statuses: list[str] = []
        self.written: list[str] = []

    async def session_update(self, params: schema.SessionNotification) -> None:
        update = params.update
        if isinstance(update, schema.ToolCall | schema.ToolCallUpdate) and update.status:
            self.tool_statuses.append(update.status)

    async def read_text_file(
        self, params: schema.ReadTextFileRequest
    ) -> schema.ReadTextFileResponse:
        self.methods.append("fs/read_text_file")
        return schema.ReadTextFileResponse(content=SOURCE)

    async def write_text_file(
        self, params: schema.WriteTextFileRequest
    ) -> schema.WriteTextFileResponse:
        self.methods.append("fs/write_text_file")
        self.written.append(params.content)
        return schema.WriteTextFileResponse()

    async def request_permission(
        self, params: schema.RequestPermissionRequest
    ) -> schema.RequestPermissionResponse:
        self.methods.append("session/request_permission")
        self.permissions.append(params)
        # The user says no: the agent writes nothing and needs no terminal.
        reject = next(o for o in params.options if o.kind.startswith("reject"))
        outcome = schema.SelectedPermissionOutcome(option_id=reject.option_id)
        return schema.RequestPermissionResponse(outcome=outcome)


CAPABILITIES = schema.ClientCapabilities(
    fs=schema.FileSystemCapabilities(read_text_file=True, write_text_file=True)
)


async def fix(components: list[list[str]], client: Workspace) -> schema.PromptResponse:
    with trio.fail_after(LIMIT):
        async with chain_of(components, client) as agent:
            await agent.initialize(
                schema.InitializeRequest(protocol_version=1, client_capabilities=CAPABILITIES)
            )
            session = (await agent.new_session("/w")).session_id
            return await agent.prompt_text(session, "fix /w/main.py")


async def test_the_policy_proxy_refuses_the_coding_agents_edit() -> None:
    client = Workspace()
    reply = await fix([POLICY, CODING_AGENT], client)
    assert reply.stop_reason == "end_turn"
    assert client.methods == ["fs/read_text_file"]  # no permission request, no write
    assert client.written == []
    assert client.tool_statuses == ["in_progress", "failed"]


async def test_without_the_policy_the_client_sees_what_it_is_asked_to_allow() -> None:
    client = Workspace()
    reply = await fix([CODING_AGENT], client)
    assert reply.stop_reason == "end_turn"
    assert client.methods == ["fs/read_text_file", "session/request_permission"]
    assert client.written == []
    assert client.tool_statuses == ["in_progress", "failed"]
    (asked,) = client.permissions
    call = asked.tool_call
    assert (call.kind, call.title, call.status) == ("edit", "Fix main.py", None)
    assert call.content is not None
    (shown,) = call.content
    assert isinstance(shown, schema.Diff)
    assert (shown.path, shown.old_text, shown.new_text) == ("/w/main.py", SOURCE, "print('hi')\n")
