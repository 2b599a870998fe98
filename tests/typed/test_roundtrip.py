"""A typed agent and a typed client against each other, over memory streams
and over real OS pipes: the whole of a turn, and what each side learns from
``initialize``."""

from __future__ import annotations

from typing import Any

import trio

from acp_trio.schema import (
    AgentCapabilities,
    AgentMessageChunk,
    CreateTerminalRequest,
    PermissionOption,
    PromptRequest,
    PromptResponse,
    ReadTextFileRequest,
    ReleaseTerminalRequest,
    RequestPermissionRequest,
    RequestPermissionResponse,
    SelectedPermissionOutcome,
    SessionCapabilities,
    SessionCloseCapabilities,
    TerminalOutputRequest,
    TextContent,
    ToolCall,
    ToolCallUpdate,
    WaitForTerminalExitRequest,
    WriteTextFileRequest,
)

from .conftest import (
    FULL_CAPS,
    INIT,
    NEW_SESSION,
    RecordingClient,
    ScriptedAgent,
    assert_one_response_each,
    limit,
    open_pair,
    start_session,
)

OPTIONS = [
    PermissionOption(option_id="allow", name="Allow", kind="allow_once"),
    PermissionOption(option_id="reject", name="Reject", kind="reject_once"),
]


async def full_turn(agent: ScriptedAgent, params: PromptRequest) -> PromptResponse:
    """Every kind of agent→client call, in one turn."""
    sid = params.session_id
    client = agent.client
    await client.send_text(sid, "Let me look. ")
    read = await client.read_text_file(ReadTextFileRequest(session_id=sid, path="/src/a.py"))
    agent.log.append(("read", read.content))
    await client.session_update(sid, ToolCall(tool_call_id="t1", title="Edit a.py"))
    answer = await client.request_permission(
        RequestPermissionRequest(
            session_id=sid, tool_call=ToolCallUpdate(tool_call_id="t1"), options=OPTIONS
        )
    )
    agent.log.append(("permission", answer.outcome))
    await client.write_text_file(
        WriteTextFileRequest(session_id=sid, path="/src/a.py", content="new")
    )
    term = await client.create_terminal(
        CreateTerminalRequest(session_id=sid, command="pytest", args=["-q"])
    )
    ids: dict[str, Any] = {"session_id": sid, "terminal_id": term.terminal_id}
    out = await client.terminal_output(TerminalOutputRequest(**ids))
    code = await client.wait_for_terminal_exit(WaitForTerminalExitRequest(**ids))
    await client.release_terminal(ReleaseTerminalRequest(**ids))
    agent.log.append(("terminal", out.output, code.exit_code))
    await client.send_text(sid, "Done.")
    return PromptResponse(stop_reason="end_turn")


async def test_full_turn(transport: str, clock: Any) -> None:
    caps = AgentCapabilities(
        session_capabilities=SessionCapabilities(close=SessionCloseCapabilities())
    )
    agent = ScriptedAgent(full_turn, capabilities=caps)
    client = RecordingClient()
    client.permission = RequestPermissionResponse(
        outcome=SelectedPermissionOutcome(option_id="allow")
    )
    with trio.fail_after(limit(transport)):
        async with open_pair(agent, client, transport) as (to_agent, to_client, awire, cwire):
            init = await to_agent.initialize(INIT)
            # What each side learned from initialize.
            assert init.protocol_version == 1
            assert to_agent.protocol_version == 1
            assert to_agent.capabilities == caps
            assert to_agent.agent_info is not None
            assert to_agent.agent_info.name == "scripted-agent"
            assert to_client.capabilities == FULL_CAPS
            assert agent.client is to_client
            assert client.agent is to_agent

            session = await to_agent.new_session(NEW_SESSION)
            assert session.session_id == "sess-1"
            result = await to_agent.prompt(
                PromptRequest(session_id="sess-1", prompt=[TextContent(text="fix a.py")])
            )
            assert result == PromptResponse(stop_reason="end_turn")
            # Every update was handled before prompt() returned.
            assert client.texts() == ["Let me look. ", "Done."]
            assert [type(n.update) for n in client.updates] == [
                AgentMessageChunk,
                ToolCall,
                AgentMessageChunk,
            ]
            assert client.log == [
                ("read", "/src/a.py"),
                ("permission", "t1"),
                ("write", "/src/a.py", "new"),
                ("terminal", "pytest"),
                ("output", "term-1"),
                ("wait", "term-1"),
                ("release", "term-1"),
            ]
            assert agent.log == [
                ("initialize", 1),
                ("read", "contents of /src/a.py"),
                ("permission", SelectedPermissionOutcome(option_id="allow")),
                ("terminal", "ok\n", 0),
            ]
            assert agent.prompts[0].prompt == [TextContent(text="fix a.py")]

    # The exact sequence of what the agent wrote: its requests, interleaved
    # with its updates, and the prompt's answer last.
    assert awire.methods_sent() == [
        "<response>",  # initialize
        "<response>",  # session/new
        "session/update",
        "fs/read_text_file",
        "session/update",
        "session/request_permission",
        "fs/write_text_file",
        "terminal/create",
        "terminal/output",
        "terminal/wait_for_exit",
        "terminal/release",
        "session/update",
        "<response>",  # session/prompt
    ]
    prompt_id = cwire.request_id("session/prompt")
    assert awire.sent()[-1] == {
        "jsonrpc": "2.0",
        "id": prompt_id,
        "result": {"stopReason": "end_turn"},
    }
    permission_id = awire.request_id("session/request_permission")
    assert cwire.sent_responses(permission_id)[0]["result"] == {
        "outcome": {"outcome": "selected", "optionId": "allow"}
    }
    # What one side sent, the other read, in the same order.
    assert awire.received() == cwire.sent()
    assert cwire.received() == awire.sent()
    assert awire.sent_cancels() == cwire.sent_cancels() == []
    assert_one_response_each(awire, cwire)


