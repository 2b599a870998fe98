"""Load and back-pressure against real processes: 10,000 requests in flight,
a cancel storm, a peer that stops reading, a peer that floods stderr.

Invariant everywhere: every request gets exactly one answer, and the
connection is still usable afterwards."""

from __future__ import annotations

import json
import random
from collections import Counter
from typing import Any, Literal

import pytest
import trio
from frames import line, req

import acp_trio
from acp_trio import ConnectionConfig
from acp_trio.schema import NewSessionRequest
from acp_trio.testing import ScenarioClient, ScriptedPeer, open_scripted_process

from .conftest import (
    AGENT,
    LIMIT,
    assert_echo,
    handshake,
    open_agent,
    open_client,
    prompt_params,
)

# Load on real processes (10,000 in flight, storms, floods): the slow tier,
# run by make test-slow; on a busy machine their watchdogs are what fails.
pytestmark = pytest.mark.slow

N_IN_FLIGHT = 10_000


async def collect_responses(
    peer: ScriptedPeer, ids: set[Any], *, within: float
) -> tuple[dict[Any, dict[str, Any]], list[dict[str, Any]]]:
    """Read until every id in ``ids`` was answered; fail on a second answer.
    Returns the answers by id and the other messages read meanwhile."""
    answers: dict[Any, dict[str, Any]] = {}
    others: list[dict[str, Any]] = []
    with trio.fail_after(within):
        while len(answers) < len(ids):
            msg = await peer.receive(within)
            if "method" in msg:
                others.append(msg)
                continue
            key = msg["id"]
            assert key in ids, msg
            assert key not in answers, f"second answer to {key!r}: {msg}"
            answers[key] = msg
    return answers, others


async def test_agent_10000_prompts_in_flight_at_once_both_directions() -> None:
    """10,000 sessions, then in one write 10,000 ``read 1 /f`` prompts (one
    per session): all run at once and each calls us back, so 10,000
    requests are in flight each way. We answer the 10,000 reads in one
    write; every request, both ways, is answered exactly once."""
    with trio.fail_after(LIMIT):
        async with open_agent(receive_timeout=20) as peer:
            first = await handshake(peer)
            new_ids = {f"new-{i}" for i in range(N_IN_FLIGHT)}
            await peer.send_bytes(
                b"".join(
                    line(req(i, "session/new", {"cwd": "/", "mcpServers": []})) for i in new_ids
                )
            )
            answers, _ = await collect_responses(peer, new_ids, within=20)
            sessions = sorted({a["result"]["sessionId"] for a in answers.values()})
            assert len(sessions) == N_IN_FLIGHT
            prompt_ids = set(range(100, 100 + N_IN_FLIGHT))
            await peer.send_bytes(
                b"".join(
                    line(req(i, "session/prompt", prompt_params(s, "read 1 /f")))
                    for i, s in zip(sorted(prompt_ids), sessions, strict=True)
                )
            )
            reads: list[dict[str, Any]] = []
            with trio.fail_after(20):
                while len(reads) < N_IN_FLIGHT:
                    msg = await peer.receive(20)
                    assert msg.get("method") == "fs/read_text_file", msg
                    reads.append(msg)
            assert len({r["id"] for r in reads}) == N_IN_FLIGHT
            await peer.send_bytes(
                b"".join(
                    line({"jsonrpc": "2.0", "id": r["id"], "result": {"content": "x" * 64}})
                    for r in reads
                )
            )
            # One "read 1 64" chunk per prompt, each before its prompt's answer.
            session_of = dict(zip(sorted(prompt_ids), sessions, strict=True))
            updated: set[str] = set()
            answered: set[int] = set()
            with trio.fail_after(20):
                while len(answered) < N_IN_FLIGHT:
                    msg = await peer.receive(20)
                    if msg.get("method") == "session/update":
                        assert msg["params"]["update"]["content"]["text"] == "read 1 64"
                        assert msg["params"]["sessionId"] not in updated, msg
                        updated.add(msg["params"]["sessionId"])
                        continue
                    assert msg["result"] == {"stopReason": "end_turn"}, msg
                    assert msg["id"] not in answered, msg
                    assert session_of[msg["id"]] in updated, msg
                    answered.add(msg["id"])
            await peer.expect_silence(0.1)
            await assert_echo(peer, first)


