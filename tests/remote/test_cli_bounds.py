"""The command line's clean ends and caps (issue 47, cases 2, 8 and 9):
SIGTERM to ``serve``, ``connect`` and ``conduct`` ends them as SIGINT does
(agents stopped, nothing left behind); ``ACP_TRIO_TOKEN`` stays out of the
agent's environment; ``serve --max-agents`` caps the agent processes. Real
processes on loopback."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
import trio

import acp_trio
from acp_trio import schema
from acp_trio.lowlevel import open_agent_process
from acp_trio.remote import open_remote_agent
from acp_trio.testing import ScenarioClient

from .conftest import LIMIT, until
from .rawhttp import INIT, JSON, dumps, read_response, tcp
from .rawhttp import head as request_head

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc")

ACP = [sys.executable, "-m", "acp_trio"]
SCENARIO_AGENT = [*ACP, "scenario-agent"]
#: Exit status of a tool ended by SIGTERM (128 + 15), as a shell reports it.
TERMINATED = 143


def children(pid: int) -> list[int]:
    """The live processes whose parent is ``pid``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as file:
                fields = file.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] not in (b"Z", b"X"):
            found.append(int(entry))
    return found


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            state = file.read().rsplit(b")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in (b"Z", b"X")


@asynccontextmanager
async def serve(
    *extra: str, agent: list[str] = SCENARIO_AGENT, env: dict[str, str] | None = None
) -> AsyncIterator[tuple[trio.Process, str]]:
    command = [*ACP, "serve", "--http", "127.0.0.1:0", *extra, "--", *agent]
    process = await trio.lowlevel.open_process(
        command, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env
    )
    try:
        assert process.stderr is not None
        seen = b""
        while (found := re.search(rb"Running on (http://[\d.]+:\d+)", seen)) is None:
            chunk = await process.stderr.receive_some()
            assert chunk, seen.decode(errors="replace")
            seen += chunk
        async with trio.open_nursery() as nursery:

            async def drain() -> None:
                assert process.stderr is not None
                while await process.stderr.receive_some():
                    pass

            nursery.start_soon(drain)
            yield process, found.group(1).decode()
            nursery.cancel_scope.cancel()
    finally:
        if process.returncode is None:
            process.kill()
        with trio.CancelScope(shield=True):
            await process.wait()


async def busy_turn(base: str, nursery: trio.Nursery, profile: str = "websocket") -> None:
    """Start a turn that never ends by itself (``wait_for_cancel``) in
    ``nursery``; returns once the agent has it."""
    started = trio.Event()

    async def run() -> None:
        client = ScenarioClient()
        async with open_remote_agent(client, base + "/acp", profile=profile) as agent:  # type: ignore[arg-type]
            await agent.initialize(client.initialize_request())
            session = await agent.new_session(schema.NewSessionRequest(cwd="/", mcp_servers=[]))
            started.set()
            await agent.prompt_text(session.session_id, "wait_for_cancel")

    async def guarded() -> None:
        try:
            await run()
        except Exception:
            started.set()  # (the server went away: the test looks at processes)

    nursery.start_soon(guarded)
    await started.wait()
    await trio.sleep(0.3)


async def test_sigterm_to_serve_stops_its_busy_agents() -> None:
    with trio.fail_after(LIMIT):
        async with serve() as (process, base), trio.open_nursery() as nursery:
            await busy_turn(base, nursery)
            agents = children(process.pid)
            assert len(agents) == 1
            process.send_signal(signal.SIGTERM)
            await process.wait()
            # (was: serve gone at once, its agent left running)
            await until(lambda: not any(alive(pid) for pid in agents))
            assert process.returncode == TERMINATED
            nursery.cancel_scope.cancel()


#: An agent busy with a turn of its own: it answers ``initialize``, then
#: neither reads its stdin nor ends when it closes (only a signal ends it).
BUSY_AGENT = [
    sys.executable,
    "-c",
    "import json, sys, time\n"
    "message = json.loads(sys.stdin.readline())\n"
    "reply = {'jsonrpc': '2.0', 'id': message['id'], 'result': {'protocolVersion': 1}}\n"
    "print(json.dumps(reply), flush=True)\n"
    "while True:\n"
    "    time.sleep(1)\n",
]


async def test_sigterm_to_serve_stops_an_agent_that_ignores_its_closed_stdin() -> None:
    body = dumps(INIT)
    agents: list[int] = []
    try:
        with trio.fail_after(LIMIT):
            async with serve(agent=BUSY_AGENT) as (process, base), tcp(base) as stream:
                await stream.send_all(request_head("POST", headers=JSON, length=len(body)) + body)
                response, _ = await read_response(stream)
                assert response.status == 200
                agents = children(process.pid)
                assert len(agents) == 1
                process.send_signal(signal.SIGTERM)
                await process.wait()
                # (was: serve gone at once, this agent left running for good)
                await until(lambda: not any(alive(pid) for pid in agents))
                assert process.returncode == TERMINATED
    finally:
        for pid in agents:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


async def test_sigterm_to_conduct_stops_its_components() -> None:
    command = [*ACP, "conduct", "--", *SCENARIO_AGENT]
    client = ScenarioClient()
    with trio.fail_after(LIMIT):
        async with (
            open_agent_process(command, stderr="capture", shutdown_grace=10) as process,
            acp_trio.open_agent(client, process.stream) as agent,
            trio.open_nursery() as nursery,
        ):
            await agent.initialize(client.initialize_request())
            session = await agent.new_session(schema.NewSessionRequest(cwd="/", mcp_servers=[]))

            async def turn() -> None:
                with contextlib.suppress(Exception):
                    await agent.prompt_text(session.session_id, "wait_for_cancel")

            nursery.start_soon(turn)
            await until(lambda: len(children(process.pid)) == 1)
            await trio.sleep(0.3)
            components = children(process.pid)
            process.process.send_signal(signal.SIGTERM)
            await process.process.wait()
            # (was: conduct gone at once, its agent left running)
            await until(lambda: not any(alive(pid) for pid in components))
            assert process.returncode == TERMINATED
            nursery.cancel_scope.cancel()


async def test_sigterm_to_conduct_stops_an_agent_that_ignores_its_closed_stdin() -> None:
    command = [*ACP, "conduct", "--", *BUSY_AGENT]
    process = await trio.lowlevel.open_process(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    components: list[int] = []
    try:
        with trio.fail_after(LIMIT):
            assert process.stdin is not None
            assert process.stdout is not None
            await process.stdin.send_all(dumps(INIT) + b"\n")
            # The agent's answer: conduct is up (a child seen earlier may be
            # one of its imports' short-lived helpers, before SIGTERM is handled).
            received = b""
            while b"\n" not in received:
                received += await process.stdout.receive_some()
            assert b'"result"' in received, received
            components = children(process.pid)
            assert len(components) == 1
            process.send_signal(signal.SIGTERM)
            await process.wait()
            # (was: conduct gone at once, this agent left running for good)
            await until(lambda: not any(alive(pid) for pid in components))
            assert process.returncode == TERMINATED
    finally:
        for pid in components:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        if process.returncode is None:
            process.kill()
        with trio.CancelScope(shield=True):
            await process.wait()


async def test_sigterm_to_connect_ends_it_and_its_remote_connection() -> None:
    with trio.fail_after(LIMIT):
        async with serve() as (server, base):
            connect = await trio.lowlevel.open_process(
                [*ACP, "connect", "--profile", "websocket", base + "/acp"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
            )
            assert connect.stdin is not None
            assert connect.stdout is not None
            try:
                await connect.stdin.send_all(dumps(INIT) + b"\n")
                received = b""
                while b"\n" not in received:
                    received += await connect.stdout.receive_some()
                await until(lambda: len(children(server.pid)) == 1)
                agents = children(server.pid)
                connect.send_signal(signal.SIGTERM)
                await connect.wait()
                assert connect.returncode == TERMINATED  # (was -15: killed outright)
                # The WebSocket was closed: the server stopped that agent.
                await until(lambda: not any(alive(pid) for pid in agents))
            finally:
                if connect.returncode is None:
                    connect.kill()
                with trio.CancelScope(shield=True):
                    await connect.wait()


ENV_AGENT = [
    sys.executable,
    "-c",
    "import json, os, sys\n"
    "line = sys.stdin.readline()\n"
    "message = json.loads(line)\n"
    "reply = {'jsonrpc': '2.0', 'id': message['id'], 'result': {'protocolVersion': 1,\n"
    "         '_meta': {'token': os.environ.get('ACP_TRIO_TOKEN')}}}\n"
    "print(json.dumps(reply), flush=True)\n"
    "sys.stdin.read()\n",
]


async def test_the_token_is_not_in_the_agents_environment() -> None:
    env = {**os.environ, "ACP_TRIO_TOKEN": "s3cret"}
    body = dumps(INIT)
    with trio.fail_after(LIMIT):
        async with serve(agent=ENV_AGENT, env=env) as (_, base), tcp(base) as stream:
            headers = {**JSON, "Authorization": "Bearer s3cret"}
            await stream.send_all(request_head("POST", headers=headers, length=len(body)) + body)
            response, reply = await read_response(stream)
            assert response.status == 200
            # (was "s3cret": the agent, and all it runs, had the token)
            assert json.loads(reply)["result"]["_meta"]["token"] is None


async def test_serve_max_agents_caps_the_agent_processes() -> None:
    body = dumps(INIT)
    with trio.fail_after(LIMIT):
        async with serve("--max-agents", "1") as (process, base):
            statuses = []
            for _ in range(3):
                async with tcp(base) as stream:
                    await stream.send_all(request_head("POST", headers=JSON, length=len(body)))
                    await stream.send_all(body)
                    response, _ = await read_response(stream)
                    statuses.append(response.status)
            assert statuses == [200, 503, 503]
            assert len(children(process.pid)) == 1
