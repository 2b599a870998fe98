"""v2 (Preview) through a chain: the v2 client, the conductor, the logging
and the context-injection proxies, and the router-backed scenario agent
(``scenario-agent --v2``). Version negotiation passes through; a prompt's
lifecycle, held prompts, ``session/cancel`` and ``tool_call/cancel`` work end
to end; each hop answers its own requests once (the conductor's trace). A
v1 client through the same chain still gets v1."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

import acp_trio
from acp_trio import RequestError, v2
from acp_trio.schema import v2 as s2
from acp_trio.testing import ScenarioClient
from tests.proxies.hops import Trace
from tests.proxies.test_conductor import LIMIT, PROXY, ROOT, eventually
from tests.v2.conftest import RecordingClient, text

pytestmark = pytest.mark.timeout(LIMIT + 30)

CONTEXT = [sys.executable, str(ROOT / "examples" / "proxies" / "context_proxy.py")]
AGENT_V2 = [sys.executable, "-m", "acp_trio", "scenario-agent", "--v2"]


def conduct(trace: Path) -> list[str]:
    command = [sys.executable, "-m", "acp_trio", "conduct", "--trace", str(trace), "--"]
    return [*command, *PROXY, "--quiet", "--", *CONTEXT, "--context", "CTX", "--", *AGENT_V2]


def chunks(client: RecordingClient) -> list[str]:
    return [
        u["content"]["text"] for u in client.updates if u["sessionUpdate"] == "agent_message_chunk"
    ]


async def test_the_v2_lifecycle_through_two_proxies(tmp_path: Path) -> None:
    log = tmp_path / "chain.jsonl"
    client = RecordingClient(answer="allow")
    with trio.fail_after(LIMIT):
        async with v2.open_any_spawned_agent(conduct(log), client) as got:
            agent = got.agent
            assert isinstance(agent, v2.AgentProxy)
            sid = (await agent.new_session("/tmp")).session_id
            echo = await agent.prompt(sid, text("echo hello there"))
            results = []
            async with trio.open_nursery() as nursery:

                async def run(words: str) -> None:
                    results.append(await agent.prompt(sid, text(words)))

                nursery.start_soon(run, "tools 2")
                await client.wait_for(lambda u: u.get("toolCallId") == "tool-1")
                await agent.cancel_tool_call(sid, "tool-0")
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
    assert got.version == 2
    assert got.initialize.protocol_version == 2
    assert echo.stop_reason == "end_turn"
    assert chunks(client)[0].startswith("hello there")
    finals = {
        u["toolCallId"]: u["status"]
        for u in client.updates
        if u.get("status") in ("completed", "cancelled", "failed")
    }
    assert finals == {"tool-0": "cancelled", "tool-1": "completed"}
    assert [r.stop_reason for r in results] == ["end_turn"]
    assert cancelled.stop_reason == "cancelled"
    assert codes == [-32800]
    assert ("running", None) in client.states()
    assert ("idle", "cancelled") in client.states()

    trace = Trace(log.read_text())
    trace.check_each_hop()
    assert trace.hops() == [0, 1, 2, 3]
    # Negotiation passed through: every hop's initialize answer says 2.
    inits = [r for r in trace.requests() if r.inner[0] in ("initialize", "proxy/initialize")]
    assert {r.hop for r in inits} == {0, 1, 2, 3}
    for request in inits:
        (reply,) = trace.replies_to(request)
        assert reply.message["result"]["protocolVersion"] == 2, reply
    # The context proxy (hop 2) added its block; the agent saw it.
    prompts = [r for r in trace.requests("session/prompt") if r.hop == 3]
    assert len(prompts) == 4
    for request in prompts:
        assert request.inner[1]["prompt"][-1] == {"type": "text", "text": "CTX"}
    # Each hop: every prompt answered once, by its messageId or (the held
    # one, cancelled) -32800; tool_call/cancel answered once.
    for hop in (0, 1, 2, 3):
        per_hop = 1 if hop in (0, 3) else 2  # a proxy's hop: the envelope and its own
        sent = [r for r in trace.requests("session/prompt") if r.hop == hop]
        answers = [trace.replies_to(r)[0].message for r in sent]
        assert len(sent) == 4 * per_hop, sent
        ids = [a["result"]["messageId"] for a in answers if "result" in a]
        assert len(ids) == 3 * per_hop
        assert all(isinstance(i, str) for i in ids)
        codes = [a["error"]["code"] for a in answers if "error" in a]
        assert codes == [-32800] * per_hop, answers
        tool_cancels = [r for r in trace.requests("tool_call/cancel") if r.hop == hop]
        assert len(tool_cancels) == per_hop, tool_cancels
        for request in tool_cancels:
            assert "result" in trace.replies_to(request)[0].message


class Holding(RecordingClient):
    """Holds its permission requests until cancelled; counts the cancels."""

    def __init__(self) -> None:
        super().__init__(answer=None)
        self.cancelled = 0

    async def request_permission(self, params: s2.RequestPermissionRequest) -> Any:
        try:
            return await super().request_permission(params)
        except trio.Cancelled:
            self.cancelled += 1
            raise


async def test_session_cancel_of_a_v2_turn_cancels_its_nested_request_on_every_hop(
    tmp_path: Path,
) -> None:
    log = tmp_path / "chain.jsonl"
    client = Holding()
    with trio.fail_after(LIMIT):
        async with v2.open_any_spawned_agent(conduct(log), client) as got:
            agent = got.agent
            assert isinstance(agent, v2.AgentProxy)
            sid = (await agent.new_session("/tmp")).session_id
            accepted = await agent.send_prompt(sid, text("permission"))
            await eventually(lambda: client.permissions == 1)
            await agent.cancel(sid)
            turn = await agent.turns.wait(sid, accepted.message_id)
            await eventually(lambda: Trace(log.read_text()).settled(), seconds=LIMIT / 2)
    assert turn.stop_reason == "cancelled"
    assert client.cancelled == 1
    trace = Trace(log.read_text())
    trace.check_each_hop()
    asked = [r for r in trace.requests("session/request_permission")]
    # The agent's one, the conductor's envelopes and the proxies' own: each
    # cancelled on its own hop by its own sender, answered -32800 once.
    assert sorted(r.hop for r in asked) == [0, 1, 1, 2, 2, 3]
    for request in asked:
        assert len(trace.cancels_of(request)) == 1, request
        (reply,) = trace.replies_to(request)
        assert reply.message["error"]["code"] == -32800, reply


async def test_a_v1_client_through_the_same_chain_gets_v1(tmp_path: Path) -> None:
    client = ScenarioClient()
    with trio.fail_after(LIMIT):
        async with acp_trio.open_spawned_agent(
            client, conduct(tmp_path / "chain.jsonl"), stderr="capture"
        ) as agent:
            init = await agent.initialize(client.initialize_request())
            session = (await agent.new_session("/")).session_id
            reply = await agent.prompt_text(session, "echo v1 here")
    assert init.protocol_version == 1
    assert reply.stop_reason == "end_turn"
    # The context proxy's typed (v1) prompt added its block: echoed too.
    assert "v1 here" in "".join(client.texts(session))
    trace = Trace((tmp_path / "chain.jsonl").read_text())
    trace.check_each_hop()
    (delivered,) = [r for r in trace.requests("session/prompt") if r.hop == 3]
    assert delivered.inner[1]["prompt"][-1] == {"type": "text", "text": "CTX"}


POLICY = [sys.executable, str(ROOT / "examples" / "proxies" / "policy_proxy.py")]


@pytest.mark.parametrize("reject", ["other", "delete"])
async def test_the_policy_proxy_decides_v2_permission_requests(reject: str) -> None:
    # The scenario's permission request names no tool call: its kind is "other".
    command = [sys.executable, "-m", "acp_trio", "conduct", "--"]
    command += [*POLICY, "--reject", reject, "--", *AGENT_V2]
    client = RecordingClient(answer="allow")
    with trio.fail_after(LIMIT):
        async with v2.open_any_spawned_agent(command, client) as got:
            agent = got.agent
            assert isinstance(agent, v2.AgentProxy)
            sid = (await agent.new_session("/tmp")).session_id
            answer = await agent.prompt(sid, text("permission"))
    assert answer.stop_reason == "end_turn"
    if reject == "other":  # refused by the proxy: the client never asked
        assert client.permissions == 0
        assert chunks(client) == ["permission: selected reject"]
    else:
        assert client.permissions == 1
        assert chunks(client) == ["permission: selected allow"]
