"""The scripted raw peer: exact bytes out, exact replies in, silence, EOF;
in memory (autojump clock) and against a spawned agent."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from acp_trio.testing import (
    NOT_JSON,
    SCENARIO_AGENT_COMMAND,
    ExpectationFailed,
    ScenarioAgent,
    ScenarioClient,
    ScriptedPeer,
    open_scripted_agent,
    open_scripted_client,
    open_scripted_process,
)

from .conftest import LIMIT, REAL_LIMIT

INIT = {"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": True}}}


async def setup(peer: ScriptedPeer) -> str:
    request_id = await peer.request("initialize", INIT)
    assert (await peer.receive_response(request_id))["result"]["protocolVersion"] == 1
    request_id = await peer.request("session/new", {"cwd": "/", "mcpServers": []})
    session_id: str = (await peer.receive_response(request_id))["result"]["sessionId"]
    return session_id


def prompt(session_id: str, text: str) -> dict[str, Any]:
    return {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}


async def test_exact_bytes_in_and_exact_replies_out(
    autojump_clock: trio.testing.MockClock,
) -> None:
    with trio.fail_after(LIMIT):
        async with open_scripted_client(ScenarioAgent()) as peer:
            await peer.send_bytes(b'{"jsonrpc":"2.0","id":"a","method":"initialize",')
            await peer.send_bytes(b'"params":{"protocolVersion":1}}\r\n')
            reply = await peer.receive()
            assert reply["id"] == "a"
            assert reply["result"]["protocolVersion"] == 1
            # Invalid JSON, then a JSON scalar: answered with id null.
            await peer.send(b"{oops\n", 42)
            first, second = await peer.receive(), await peer.receive()
            assert (first["id"], first["error"]["code"]) == (None, -32700)
            assert (second["id"], second["error"]["code"]) == (None, -32600)
            await peer.expect_silence(1)
            sent = [e for e in peer.transcript if e.direction == "sent"]
            assert sent[-1].message == 42
            assert sent[-2].message is NOT_JSON


async def test_a_request_and_its_cancel_in_one_write(
    autojump_clock: trio.testing.MockClock,
) -> None:
    with trio.fail_after(LIMIT):
        async with open_scripted_client(ScenarioAgent()) as peer:
            session_id = await setup(peer)
            request = {"jsonrpc": "2.0", "id": 99, "method": "session/prompt"}
            request["params"] = prompt(session_id, "wait_for_cancel")
            cancel = {"jsonrpc": "2.0", "method": "$/cancel_request"}
            cancel["params"] = {"requestId": 99}
            await peer.send(request, cancel)
            reply = await peer.receive_response(99)
            assert reply["error"]["code"] == -32800
            # A repeated (late) cancel and a cancel of an unknown id: nothing.
            await peer.cancel_request(99)
            await peer.cancel_request("nobody")
            await peer.expect_silence(1)


async def test_receive_response_keeps_other_messages_queued(
    autojump_clock: trio.testing.MockClock,
) -> None:
    with trio.fail_after(LIMIT):
        async with open_scripted_client(ScenarioAgent()) as peer:
            session_id = await setup(peer)
            request_id = await peer.request("session/prompt", prompt(session_id, "stream 2 1"))
            reply = await peer.receive_response(request_id)
            assert reply["result"] == {"stopReason": "end_turn"}
            assert len(peer.queued) == 2
            texts = [(await peer.receive())["params"]["update"]["content"]["text"] for _ in "ab"]
            assert texts == ["0", "1"]
            await peer.request("session/new", {"cwd": "/", "mcpServers": []})
            with pytest.raises(ExpectationFailed, match="expected silence"):
                await peer.expect_silence(1)


async def test_string_and_integer_ids_stay_distinct(
    autojump_clock: trio.testing.MockClock,
) -> None:
    with trio.fail_after(LIMIT):
        async with open_scripted_client(ScenarioAgent()) as peer:
            await peer.request("initialize", INIT, id="1")
            with pytest.raises(ExpectationFailed, match="no response to id 1 within 2 s"):
                await peer.receive_response(1, within=2)
            assert (await peer.receive_response("1"))["id"] == "1"


async def test_timeouts_and_eof_fail_with_a_clear_message(
    autojump_clock: trio.testing.MockClock,
) -> None:
    with trio.fail_after(LIMIT):
        async with open_scripted_client(ScenarioAgent(), receive_timeout=3) as peer:
            start = trio.current_time()
            with pytest.raises(ExpectationFailed, match="no message within 3 s; nothing received"):
                await peer.receive()
            assert trio.current_time() - start == pytest.approx(3)
            await peer.request("initialize", INIT)
            await peer.receive()
            await peer.close_send()
            await peer.expect_eof()
            with pytest.raises(ExpectationFailed, match="end of stream"):
                await peer.receive()


async def test_a_line_that_is_not_json_fails_receive_but_not_receive_line() -> None:
    left, right = trio.testing.memory_stream_pair()
    peer = ScriptedPeer(left, timeout=5)
    with trio.fail_after(REAL_LIMIT):
        await right.send_all(b"hello\nworld")
        with pytest.raises(ExpectationFailed, match="not JSON: hello"):
            await peer.receive()
        await right.aclose()
        assert await peer.receive_line() == b"world"  # the last line, without \n


async def test_receive_all_reads_to_the_end_of_the_stream(
    autojump_clock: trio.testing.MockClock,
) -> None:
    left, right = trio.testing.memory_stream_pair()
    peer = ScriptedPeer(left, timeout=5)
    with trio.fail_after(LIMIT):
        await right.send_all(b'{"a":1}\n\n[2]\n{"b":')
        assert await peer.receive() == {"a": 1}
        # The end does not come: the messages read so far stay queued.
        with pytest.raises(ExpectationFailed, match="no end of stream within 2 s"):
            await peer.receive_all(within=2)
        assert peer.queued == [[2]]
        await right.send_all(b'3}\n"last"')
        await right.aclose()
        assert await peer.receive_all() == [[2], {"b": 3}, "last"]
        received = [e.message for e in peer.transcript if e.direction == "received"]
        assert received[-2:] == [{"b": 3}, "last"]
        assert await peer.receive_all() == []  # still the end
        with pytest.raises(ExpectationFailed, match="end of stream"):
            await peer.receive()


async def test_receive_all_fails_on_a_line_that_is_not_json() -> None:
    left, right = trio.testing.memory_stream_pair()
    peer = ScriptedPeer(left, timeout=5)
    with trio.fail_after(REAL_LIMIT):
        await right.send_all(b'{"a":1}\nnope\n')
        await right.aclose()
        with pytest.raises(ExpectationFailed, match="not JSON: nope"):
            await peer.receive_all()
        assert peer.queued == [{"a": 1}]


async def test_a_scripted_agent_drives_the_scenario_client(
    autojump_clock: trio.testing.MockClock,
) -> None:
    client = ScenarioClient()
    with trio.fail_after(LIMIT):
        async with open_scripted_agent(client) as peer:
            read = {"sessionId": "s", "path": "/etc/motd"}
            request_id = await peer.request("fs/read_text_file", read)
            assert (await peer.receive_response(request_id))["result"] == {"content": "x" * 64}
            terminal = await peer.request("terminal/create", {"sessionId": "s", "command": "x"})
            await peer.expect_silence(10)  # held
            await peer.cancel_request(terminal)
            assert (await peer.receive_response(terminal))["error"]["code"] == -32800
            assert client.cancelled == ["terminal/create"]


async def test_a_scripted_peer_over_a_spawned_agent() -> None:
    with trio.fail_after(REAL_LIMIT):
        async with open_scripted_process(SCENARIO_AGENT_COMMAND, receive_timeout=20) as peer:
            session_id = await setup(peer)
            request_id = await peer.request("session/prompt", prompt(session_id, "echo hi"))
            update = await peer.receive_request("session/update")
            assert update["params"]["update"]["content"] == {"type": "text", "text": "hi"}
            assert (await peer.receive_response(request_id))["result"]["stopReason"] == "end_turn"
            await peer.close_send()
            await peer.expect_eof()
            assert peer.process is not None
            assert await peer.process.process.wait() == 0
