"""No orphan processes: an agent started through an npx/uvx-style wrapper
(a shell or Python process that runs the real agent as its child and waits),
with a grandchild of its own, is gone entirely (wrapper, agent, grandchild)
when the client leaves ``open_spawned_agent``: normally, by cancellation, or
by an error. Zombies waiting for init to reap them do not count (see
``_group_running_sync``). The same holds for an agent behind the trace proxy
(``python -m acp_trio trace``), which runs its agent in a session of its own:
the proxy stops it before it exits, however it is stopped."""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import pytest
import trio

import acp_trio
from acp_trio._transports._process import _group_running_sync
from acp_trio.schema import NewSessionRequest
from acp_trio.testing import ScenarioClient

from .conftest import AGENT, HERE, LIMIT
from .test_faults import gone

WRAPPERS = {
    "sh": ("sh", str(HERE / "agents" / "wrapper.sh")),
    "python": (sys.executable, str(HERE / "agents" / "wrapper.py")),
}


class AppError(Exception):
    pass


async def run_client(command: list[str], how: str, meta: dict[str, Any]) -> None:
    client = ScenarioClient()
    with trio.CancelScope() as outer:
        async with acp_trio.open_spawned_agent(client, command) as agent:
            init = await agent.initialize(client.initialize_request())
            assert init.meta is not None
            meta.update(init.meta)
            new = NewSessionRequest(cwd="/", mcp_servers=[])
            session = (await agent.new_session(new)).session_id
            if how == "normally":
                await agent.prompt_text(session, "echo bye")
                return
            async with trio.open_nursery() as nursery:
                nursery.start_soon(agent.prompt_text, session, "permission")
                await client.wait_for_requests("session/request_permission")
                if how == "by an error":
                    raise AppError("the application failed mid-prompt")
                outer.cancel()
                await trio.sleep_forever()
    assert outer.cancelled_caught == (how == "by cancellation")


def assert_all_gone(meta: dict[str, Any]) -> None:
    pgid = meta["pgid"]
    assert meta["pid"] != pgid, "the agent should be the wrapper's child"
    assert not _group_running_sync(pgid)
    for pid in (pgid, meta["pid"], *meta["children"]):
        assert gone(pid), pid


@pytest.mark.parametrize("how", ["normally", "by cancellation", "by an error"])
@pytest.mark.parametrize("wrapper", sorted(WRAPPERS))
async def test_wrapped_agent_leaves_nothing_behind(wrapper: str, how: str, tmp_path: Path) -> None:
    log = tmp_path / "agent.log"
    command = [*WRAPPERS[wrapper], *AGENT, "--child", "--log", str(log)]
    meta: dict[str, Any] = {}
    with trio.fail_after(LIMIT):
        if how == "by an error":
            # One plain exception, not a group.
            with pytest.raises(AppError):
                await run_client(command, how, meta)
        else:
            await run_client(command, how, meta)
    assert_all_gone(meta)
    # The agent ended in order, not by SIGKILL. (Whether its prompt saw the
    # cancellation or the -32800 of its permission request first is a race.)
    assert log.read_text().splitlines()[-1:] == ["exit"]


async def test_grandchild_ignoring_sigterm_is_killed() -> None:
    command = [*WRAPPERS["sh"], *AGENT, "--stubborn-child"]
    meta: dict[str, Any] = {}
    with trio.fail_after(LIMIT):
        await run_client(command, "by cancellation", meta)
    assert_all_gone(meta)


# ----------------------------------------------------------------------
# Behind the trace proxy

#: The agent keeps running after its stdin closed; "term": it ignores SIGTERM too.
STUBBORN = {
    "eof": ("--ignore-eof",),
    "term": ("--ignore-eof", "--ignore-term"),
}
#: The agent's exit status the proxy reports: SIGTERM, or SIGKILL when ignored.
STOPPED_BY = {"eof": 128 + signal.SIGTERM, "term": 128 + signal.SIGKILL}


def traced(log: Path, *agent: str) -> list[str]:
    return [sys.executable, "-m", "acp_trio", "trace", "--log", str(log), "--", *agent]


def exit_record(log: Path) -> dict[str, Any]:
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert records[0]["event"] == "start", records[0]
    assert records[-1]["event"] == "exit", records[-1]
    return records[-1]


@contextmanager
def killing_leftovers(meta: dict[str, Any]) -> Iterator[None]:
    """Whatever the test finds, leave no agent running after it."""
    try:
        yield
    finally:
        if "pid" in meta:
            with suppress(OSError):
                os.kill(meta["pid"], signal.SIGKILL)


@pytest.mark.parametrize("stubborn", sorted(STUBBORN))
async def test_an_agent_behind_the_trace_proxy_is_stopped_with_it(
    stubborn: str, tmp_path: Path
) -> None:
    """open_spawned_agent closes the proxy's stdin, then SIGTERMs it after its
    grace (2 s, the proxy's own grace too), then SIGKILLs it: the proxy must
    stop its agent in that time."""
    log = tmp_path / "trace.jsonl"
    meta: dict[str, Any] = {}
    with killing_leftovers(meta):
        with trio.fail_after(LIMIT):
            await run_client(traced(log, *AGENT, *STUBBORN[stubborn]), "normally", meta)
        assert gone(meta["pid"]), "the proxy left its agent running"
    assert exit_record(log)["code"] == STOPPED_BY[stubborn]


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
async def test_a_signalled_trace_proxy_stops_its_agent_and_logs_its_exit(
    signum: int, tmp_path: Path
) -> None:
    log = tmp_path / "trace.jsonl"
    meta: dict[str, Any] = {}
    client = ScenarioClient()
    with killing_leftovers(meta):
        with trio.fail_after(LIMIT):
            async with (
                acp_trio.lowlevel.open_agent_process(
                    traced(log, *AGENT, *STUBBORN["term"])
                ) as proxy,
                acp_trio.open_agent(client, proxy.stream) as agent,
            ):
                init = await agent.initialize(client.initialize_request())
                assert init.meta is not None
                meta.update(init.meta)
                proxy.process.send_signal(signum)
                # Stopped by our signal, before anything else reaches it.
                assert await proxy.process.wait() == STOPPED_BY["term"]
        assert gone(meta["pid"]), "the proxy left its agent running"
    record = exit_record(log)
    assert record["code"] == STOPPED_BY["term"]
    assert record["signal"] == signal.Signals(signum).name
