"""A turn's end with real processes: the relay shape (an agent whose prompt
handler opens its sub-agent, a real process, and prompts it), a spawned
agent's last stderr lines, the "stop_process" abandon policy, an agent that
exits mid-cancel.

Real clock; every time limit is a watchdog. Bounds are asserted as what
happened, in order: the sub-agent's own record of the frames it read and
wrote (``agents/sub_agent.py``) shows whether a ``$/cancel_request`` (the
rung after the grace) ever came, and whether it exited by itself (``<eof>``)
or was killed. Loops of 20 runs show that no ordering is left to chance.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

import acp_trio
from acp_trio import ConnectionClosed, RequestError
from acp_trio.lowlevel import current_request
from acp_trio.schema import (
    InitializeRequest,
    InitializeResponse,
    NewSessionRequest,
    NewSessionResponse,
    PromptRequest,
    PromptResponse,
    SessionNotification,
)

from .conftest import RecordingClient

SUB = Path(__file__).parent / "agents" / "sub_agent.py"
#: Real seconds one run may take (a watchdog: the runs take about one).
WATCHDOG = 60
RUNS = range(20)


def sub_command(record: Path) -> list[str]:
    return [sys.executable, str(SUB), str(record)]


def read_record(record: Path) -> list[str]:
    return record.read_text().splitlines() if record.exists() else []


class ListHandler(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def stderr_logger(name: str) -> tuple[logging.Logger, ListHandler]:
    """A logger of its own for one spawned agent's stderr lines."""
    logger = logging.getLogger(f"tests.sub.{name}")
    logger.propagate = False
    logger.setLevel(logging.INFO)
    handler = ListHandler()
    logger.handlers[:] = [handler]
    return logger, handler


def stderr_lines(handler: ListHandler) -> list[str]:
    """The agent's lines, without the ``name[pid]: `` prefix."""
    return [line.split(": ", 1)[1] for line in handler.lines]


# ----------------------------------------------------------------------
# The relay


class SubClient(acp_trio.Client):
    """The relay's client of its sub-agent: passes the sub's updates on to
    the relay's own client, under the outer session's id."""

    def __init__(self, relay: Relay, outer_session: str, started: Callable[[], None]) -> None:
        super().__init__()
        self.relay = relay
        self.outer_session = outer_session
        self.started = started

    async def session_update(self, params: SessionNotification) -> None:
        await self.relay.client.session_update(
            SessionNotification(session_id=self.outer_session, update=params.update)
        )
        self.started()


class Relay(acp_trio.Agent):
    """An agent that relays each prompt to a sub-agent it spawns for the
    turn, inside its prompt handler, and passes the sub's error on as it is.
    ``deadline``: the relay's own deadline on the turn passes as soon as the
    sub's turn has started."""

    def __init__(self, command: list[str], logger: logging.Logger, *, deadline: bool) -> None:
        super().__init__()
        self.command = command
        self.logger = logger
        self.deadline = deadline

    async def initialize(self, params: InitializeRequest) -> InitializeResponse:
        return InitializeResponse(protocol_version=1)

    async def new_session(self, params: NewSessionRequest) -> NewSessionResponse:
        return NewSessionResponse(session_id="outer-1")

    async def prompt(self, params: PromptRequest) -> PromptResponse:
        ctx = current_request()
        assert ctx is not None

        def started() -> None:
            if self.deadline:
                ctx.cancel_scope.deadline = trio.current_time()

        client = SubClient(self, params.session_id, started)
        async with acp_trio.open_spawned_agent(client, self.command, stderr=self.logger) as sub:
            await sub.initialize()
            inner = await sub.new_session(cwd="/")
            try:
                answer = await sub.prompt(attrs.evolve(params, session_id=inner.session_id))
            except RequestError as exc:
                raise exc.passed_on() from None
            return PromptResponse(stop_reason=answer.stop_reason)


class OuterClient(RecordingClient):
    def __init__(self) -> None:
        super().__init__()
        self.relayed = trio.Event()

    async def session_update(self, params: SessionNotification) -> None:
        await super().session_update(params)
        self.relayed.set()


