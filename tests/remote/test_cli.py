"""``python -m acp_trio serve`` (any stdio agent over both profiles) and
``connect`` (a remote agent bridged to stdio), as real processes on
loopback."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
import trio

import acp_trio
from acp_trio import schema
from acp_trio._cli import main
from acp_trio.remote import open_remote_agent
from acp_trio.testing import ScenarioClient

from .conftest import LIMIT, until

SCENARIO_AGENT = [sys.executable, "-m", "acp_trio", "scenario-agent"]


@asynccontextmanager
async def serving(*extra: str) -> AsyncIterator[str]:
    """``serve`` the scenario agent on a free port; yields its base URL."""
    command = [sys.executable, "-m", "acp_trio", "serve", "--http", "127.0.0.1:0", *extra]
    async with trio.open_nursery() as nursery:
        process = await nursery.start(
            functools_partial_run([*command, "--", *SCENARIO_AGENT]),
        )
        try:
            assert process.stderr is not None
            seen = b""
            while (found := re.search(rb"Running on (http://[\d.]+:\d+)", seen)) is None:
                chunk = await process.stderr.receive_some()
                assert chunk, seen.decode(errors="replace")
                seen += chunk

            async def drain() -> None:
                while await process.stderr.receive_some():
                    pass

            nursery.start_soon(drain)
            yield found.group(1).decode()
        finally:
            process.terminate()
            with trio.CancelScope(shield=True), trio.fail_after(LIMIT):
                await process.wait()
            nursery.cancel_scope.cancel()


def functools_partial_run(command: list[str]):  # type: ignore[no-untyped-def]
    async def run(task_status: trio.TaskStatus[trio.Process] = trio.TASK_STATUS_IGNORED) -> None:
        await trio.run_process(
            command,
            stdin=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            task_status=task_status,
            check=False,
        )

    return run


# Issue 23: on a loaded machine the h2c case was once seen to hang (the
# session's SSE events never reached the client) in 2 of 3 runs of
# tests/remote. Its cause was not found; the h2c reopen stall fixed by
# reset_when_left (httpcore2 sends no RST_STREAM for a stream it leaves) is
# the likely one. It has passed 40 runs in 40 since (tests/remote/test_cli.py
# 20 times, and 20 times again after a rebase, each beside two busy loops and
# a full test run on this 2-core machine, load about 4) and two whole runs of
# tests/remote: not skipped any more.
@pytest.mark.parametrize("profile", ["websocket", "http", "http1"])
async def test_serve_exposes_a_stdio_agent(profile: str) -> None:
    with trio.fail_after(LIMIT):
        async with serving() as base:
            client = ScenarioClient()
            async with open_remote_agent(client, base + "/acp", profile=profile) as agent:  # type: ignore[arg-type]
                await agent.initialize(client.initialize_request())
                session = await agent.new_session(schema.NewSessionRequest(cwd="/", mcp_servers=[]))
                result = await agent.prompt_text(session.session_id, "stream 50 4")
                assert result.stop_reason == "end_turn"
                assert len(client.texts()) == 50
                # Cancellation passes through the bridge: the agent process
                # cancels its nested requests on the wire.
                async with trio.open_nursery() as nursery:

                    async def run() -> None:
                        await agent.prompt_text(session.session_id, "nested")

                    nursery.start_soon(run)
                    await client.wait_for_requests("session/request_permission")
                    await client.wait_for_requests("fs/read_text_file")
                    await agent.cancel(session.session_id)
                await until(lambda: len(client.cancelled) >= 3)


async def test_serve_requires_a_token_when_given_one() -> None:
    with trio.fail_after(LIMIT):
        async with serving("--token", "s3cret") as base:
            client = ScenarioClient()
            with pytest.raises(Exception, match="401"):
                async with open_remote_agent(client, base + "/acp", profile="http") as agent:
                    await agent.initialize(client.initialize_request())
            client = ScenarioClient()
            async with open_remote_agent(
                client, base + "/acp", profile="websocket", token="s3cret"
            ) as agent:
                result = await agent.initialize(client.initialize_request())
                assert result.protocol_version == 1


@pytest.mark.parametrize("scheme", ["ws", "http"])
async def test_connect_bridges_a_remote_agent_to_stdio(scheme: str) -> None:
    with trio.fail_after(LIMIT):
        async with serving() as base:
            url = base.replace("http", scheme, 1) + "/acp"
            command = [sys.executable, "-m", "acp_trio", "connect", url]
            client = ScenarioClient()
            async with acp_trio.open_spawned_agent(client, command, stderr="capture") as agent:
                await agent.initialize(client.initialize_request())
                session = await agent.new_session(schema.NewSessionRequest(cwd="/", mcp_servers=[]))
                result = await agent.prompt_text(session.session_id, "echo through two bridges")
                assert result.stop_reason == "end_turn"
                assert client.texts() == ["through two bridges"]


def test_serve_refuses_a_non_loopback_address_without_the_flag(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as info:
        main(["serve", "--http", "0.0.0.0:0", "--", *SCENARIO_AGENT])
    assert info.value.code == 2
    assert "not a loopback address" in capsys.readouterr().err


def test_serve_needs_a_command_and_an_address(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["serve", "--http", "127.0.0.1:0"])
    assert "command after --" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["serve", "--http", "nowhere", "--", "x"])
    assert "HOST:PORT" in capsys.readouterr().err
