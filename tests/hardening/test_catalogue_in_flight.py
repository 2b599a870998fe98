"""More of the catalogue of hostile and broken lines (``test_catalogue.py``),
for the cases that need a request in flight (ids ``1`` and ``"1"`` together,
a duplicate id, a reply with both ``result`` and ``error``, a malformed
cancel, an end of stream mid-line, an unparsable reply), then ordering,
early updates and repeated replies, against a real agent process and a
real client process."""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio
from frames import line

from .conftest import (
    LIMIT,
    Side,
    assert_echo,
    error_of,
    handshake,
    new_session,
    open_agent,
    open_client,
    prompt_params,
    valid_request,
)

# ----------------------------------------------------------------------
# Cases that need a request in flight


async def test_agent_ids_1_and_string_1_in_flight_together() -> None:
    with trio.fail_after(LIMIT):
        async with open_agent() as peer:
            first = await handshake(peer)
            second = await new_session(peer)
            await peer.send(
                {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "session/prompt",
                    "params": prompt_params(first, "sleep 300"),
                },
                {
                    "jsonrpc": "2.0",
                    "id": "1",
                    "method": "session/prompt",
                    "params": prompt_params(second, "fail -32042 string one"),
                },
            )
            # "1" fails at once; 1 is still sleeping, and is not confused with it.
            reply = await peer.receive()
            assert error_of(reply) == ("1", -32042), reply
            reply = await peer.receive()
            assert reply == {"jsonrpc": "2.0", "id": 1, "result": {"stopReason": "end_turn"}}
            await peer.expect_silence(0.15)
            await assert_echo(peer, first)


async def test_client_ids_1_and_string_1_in_flight_together() -> None:
    with trio.fail_after(LIMIT):
        async with open_client("prompts") as client:
            await client.serve_handshake()
            prompt = await client.next_prompt()
            peer = client.peer
            hold = {"sessionId": "s-1", "path": "/hold"}
            await peer.send(
                {"jsonrpc": "2.0", "id": 1, "method": "fs/read_text_file", "params": hold},
                {"jsonrpc": "2.0", "id": "1", "method": "fs/read_text_file", "params": hold},
            )
            await peer.expect_silence(0.1)  # both held
            await peer.cancel_request("1")
            assert error_of(await peer.receive()) == ("1", -32800)
            await peer.expect_silence(0.1)  # 1 is still held
            await peer.cancel_request(1)
            assert error_of(await peer.receive()) == (1, -32800)
            await peer.expect_silence(0.1)
            await client.answer_prompt(prompt, "done")
            await client.finish()


async def test_agent_duplicate_in_flight_id() -> None:
    with trio.fail_after(LIMIT):
        async with open_agent() as peer:
            session = await handshake(peer)
            await peer.request(
                "session/prompt", prompt_params(session, "wait_for_cancel"), id="dup"
            )
            await peer.request("session/new", {"cwd": "/", "mcpServers": []}, id="dup")
            # The second is refused; the first is left alone.
            assert error_of(await peer.receive()) == ("dup", -32600)
            await peer.expect_silence(0.1)
            await peer.cancel_request("dup")
            assert error_of(await peer.receive()) == ("dup", -32800)
            await peer.cancel_request("dup")  # repeated: nothing
            await peer.expect_silence(0.15)
            await assert_echo(peer, session)


async def test_client_duplicate_in_flight_id() -> None:
    with trio.fail_after(LIMIT):
        async with open_client("prompts") as client:
            await client.serve_handshake()
            prompt = await client.next_prompt()
            peer = client.peer
            hold = {"sessionId": "s-1", "path": "/hold"}
            await peer.request("fs/read_text_file", hold, id=7)
            await peer.request("fs/read_text_file", {"sessionId": "s-1", "path": "/f"}, id=7)
            assert error_of(await peer.receive()) == (7, -32600)
            await peer.expect_silence(0.1)
            await peer.cancel_request(7)
            assert error_of(await peer.receive()) == (7, -32800)
            await peer.expect_silence(0.15)
            await client.answer_prompt(prompt, "done")
            await client.finish()


async def test_agent_reply_with_both_result_and_error_fails_its_call() -> None:
    with trio.fail_after(LIMIT):
        async with open_agent() as peer:
            session = await handshake(peer)
            rid = await peer.request("session/prompt", prompt_params(session, "permission"))
            ask = await peer.receive_request("session/request_permission")
            await peer.send(
                {
                    "jsonrpc": "2.0",
                    "id": ask["id"],
                    "result": {"outcome": {"outcome": "selected", "optionId": "allow"}},
                    "error": {"code": -32000, "message": "both"},
                }
            )
            # The agent's call failed (RemoteProtocolError) instead of hanging;
            # the scenario agent does not catch it: its prompt fails -32603.
            assert error_of(await peer.receive_response(rid)) == (rid, -32603)
            await peer.expect_silence(0.15)  # and the bad reply was not answered
            await assert_echo(peer, session)