@pytest.mark.slow
@pytest.mark.parametrize("run", RUNS)
@pytest.mark.parametrize("cause", ["session/cancel", "$/cancel_request", "deadline"])
async def test_a_relay_cancels_its_sub_agent_the_protocols_way(
    cause: str, run: int, tmp_path: Path
) -> None:
    """Done when: after the outer session/cancel, $/cancel_request or
    deadline, the sub-agent reads ``session/cancel`` before anything else,
    answers ``cancelled`` within the grace (no ``$/cancel_request`` ever
    came: that rung is the grace's end), and the outer turn ends
    ``cancelled`` (``-32800`` for the outer ``$/cancel_request`` and the
    relay's own deadline). The sub then exits by itself, its last stderr
    line forwarded."""
    record = tmp_path / "record"
    logger, lines = stderr_logger(f"relay-{cause}-{run}")
    relay = Relay(sub_command(record), logger, deadline=cause == "deadline")
    client = OuterClient()
    outcome: Any = None
    with trio.fail_after(WATCHDOG):
        async with acp_trio.open_agent_client_pair(relay, client) as (to_relay, _):
            await to_relay.initialize()
            sid = (await to_relay.new_session(cwd="/")).session_id
            params = {"sessionId": sid, "prompt": [{"type": "text", "text": "wait"}]}
            pending = await to_relay.connection.send_request("session/prompt", params)
            if cause != "deadline":
                await client.relayed.wait()
                if cause == "session/cancel":
                    await to_relay.cancel(sid)
                else:
                    pending.cancel()
            try:
                outcome = await pending.result()
            except RequestError as exc:
                outcome = exc
    if cause == "session/cancel":
        assert outcome == {"stopReason": "cancelled"}
    else:
        assert isinstance(outcome, RequestError)
        assert outcome.code == -32800
    assert client.texts() == ["started"]  # the sub's update, relayed
    seen = read_record(record)
    received = [line for line in seen if line.startswith("recv ")]
    assert received == [
        "recv initialize",
        "recv session/new",
        "recv session/prompt",
        "recv session/cancel",
    ], seen
    assert "send <answer> " + '{"stopReason": "cancelled"}' in seen
    assert seen[-1] == "<eof>"  # stdin closed after the answer; exited by itself
    assert stderr_lines(lines)[-1] == "sub: bye"


# ----------------------------------------------------------------------
# A spawned agent's end


class Started(acp_trio.Client):
    def __init__(self) -> None:
        super().__init__()
        self.started = trio.Event()

    async def session_update(self, params: SessionNotification) -> None:
        self.started.set()


@pytest.mark.slow
@pytest.mark.parametrize("run", RUNS)
async def test_the_last_stderr_line_of_an_agent_cancelled_mid_turn_is_forwarded(
    run: int, tmp_path: Path
) -> None:
    """Done when: 20 of 20. The block is left by a cancel while the turn
    runs; the agent writes its last lines after that (when its turn ends,
    and as it exits on its stdin closing), and every one is forwarded."""
    record = tmp_path / "record"
    logger, lines = stderr_logger(f"cancelled-{run}")
    client = Started()
    with trio.fail_after(WATCHDOG):
        with trio.CancelScope() as scope:
            async with acp_trio.open_spawned_agent(
                client, sub_command(record), stderr=logger
            ) as agent:
                await agent.initialize()
                sid = (await agent.new_session(cwd="/")).session_id
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(agent.prompt_text, sid, "wait")
                    await client.started.wait()
                    scope.cancel()
        assert scope.cancelled_caught
    assert stderr_lines(lines) == ["sub: turn started", "sub: turn ended", "sub: bye"]
    assert read_record(record)[-1] == "<eof>"


