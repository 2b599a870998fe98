"""An agent using the client's files and terminals over a real connection
(``open_agent_client_pair``), served by WorkspaceFiles and a
TerminalManager through the mixins. Real files, real processes, real clock.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import trio

import acp_trio
from acp_trio import Agent, Client, RequestError
from acp_trio.contrib._terminals import (
    TerminalManager,
    TerminalsMixin,
    open_terminal_manager,
)
from acp_trio.contrib._workspace import WorkspaceFiles, WorkspaceFilesMixin
from acp_trio.schema import (
    ClientCapabilities,
    CreateTerminalRequest,
    FileSystemCapabilities,
    InitializeRequest,
    NewSessionRequest,
    NewSessionResponse,
    PromptRequest,
    PromptResponse,
    ReadTextFileRequest,
    ReleaseTerminalRequest,
    TerminalOutputRequest,
    WaitForTerminalExitRequest,
    WriteTextFileRequest,
)

from .conftest import group_alive, group_vanishes, limited

CAPS = ClientCapabilities(
    fs=FileSystemCapabilities(read_text_file=True, write_text_file=True), terminal=True
)


class AppClient(WorkspaceFilesMixin, TerminalsMixin, Client):
    """What an application writes: the mixins do the serving."""

    def __init__(self, files: WorkspaceFiles, terminals: TerminalManager) -> None:
        super().__init__()
        self.files = files
        self.terminals = terminals


class ToolAgent(Agent):
    """Runs ``self.script`` as its prompt turn; records what it saw."""

    def __init__(self, root: Path, script: Any) -> None:
        super().__init__()
        self.root = root
        self.script = script
        self.log: dict[str, Any] = {}

    async def new_session(self, params: NewSessionRequest) -> NewSessionResponse:
        return NewSessionResponse(session_id="sess-1")

    async def prompt(self, params: PromptRequest) -> PromptResponse:
        await self.script(self, params.session_id)
        return PromptResponse(stop_reason="end_turn")


async def edit_and_test(agent: ToolAgent, sid: str) -> None:
    client, root, log = agent.client, agent.root, agent.log
    read = await client.read_text_file(
        ReadTextFileRequest(session_id=sid, path=str(root / "a.txt"), line=2, limit=1)
    )
    log["read"] = read.content
    await client.write_text_file(
        WriteTextFileRequest(session_id=sid, path=str(root / "new.txt"), content="héllo\n")
    )
    for path in ("/etc/passwd", "relative.txt", str(root / "missing.txt")):
        try:
            await client.read_text_file(ReadTextFileRequest(session_id=sid, path=path))
        except RequestError as exc:
            log.setdefault("refusals", []).append((exc.code, exc.data["reason"]))
    term = await client.create_terminal(
        CreateTerminalRequest(
            session_id=sid, command="cat", args=["new.txt"], cwd=str(root), output_byte_limit=100
        )
    )
    ids: dict[str, Any] = {"session_id": sid, "terminal_id": term.terminal_id}
    exit_status = await client.wait_for_terminal_exit(WaitForTerminalExitRequest(**ids))
    out = await client.terminal_output(TerminalOutputRequest(**ids))
    await client.release_terminal(ReleaseTerminalRequest(**ids))
    log["terminal"] = (exit_status.exit_code, out.output, out.truncated)
    try:
        await client.terminal_output(TerminalOutputRequest(**ids))
    except RequestError as exc:
        log["after_release"] = (exc.code, exc.data["reason"])
    try:
        await client.create_terminal(CreateTerminalRequest(session_id=sid, command="rm"))
    except RequestError as exc:
        log["refused_command"] = (exc.code, exc.message)


@limited
async def test_agent_reads_writes_and_runs_a_command(tmp_path: Path) -> None:
    root = tmp_path / "project"
    root.mkdir()
    (root / "a.txt").write_text("one\ntwo\nthree\n")
    asked: list[str] = []

    async def approve(params: CreateTerminalRequest) -> bool:
        asked.append(" ".join([params.command, *(params.args or [])]))
        return params.command == "cat"

    agent = ToolAgent(root, edit_and_test)
    async with open_terminal_manager(approve) as terminals:
        client = AppClient(WorkspaceFiles([root]), terminals)
        async with acp_trio.open_agent_client_pair(agent, client) as (to_agent, _):
            await to_agent.initialize(
                InitializeRequest(protocol_version=1, client_capabilities=CAPS)
            )
            session = await to_agent.new_session(NewSessionRequest(cwd=str(root), mcp_servers=[]))
            result = await to_agent.prompt_text(session.session_id, "go")
    assert result.stop_reason == "end_turn"
    log = agent.log
    assert log["read"] == "two\n"
    assert (root / "new.txt").read_text(encoding="utf-8") == "héllo\n"
    assert log["refusals"] == [
        (-32602, "path is outside the workspace roots"),
        (-32602, "path is not absolute"),
        (-32002, "file not found"),
    ]
    assert log["terminal"] == (0, "héllo\n", False)
    assert log["after_release"] == (-32002, "released")
    assert log["refused_command"][0] == -32602
    assert "refused" in log["refused_command"][1]
    assert asked == ["cat new.txt", "rm"]


@limited
async def test_a_bare_initialize_advertises_what_the_mixins_serve(tmp_path: Path) -> None:
    """No capabilities passed: the mixin client advertises fs (read and
    write) and terminal, and the agent's read and write go through."""
    root = tmp_path / "project"
    root.mkdir()
    (root / "a.txt").write_text("one\ntwo\n")

    async def read_and_write(agent: ToolAgent, sid: str) -> None:
        read = await agent.client.read_text_file(
            ReadTextFileRequest(session_id=sid, path=str(root / "a.txt"))
        )
        agent.log["read"] = read.content
        await agent.client.write_text_file(
            WriteTextFileRequest(session_id=sid, path=str(root / "b.txt"), content="b\n")
        )

    async def never(params: CreateTerminalRequest) -> bool:
        return False

    agent = ToolAgent(root, read_and_write)
    async with open_terminal_manager(never) as terminals:
        client = AppClient(WorkspaceFiles([root]), terminals)
        async with acp_trio.open_agent_client_pair(agent, client) as (to_agent, to_client):
            await to_agent.initialize()
            assert to_client.capabilities == CAPS
            session = await to_agent.new_session(NewSessionRequest(cwd=str(root), mcp_servers=[]))
            result = await to_agent.prompt_text(session.session_id, "go")
    assert result.stop_reason == "end_turn"
    assert agent.log["read"] == "one\ntwo\n"
    assert (root / "b.txt").read_text() == "b\n"


