"""No ``ExceptionGroup`` escapes a public entry point: each one is made to
fail for real (a stream with a bug of its own, a trace hook that raises, one
agent object on two TCP connections, a deleted working directory) and
raises that one plain exception.

Trio wraps every error leaving a nursery in a group; the nurseries inside
acp_trio are its business, so each entry point that opens one (directly, or
through ``Connection``) unwraps the group. When a connection fails, the
calls in flight fail with ``ConnectionClosed``: the error that ended it is
what comes out, not a group of both.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

import acp_trio
from acp_trio import ConnectionConfig
from acp_trio.testing import SCENARIO_AGENT_COMMAND, ScenarioAgent, check_agent, open_memory_pair

from .conftest import INIT, LIMIT, REAL_LIMIT, RecordingClient, ScriptedAgent


class BuggyStream(trio.abc.Stream):
    """A stream whose reads fail with an error of its own, not a transport
    error: at once, or (``after_write``) once something was written to it,
    so that a call is in flight when the connection fails."""

    def __init__(self, *, after_write: bool = False) -> None:
        self.broken = trio.Event()
        if not after_write:
            self.broken.set()

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        await self.broken.wait()
        raise RuntimeError("stream bug")

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await trio.lowlevel.checkpoint()
        self.broken.set()

    async def wait_send_all_might_not_block(self) -> None:
        await trio.lowlevel.checkpoint()

    async def aclose(self) -> None:
        await trio.lowlevel.checkpoint()


def raising_trace(direction: str, frame: bytes) -> None:
    raise ValueError("trace hook bug")


async def raised_by(run: Callable[[], Any], within: float = LIMIT) -> BaseException:
    """What ``await run()`` raised (it must raise)."""
    with trio.fail_after(within):
        try:
            await run()
        except BaseException as exc:
            return exc
    raise AssertionError("it did not raise")


def assert_plain(exc: BaseException, kind: type[BaseException], match: str) -> None:
    assert not isinstance(exc, BaseExceptionGroup), repr(exc)
    assert type(exc) is kind, repr(exc)
    assert match in str(exc)


async def test_serve_connection(autojump_clock: Any) -> None:
    exc = await raised_by(lambda: acp_trio.lowlevel.serve_connection(BuggyStream()))
    assert_plain(exc, RuntimeError, "stream bug")


async def test_serve_agent(autojump_clock: Any) -> None:
    exc = await raised_by(lambda: acp_trio.serve_agent(ScriptedAgent(), BuggyStream()))
    assert_plain(exc, RuntimeError, "stream bug")


def open_side(side: str, stream: trio.abc.Stream) -> AbstractAsyncContextManager[Any]:
    if side == "connection":
        return acp_trio.lowlevel.open_connection(stream)
    if side == "agent":
        return acp_trio.open_client(ScriptedAgent(), stream)
    return acp_trio.open_agent(RecordingClient(), stream)


@pytest.mark.parametrize("side", ["connection", "agent", "client"])
async def test_open_a_side_with_a_call_in_flight(side: str, autojump_clock: Any) -> None:
    """The call fails with ConnectionClosed, the connection with the
    stream's error: that one comes out (it used to be a group of both)."""

    async def run() -> None:
        async with open_side(side, BuggyStream(after_write=True)) as opened:
            connection = opened if side == "connection" else opened.connection
            await connection.call("_ping")

    assert_plain(await raised_by(run), RuntimeError, "stream bug")


async def test_open_agent_client_pair_with_a_buggy_trace_hook(autojump_clock: Any) -> None:
    async def run() -> None:
        async with acp_trio.open_agent_client_pair(
            ScriptedAgent(), RecordingClient(), agent_config=ConnectionConfig(trace=raising_trace)
        ) as (to_agent, _):
            await to_agent.initialize(INIT)

    assert_plain(await raised_by(run), ValueError, "trace hook bug")


async def test_open_memory_pair_with_a_buggy_trace_hook(autojump_clock: Any) -> None:
    async def run() -> None:
        async with open_memory_pair(
            ScriptedAgent(), RecordingClient(), client_config=ConnectionConfig(trace=raising_trace)
        ):
            pass  # pragma: no cover

    assert_plain(await raised_by(run), ValueError, "trace hook bug")


