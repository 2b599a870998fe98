"""Shared helpers of the v2 API tests: a recording v2 client, and the v2
test agent and client connected over memory streams (autojump clock) or
over a subprocess's pipes (real clock)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
import trio.testing

from acp_trio import v2
from acp_trio.schema import v2 as s2

from .v2_test_agent import V2TestAgent

#: Virtual seconds an in-memory test may take.
LIMIT = 600
#: Real seconds a test over pipes may take (a generous watchdog).
PIPE_LIMIT = 60


@pytest.fixture
def autojump_clock() -> trio.testing.MockClock:
    return trio.testing.MockClock(autojump_threshold=0)


class RecordingClient(v2.Client):
    """Records every update (as wire JSON) and answers permissions with
    ``answer`` (a selected option id), or holds them if it is ``None``."""

    def __init__(self, answer: str | None = "y") -> None:
        self.updates: list[dict[str, Any]] = []
        self.changed = trio.Event()
        self.answer = answer
        self.permissions = 0

    async def session_update(self, params: s2.UpdateSessionNotification) -> None:
        self.updates.append(s2.converter.unstructure(params)["update"])
        self.changed.set()
        self.changed = trio.Event()

    async def request_permission(
        self, params: s2.RequestPermissionRequest
    ) -> s2.RequestPermissionResponse:
        self.permissions += 1
        if self.answer is None:
            await trio.sleep_forever()
        return s2.RequestPermissionResponse(
            outcome=s2.SelectedPermissionOutcome(option_id=self.answer)
        )

    async def wait_for(self, predicate: Any) -> dict[str, Any]:
        """The first update (from the start) that ``predicate`` accepts."""
        seen = 0
        while True:
            for update in self.updates[seen:]:
                if predicate(update):
                    return update
            seen = len(self.updates)
            await self.changed.wait()

    def states(self) -> list[tuple[str, str | None]]:
        return [
            (u["state"], u.get("stopReason"))
            for u in self.updates
            if u["sessionUpdate"] == "state_update"
        ]


def text(value: str) -> list[s2.ContentBlock]:
    return [s2.TextContent(text=value)]


@asynccontextmanager
async def memory_pair(
    client: RecordingClient, agent: v2.Agent | None = None
) -> AsyncIterator[v2.AgentProxy]:
    """The v2 test agent and ``client`` over memory streams, initialized."""
    left, right = trio.testing.memory_stream_pair()
    async with (
        v2.open_client(agent or V2TestAgent(), left),
        v2.open_agent(client, right) as proxy,
    ):
        await proxy.initialize()
        yield proxy
