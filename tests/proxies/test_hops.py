"""Each hop's own wire, from the conductor's per-hop trace: cancellation of
a prompt waiting on nested requests (``session/cancel`` and
``$/cancel_request``) reaches every hop, each hop cancelling and answering
its own requests with its own ids; and one prompt and its nested permission
request followed through two proxies by the trace alone."""

from __future__ import annotations

import io
import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

import acp_trio
from acp_trio._proxy._conductor import serve_conductor
from acp_trio.testing import SCENARIO_AGENT_COMMAND, ScenarioClient
from tests.proxies.hops import CANCEL, SUCCESSOR, Trace
from tests.proxies.test_conductor import LIMIT, PROXY, RawClient, eventually

pytestmark = pytest.mark.timeout(LIMIT + 30)

CHAIN = [PROXY, PROXY, list(SCENARIO_AGENT_COMMAND)]
NESTED = {"fs/read_text_file", "terminal/create", "session/request_permission"}
CAPS = {"fs": {"readTextFile": True, "writeTextFile": True}, "terminal": True}


@asynccontextmanager
async def traced_chain(
    handler: acp_trio.lowlevel.Handler, log: io.StringIO
) -> AsyncIterator[tuple[acp_trio.lowlevel.Connection, str]]:
    """The chain behind a raw client connection, initialized, with a session."""
    left, right = trio.testing.memory_stream_pair()
    async with trio.open_nursery() as nursery:
        await nursery.start(
            lambda task_status: serve_conductor(
                right, CHAIN, stderr="capture", trace=log, task_status=task_status
            )
        )
        async with acp_trio.lowlevel.open_connection(left, handler) as conn:
            await conn.call("initialize", {"protocolVersion": 1, "clientCapabilities": CAPS})
            session = await conn.call("session/new", {"cwd": "/", "mcpServers": []})
            yield conn, session["sessionId"]
        nursery.cancel_scope.cancel()


def prompt_of(session: str, text: str) -> dict[str, Any]:
    return {"sessionId": session, "prompt": [{"type": "text", "text": text}]}


@pytest.mark.parametrize("how", ["session/cancel", CANCEL])
async def test_a_cancelled_prompt_cancels_its_nested_requests_on_every_hop(how: str) -> None:
    log = io.StringIO()
    handler = RawClient()
    with trio.fail_after(LIMIT):
        async with traced_chain(handler, log) as (conn, session):
            async with conn.open_request("session/prompt", prompt_of(session, "nested")) as pending:
                await eventually(lambda: len(handler.arrived) == 3)
                if how == CANCEL:
                    with pytest.raises(acp_trio.RequestError):
                        await pending.cancel_and_wait()
                else:
                    await conn.notify("session/cancel", {"sessionId": session})
                    assert await pending.result() == {"stopReason": "cancelled"}
            # The cancels travel up the chain hop by hop: wait until every
            # request on every hop has its answer.
            await eventually(lambda: Trace(log.getvalue()).settled(), seconds=LIMIT / 2)
    assert sorted(handler.cancelled) == sorted(NESTED)

    trace = Trace(log.getvalue())
    trace.check_each_hop()
    assert trace.hops() == [0, 1, 2, 3]
    for hop in trace.hops():
        nested = [r for r in trace.requests() if r.hop == hop and r.inner[0] in NESTED]
        # Agent, client: the three once. A proxy's hop: the conductor's
        # envelopes to it and its own plain requests, three each.
        assert len(nested) == (3 if hop in (0, 3) else 6), nested
        for request in nested:
            if hop in (0, 3):  # the agent asks; the conductor asks the client
                assert request.sender == ("peer" if hop == 3 else "conductor"), request
            assert len(trace.cancels_of(request)) == 1, request
            (reply,) = trace.replies_to(request)
            assert reply.message["error"]["code"] == -32800, reply
        prompts = trace.requests("session/prompt")
        for request in [p for p in prompts if p.hop == hop]:
            (reply,) = trace.replies_to(request)
            if how == CANCEL:
                # Cancelled on every hop by its own sender, with its own id.
                assert len(trace.cancels_of(request)) == 1, request
            else:
                assert trace.cancels_of(request) == [], request
                assert reply.message["result"] == {"stopReason": "cancelled"}, reply
    # session/cancel went down as a notification, once per hop direction.
    notes = [f for f in trace.frames if f.inner[0] == "session/cancel"]
    expected = 6 if how == "session/cancel" else 0
    assert len(notes) == expected, notes


class Allowing(acp_trio.lowlevel.Handler):
    async def handle_request(
        self, ctx: acp_trio.lowlevel.RequestContext, method: str, params: Any
    ) -> Any:
        assert method == "session/request_permission"
        return {"outcome": {"outcome": "selected", "optionId": "allow"}}

    async def handle_notification(self, method: str, params: Any) -> None:
        pass


