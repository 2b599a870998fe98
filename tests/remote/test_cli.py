"""``python -m acp_trio serve`` (any stdio agent over both profiles) and
``connect`` (a remote agent bridged to stdio), as real processes on
loopback."""

from __future__ import annotations

import json
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
from acp_trio.remote import RemoteApp, agent_app, open_remote_agent
from acp_trio.testing import ScenarioAgent, ScenarioClient

from .conftest import LIMIT, running, until

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
NESTED = ("session/request_permission", "fs/read_text_file", "terminal/create")


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
                    # All three held before the cancel: one still on its way
                    # when its $/cancel_request comes is answered -32800
                    # without its handler ever running, and is never counted
                    # as cancelled (this hung the test 1 run in 6 or 8).
                    for method in NESTED:
                        await client.wait_for_requests(method)
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


INIT_LINE = (
    b'{"jsonrpc":"2.0","id":0,"method":"initialize",'
    b'"params":{"protocolVersion":1,"clientCapabilities":{}}}\n'
)
PROFILES = ["websocket", "http", "http1"]


async def run_connect(url: str, stdin: bytes, *extra: str) -> subprocess.CompletedProcess[bytes]:
    command = [sys.executable, "-m", "acp_trio", "connect", *extra, url]
    return await trio.run_process(
        command, stdin=stdin, capture_stdout=True, capture_stderr=True, check=False
    )


def replies(stdout: bytes) -> list[dict[str, object]]:
    return [json.loads(line) for line in stdout.splitlines()]


@pytest.mark.parametrize("profile", PROFILES)
async def test_connect_delivers_the_replies_owed_when_stdin_closes(profile: str) -> None:
    with trio.fail_after(LIMIT):
        async with running(agent_app(ScenarioAgent)) as base:
            done = await run_connect(base + "/acp", INIT_LINE, "--profile", profile)
    assert done.returncode == 0, done.stderr
    [reply] = replies(done.stdout)  # (was none over WebSocket and h2c)
    assert reply["id"] == 0
    assert reply["result"]["protocolVersion"] == 1  # type: ignore[index]


@pytest.mark.parametrize("profile", PROFILES)
async def test_connect_answers_a_malformed_line_and_goes_on(profile: str) -> None:
    stdin = b"this is not JSON\n[1, 2]\n" + INIT_LINE
    with trio.fail_after(LIMIT):
        async with running(agent_app(ScenarioAgent)) as base:
            done = await run_connect(base + "/acp", stdin, "--profile", profile)
    assert done.returncode == 0, done.stderr  # (was 1 over HTTP: the server's 400)
    parse_error, invalid, reply = replies(done.stdout)
    assert parse_error["id"] is None
    assert parse_error["error"]["code"] == -32700  # type: ignore[index]
    assert invalid["id"] is None
    assert invalid["error"]["code"] == -32600  # type: ignore[index]
    assert reply["id"] == 0


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize(
    ("token", "said"),
    [(None, "a bearer token is required"), ("wrong", "the bearer token is not right")],
    ids=["no token", "wrong token"],
)
async def test_connect_says_in_one_line_why_the_server_refused(
    profile: str, token: str | None, said: str
) -> None:
    app = RemoteApp(agent_app(ScenarioAgent).handle, token="s3cret")
    extra = ["--profile", profile] + (["--token", token] if token else [])
    with trio.fail_after(LIMIT):
        async with running(app) as base:
            done = await run_connect(base + "/acp", INIT_LINE, *extra)
    assert done.returncode == 1
    assert done.stdout == b""
    [line] = done.stderr.decode().splitlines()  # (was a traceback)
    assert "401" in line
    assert said in line


async def test_connect_says_in_one_line_that_nothing_listens() -> None:
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]
    await listeners[0].aclose()  # (the port is free: nothing listens)
    with trio.fail_after(LIMIT):
        done = await run_connect(f"http://127.0.0.1:{port}/acp", INIT_LINE)
    assert done.returncode == 1
    [line] = done.stderr.decode().splitlines()
    assert f"127.0.0.1:{port}" in line


@pytest.mark.parametrize("profile", PROFILES)
async def test_check_agent_through_connect_conforms(profile: str) -> None:
    """Issue 37's bar: a served scenario agent, reached through ``connect``
    on each profile, CONFORMS (h2c used to stall, and ``connect`` to lose
    replies when stdin closed)."""
    with trio.fail_after(LIMIT * 3):
        async with running(agent_app(ScenarioAgent)) as base:
            connect = [sys.executable, "-m", "acp_trio", "connect", "--profile", profile]
            done = await trio.run_process(
                [sys.executable, "-m", "acp_trio", "check-agent", "--", *connect, base + "/acp"],
                capture_stdout=True,
                capture_stderr=True,
                check=False,
            )
    assert done.returncode == 0, done.stdout.decode()[-3000:]
    assert b"\nCONFORMS\n" in done.stdout


@pytest.mark.parametrize("profile", PROFILES)
async def test_connect_ends_quietly_when_the_editor_stops_reading(profile: str) -> None:
    # The editor takes its answers, then goes away (closes its end of our
    # stdout) while the agent still streams: the session is over, not a
    # failure to connect (was exit 1, "cannot connect: Broken pipe").
    new = b'{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}\n'
    prompt = (
        b'{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":'
        b'"scenario-1","prompt":[{"type":"text","text":"stream 400 64"}]}}\n'
    )
    command = [sys.executable, "-m", "acp_trio", "connect", "--profile", profile]
    with trio.fail_after(LIMIT):
        async with running(agent_app(ScenarioAgent)) as base:
            process = await trio.lowlevel.open_process(
                [*command, base + "/acp"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            assert process.stdin is not None
            assert process.stdout is not None
            assert process.stderr is not None
            await process.stdin.send_all(INIT_LINE + new)
            seen = b""
            while seen.count(b"\n") < 2:
                chunk = await process.stdout.receive_some()
                assert chunk, seen
                seen += chunk
            assert [reply["id"] for reply in replies(seen)] == [0, 1]
            await process.stdout.aclose()
            await process.stdin.send_all(prompt)
            await process.stdin.aclose()
            err = b""
            while chunk := await process.stderr.receive_some():
                err += chunk
            code = await process.wait()
    assert b"Broken pipe" not in err, err
    assert code == 0, err