async def test_run_agent(autojump_clock: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    @asynccontextmanager
    async def buggy_stdio() -> AsyncIterator[trio.abc.Stream]:
        yield BuggyStream()

    monkeypatch.setattr(acp_trio._typed._agent, "open_stdio_stream", buggy_stdio)  # type: ignore[attr-defined]
    exc = await raised_by(lambda: acp_trio.run_agent(ScriptedAgent, handle_signals=False))
    assert_plain(exc, RuntimeError, "stream bug")


async def test_connect_to_agent_with_a_buggy_trace_hook() -> None:
    async def run() -> None:
        config = ConnectionConfig(trace=raising_trace)
        async with acp_trio.open_spawned_agent(
            RecordingClient(), SCENARIO_AGENT_COMMAND, config=config
        ) as agent:
            await agent.initialize(INIT)

    assert_plain(await raised_by(run, REAL_LIMIT), ValueError, "trace hook bug")


async def test_serve_tcp_with_one_agent_object_for_two_connections() -> None:
    """The second connection's handler fails (see test_many_connections):
    the server ends with that RuntimeError, not a group of groups."""
    agent = ScenarioAgent()
    handle = functools.partial(acp_trio.serve_agent, agent)

    async def run() -> None:
        async with trio.open_nursery() as nursery:
            listeners = await nursery.start(acp_trio.serve_tcp, handle, 0)
            port = listeners[0].socket.getsockname()[1]
            async with (
                await acp_trio.lowlevel.open_tcp_stream("127.0.0.1", port),
                await acp_trio.lowlevel.open_tcp_stream("127.0.0.1", port),
            ):
                await trio.sleep_forever()

    group = await raised_by(run, REAL_LIMIT)
    # The group is this test's own nursery's; inside it, serve_tcp's error.
    assert isinstance(group, BaseExceptionGroup)
    (exc,) = group.exceptions
    assert_plain(exc, RuntimeError, "pass a factory")


async def test_check_agent_in_a_deleted_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The agent's default working directory is ours, which is gone."""
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    exc = await raised_by(lambda: check_agent([sys.executable, "-c", "pass"]), REAL_LIMIT)
    assert_plain(exc, FileNotFoundError, "")


@pytest.mark.skipif(os.name != "posix", reason="terminals are POSIX only")
async def test_release_session_of_the_terminal_manager(monkeypatch: pytest.MonkeyPatch) -> None:
    """Killing a terminal does not fail in practice (its errors are
    handled); one is planted to show what would come out."""
    from acp_trio.contrib._terminals import TerminalManager
    from acp_trio.schema import CreateTerminalRequest

    async def approve(params: Any) -> bool:
        return True

    async def failing_kill(self: TerminalManager, term: Any) -> None:
        await trio.lowlevel.checkpoint()
        raise OSError("planted")

    with trio.fail_after(REAL_LIMIT):
        async with acp_trio.contrib.open_terminal_manager(approve) as manager:
            await manager.create_terminal(
                CreateTerminalRequest(session_id="s1", command="sleep", args=["30"])
            )
            with monkeypatch.context() as patch:
                patch.setattr(TerminalManager, "_kill", failing_kill)
                # Caught here, inside the manager's block (which unwraps too).
                exc = await raised_by(lambda: manager.release_session("s1"))
            # Leaving the block kills the terminal for real.
    assert_plain(exc, OSError, "planted")


async def test_connect_connection_puts_one_plain_error_in_the_callers_nursery(
    autojump_clock: Any,
) -> None:
    async def run() -> None:
        async with trio.open_nursery() as nursery:
            await acp_trio.lowlevel.connect_connection(nursery, BuggyStream())
            await trio.sleep_forever()

    exc = await raised_by(run)
    # The group is the caller's own nursery's; inside it, one plain error.
    assert isinstance(exc, BaseExceptionGroup), repr(exc)
    (inner,) = exc.exceptions
    assert_plain(inner, RuntimeError, "stream bug")
