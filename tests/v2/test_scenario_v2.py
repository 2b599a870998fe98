"""The v2 scenario agent (``python -m acp_trio scenario-agent --v2``): its
vocabulary over v2 from the v2 client, and the v1 one from a v1 client, both
through the router in one subprocess."""

from __future__ import annotations

import sys

import trio
import trio.testing

import acp_trio
from acp_trio import RequestError, v2
from acp_trio._transports import open_agent_process
from acp_trio.testing import ScenarioClient

from .conftest import PIPE_LIMIT, RecordingClient, text

COMMAND = [sys.executable, "-m", "acp_trio", "scenario-agent", "--v2"]


def chunks(client: RecordingClient) -> list[str]:
    return [
        u["content"]["text"] for u in client.updates if u["sessionUpdate"] == "agent_message_chunk"
    ]


async def test_the_v2_scenario_vocabulary_over_pipes() -> None:
    client = RecordingClient(answer="allow")
    with trio.fail_after(PIPE_LIMIT):
        async with v2.open_any_spawned_agent(COMMAND, client) as got:
            agent = got.agent
            assert isinstance(agent, v2.AgentProxy)
            sid = (await agent.new_session("/tmp")).session_id
            echo = await agent.prompt(sid, text("echo hello there"))
            stream = await agent.prompt(sid, text("stream 2 4"))
            permission = await agent.prompt(sid, text("permission"))
            failed = await agent.prompt(sid, text("fail -32042 no luck"))
            results = []
            async with trio.open_nursery() as nursery:

                async def run(words: str) -> None:
                    results.append(await agent.prompt(sid, text(words)))

                nursery.start_soon(run, "tools 3")
                await client.wait_for(lambda u: u.get("toolCallId") == "tool-2")
                await agent.cancel_tool_call(sid, "tool-0")
            async with trio.open_nursery() as nursery:
                nursery.start_soon(run, "terminal")
                await client.wait_for(lambda u: u.get("terminalId") == "term-1")
                await agent.cancel_terminal(sid, "term-1")
            waiting = await agent.send_prompt(sid, text("wait_for_cancel"))
            codes = []

            async def held() -> None:
                try:
                    await agent.send_prompt(sid, text("echo never"))
                except RequestError as exc:
                    codes.append(exc.code)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(held)
                await trio.testing.wait_all_tasks_blocked()
                await agent.cancel(sid)
            cancelled = await agent.turns.wait(sid, waiting.message_id)
    assert chunks(client)[:4] == ["hello there", "0...", "1...", "permission: selected allow"]
    assert [echo.stop_reason, stream.stop_reason, permission.stop_reason] == ["end_turn"] * 3
    assert failed.stop_reason == "error"
    assert failed.error is not None
    assert (failed.error.code, failed.error.message) == (-32042, "no luck")
    finals = {
        u["toolCallId"]: u["status"]
        for u in client.updates
        if u.get("status") in ("completed", "cancelled", "failed")
    }
    assert finals == {"tool-0": "cancelled", "tool-1": "completed", "tool-2": "completed"}
    assert [r.stop_reason for r in results] == ["end_turn", "end_turn"]
    assert cancelled.stop_reason == "cancelled"
    assert codes == [-32800]
    assert ("requires_action", None) in client.states()


async def test_a_v1_client_gets_the_v1_scenario_agent_through_the_router() -> None:
    with trio.fail_after(PIPE_LIMIT):
        client = ScenarioClient()
        async with (
            open_agent_process(COMMAND) as process,
            acp_trio.open_agent(client, process.stream) as agent,
        ):
            await agent.initialize()
            session = await agent.new_session("/tmp")
            answer = await agent.prompt(
                session.session_id, [acp_trio.schema.TextContent(text="echo v1 here")]
            )
    assert answer.stop_reason == "end_turn"
    assert client.texts() == ["v1 here"]