async def test_one_prompt_and_its_permission_request_followed_by_the_trace() -> None:
    log = io.StringIO()
    with trio.fail_after(LIMIT):
        async with traced_chain(Allowing(), log) as (conn, session):
            answer = await conn.call("session/prompt", prompt_of(session, "permission"))
    assert answer == {"stopReason": "end_turn"}
    trace = Trace(log.getvalue())
    trace.check_each_hop()
    starts = [(r["hop"], r["peer"]) for r in trace.records if r.get("event") == "start"]
    assert starts == [(1, "proxy 1"), (2, "proxy 2"), (3, "agent")]
    peers = {(f["hop"], f["peer"]) for f in trace.records if "message" in f}
    assert peers == {(0, "client"), (1, "proxy 1"), (2, "proxy 2"), (3, "agent")}

    # Down: the client's prompt, hop by hop, to the agent.
    (first,) = [r for r in trace.requests("session/prompt") if r.hop == 0]
    path = [first]
    while path[-1].hop < 3 or path[-1].sender == "peer":
        at = path[-1]
        if at.sender == "conductor":  # a proxy passed it on
            path.append(trace.through_proxy(at))
        else:
            hop, request_id = trace.forwarded(at.hop, at.message["id"])
            path.append(trace.request(hop, "conductor", request_id))
    down = [(f.hop, f.sender, f.message["method"]) for f in path]
    assert down == [
        (0, "peer", "session/prompt"),
        (1, "conductor", "session/prompt"),
        (1, "peer", SUCCESSOR),
        (2, "conductor", "session/prompt"),
        (2, "peer", SUCCESSOR),
        (3, "conductor", "session/prompt"),
    ]
    # Each hop's own ids, each answered once with the agent's answer.
    for frame in path:
        (reply,) = trace.replies_to(frame)
        assert reply.message["result"] == {"stopReason": "end_turn"}

    # Up: the agent's permission request, hop by hop, to the client.
    (asked,) = [r for r in trace.requests("session/request_permission") if r.hop == 3]
    up = [asked]
    while up[-1].hop > 0:
        at = up[-1]
        if at.sender == "conductor":
            up.append(trace.through_proxy(at))
        else:
            hop, request_id = trace.forwarded(at.hop, at.message["id"])
            up.append(trace.request(hop, "conductor", request_id))
    assert [(f.hop, f.sender, f.message["method"]) for f in up] == [
        (3, "peer", "session/request_permission"),
        (2, "conductor", SUCCESSOR),
        (2, "peer", "session/request_permission"),
        (1, "conductor", SUCCESSOR),
        (1, "peer", "session/request_permission"),
        (0, "conductor", "session/request_permission"),
    ]
    chosen = {"outcome": {"outcome": "selected", "optionId": "allow"}}
    for frame in up:
        (reply,) = trace.replies_to(frame)
        assert reply.message["result"] == chosen
    # The ids are each hop's own: the trace tells them apart by hop.
    assert len({(f.hop, f.sender, json.dumps(f.message["id"])) for f in path + up}) == 12


async def test_the_command_line_writes_the_per_hop_trace(tmp_path: Path) -> None:
    path = tmp_path / "chain.jsonl"
    command = [sys.executable, "-m", "acp_trio", "conduct", "--trace", str(path), "--"]
    command += [*PROXY, "--quiet", "--", *SCENARIO_AGENT_COMMAND]
    client = ScenarioClient()
    with trio.fail_after(LIMIT):
        async with acp_trio.open_spawned_agent(client, command, stderr="capture") as agent:
            await agent.initialize(client.initialize_request())
            session = (await agent.new_session("/")).session_id
            await agent.prompt_text(session, "read 1 /a")
    trace = Trace(path.read_text())
    trace.check_each_hop()
    assert trace.hops() == [0, 1, 2]
    (read,) = [r for r in trace.requests("fs/read_text_file") if r.hop == 2]
    hop, request_id = trace.forwarded(2, read.message["id"])
    wrapped = trace.request(hop, "conductor", request_id)
    assert wrapped.message["method"] == SUCCESSOR
    plain = trace.through_proxy(wrapped)
    hop, request_id = trace.forwarded(1, plain.message["id"])
    assert trace.request(hop, "conductor", request_id).message["method"] == "fs/read_text_file"
    assert [r["event"] for r in trace.records if "event" in r][-1] == "stopping"


META = [sys.executable, str(Path(__file__).with_name("meta_proxy.py"))]


async def test_the_envelope_meta_stays_on_its_hop_and_the_message_meta_passes() -> None:
    log = io.StringIO()
    left, right = trio.testing.memory_stream_pair()
    inner = {"example.org/trace": {"id": "t-1"}}
    sent = {**prompt_of("", "echo hi"), "_meta": inner}
    chain = [META, list(SCENARIO_AGENT_COMMAND)]
    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            await nursery.start(
                lambda task_status: serve_conductor(
                    right, chain, stderr="capture", trace=log, task_status=task_status
                )
            )
            async with acp_trio.lowlevel.open_connection(left, Allowing()) as conn:
                await conn.call("initialize", {"protocolVersion": 1, "clientCapabilities": CAPS})
                sent["sessionId"] = (
                    await conn.call("session/new", {"cwd": "/", "mcpServers": []})
                )["sessionId"]
                assert await conn.call("session/prompt", sent) == {"stopReason": "end_turn"}
            nursery.cancel_scope.cancel()
    trace = Trace(log.getvalue())
    trace.check_each_hop()
    # The proxy's envelope carried its own _meta ...
    (envelope,) = [r for r in trace.requests("session/prompt") if r.hop == 1 and r.sender == "peer"]
    assert envelope.message["params"]["_meta"] == {"example.org/hop": "local to this hop"}
    # ... which the agent never sees; the prompt's own _meta arrives unchanged.
    (delivered,) = [r for r in trace.requests("session/prompt") if r.hop == 2]
    assert delivered.message["params"] == sent
    assert not [
        f for f in trace.frames if f.hop == 2 and "example.org/hop" in json.dumps(f.message)
    ]
    # The conductor's own envelopes (the agent's update, wrapped for the
    # proxy) carry no _meta of their own.
    wrapped = [f for f in trace.frames if f.hop == 1 and f.sender == "conductor"]
    envelopes = [f for f in wrapped if f.message.get("method") == SUCCESSOR]
    assert envelopes
    assert all("_meta" not in f.message["params"] for f in envelopes)