async def test_client_reply_with_both_result_and_error_fails_its_call() -> None:
    with trio.fail_after(LIMIT):
        async with open_client("prompts", "--prompts", "2") as client:
            await client.serve_handshake()
            prompt = await client.next_prompt()
            await client.peer.send(
                {
                    "jsonrpc": "2.0",
                    "id": prompt,
                    "result": {"stopReason": "end_turn"},
                    "error": {"code": -32000, "message": "both"},
                }
            )
            reported = await client.report("prompt")
            assert reported["error"] == "RemoteProtocolError", reported
            # The bad reply is not answered: the next message is the next turn.
            await client.answer_prompt(await client.next_prompt(), "next turn")
            assert client.peer.queued == []
            await client.finish()


@pytest.mark.parametrize("side", ["agent", "client"])
async def test_malformed_cancel_leaves_the_running_request_alone(side: Side) -> None:
    malformed = [{"requestId": {"id": "w"}}, {"requestId": ["w"]}, {"id": "w"}]

    async def check(peer: Any, request_id: Any) -> None:
        for params in malformed:
            await peer.notify("$/cancel_request", params)
        await peer.expect_silence(0.15)
        await peer.cancel_request(request_id)
        assert error_of(await peer.receive()) == (request_id, -32800)
        await peer.expect_silence(0.1)

    with trio.fail_after(LIMIT):
        if side == "agent":
            async with open_agent() as peer:
                session = await handshake(peer)
                await peer.request(
                    "session/prompt", prompt_params(session, "wait_for_cancel"), id="w"
                )
                await check(peer, "w")
                await assert_echo(peer, session)
        else:
            async with open_client("prompts") as client:
                await client.serve_handshake()
                prompt = await client.next_prompt()
                await client.peer.request(
                    "fs/read_text_file", {"sessionId": "s-1", "path": "/hold"}, id="w"
                )
                await check(client.peer, "w")
                await client.answer_prompt(prompt, "done")
                await client.finish()


async def test_agent_lone_surrogate_is_echoed_as_valid_json() -> None:
    with trio.fail_after(LIMIT):
        async with open_agent() as peer:
            session = await handshake(peer)
            # "\ud800" is valid JSON text for an invalid code point.
            await peer.send_bytes(
                b'{"jsonrpc":"2.0","id":"s","method":"session/prompt","params":{"sessionId":"'
                + session.encode()
                + b'","prompt":[{"type":"text","text":"echo \\ud800!"}]}}\n'
            )
            raw = await peer.receive_line()
            assert b"\\ud800!" in raw, raw  # escaped, so the line is valid UTF-8
            assert json.loads(raw)["params"]["update"]["content"]["text"] == "\ud800!"
            reply = await peer.receive_response("s")
            assert reply["result"] == {"stopReason": "end_turn"}
            await assert_echo(peer, session)


@pytest.mark.parametrize("tail", ["a request", "garbage"])
async def test_agent_eof_in_the_middle_of_a_line(tail: str) -> None:
    with trio.fail_after(LIMIT):
        async with open_agent() as peer:
            session = await handshake(peer)
            if tail == "a request":
                # A final line without its "\n" is still a message; the EOF
                # then closes the connection, which cancels it: one answer.
                await peer.send_bytes(line(valid_request("agent", "last"))[:-1])
                await peer.close_send()
                reply = await peer.receive_response("last")
                assert "result" in reply or error_of(reply) == ("last", -32800), reply
            else:
                await peer.send_bytes(
                    json.dumps({"jsonrpc": "2.0", "id": "x", "method": "session/prompt"}).encode()[
                        :30
                    ]
                )
                await peer.close_send()
                assert error_of(await peer.receive()) == (None, -32700)
            await peer.expect_eof()
            assert peer.process is not None
            await peer.process.process.wait()
            assert peer.process.returncode == 0
            del session


async def test_client_eof_in_the_middle_of_a_line() -> None:
    with trio.fail_after(LIMIT):
        async with open_client("prompts", "--prompts", "2") as client:
            await client.serve_handshake()
            prompt = await client.next_prompt()
            # Half of the prompt's answer, then the agent is gone.
            answer = line({"jsonrpc": "2.0", "id": prompt, "result": {"stopReason": "end_turn"}})
            await client.peer.send_bytes(answer[:20])
            await client.peer.close_send()
            closed = await client.report("closed")
            assert closed["reason"] == "the peer closed the connection", closed
            await client.report("exit")
            await client.process.wait()
            assert client.process.returncode == 0


UNPARSABLE_REPLIES = {
    "invalid UTF-8": b'{"jsonrpc":"2.0","id":%s,"result":{"stopReason":"end_turn","x":"\xff"}}\n',
    "NaN": b'{"jsonrpc":"2.0","id":%s,"result":{"stopReason":"end_turn","x":NaN}}\n',
    "truncated": b'{"jsonrpc":"2.0","id":%s,"result":{"stopReason":"end_\n',
}


