"""Helpers of the hardening tests: real processes on both sides.

- The **agent side**: ``agents/scenario_agent.py`` (the shipped
  ``ScenarioAgent`` under ``acp_trio.run_agent``, plus knobs such as
  ``--max-message-size``) in a subprocess, played by a
  :class:`~acp_trio.testing.ScriptedPeer` (:func:`open_agent`) that writes
  exact bytes to its stdin.
- The **client side**: ``clients/client_script.py`` (an acp_trio client on
  its own stdio) in a subprocess, with the test playing the agent on its
  stdin/stdout (:func:`open_client`); the client reports what it saw as
  ``@@``-prefixed JSON lines on stderr.

Every test runs on the real clock under ``trio.fail_after``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any

import trio

from acp_trio.testing import ScriptedPeer, open_scripted_process

HERE = Path(__file__).parent
AGENT = (sys.executable, str(HERE / "agents" / "scenario_agent.py"))
CLIENT = (sys.executable, str(HERE / "clients" / "client_script.py"))

#: Real seconds one process test may take (a watchdog: generous on a busy
#: machine, and below pytest-timeout's 120).
LIMIT = 60

CLIENT_CAPS = {"fs": {"readTextFile": True, "writeTextFile": True}, "terminal": True}


def env_with(**extra: str) -> dict[str, str]:
    return {**os.environ, **extra}


def error_of(msg: dict[str, Any]) -> tuple[Any, int]:
    """``(id, code)`` of an error response (and nothing else in it)."""
    assert set(msg) == {"jsonrpc", "id", "error"}, msg
    return msg["id"], msg["error"]["code"]


def same_id(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b


# ----------------------------------------------------------------------
# The agent side: a scripted client against a real agent process


@asynccontextmanager
async def open_agent(
    *args: str, env: dict[str, str] | None = None, receive_timeout: float = 10.0
) -> AsyncIterator[ScriptedPeer]:
    """The hardening agent in a subprocess, played by a scripted client."""
    async with open_scripted_process(
        [*AGENT, *args], env=env, receive_timeout=receive_timeout
    ) as peer:
        yield peer


async def handshake(peer: ScriptedPeer) -> str:
    """``initialize`` and ``session/new``; returns the session id."""
    rid = await peer.request(
        "initialize", {"protocolVersion": 1, "clientCapabilities": CLIENT_CAPS}
    )
    init = await peer.receive_response(rid)
    assert init["result"]["protocolVersion"] == 1, init
    return await new_session(peer)


async def new_session(peer: ScriptedPeer) -> str:
    rid = await peer.request("session/new", {"cwd": "/", "mcpServers": []})
    reply = await peer.receive_response(rid)
    session_id: str = reply["result"]["sessionId"]
    return session_id


def prompt_params(session_id: str, text: str, *more: str) -> dict[str, Any]:
    blocks = [{"type": "text", "text": t} for t in (text, *more)]
    return {"sessionId": session_id, "prompt": blocks}


async def assert_echo(peer: ScriptedPeer, session_id: str, token: str = "still alive") -> None:
    """The connection still works: an ``echo`` prompt is answered, its update
    first, and nothing else arrives meanwhile."""
    rid = await peer.request("session/prompt", prompt_params(session_id, f"echo {token}"))
    # In this order, and nothing between (or before: nothing left queued).
    assert peer.queued == [], peer.queued
    update = await peer.receive()
    assert update["method"] == "session/update", update
    assert update["params"]["update"]["content"]["text"] == token, update
    reply = await peer.receive()
    assert reply == {"jsonrpc": "2.0", "id": rid, "result": {"stopReason": "end_turn"}}, reply


# ----------------------------------------------------------------------
# The client side: the test plays the agent of a real client process


class ClientProcess:
    """A running ``client_script.py``: :attr:`peer` is the test's agent end of
    its stdio; :meth:`report` reads its ``@@`` reports."""

    def __init__(self, process: trio.Process, peer: ScriptedPeer) -> None:
        self.process = process
        self.peer = peer
        self.log: list[bytes] = []
        self._send, self._reports = trio.open_memory_channel[dict[str, Any]](1000)

    async def read_stderr(self) -> None:
        assert self.process.stderr is not None
        buffer = b""
        with suppress(trio.ClosedResourceError, trio.BrokenResourceError):
            while chunk := await self.process.stderr.receive_some(65536):
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    if line.startswith(b"@@"):
                        await self._send.send(json.loads(line[2:]))
                    else:
                        self.log.append(line)
        await self._send.aclose()

    async def report(self, event: str | None = None, within: float = 10.0) -> dict[str, Any]:
        """The next report (which must be ``event`` when given)."""
        with trio.fail_after(within):
            try:
                item = await self._reports.receive()
            except trio.EndOfChannel:
                raise AssertionError(f"client exited; its log: {self.log[-20:]}") from None
        if event is not None:
            assert item["event"] == event, (item, self.log[-20:])
        return item

    async def serve_handshake(self, session_id: str = "s-1") -> None:
        """Answer ``initialize`` and ``session/new`` as the agent."""
        peer = self.peer
        init = await peer.receive_request("initialize")
        await peer.respond(init["id"], {"protocolVersion": 1, "agentCapabilities": {}})
        await self.report("initialized")
        new = await peer.receive_request("session/new")
        await peer.respond(new["id"], {"sessionId": session_id})
        reported = await self.report("session")
        assert reported == {"event": "session", "id": session_id, "updates": 0, "held": 0}, reported

    async def next_prompt(self) -> Any:
        """The id of the client's next ``session/prompt``."""
        message = await self.peer.receive_request("session/prompt")
        return message["id"]

    async def answer_prompt(self, prompt_id: Any, *texts: str, session_id: str = "s-1") -> None:
        """Stream ``texts`` and end the turn; the client must report exactly
        them (so everything sent before was handled as the rules say)."""
        for text in texts:
            await self.peer.notify("session/update", text_update(session_id, text))
        await self.peer.respond(prompt_id, {"stopReason": "end_turn"})
        reported = await self.report("prompt")
        assert reported["stop"] == "end_turn", reported
        assert reported["texts"] == list(texts), reported

    async def assert_serves_requests(self, request_id: Any = "alive?") -> None:
        """The client still answers our requests (a read of a file)."""
        await self.peer.request(
            "fs/read_text_file", {"sessionId": "s-1", "path": "/f"}, id=request_id
        )
        reply = await self.peer.receive_response(request_id)
        assert reply["result"] == {"content": "x" * 64}, reply

    async def finish(self) -> None:
        """The client's last report: nothing left in flight, clean exit."""
        stats = await self.report("stats")
        assert stats == {
            "event": "stats",
            "incoming": 0,
            "outgoing": 0,
            "queued": 0,
            "tree": 0,
        }, stats
        await self.report("exit")
        await self.process.wait()  # under the test's watchdog
        assert self.process.returncode == 0, self.log[-20:]


