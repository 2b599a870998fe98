"""A spawned agent's stderr, over real pipes: forwarded line by line to our
stderr or a logger, prefixed and in order; the tail still in
``ConnectionClosed``; and neither a flood nor a stuck destination blocks the
agent, the connection, or grows our memory beyond the bound."""

from __future__ import annotations

import logging
import os
import sys
import textwrap
import threading
import tracemalloc
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path

import pytest
import trio

import acp_trio
from acp_trio import ConnectionClosed, ConnectionConfig
from acp_trio._transports._process import StderrMode
from acp_trio._transports._stderr import MAX_LINE, QUEUE_BYTES, default_prefix

LIMIT = 60  # a watchdog, not a speed requirement: two shared cores

# "say": writes the given lines (hex, so any bytes) to stderr in one write.
# "flood": writes `total` bytes of `width`-byte lines with blocking writes
# (an undrained pipe would block it), returns what it wrote. "crash" exits 3.
AGENT = textwrap.dedent(
    """
    import os, sys, trio, acp_trio

    def write_all(data):
        view = memoryview(data)
        while view:
            view = view[os.write(2, view):]

    class Agent(acp_trio.lowlevel.Handler):
        async def handle_request(self, ctx, method, params):
            if method == "echo":
                return params
            if method == "say":
                write_all(b"".join(bytes.fromhex(line) for line in params["lines"]))
                return "said"
            if method == "flood":
                width, total = params["width"], params["total"]
                line = b"f" * (width - 1) + b"\\n"
                block = line * max(1, 65536 // width)
                written = 0
                while written < total:
                    chunk = block[: total - written]
                    write_all(chunk)
                    written += len(chunk)
                return {"written": written, "lines": written // width}
            if method == "crash":
                write_all(b"Traceback (most recent call last):\\nValueError: boom\\n")
                os._exit(3)
            return await super().handle_request(ctx, method, params)

    async def main():
        async with acp_trio.lowlevel.open_stdio_stream() as stream:
            async with acp_trio.lowlevel.open_connection(stream, Agent()) as conn:
                await conn.wait_closed()

    trio.run(main)
    """
)


@pytest.fixture
def agent(tmp_path: Path) -> list[str]:
    path = tmp_path / "stderr_agent.py"
    path.write_text(AGENT)
    return [sys.executable, str(path)]


def hexes(*lines: bytes) -> list[str]:
    return [line.hex() for line in lines]


class Collect(logging.Handler):
    """Keeps the messages (or, with ``keep=False``, counts the lines and
    keeps the drop notices); optionally blocks every emit until released."""

    def __init__(self, gate: threading.Event | None = None, *, keep: bool = True) -> None:
        super().__init__()
        self.messages: list[str] = []
        self.lines = 0
        self.gate = gate
        self.keep = keep

    def emit(self, record: logging.LogRecord) -> None:
        if self.gate is not None:
            self.gate.wait()
        message = record.getMessage()
        if is_notice(message):
            self.messages.append(message)
            return
        self.lines += 1
        if self.keep:
            self.messages.append(message)


async def wait_until(predicate: Callable[[], bool]) -> None:
    """Polls: what the tests wait for changes in worker threads and pipes,
    which signal no event; the watchdogs bound it."""
    while not predicate():  # noqa: ASYNC110
        await trio.sleep(0.01)


def is_notice(message: str) -> bool:
    return ": [acp_trio: " in message and message.endswith(" dropped]")


def noticed(messages: list[str]) -> int:
    """The lines the drop notices among ``messages`` say were dropped."""
    return sum(int(m.split("[acp_trio: ")[1].split()[0]) for m in messages if is_notice(m))


async def caught_up(
    process: acp_trio.lowlevel.AgentProcess, conn: acp_trio.lowlevel.Connection
) -> None:
    """Until every stderr byte the agent wrote so far is read and every line
    queued is written: a marker the agent writes shows in the tail, then the
    pump is idle. (A request's answer on stdout can overtake its stderr.)
    The marker itself may be dropped, or forwarded."""
    await conn.call("say", {"lines": hexes(b"-- marker --\n")})
    await wait_until(lambda: (process.stderr_tail() or b"").endswith(b"-- marker --\n"))
    await wait_until(lambda: process.stderr_statistics().idle)


