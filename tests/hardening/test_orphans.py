"""No orphan processes: an agent started through an npx/uvx-style wrapper
(a shell or Python process that runs the real agent as its child and waits),
with a grandchild of its own, is gone entirely (wrapper, agent, grandchild)
when the client leaves ``connect_to_agent``: normally, by cancellation, or
by an error. Zombies waiting for init to reap them do not count (see
``_group_running_sync``)."""

from __future__ import annotations

import sys
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
        async with acp_trio.connect_to_agent(client, command) as agent:
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
async def test_wrapped_agent_leaves_nothing_behind(wrapper: str, how: str) -> None:
    command = [*WRAPPERS[wrapper], *AGENT, "--child"]
    meta: dict[str, Any] = {}
    with trio.fail_after(LIMIT):
        start = trio.current_time()
        if how == "by an error":
            # One plain exception, not a group.
            with pytest.raises(AppError):
                await run_client(command, how, meta)
        else:
            await run_client(command, how, meta)
        # The agent exits when its stdin closes, well within the grace period;
        # what is left in its group gets SIGTERM at once.
        assert trio.current_time() - start < 3
    assert_all_gone(meta)


async def test_grandchild_ignoring_sigterm_is_killed() -> None:
    command = [*WRAPPERS["sh"], *AGENT, "--stubborn-child"]
    meta: dict[str, Any] = {}
    with trio.fail_after(LIMIT):
        await run_client(command, "by cancellation", meta)
    assert_all_gone(meta)
