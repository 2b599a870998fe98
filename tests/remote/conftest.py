"""Shared helpers for the remote-transport tests: a real hypercorn server
on a loopback port (real clock, generous watchdogs)."""

from __future__ import annotations

import functools
import json
import subprocess
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("hypercorn")
pytest.importorskip("wsproto")

import trio

from acp_trio import schema
from acp_trio.remote import RemoteApp, open_remote_agent, serve_remote
from acp_trio.testing import ScenarioClient

#: The watchdog of each I/O test (seconds); generous for a loaded machine.
LIMIT = int(__import__("os").environ.get("REMOTE_TEST_LIMIT", "60"))


@asynccontextmanager
async def running(app: RemoteApp, host: str = "127.0.0.1") -> AsyncIterator[str]:
    """Serve ``app`` on a free loopback port for the block; yields its base
    URL (``http://127.0.0.1:PORT``)."""
    async with trio.open_nursery() as nursery:
        binds = await nursery.start(functools.partial(serve_remote, app, 0, host=host))
        try:
            yield binds[0]
        finally:
            nursery.cancel_scope.cancel()


def ws_url(base: str, path: str = "/acp") -> str:
    return base.replace("http://", "ws://", 1) + path


async def until(predicate: Callable[[], bool]) -> None:
    """Wait until ``predicate()`` holds (the test's watchdog bounds it)."""
    while True:
        if predicate():
            return
        await trio.sleep(0.005)


@asynccontextmanager
async def server_process(command: Sequence[str], cwd: Path) -> AsyncIterator[str]:
    """Run a peer's server script (which prints ``{"url": ...}`` once
    listening) for the block; yields that ``http://`` URL (WebSocket on the
    same port)."""
    async with trio.open_nursery() as nursery:
        process = await nursery.start(
            functools.partial(
                trio.run_process,
                list(command),
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                check=False,
            )
        )
        try:
            line = b""
            while not line.endswith(b"\n"):
                chunk = await process.stdout.receive_some()
                assert chunk, f"the server exited: {command}"
                line += chunk
            yield json.loads(line)["url"]
        finally:
            process.terminate()
            nursery.cancel_scope.cancel()


async def cancelled_turn(agent: Any, session_id: str) -> schema.PromptResponse:
    """Prompt ``wait_for_cancel`` and end it with ``session/cancel``; returns
    the prompt's result.

    A cancel that reaches the agent before the prompt does is ignored (no
    turn to cancel), and nothing on the wire says the turn has started, so
    ``session/cancel`` is sent again every 0.2 s until the turn ends (the
    test's watchdog bounds it)."""
    results: list[schema.PromptResponse] = []
    done = trio.Event()

    async def run() -> None:
        results.append(await agent.prompt_text(session_id, "wait_for_cancel"))
        done.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run)
        while not done.is_set():
            await agent.cancel(session_id)
            with trio.move_on_after(0.2):
                await done.wait()
    return results[0]


async def drive_scenario_server(url: str, profile: Any, name: str) -> None:
    """Through acp_trio's client at a peer's scenario server ``url``:
    prompts, streamed updates, an agent -> client read, and a turn ended by
    ``session/cancel``."""
    client = ScenarioClient()
    async with open_remote_agent(client, url, profile=profile) as agent:
        await agent.initialize(client.initialize_request())
        session = await agent.new_session(schema.NewSessionRequest(cwd="/", mcp_servers=[]))
        sid = session.session_id
        for command in (f"echo hi {name}", "stream 30 2", "read 2 /x"):
            result = await agent.prompt_text(sid, command)
            assert result.stop_reason == "end_turn"
        assert client.texts() == [
            f"hi {name}",
            *(f"{i}." if i < 10 else str(i) for i in range(30)),
            "read 2 128",
        ]
        result = await cancelled_turn(agent, sid)
        assert result.stop_reason == "cancelled"