async def test_initialize_sends_the_clients_capabilities_exactly(autojump_clock: Any) -> None:
    agent = ScriptedAgent()
    with trio.fail_after(600):
        async with open_pair(agent, RecordingClient()) as (to_agent, _, awire, cwire):
            await start_session(to_agent)
    assert cwire.sent_requests("initialize")[0]["params"] == {
        "protocolVersion": 1,
        "clientCapabilities": {
            "fs": {"readTextFile": True, "writeTextFile": True},
            "terminal": True,
        },
    }
    assert cwire.sent_requests("session/new")[0]["params"] == {"cwd": "/work", "mcpServers": []}
    assert awire.sent_responses(cwire.request_id("session/new"))[0]["result"] == {
        "sessionId": "sess-1"
    }


async def test_concurrent_prompts_on_two_sessions(transport: str, clock: Any) -> None:
    """Two sessions' turns run at once; each one's updates reach the client
    before its own answer."""
    both_waiting = trio.Event()
    waiting: list[str] = []

    async def rendezvous(agent: ScriptedAgent, params: PromptRequest) -> PromptResponse:
        sid = params.session_id
        await agent.client.send_text(sid, f"{sid} started")
        waiting.append(sid)
        if len(waiting) == 2:
            both_waiting.set()
        await both_waiting.wait()
        await agent.client.send_text(sid, f"{sid} done")
        return PromptResponse(stop_reason="end_turn")

    agent = ScriptedAgent(rendezvous)
    client = RecordingClient()
    results: dict[str, PromptResponse] = {}
    with trio.fail_after(limit(transport)):
        async with open_pair(agent, client, transport) as (to_agent, _, awire, cwire):
            first = await start_session(to_agent)
            second = (await to_agent.new_session(NEW_SESSION)).session_id

            async def run(sid: str) -> None:
                results[sid] = await to_agent.prompt_text(sid, "go")

            async with trio.open_nursery() as nursery:
                nursery.start_soon(run, first)
                nursery.start_soon(run, second)
    assert results == {
        "sess-1": PromptResponse(stop_reason="end_turn"),
        "sess-2": PromptResponse(stop_reason="end_turn"),
    }
    assert sorted(client.texts()) == sorted(
        ["sess-1 started", "sess-1 done", "sess-2 started", "sess-2 done"]
    )
    # Per session, the updates are ahead of that session's answer.
    sent = awire.sent()
    prompt_ids = {m["params"]["sessionId"]: m["id"] for m in cwire.sent_requests("session/prompt")}
    for sid, prompt_id in prompt_ids.items():
        answer_at = next(i for i, m in enumerate(sent) if m.get("id") == prompt_id)
        update_at = [
            i
            for i, m in enumerate(sent)
            if m.get("method") == "session/update" and m["params"]["sessionId"] == sid
        ]
        assert len(update_at) == 2
        assert max(update_at) < answer_at
    assert_one_response_each(awire, cwire)
