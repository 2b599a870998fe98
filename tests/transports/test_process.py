"""Real subprocesses and pipes: the stdio transport on both sides."""

from __future__ import annotations

import os
import signal
import sys
import textwrap
from pathlib import Path

import pytest
import trio

import acp_trio
from acp_trio import ConnectionClosed, ConnectionConfig
from acp_trio._transports._process import _group_running_sync

# An agent on acp_trio's stdio transport: answers "echo", prints junk to
# stdout before answering, crashes on "crash", spawns a child on "spawn".
AGENT = textwrap.dedent(
    """
    import os, subprocess, sys, trio, acp_trio

    class Agent(acp_trio.lowlevel.Handler):
        async def handle_request(self, ctx, method, params):
            if method == "echo":
                print("stray print from the agent")
                sys.stdout.flush()
                os.write(1, b"raw write to fd 1\\n")
                return params
            if method == "crash":
                sys.stderr.write("agent: about to crash\\n")
                sys.stderr.flush()
                os._exit(3)
            if method == "spawn":
                child = subprocess.Popen(["sleep", "3600"], stdin=subprocess.DEVNULL)
                return {"pid": child.pid}
            return await super().handle_request(ctx, method, params)

    async def main():
        async with acp_trio.lowlevel.open_stdio_stream() as stream:
            async with acp_trio.lowlevel.open_connection(stream, Agent()) as conn:
                await conn.wait_closed()

    trio.run(main)
    """
)

STUBBORN = textwrap.dedent(
    """
    import signal, sys, time
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    print("ignoring SIGTERM", flush=True)
    sys.stdin.read()  # until stdin closes
    while True:
        time.sleep(1)
    """
)


@pytest.fixture
def agent_script(tmp_path: Path) -> list[str]:
    path = tmp_path / "agent.py"
    path.write_text(AGENT)
    return [sys.executable, str(path)]


def group_alive(pgid: int) -> bool:
    """Whether a process of the group still runs. Zombies don't count: they
    are dead, waiting for init (which here reaps orphans only now and then)
    to collect them."""
    return _group_running_sync(pgid)


def process_gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
    except FileNotFoundError:
        return True
    return fields[0] in (b"Z", b"X")


async def test_stray_stdout_writes_do_not_corrupt_the_stream(agent_script: list[str]) -> None:
    with trio.fail_after(20):
        async with (
            acp_trio.lowlevel.open_agent_process(agent_script) as agent,
            acp_trio.lowlevel.open_connection(agent.stream) as conn,
        ):
            for i in range(3):
                assert await conn.call("echo", {"n": i}) == {"n": i}
        tail = agent.stderr_tail()
        assert tail is not None
        assert b"stray print from the agent" in tail
        assert b"raw write to fd 1" in tail
        assert agent.returncode == 0
        assert not group_alive(agent.pid)


async def test_agent_crash_fails_pending_calls_with_exit_code_and_stderr(
    agent_script: list[str],
) -> None:
    with trio.fail_after(20):
        async with acp_trio.lowlevel.open_agent_process(agent_script) as agent:
            config = ConnectionConfig(exit_details=agent.exit_details)
            async with acp_trio.lowlevel.open_connection(agent.stream, config=config) as conn:
                with pytest.raises(ConnectionClosed) as info:
                    await conn.call("crash")
                with pytest.raises(ConnectionClosed):
                    await conn.call("echo", {})
    assert info.value.exit_code == 3
    assert info.value.stderr_tail is not None
    assert b"agent: about to crash" in info.value.stderr_tail
    assert "exit code 3" in str(info.value)


async def test_teardown_kills_what_the_agent_left_in_its_group(
    agent_script: list[str],
) -> None:
    with trio.fail_after(20):
        async with (
            acp_trio.lowlevel.open_agent_process(agent_script, terminate_grace=1.0) as agent,
            acp_trio.lowlevel.open_connection(agent.stream) as conn,
        ):
            child = (await conn.call("spawn"))["pid"]
            assert group_alive(agent.pid)
        assert agent.returncode == 0
        assert not group_alive(agent.pid)
        assert process_gone(child)


async def test_agent_that_ignores_sigterm_is_killed(tmp_path: Path) -> None:
    path = tmp_path / "stubborn.py"
    path.write_text(STUBBORN)
    with trio.fail_after(20):
        async with acp_trio.lowlevel.open_agent_process(
            [sys.executable, str(path)], shutdown_grace=0.2, terminate_grace=0.3
        ) as agent:
            # Its handler is in place before the stop begins (a busy
            # machine may take longer than the graces to start Python).
            said = b""
            while b"\n" not in said:
                said += await agent.stream.receive_some()
            assert said == b"ignoring SIGTERM\n"
    assert agent.returncode == -signal.SIGKILL
    assert not group_alive(agent.pid)


async def test_cancelled_client_still_reaps_the_agent(agent_script: list[str]) -> None:
    with trio.fail_after(20):
        with trio.move_on_after(0.5):
            async with acp_trio.lowlevel.open_agent_process(agent_script) as agent:
                await trio.sleep_forever()
    assert agent.returncode is not None
    assert not group_alive(agent.pid)


async def test_a_program_that_does_not_exist() -> None:
    with pytest.raises(FileNotFoundError):
        async with acp_trio.lowlevel.open_agent_process(["/nonexistent/agent"]):
            pass


@pytest.mark.parametrize("stdin_kind", ["devnull", "file"])
async def test_agent_stdio_on_non_pipes_ends_cleanly(tmp_path: Path, stdin_kind: str) -> None:
    # stdin that is not a pipe is read with blocking reads in a thread:
    # a request in a file is answered, then EOF ends the agent.
    script = tmp_path / "agent.py"
    script.write_text(AGENT)
    request = b'{"jsonrpc":"2.0","id":7,"method":"echo","params":{"a":1}}\n'
    if stdin_kind == "file":
        source = tmp_path / "in.jsonl"
        source.write_bytes(request)
        stdin_path = str(source)
    else:
        stdin_path = os.devnull
    out = tmp_path / "out.jsonl"
    fin = os.open(stdin_path, os.O_RDONLY)
    fout = os.open(out, os.O_WRONLY | os.O_CREAT)
    try:
        with trio.fail_after(20):
            result = await trio.run_process(
                [sys.executable, str(script)], stdin=fin, stdout=fout, capture_stderr=True
            )
    finally:
        os.close(fin)
        os.close(fout)
    assert result.returncode == 0
    lines = out.read_bytes().splitlines()
    if stdin_kind == "file":
        # EOF right after the request cancels its handler: -32800 or the
        # result, never both, and nothing but JSON on stdout.
        assert len(lines) == 1
        assert lines[0].startswith(b'{"jsonrpc":"2.0","id":7,')
    else:
        assert lines == []


async def test_an_error_in_the_block_comes_out_plain(agent_script: list[str]) -> None:
    with trio.fail_after(20), pytest.raises(KeyError, match="boom"):
        async with acp_trio.lowlevel.open_agent_process(agent_script) as agent:
            raise KeyError("boom")
    assert agent.returncode is not None