@pytest.mark.parametrize("kind", sorted(UNPARSABLE_REPLIES))
async def test_client_unparsable_reply_fails_its_call(kind: str) -> None:
    """A reply that is not valid JSON, whose first bytes still show which
    call it answers: that call fails at once instead of waiting forever, and
    the reply is not answered (never a reply to a reply)."""
    with trio.fail_after(LIMIT):
        async with open_client("prompts", "--prompts", "2") as client:
            await client.serve_handshake()
            prompt = await client.next_prompt()
            await client.peer.send_bytes(UNPARSABLE_REPLIES[kind] % json.dumps(prompt).encode())
            reported = await client.report("prompt")
            assert reported["error"] == "RemoteProtocolError", reported
            await client.answer_prompt(await client.next_prompt(), "next turn")
            await client.finish()


@pytest.mark.parametrize("kind", sorted(UNPARSABLE_REPLIES))
async def test_agent_unparsable_reply_fails_its_call(kind: str) -> None:
    with trio.fail_after(LIMIT):
        async with open_agent() as peer:
            session = await handshake(peer)
            rid = await peer.request("session/prompt", prompt_params(session, "permission"))
            ask = await peer.receive_request("session/request_permission")
            await peer.send_bytes(UNPARSABLE_REPLIES[kind] % json.dumps(ask["id"]).encode())
            # The agent's call failed instead of hanging; its prompt with it
            # (and nothing answers the reply itself).
            assert error_of(await peer.receive()) == (rid, -32603)
            await assert_echo(peer, session)
            assert peer.queued == []


# ----------------------------------------------------------------------
# Ordering, early updates, repeated replies


def update_line(text: str, session_id: str = "s-1") -> bytes:
    return line(
        {
            "jsonrpc": "2.0",
            "method": "session/update",
            "params": {
                "sessionId": session_id,
                "update": {
                    "sessionUpdate": "agent_message_chunk",
                    "content": {"type": "text", "text": text},
                },
            },
        }
    )


async def test_client_1000_updates_and_the_result_in_one_write() -> None:
    """All 1,000 chunks reach the client, in order, before its prompt returns."""
    with trio.fail_after(LIMIT):
        async with open_client("prompts", "--prompts", "2") as client:
            await client.serve_handshake()
            prompt = await client.next_prompt()
            texts = [f"chunk {i}" for i in range(1000)]
            result = line({"jsonrpc": "2.0", "id": prompt, "result": {"stopReason": "end_turn"}})
            await client.peer.send_bytes(b"".join(map(update_line, texts)) + result)
            reported = await client.report("prompt")
            assert reported["texts"] == texts
            await client.answer_prompt(await client.next_prompt(), "next")
            await client.finish()


async def test_client_update_before_the_session_new_result() -> None:
    """A non-compliant agent streams for a session before answering
    ``session/new``: the update is delivered, nothing breaks."""
    with trio.fail_after(LIMIT):
        async with open_client("prompts") as client:
            peer = client.peer
            init = await peer.receive_request("initialize")
            await peer.respond(init["id"], {"protocolVersion": 1})
            await client.report("initialized")
            new = await peer.receive_request("session/new")
            await peer.send_bytes(
                update_line("too early")
                + line({"jsonrpc": "2.0", "id": new["id"], "result": {"sessionId": "s-1"}})
            )
            reported = await client.report("session")
            # Not before new_session() returned (the client could not know
            # the session), then delivered.
            assert (reported["held"], reported["updates"]) == (0, 1), reported
            await client.answer_prompt(await client.next_prompt(), "on time")
            await client.finish()


async def test_client_repeated_reply_is_dropped() -> None:
    with trio.fail_after(LIMIT):
        async with open_client("prompts", "--prompts", "2") as client:
            await client.serve_handshake()
            prompt = await client.next_prompt()
            first = line({"jsonrpc": "2.0", "id": prompt, "result": {"stopReason": "end_turn"}})
            again = line({"jsonrpc": "2.0", "id": prompt, "result": {"stopReason": "refusal"}})
            await client.peer.send_bytes(first + again + again)
            assert (await client.report("prompt"))["stop"] == "end_turn"
            await client.answer_prompt(await client.next_prompt(), "next")
            assert client.peer.queued == []  # the repeats were not answered
            await client.finish()


async def test_agent_repeated_reply_is_dropped() -> None:
    with trio.fail_after(LIMIT):
        async with open_agent() as peer:
            session = await handshake(peer)
            rid = await peer.request("session/prompt", prompt_params(session, "permission"))
            ask = await peer.receive_request("session/request_permission")
            allow = {"outcome": {"outcome": "selected", "optionId": "allow"}}
            reject = {"outcome": {"outcome": "selected", "optionId": "reject"}}
            await peer.send(
                {"jsonrpc": "2.0", "id": ask["id"], "result": allow},
                {"jsonrpc": "2.0", "id": ask["id"], "result": reject},
            )
            update = await peer.receive()
            assert update["params"]["update"]["content"]["text"] == "permission: selected allow"
            assert await peer.receive() == {
                "jsonrpc": "2.0",
                "id": rid,
                "result": {"stopReason": "end_turn"},
            }
            await assert_echo(peer, session)