async def test_client_10000_requests_in_flight_at_once() -> None:
    with trio.fail_after(LIMIT):
        async with open_client("prompts", receive_timeout=20) as client:
            await client.serve_handshake()
            prompt = await client.next_prompt()
            ids = set(range(N_IN_FLIGHT))
            params = {"sessionId": "s-1", "path": "/f"}
            await client.peer.send_bytes(
                b"".join(line(req(i, "fs/read_text_file", params)) for i in ids)
            )
            answers, others = await collect_responses(client.peer, ids, within=20)
            assert others == []
            assert all(a["result"] == {"content": "x" * 64} for a in answers.values())
            await client.answer_prompt(prompt, "done")
            await client.finish()


# ----------------------------------------------------------------------
# Cancel storm

STORM = 1500
COMMANDS = ["sleep 5", "sleep 40", "wait_for_cancel", "stream 20", "permission", "echo hi"]


async def test_agent_cancel_storm() -> None:
    """1,500 prompts over 30 sessions (so many queue behind their session's
    turn), each cancelled at a random moment by ``$/cancel_request`` or by a
    ``session/cancel`` of its session. Each is answered exactly once, with a
    result or ``-32800``; every permission request the agent had open is
    cancelled on the wire, each exactly once."""
    rng = random.Random(1234)
    with trio.fail_after(LIMIT):
        async with open_agent(receive_timeout=20) as peer:
            first = await handshake(peer)
            sessions = [first]
            for _ in range(29):
                rid = await peer.request("session/new", {"cwd": "/", "mcpServers": []})
                sessions.append((await peer.receive_response(rid))["result"]["sessionId"])
            ids = set(range(1000, 1000 + STORM))
            commands = {i: rng.choice(COMMANDS) for i in ids}
            answers: dict[int, dict[str, Any]] = {}
            asked: set[Any] = set()
            cancelled_asks: Counter[Any] = Counter()

            async def reader() -> None:
                while len(answers) < STORM:
                    msg = await peer.receive(20)
                    method = msg.get("method")
                    if method == "session/request_permission":
                        asked.add(msg["id"])
                    elif method == "$/cancel_request":
                        cancelled_asks[msg["params"]["requestId"]] += 1
                    elif method is None:
                        assert msg["id"] in ids, msg
                        assert msg["id"] not in answers, f"second answer: {msg}"
                        answers[msg["id"]] = msg

            lock = trio.Lock()  # one writer at a time on the pipe

            async def cancel_later(request_id: int, session_id: str, delay: float) -> None:
                await trio.sleep(delay)
                async with lock:
                    if rng.random() < 0.7:
                        await peer.cancel_request(request_id)
                    else:
                        await peer.notify("session/cancel", {"sessionId": session_id})

            async with trio.open_nursery() as nursery:
                nursery.start_soon(reader)
                for request_id in sorted(ids):
                    session = rng.choice(sessions)
                    async with lock:
                        await peer.request(
                            "session/prompt",
                            prompt_params(session, commands[request_id]),
                            id=request_id,
                        )
                    nursery.start_soon(cancel_later, request_id, session, rng.random() * 0.05)
                    if rng.random() < 0.1:
                        await trio.sleep(0.001)

            outcomes: Counter[str] = Counter()
            for request_id, msg in answers.items():
                if "result" in msg:
                    stop = msg["result"]["stopReason"]
                    assert stop in ("end_turn", "cancelled"), msg
                    if commands[request_id] in ("wait_for_cancel", "permission"):
                        assert stop == "cancelled", msg  # they never end on their own
                    outcomes[stop] += 1
                else:
                    assert msg["error"]["code"] == -32800, msg
                    outcomes["-32800"] += 1
            assert sum(outcomes.values()) == STORM
            # Every open permission request was cancelled on the wire, once.
            await trio.sleep(0.2)
            while peer.queued:
                msg = await peer.receive()
                if msg.get("method") == "$/cancel_request":
                    cancelled_asks[msg["params"]["requestId"]] += 1
            assert set(cancelled_asks) <= asked
            assert all(n == 1 for n in cancelled_asks.values()), cancelled_asks
            assert set(cancelled_asks) == asked
            await assert_echo(peer, first)