def text_update(session_id: str, text: str) -> dict[str, Any]:
    return {
        "sessionId": session_id,
        "update": {
            "sessionUpdate": "agent_message_chunk",
            "content": {"type": "text", "text": text},
        },
    }


@asynccontextmanager
async def open_client(*args: str, receive_timeout: float = 10.0) -> AsyncIterator[ClientProcess]:
    """``client_script.py ARGS`` in a subprocess (own process group), its
    stdio played by the test as the agent. Killed and reaped at the end."""
    process = await trio.lowlevel.open_process(
        [*CLIENT, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    assert process.stdin is not None
    assert process.stdout is not None
    peer = ScriptedPeer(trio.StapledStream(process.stdin, process.stdout), timeout=receive_timeout)
    client = ClientProcess(process, peer)
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(client.read_stderr)
            try:
                yield client
            finally:
                with trio.CancelScope(shield=True):
                    await stop_process(process)
                nursery.cancel_scope.deadline = trio.current_time() + 1
    finally:
        with suppress(OSError):
            process.kill()


async def stop_process(process: trio.Process, grace: float = 3.0) -> None:
    """Close its stdin, give it ``grace`` seconds, then SIGKILL; reap it."""
    if process.stdin is not None:
        with suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            await process.stdin.aclose()
    with trio.move_on_after(grace):
        await process.wait()
    if process.returncode is None:
        process.kill()
        await process.wait()


Side = str  # "agent" (we play the client) or "client" (we play the agent)


def valid_request(side: Side, request_id: Any) -> dict[str, Any]:
    """A request the side under test serves at once."""
    if side == "agent":
        return {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": "session/new",
            "params": {"cwd": "/", "mcpServers": []},
        }
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "fs/read_text_file",
        "params": {"sessionId": "s-1", "path": "/f"},
    }