@pytest.mark.parametrize("how", ["normally", "by an error"])
async def test_every_stderr_line_is_forwarded_however_the_block_is_left(
    how: str, tmp_path: Path
) -> None:
    record = tmp_path / "record"
    logger, lines = stderr_logger(f"left-{how}")
    client = Started()
    with trio.fail_after(WATCHDOG):
        with pytest.raises(KeyError) if how == "by an error" else _nothing():
            async with acp_trio.open_spawned_agent(
                client, sub_command(record), stderr=logger
            ) as agent:
                await agent.initialize()
                sid = (await agent.new_session(cwd="/")).session_id
                with trio.move_on_after(WATCHDOG / 2) as moved:
                    async with trio.open_nursery() as nursery:
                        nursery.start_soon(agent.prompt_text, sid, "wait")
                        await client.started.wait()
                        nursery.cancel_scope.cancel()
                assert not moved.cancelled_caught
                if how == "by an error":
                    raise KeyError("boom")
    assert stderr_lines(lines) == ["sub: turn started", "sub: turn ended", "sub: bye"]


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def pid_of(response: InitializeResponse) -> int:
    assert response.meta is not None
    pid = response.meta["pid"]
    assert isinstance(pid, int)
    return pid


def gone(pid: int) -> bool:
    """No such process any more, not even a zombie (reaped)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


async def test_an_agent_that_answers_nothing_more_is_stopped_by_the_stop_process_policy(
    tmp_path: Path,
) -> None:
    """Done when: the typed outcome, then the policy's end (the process
    stopped: it ignores its stdin closing and SIGTERM, so SIGKILL) within
    its bound, nothing left running, before the block is left."""
    record = tmp_path / "record"
    logger, lines = stderr_logger("mute")
    client = Started()
    with trio.fail_after(WATCHDOG):
        async with acp_trio.open_spawned_agent(
            client,
            sub_command(record),
            stderr=logger,
            cancel_grace=0.5,
            escalation_grace=0.5,
            abandon_policy="stop_process",
            shutdown_grace=0.5,
            terminate_grace=0.5,
        ) as agent:
            pid = pid_of(await agent.initialize())
            sid = (await agent.new_session(cwd="/")).session_id
            ended: list[BaseException] = []

            async def prompt() -> None:
                try:
                    await agent.prompt_text(sid, "mute")
                except acp_trio.TurnNotAnswered as exc:
                    ended.append(exc)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(prompt)
                await client.started.wait()
                outcome = await agent.cancel_turn(sid)
            assert outcome.how == "abandoned"
            assert outcome.policy == "stop_process"
            assert len(ended) == 1
            # The policy's end: the connection ends with the process...
            await agent.connection.wait_closed()
            with pytest.raises(ConnectionClosed):
                await agent.prompt_text(sid, "more")
            # ...which was killed (it ignored SIGTERM), and is reaped.
            while not gone(pid):  # noqa: ASYNC110 - no event tells a reaping: poll
                await trio.sleep(0.05)
            assert agent.connection.closed_error().exit_code == -9
    seen = read_record(record)
    assert [line for line in seen if line.startswith("recv ")][-2:] == [
        "recv session/cancel",
        "recv $/cancel_request",
    ]
    assert "<eof>" not in seen  # it never exited by itself
    assert stderr_lines(lines) == ["sub: turn started"]


async def test_an_agent_that_exits_mid_cancel_is_an_error_at_once(tmp_path: Path) -> None:
    """Done when: an error at once. The grace is a minute and the watchdog
    shorter: the error comes from the agent's exit, not from a rung."""
    record = tmp_path / "record"
    logger, _ = stderr_logger("exits")
    client = Started()
    with trio.fail_after(WATCHDOG / 2):
        async with acp_trio.open_spawned_agent(
            client, sub_command(record), stderr=logger, cancel_grace=60
        ) as agent:
            await agent.initialize()
            sid = (await agent.new_session(cwd="/")).session_id
            ended: list[BaseException] = []

            async def prompt() -> None:
                try:
                    await agent.prompt_text(sid, "exit")
                except ConnectionClosed as exc:
                    ended.append(exc)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(prompt)
                await client.started.wait()
                with pytest.raises(ConnectionClosed) as info:
                    await agent.cancel_turn(sid)
            assert info.value.exit_code == 3
            assert len(ended) == 1
            assert agent.prompts_in_flight() == {}
    assert read_record(record)[-1] == "<exit>"