async def test_client_cancel_storm() -> None:
    """3,000 requests to the client (held reads and instant reads), each
    cancelled at a random moment: exactly one answer each."""
    rng = random.Random(99)
    with trio.fail_after(LIMIT):
        async with open_client("prompts", receive_timeout=20) as client:
            await client.serve_handshake()
            prompt = await client.next_prompt()
            peer = client.peer
            paths = {i: rng.choice(["/hold", "/f"]) for i in range(3000)}

            lock = trio.Lock()  # one writer at a time on the pipe

            async def cancel_later(request_id: int, delay: float) -> None:
                await trio.sleep(delay)
                async with lock:
                    await peer.cancel_request(request_id)

            async with trio.open_nursery() as nursery:
                for request_id, path in paths.items():
                    async with lock:
                        await peer.request(
                            "fs/read_text_file", {"sessionId": "s-1", "path": path}, id=request_id
                        )
                    nursery.start_soon(cancel_later, request_id, rng.random() * 0.05)
            answers, others = await collect_responses(peer, set(paths), within=20)
            assert others == []
            for request_id, msg in answers.items():
                if paths[request_id] == "/hold":
                    assert msg["error"]["code"] == -32800, msg
                else:
                    assert "result" in msg or msg["error"]["code"] == -32800, msg
            await peer.expect_silence(0.1)
            await client.answer_prompt(prompt, "done")
            await client.finish()


# ----------------------------------------------------------------------
# A peer that stops reading


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for row in status:
            if row.startswith("VmRSS:"):
                return int(row.split()[1]) / 1024
    raise AssertionError("no VmRSS")


@pytest.mark.parametrize("cancel", ["session/cancel", "$/cancel_request"])
async def test_agent_whose_client_stops_reading(cancel: str) -> None:
    """The agent streams 100,000 updates of 1,000 bytes (100 MB) while we do
    not read: its writes block, its queue stays bounded, it still reads and
    obeys the cancel; when we read again, the answer comes after the few
    updates that were queued."""
    with trio.fail_after(LIMIT):
        async with open_agent() as peer:
            session = await handshake(peer)
            assert peer.process is not None
            pid = peer.process.pid
            baseline = rss_mb(pid)
            rid = await peer.request("session/prompt", prompt_params(session, "stream 100000 1000"))
            await trio.sleep(1.0)  # not reading: the pipe and the agent's queue fill up
            stalled = rss_mb(pid)
            if cancel == "session/cancel":
                await peer.notify("session/cancel", {"sessionId": session})
            else:
                await peer.cancel_request(rid)
            await trio.sleep(0.3)
            updates = 0
            received = 0
            while True:
                raw = await peer.receive_line()
                received += len(raw)
                msg = json.loads(raw)
                if msg.get("method") == "session/update":
                    updates += 1
                    continue
                break
            assert msg["id"] == rid, msg
            if cancel == "session/cancel":
                assert msg["result"] == {"stopReason": "cancelled"}, msg
            else:
                assert msg["error"]["code"] == -32800, msg
            # Bounded: about the outbox limit (1,024 frames) plus the pipe.
            assert updates < 5_000, updates
            assert received < 6_000_000, received
            assert stalled - baseline < 30, (baseline, stalled)
            await assert_echo(peer, session)
            assert peer.queued == []