@pytest.fixture
def private_logger() -> logging.Logger:
    """A logger of the test's own, outside logging's registry: pytest's
    capture handlers (which would keep every record) never see it."""
    logger = logging.Logger("test_stderr.private", logging.INFO)
    logger.propagate = False
    return logger


SAID = (
    b"first line\n",
    b"second line, CRLF\r\n",
    b"bad utf-8: \xff\xfe end\n",
    b"x" * (MAX_LINE * 3) + b"\n",
    b"after the long one\n",
    b"no newline at the end",
)


def expected(prefix: str) -> list[str]:
    cut = "x" * MAX_LINE + f" [acp_trio: line cut at {MAX_LINE} bytes]"
    lines = ["first line", "second line, CRLF", "bad utf-8: \ufffd\ufffd end", cut]
    return [prefix + line for line in [*lines, "after the long one", "no newline at the end"]]


async def test_lines_are_forwarded_to_our_stderr_in_order_with_a_prefix(
    agent: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with trio.fail_after(LIMIT):
        # The default: forward.
        async with (
            acp_trio.lowlevel.open_agent_process(agent) as process,
            acp_trio.lowlevel.open_connection(process.stream) as conn,
        ):
            assert await conn.call("say", {"lines": hexes(*SAID)}) == "said"
            assert await conn.call("echo", {"n": 1}) == {"n": 1}
    err = capsys.readouterr().err.splitlines()
    prefix = f"stderr_agent.py[{process.pid}]: "
    assert prefix == default_prefix(agent, process.pid)
    assert [line for line in err if line.startswith(prefix)] == expected(prefix)
    assert process.stderr_lines_dropped == 0
    # The tail keeps the raw bytes, as before.
    tail = process.stderr_tail()
    assert tail is not None
    assert tail.endswith(b"after the long one\nno newline at the end")


@pytest.mark.parametrize("how", ["log", "logger"])
async def test_lines_become_log_records(
    agent: list[str],
    caplog: pytest.LogCaptureFixture,
    private_logger: logging.Logger,
    how: str,
) -> None:
    collect = Collect()
    private_logger.addHandler(collect)
    caplog.set_level(logging.INFO, logger="acp_trio.agent_stderr")
    mode: StderrMode | logging.Logger = "log" if how == "log" else private_logger
    with trio.fail_after(LIMIT):
        async with (
            acp_trio.lowlevel.open_agent_process(
                agent, stderr=mode, stderr_prefix="[agent] "
            ) as process,
            acp_trio.lowlevel.open_connection(process.stream) as conn,
        ):
            assert await conn.call("say", {"lines": hexes(*SAID)}) == "said"
    if how == "log":
        records = [r for r in caplog.records if r.name == "acp_trio.agent_stderr"]
        assert [r.getMessage() for r in records] == expected("[agent] ")
        assert {r.levelno for r in records} == {logging.INFO}
        assert {getattr(r, "agent_pid", None) for r in records} == {process.pid}
        assert collect.messages == []
    else:
        assert collect.messages == expected("[agent] ")


async def test_connect_to_agent_takes_the_same_options(
    agent: list[str], capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    # A typed client over the same pipes: a raw "say" through its connection.
    caplog.set_level(logging.INFO, logger="acp_trio.agent_stderr")
    with trio.fail_after(LIMIT):
        async with acp_trio.open_spawned_agent(acp_trio.Client(), agent, stderr="log") as proxy:
            await proxy.connection.call("say", {"lines": hexes(b"via the logger\n")})
        async with acp_trio.open_spawned_agent(acp_trio.Client(), agent) as proxy:
            await proxy.connection.call("say", {"lines": hexes(b"via our stderr\n")})
    records = [r for r in caplog.records if r.name == "acp_trio.agent_stderr"]
    assert [r.getMessage().split(": ", 1)[1] for r in records] == ["via the logger"]
    assert "]: via our stderr\n" in capsys.readouterr().err


async def test_the_tail_is_still_in_connection_closed(
    agent: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with trio.fail_after(LIMIT):
        async with acp_trio.lowlevel.open_agent_process(agent) as process:
            config = ConnectionConfig(exit_details=process.exit_details)
            async with acp_trio.lowlevel.open_connection(process.stream, config=config) as conn:
                with pytest.raises(ConnectionClosed) as info:
                    await conn.call("crash")
    assert info.value.exit_code == 3
    assert info.value.stderr_tail == b"Traceback (most recent call last):\nValueError: boom\n"
    assert "stderr tail:\nTraceback (most recent call last):\nValueError: boom" in str(info.value)
    assert f"stderr_agent.py[{process.pid}]: ValueError: boom\n" in capsys.readouterr().err


async def test_a_50_mb_flood_blocks_nobody_and_memory_stays_bounded(
    agent: list[str], private_logger: logging.Logger
) -> None:
    """The agent writes 50 MB with blocking writes, then answers: it was
    never left on a full pipe. Meanwhile a destination that is slower than
    the flood (a log handler) gets what it can take; the rest is counted.
    Our allocations stay within the queue's bound plus a margin, far below
    the 50 MB that went through."""
    collect = Collect(keep=False)
    private_logger.addHandler(collect)
    total, width = 50 * 1024 * 1024, 1000
    tracemalloc.start()
    try:
        with trio.fail_after(LIMIT):
            async with (
                acp_trio.lowlevel.open_agent_process(agent, stderr=private_logger) as process,
                acp_trio.lowlevel.open_connection(process.stream) as conn,
            ):
                assert await conn.call("echo", {"n": 0}) == {"n": 0}
                tracemalloc.reset_peak()
                base, _ = tracemalloc.get_traced_memory()
                flood = await conn.call("flood", {"total": total, "width": width})
                assert flood["written"] == total
                assert await conn.call("echo", {"n": 1}) == {"n": 1}
                await caught_up(process, conn)
                _, peak = tracemalloc.get_traced_memory()
                assert process.stderr_statistics().peak_queued_bytes <= QUEUE_BYTES
                # Every line was forwarded or counted in a drop notice.
                assert process.stderr_lines_dropped > 0
                assert noticed(collect.messages) == process.stderr_lines_dropped
                assert collect.lines + noticed(collect.messages) == flood["lines"] + 1  # marker
    finally:
        tracemalloc.stop()
    assert peak - base < 4 * 1024 * 1024, (peak - base, total)


async def test_a_destination_that_blocks_does_not_block_the_protocol(
    agent: list[str], private_logger: logging.Logger
) -> None:
    """A log handler stuck until we release it: the flood and later requests
    are answered meanwhile; once it moves, it gets the lines that fitted,
    a notice of how many were dropped, then the new ones."""
    gate = threading.Event()
    collect = Collect(gate)
    private_logger.addHandler(collect)
    try:
        with trio.fail_after(LIMIT):
            async with (
                acp_trio.lowlevel.open_agent_process(agent, stderr=private_logger) as process,
                acp_trio.lowlevel.open_connection(process.stream) as conn,
            ):
                flood = await conn.call("flood", {"total": 5 * 1024 * 1024, "width": 100})
                for n in range(3):
                    assert await conn.call("echo", {"n": n}) == {"n": n}
                await conn.call("say", {"lines": hexes(b"end of flood\n")})
                await wait_until(lambda: (process.stderr_tail() or b"").endswith(b"end of flood\n"))
                dropped = process.stderr_lines_dropped
                assert dropped > 0
                assert collect.messages == []
                gate.set()
                await caught_up(process, conn)
                await conn.call("say", {"lines": hexes(b"after the jam\n")})
                await wait_until(
                    lambda: (
                        bool(collect.messages) and collect.messages[-1].endswith("after the jam")
                    )
                )
    finally:
        gate.set()
    prefix = f"stderr_agent.py[{process.pid}]: "
    notices = [m for m in collect.messages if is_notice(m)]
    # What the jam dropped, reported once it ended (with the marker, if it
    # came while the backlog was still being written).
    assert notices[0].startswith(f"{prefix}[acp_trio: ")
    assert dropped <= noticed(notices[:1]) <= dropped + 1
    assert len(notices) <= 2
    assert noticed(notices) == process.stderr_lines_dropped
    forwarded = [m for m in collect.messages if not is_notice(m)]
    # The flood, "end of flood", the marker, "after the jam".
    assert len(forwarded) + process.stderr_lines_dropped == flood["lines"] + 3
    assert forwarded[-1] == prefix + "after the jam"


async def test_our_stderr_a_pipe_nobody_reads(
    agent: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Forwarding to a full pipe blocks a worker thread, never the loop: the
    protocol carries on, and leaving the block does not wait for it."""
    read_end, write_end = os.pipe()
    jammed = open(write_end, "w", encoding="utf-8")  # noqa: ASYNC230, SIM115
    monkeypatch.setattr(sys, "stderr", jammed)
    try:
        with trio.fail_after(LIMIT):
            async with (
                acp_trio.lowlevel.open_agent_process(agent) as process,
                acp_trio.lowlevel.open_connection(process.stream) as conn,
            ):
                await conn.call("flood", {"total": 5 * 1024 * 1024, "width": 100})
                for n in range(3):
                    assert await conn.call("echo", {"n": n}) == {"n": n}
                assert process.stderr_lines_dropped > 0
        assert process.returncode == 0
    finally:
        monkeypatch.undo()
        # The abandoned writer gets EPIPE and ends; closing may fail alike.
        os.close(read_end)
        with suppress(OSError):
            jammed.close()


def test_the_default_prefix_names_the_program() -> None:
    assert default_prefix(["/usr/local/bin/my-agent", "--acp"], 7) == "my-agent[7]: "
    assert default_prefix(["python3", "-u", "agents/echo.py"], 7) == "echo.py[7]: "
    assert default_prefix(["npx", "-y", "@zed-industries/claude-code-acp"], 7) == (
        "claude-code-acp[7]: "
    )
    assert default_prefix(["node"], 7) == "node[7]: "


@pytest.mark.parametrize(
    ("command", "name"),
    [
        # Code given inline is not a name (it was the whole script).
        (["python3", "-c", "import agent\nagent.main()\n"], "python3 -c"),
        (["/usr/bin/python3.12", "-u", "-c", "print(1)"], "python3.12 -c"),
        (["node", "-e", "require('./agent').run()"], "node -e"),
        (["node", "--eval", "run()"], "node --eval"),
        (["deno", "eval", "console.log(1)"], "deno eval"),
        # An option's value, or a subcommand, is not the program either.
        (["python", "-W", "error", "-X", "dev", "agent.py"], "agent.py"),
        (["python", "-m", "acp_trio", "scenario-agent"], "acp_trio"),
        (["node", "--require", "ts-node/register", "agent.ts"], "agent.ts"),
        (["deno", "run", "-A", "agent.ts"], "agent.ts"),
        (["npx", "--package", "x", "some-agent"], "some-agent"),
        (["uvx", "--from", "pkg", "my-agent"], "my-agent"),
        # Something that cannot be a name (a command line, a long blob): the launcher.
        (["bun", "x y z"], "bun"),
        (["python", "a" * 200], "python"),
    ],
)
def test_the_default_prefix_is_short_and_says_what_runs(command: list[str], name: str) -> None:
    assert default_prefix(command, 7) == f"{name}[7]: "


async def test_a_python_c_agent_is_prefixed_python_c(capsys: pytest.CaptureFixture[str]) -> None:
    script = "import sys\nsys.stderr.write('hello from the agent\\n')\n" + "# padding\n" * 20
    with trio.fail_after(LIMIT):
        async with acp_trio.lowlevel.open_agent_process([sys.executable, "-c", script]) as process:
            await process.process.wait()
    name = os.path.basename(sys.executable)
    err = capsys.readouterr().err.splitlines()
    assert f"{name} -c[{process.pid}]: hello from the agent" in err


async def test_an_unknown_mode_is_refused(agent: list[str]) -> None:
    with pytest.raises(ValueError, match="stderr must be"):
        async with acp_trio.lowlevel.open_agent_process(agent, stderr="loud"):  # type: ignore[arg-type]
            pass