async def start_and_wait(agent: ToolAgent, sid: str) -> None:
    client = agent.client
    term = await client.create_terminal(
        CreateTerminalRequest(session_id=sid, command="sh", args=["-c", "echo $$; sleep 3600"])
    )
    ids: dict[str, Any] = {"session_id": sid, "terminal_id": term.terminal_id}
    while not (out := await client.terminal_output(TerminalOutputRequest(**ids))).output:  # noqa: ASYNC110
        await trio.sleep(0.01)
    agent.log["pgid"] = int(out.output)
    agent.log["waiting"].set()
    # Never released: the turn is cancelled while it waits.
    await client.wait_for_terminal_exit(WaitForTerminalExitRequest(**ids))


@limited
async def test_cancelled_turn_leaves_the_command_running_until_the_manager_ends(
    tmp_path: Path,
) -> None:
    async def approve(params: CreateTerminalRequest) -> bool:
        return True

    agent = ToolAgent(tmp_path, start_and_wait)
    agent.log["waiting"] = trio.Event()
    async with open_terminal_manager(approve) as terminals:
        client = AppClient(WorkspaceFiles([tmp_path]), terminals)
        async with (
            acp_trio.open_agent_client_pair(agent, client) as (to_agent, _),
            trio.open_nursery() as nursery,
        ):
            await to_agent.initialize(
                InitializeRequest(protocol_version=1, client_capabilities=CAPS)
            )
            session = await to_agent.new_session(
                NewSessionRequest(cwd=str(tmp_path), mcp_servers=[])
            )
            results: list[PromptResponse] = []

            async def turn() -> None:
                results.append(await to_agent.prompt_text(session.session_id, "go"))

            nursery.start_soon(turn)
            await agent.log["waiting"].wait()
            await to_agent.cancel(session.session_id)
        assert [r.stop_reason for r in results] == ["cancelled"]
        # The agent's wait was cancelled on the wire; the command runs on.
        pgid = agent.log["pgid"]
        assert group_alive(pgid)
        assert len(terminals.terminal_ids()) == 1
    # The manager's end kills what the agent never released.
    assert not group_alive(pgid)
    await group_vanishes(pgid)
    with pytest.raises(ProcessLookupError):
        os.killpg(pgid, 0)
