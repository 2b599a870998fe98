"""Cancellation edges against a real agent process (and a typed client
against one): cancels before, right after and long after their request,
``session/cancel`` with nothing running and in rapid cycles, and the
bookkeeping of cancels of finished requests.

The rules (``acp_trio._core._connection``, ``acp_trio._typed._agent``): a
``$/cancel_request`` for an id that is not running (unknown, finished, not
sent yet, repeated) does nothing and is never answered; one read right
after its request cancels it before its handler runs (``-32800``);
``session/cancel`` ends every prompt of the session sent before it
(``stopReason: "cancelled"``) and nothing sent after it.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
import trio
from frames import cancel, session_cancel

import acp_trio
from acp_trio import ConnectionConfig
from acp_trio.schema import NewSessionRequest
from acp_trio.testing import ScenarioClient

from .conftest import (
    AGENT,
    LIMIT,
    assert_echo,
    error_of,
    handshake,
    open_agent,
    prompt_params,
)
from .test_sizes import peak_rss_mb


def prompt(request_id: Any, session: str, text: str) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "session/prompt",
        "params": prompt_params(session, text),
    }


async def test_cancel_before_its_request_in_the_same_write_does_nothing() -> None:
    with trio.fail_after(LIMIT):
        async with open_agent() as peer:
            session = await handshake(peer)
            await peer.send(cancel("early"), prompt("early", session, "echo not cancelled"))
            update = await peer.receive()
            assert update["params"]["update"]["content"]["text"] == "not cancelled"
            assert (await peer.receive())["result"] == {"stopReason": "end_turn"}
            await assert_echo(peer, session)


async def test_cancel_right_behind_its_request_in_the_same_write() -> None:
    with trio.fail_after(LIMIT):
        async with open_agent() as peer:
            session = await handshake(peer)
            await peer.send(prompt("late", session, "echo never said"), cancel("late"))
            # Cancelled before its handler ran: no update, just -32800.
            assert error_of(await peer.receive()) == ("late", -32800)
            await peer.send(cancel("late"), cancel("late"))  # repeated, finished: nothing
            await assert_echo(peer, session)
            await peer.expect_silence(0.05)


async def test_session_cancel_with_nothing_running_then_a_prompt_at_once() -> None:
    with trio.fail_after(LIMIT):
        async with open_agent() as peer:
            session = await handshake(peer)
            await peer.send(session_cancel(session))
            await peer.expect_silence(0.1)
            # The cancel ends prompts sent before it, not the one right after.
            await peer.send(session_cancel(session), prompt("after", session, "echo after"))
            assert (await peer.receive())["method"] == "session/update"
            assert (await peer.receive())["result"] == {"stopReason": "end_turn"}
            await assert_echo(peer, session)


async def test_100_prompt_and_cancel_cycles_in_one_write() -> None:
    with trio.fail_after(LIMIT):
        async with open_agent() as peer:
            session = await handshake(peer)
            messages: list[Any] = []
            for i in range(100):
                messages += [prompt(f"c{i}", session, "wait_for_cancel"), session_cancel(session)]
            await peer.send(*messages)
            answers = [await peer.receive() for _ in range(100)]
            assert sorted(a["id"] for a in answers) == sorted(f"c{i}" for i in range(100))
            assert all(a["result"] == {"stopReason": "cancelled"} for a in answers), answers
            await assert_echo(peer, session)


async def test_10000_cancels_of_finished_requests_keep_memory_flat() -> None:
    with trio.fail_after(LIMIT):
        async with open_agent() as peer:
            session = await handshake(peer)
            await assert_echo(peer, session)
            assert peer.process is not None
            before = peak_rss_mb(peer.process.pid)
            finished = [1, 2, 3]  # initialize, session/new, the echo
            data = b"".join(
                json.dumps(cancel(finished[i % 3] if i % 2 else i)).encode() + b"\n"
                for i in range(10_000)
            )
            await peer.send_bytes(data)
            await assert_echo(peer, session)
            await peer.expect_silence(0.05)
            assert peak_rss_mb(peer.process.pid) - before < 2


async def test_caller_deadline_cancels_the_turn_and_the_late_answer_is_consumed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """``trio.move_on_after`` around a prompt: one ``session/cancel`` goes
    out (no ``$/cancel_request``), the agent's late ``cancelled`` answer is
    consumed without a word in the log, and the next prompt works."""
    frames: list[tuple[str, Any]] = []
    client = ScenarioClient()
    caplog.set_level(logging.DEBUG, logger="acp_trio")
    with trio.fail_after(LIMIT):
        async with acp_trio.lowlevel.open_agent_process([*AGENT]) as process:
            config = ConnectionConfig(
                exit_details=process.exit_details,
                trace=lambda direction, frame: frames.append((direction, json.loads(frame))),
            )
            async with acp_trio.open_agent(client, process.stream, config=config) as agent:
                await agent.initialize(client.initialize_request())
                new = NewSessionRequest(cwd="/", mcp_servers=[])
                session = (await agent.new_session(new)).session_id
                with trio.move_on_after(0.01) as scope:
                    await agent.prompt_text(session, "sleep 100")
                assert scope.cancelled_caught
                result = await agent.prompt_text(session, "echo next")
                assert result.stop_reason == "end_turn"
                assert agent.connection.request_tree() == []
    sent = [m for d, m in frames if d == "send"]
    prompt_id = next(m["id"] for m in sent if m.get("method") == "session/prompt")
    assert [m for m in sent if m.get("method") == "$/cancel_request"] == []
    cancels = [m for m in sent if m.get("method") == "session/cancel"]
    assert [m["params"] for m in cancels] == [{"sessionId": session}]
    received = [m for d, m in frames if d == "recv" and m.get("id") == prompt_id]
    assert [m.get("result") for m in received] == [{"stopReason": "cancelled"}]
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text
    assert "late or repeated reply" not in caplog.text