async def test_client_whose_agent_stops_reading() -> None:
    """We send 20,000 requests to the client and do not read its answers:
    its writes block, but it still reads, so a cancel of a held request and
    the prompt's reply still reach it; when we read again, everything is
    there, once."""
    with trio.fail_after(LIMIT):
        async with open_client("prompts", "--prompts", "2", receive_timeout=20) as client:
            await client.serve_handshake()
            prompt = await client.next_prompt()
            peer = client.peer
            await peer.request("fs/read_text_file", {"sessionId": "s-1", "path": "/hold"}, id="h")
            ids = set(range(20_000))
            params = {"sessionId": "s-1", "path": "/f"}
            await peer.send_bytes(b"".join(line(req(i, "fs/read_text_file", params)) for i in ids))
            await trio.sleep(0.5)
            await peer.cancel_request("h")
            await peer.respond(prompt, {"stopReason": "end_turn"})
            reported = await client.report("prompt")  # its reader is not stuck
            assert reported["stop"] == "end_turn"
            answers, others = await collect_responses(peer, ids | {"h"}, within=20)
            assert answers["h"]["error"]["code"] == -32800
            # Nothing else but, perhaps, the next turn.
            assert [m["method"] for m in others] in ([], ["session/prompt"]), others
            second = others[0]["id"] if others else await client.next_prompt()
            await peer.respond(second, {"stopReason": "end_turn"})
            await client.report("prompt")
            await client.finish()


# ----------------------------------------------------------------------
# A slow client under a burst


async def test_slow_client_under_a_burst_gets_backpressure_not_a_close() -> None:
    """The agent streams 1,000 updates to a client whose handler is slow:
    the client's queue stays within its bound (reading pauses, so the agent
    waits), nothing is dropped or reordered, every update is handled before
    the prompt returns, and the connection stays up."""

    class SlowClient(ScenarioClient):
        max_queued = 0

        async def session_update(self, params: Any) -> None:
            stats = self.agent.connection.statistics()
            self.max_queued = max(self.max_queued, stats.notifications_queued)
            await super().session_update(params)
            await trio.sleep(0.0002)

    client = SlowClient()
    with trio.fail_after(LIMIT):
        async with acp_trio.lowlevel.open_agent_process([*AGENT]) as process:
            config = ConnectionConfig(
                exit_details=process.exit_details, max_queued_notifications=64
            )
            async with acp_trio.open_agent(client, process.stream, config=config) as agent:
                await agent.initialize(client.initialize_request())
                new = NewSessionRequest(cwd="/", mcp_servers=[])
                session = (await agent.new_session(new)).session_id
                result = await agent.prompt_text(session, "stream 1000 100")
                assert result.stop_reason == "end_turn"
                assert client.texts() == [str(i).ljust(100, ".") for i in range(1000)]
                # Read but not handled: the queue, plus the one in the handler.
                assert 0 < client.max_queued <= 64 + 1
                assert not agent.connection.closed
                result = await agent.prompt_text(session, "echo after")
                assert client.texts()[-1] == "after"


# ----------------------------------------------------------------------
# stderr


@pytest.mark.parametrize("stderr", ["capture", "discard"])
async def test_agent_flooding_stderr_before_initialize(stderr: str) -> None:
    """8 MB on stderr before answering ``initialize``: the client drains it
    (the agent would block on a full pipe otherwise), keeps the tail."""
    mode: Literal["capture", "discard"] = "capture" if stderr == "capture" else "discard"
    with trio.fail_after(LIMIT):
        async with open_scripted_process(
            [*AGENT, "--stderr-flood", str(8_000_000)], stderr=mode, receive_timeout=20
        ) as peer:
            session = await handshake(peer)
            await assert_echo(peer, session)
            assert peer.process is not None
            tail = peer.process.stderr_tail()
            if stderr == "capture":
                assert tail is not None
                assert len(tail) == 64 * 1024
                assert set(tail) <= set(b"e\n")
            else:
                assert tail is None
