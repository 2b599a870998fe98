"""ACP v2 interop with the official TypeScript SDK 2.4.0 (its experimental
v2 API), both directions, over stdio, through the version routers,
cancellation included; and the v1 fallback when the other side speaks v1
only.

- acp_trio's v2 client (``acp_trio.v2.open_any_spawned_agent``) drives
  ``ts_v2_agent.mjs``, served by the TS SDK's ``AgentProtocolRouter``.
- ``ts_v2_client.mjs`` drives ``tests/v2/v2_test_agent.py``, served by
  ``acp_trio.v2.run_router``.

Needs ``node`` and the SDK installed next to this file
(``npm ci --prefix tests/interop``); skipped otherwise.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

import acp_trio
from acp_trio import RequestError, v2
from acp_trio.schema import v2 as s2

from .test_typescript import NODE, _skip_reason

HERE = Path(__file__).resolve().parent
TS_V2_AGENT = HERE / "ts_v2_agent.mjs"
TS_V1_AGENT = HERE / "ts_agent.mjs"
TS_V2_CLIENT = HERE / "ts_v2_client.mjs"
TRIO_AGENT = HERE.parent / "v2" / "v2_test_agent.py"

pytestmark = pytest.mark.skipif(bool(_skip_reason), reason=_skip_reason)

LIMIT = 90


class Recorder(v2.Client):
    def __init__(self) -> None:
        self.updates: list[dict[str, Any]] = []
        self.changed = trio.Event()

    async def session_update(self, params: Any) -> None:
        self.updates.append(_wire(params))
        self.changed.set()
        self.changed = trio.Event()

    async def wait_for(self, predicate: Any) -> dict[str, Any]:
        while True:
            for update in self.updates:
                if predicate(update):
                    return update
            await self.changed.wait()


def _wire(params: Any) -> dict[str, Any]:
    update: dict[str, Any] = s2.converter.unstructure(params)["update"]
    return update


def _text(words: str) -> list[Any]:
    return [s2.TextContent(text=words)]


async def _run_ts_client(*args: str) -> list[dict[str, Any]]:
    assert NODE is not None
    result = await trio.run_process(
        [NODE, str(TS_V2_CLIENT), *args], capture_stdout=True, check=False
    )
    events = [json.loads(line) for line in result.stdout.decode().splitlines() if line]
    assert result.returncode == 0, events[-3:]
    return events


async def test_ts_v2_client_against_the_acp_trio_v2_agent_through_the_router() -> None:
    with trio.fail_after(LIMIT):
        events = await _run_ts_client("--", sys.executable, str(TRIO_AGENT))
    by = {e["ev"]: e for e in events if e["ev"] != "update"}
    assert by["initialized"]["result"]["protocolVersion"] == 2
    assert by["hello"]["stopReason"] == "end_turn"
    # session/cancel: the running turn ends cancelled, both held prompts -32800.
    assert by["cancel"] == {
        "ev": "cancel",
        "stopReason": "cancelled",
        "held": [{"code": -32800}, {"code": -32800}],
    }
    assert by["tools"]["finals"] == {"slow": "cancelled", "fast": "completed"}
    assert by["tools"]["stopReason"] == "end_turn"
    assert by["raise"]["stopReason"] == "error"
    assert "boom" in by["raise"]["error"]["message"]
    assert "done" in by


async def test_ts_v2_client_falls_back_to_v1_against_a_v1_only_acp_trio_router() -> None:
    with trio.fail_after(LIMIT):
        events = await _run_ts_client(
            "--fallback", "--", sys.executable, str(TRIO_AGENT), "--no-v2"
        )
    by = {e["ev"]: e for e in events}
    assert by["v2_refused"]["message"] is not None
    assert by["v1"] == {"ev": "v1", "protocolVersion": 1, "stopReason": "end_turn"}


async def test_acp_trio_v2_client_against_the_ts_v2_agent_through_its_router() -> None:
    client = Recorder()
    assert NODE is not None
    with trio.fail_after(LIMIT):
        async with v2.open_any_spawned_agent([NODE, str(TS_V2_AGENT)], client) as got:
            assert got.version == 2
            agent = got.agent
            assert isinstance(agent, v2.AgentProxy)
            sid = (await agent.new_session("/tmp")).session_id

            hello = await agent.prompt(sid, _text("hello"))

            accepted = await agent.send_prompt(sid, _text("wait"))
            await client.wait_for(lambda u: u.get("messageId") == accepted.message_id)
            codes: list[int] = []

            async def held() -> None:
                with pytest.raises(RequestError) as info:
                    await agent.send_prompt(sid, _text("hello"))
                codes.append(info.value.code)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(held)
                nursery.start_soon(held)
                await trio.testing.wait_all_tasks_blocked()
                await agent.cancel(sid)
            cancelled = await agent.turns.wait(sid, accepted.message_id)

            results = []
            async with trio.open_nursery() as nursery:

                async def tools() -> None:
                    results.append(await agent.prompt(sid, _text("tools")))

                nursery.start_soon(tools)
                await client.wait_for(lambda u: u.get("toolCallId") == "fast")
                await agent.cancel_tool_call(sid, "slow")

            failed = await agent.prompt(sid, _text("raise"))
    assert hello.stop_reason == "end_turn"
    assert cancelled.stop_reason == "cancelled"
    assert codes == [-32800, -32800]
    assert results[0].stop_reason == "end_turn"
    finals = {
        u["toolCallId"]: u["status"]
        for u in client.updates
        if u.get("status") in ("completed", "cancelled", "failed")
    }
    assert finals == {"slow": "cancelled", "fast": "completed"}
    assert failed.stop_reason == "error"
    assert failed.error is not None
    assert failed.error.message == "boom"


@pytest.mark.parametrize("agent", ["v1-only router", "v1 agent, no router"])
async def test_acp_trio_client_falls_back_to_v1_against_a_v1_only_ts_agent(agent: str) -> None:
    assert NODE is not None
    command = (
        [NODE, str(TS_V2_AGENT), "--no-v2"]
        if agent == "v1-only router"
        else [NODE, str(TS_V1_AGENT)]
    )
    with trio.fail_after(LIMIT):
        async with v2.open_any_spawned_agent(command, Recorder(), acp_trio.Client()) as got:
            assert got.version == 1
            assert isinstance(got.agent, acp_trio.AgentProxy)
            session = await got.agent.new_session("/tmp")
            answer = await got.agent.prompt(
                session.session_id, [acp_trio.schema.TextContent(text="echo hi")]
            )
    assert answer.stop_reason == "end_turn"
