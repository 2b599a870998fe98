"""A typed client driving a typed agent in a real subprocess
(``open_spawned_agent`` + ``run_agent``): a normal session, and an agent that
dies in the middle of a prompt. Real clock, real time limits."""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path

import pytest
import trio

import acp_trio
from acp_trio import ConnectionClosed
from acp_trio.schema import AgentMessageChunk, PromptResponse

from .conftest import INIT, NEW_SESSION, REAL_LIMIT, RecordingClient

AGENT = textwrap.dedent(
    """
    import functools, os, sys, trio, acp_trio
    from acp_trio import schema

    class Agent(acp_trio.Agent):
        async def initialize(self, params):
            return schema.InitializeResponse(
                protocol_version=1,
                agent_info=schema.Implementation(name="sub", version="1"),
                meta={"pid": os.getpid()},
            )

        async def new_session(self, params):
            return schema.NewSessionResponse(session_id="sub-1")

        async def prompt(self, params):
            text = params.prompt[0].text
            if text == "crash":
                await self.client.send_text(params.session_id, "about to crash")
                print("agent: fatal error in prompt", file=sys.stderr, flush=True)
                os._exit(3)
            for word in text.split():
                await self.client.send_text(params.session_id, word)
            print("stray print goes to stderr")
            return schema.PromptResponse(stop_reason="end_turn")

    # No SIGTERM handler: a SIGTERM kills us before we write the marker.
    trio.run(functools.partial(acp_trio.run_agent, Agent(), handle_signals=False))
    with open(sys.argv[1], "w") as marker:
        marker.write("stdin closed")
    """
)


@pytest.fixture
def agent_command(tmp_path: Path) -> list[str]:
    """The agent; it writes ``exited`` in ``tmp_path`` if it ends because its
    stdin closed."""
    path = tmp_path / "agent.py"
    path.write_text(AGENT)
    return [sys.executable, str(path), str(tmp_path / "exited")]


def reaped(pid: int) -> bool:
    """True if ``pid`` is no child of ours any more (waited for)."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return False


async def test_a_normal_session_in_a_subprocess(
    agent_command: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    client = RecordingClient()
    with trio.fail_after(REAL_LIMIT):
        async with acp_trio.open_spawned_agent(client, agent_command) as agent:
            init = await agent.initialize(INIT)
            assert agent.agent_info is not None
            assert agent.agent_info.name == "sub"
            assert init.meta is not None
            pid = init.meta["pid"]
            session = await agent.new_session(NEW_SESSION)
            assert session.session_id == "sub-1"
            result = await agent.prompt_text("sub-1", "one two three")
            assert result == PromptResponse(stop_reason="end_turn")
            # Streamed, in order, all handled before the answer came back.
            assert client.texts() == ["one", "two", "three"]
            assert all(isinstance(n.update, AgentMessageChunk) for n in client.updates)
            assert not reaped(pid)
    # Closing stdin asks the agent to exit; it does, by itself (a SIGTERM
    # after the grace period would have killed it first), and it is reaped.
    assert (tmp_path / "exited").read_text() == "stdin closed"
    assert reaped(pid)
    # Its print() (stderr, under run_agent) reached our stderr, prefixed.
    assert f"agent.py[{pid}]: stray print goes to stderr\n" in capsys.readouterr().err


async def test_agent_crashing_mid_prompt(
    agent_command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    client = RecordingClient()
    with trio.fail_after(REAL_LIMIT):
        async with acp_trio.open_spawned_agent(client, agent_command) as agent:
            init = await agent.initialize(INIT)
            assert init.meta is not None
            pid = init.meta["pid"]
            await agent.new_session(NEW_SESSION)
            with pytest.raises(ConnectionClosed) as info:
                await agent.prompt_text("sub-1", "crash")
            assert info.value.exit_code == 3
            assert info.value.stderr_tail is not None
            assert b"agent: fatal error in prompt" in info.value.stderr_tail
            assert "exit code 3" in str(info.value)
            # Later calls fail the same way, at once.
            with pytest.raises(ConnectionClosed):
                await agent.new_session(NEW_SESSION)
    assert reaped(pid)
    # The traceback-to-be was also shown as it happened, not only in the tail.
    assert f"agent.py[{pid}]: agent: fatal error in prompt\n" in capsys.readouterr().err
