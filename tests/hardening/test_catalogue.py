"""Hostile and broken lines, against a real agent process and a real client
process.

Each case writes exact bytes into a live connection and checks the
documented answer (the rules of ``acp_trio._jsonrpc._messages``):

- bytes that are not UTF-8 or not JSON: ``-32700`` with ``id: null``;
- JSON that is not a message object (arrays included: ACP v1 has no
  batches): ``-32600`` with ``id: null``, and nothing inside is run;
- an invalid object that names a method and a valid id: ``-32600`` with
  that id;
- responses the connection is not waiting for (unknown id, both ``result``
  and ``error``, no ``result`` at all): never answered;
- malformed ``$/cancel_request``: ignored;
- a UTF-8 BOM, CRLF line ends and blank lines: tolerated;
- ids echoed exactly: ``0`` is an id, ``1`` is not ``"1"``.

Then nothing else arrives, and the connection still works: the agent still
answers an ``echo`` prompt, the client still delivers an agent's reply and
still answers a request.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import attrs
import pytest
import trio
from frames import line

from .conftest import (
    LIMIT,
    assert_echo,
    error_of,
    handshake,
    new_session,
    open_agent,
    open_client,
    prompt_params,
)

RESULT = "result"

Side = str  # "agent" (we play the client) or "client" (we play the agent)


def valid_request(side: Side, request_id: Any) -> dict[str, Any]:
    """A request the side under test serves at once."""
    if side == "agent":
        return {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": "session/new",
            "params": {"cwd": "/", "mcpServers": []},
        }
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "fs/read_text_file",
        "params": {"sessionId": "s-1", "path": "/f"},
    }


@attrs.frozen
class Case:
    name: str
    #: What to write, given a function making a valid request for an id.
    data: Callable[[Callable[[Any], dict[str, Any]]], bytes]
    #: The replies, in order: ``(id, error code)`` or ``(id, RESULT)``.
    replies: tuple[tuple[Any, Any], ...] = ()


def _with(request: dict[str, Any], **changes: Any) -> dict[str, Any]:
    out = {**request, **changes}
    return {k: v for k, v in out.items() if v is not ...}


CASES = [
    Case("not JSON", lambda r: b"{not json\n", ((None, -32700),)),
    Case("truncated JSON", lambda r: line(r("t"))[:-8] + b"\n", ((None, -32700),)),
    Case(
        "invalid UTF-8 inside a request",
        lambda r: line(r("u8")).replace(b'"/', b'"\xff\xfe/', 1),
        ((None, -32700),),
    ),
    Case("invalid UTF-8 alone", lambda r: b"\xc3\x28\xa0\xa1\n", ((None, -32700),)),
    Case("NUL bytes", lambda r: b"\x00\x00\x00\n", ((None, -32700),)),
    Case(
        "ANSI and OSC escapes (a log line)",
        lambda r: b"\x1b]0;agent\x07\x1b[31mstarting up\x1b[0m\n",
        ((None, -32700),),
    ),
    Case("NaN", lambda r: line(r("nan"))[:-2] + b',"x":NaN}\n', ((None, -32700),)),
    Case(
        "nested 100,000 deep", lambda r: b"[" * 100_000 + b"]" * 100_000 + b"\n", ((None, -32700),)
    ),
    Case("blank lines", lambda r: b"\n\r\n   \n\t\n\n"),
    Case(
        "a batch array (its request is not run)",
        lambda r: b"[" + line(r("batched"))[:-1] + b"]\n",
        ((None, -32600),),
    ),
    Case("an empty array", lambda r: b"[]\n", ((None, -32600),)),
    Case(
        "JSON scalars",
        lambda r: b'42\n"x"\nnull\ntrue\n-1.5e3\n',
        ((None, -32600),) * 5,
    ),
    Case('"jsonrpc": "1.0"', lambda r: line(_with(r("v1"), jsonrpc="1.0")), (("v1", -32600),)),
    Case('no "jsonrpc"', lambda r: line(_with(r("v2"), jsonrpc=...)), (("v2", -32600),)),
    Case(
        "params a string",
        lambda r: line(_with(r("p1"), params="text")),
        (("p1", -32600),),
    ),
    Case(
        'no "method", no "id"',
        lambda r: line({"jsonrpc": "2.0", "params": {}}),
        ((None, -32600),),
    ),
    # With an id but no method and no result/error it can only be read as a
    # malformed response: no reply to a reply (it fails a pending call of
    # that id, if there is one).
    Case('no "method", an "id"', lambda r: line({"jsonrpc": "2.0", "id": "m1", "params": {}})),
    # Only a string names a method: anything else is answered with id null.
    Case('"method" a number', lambda r: line(_with(r("n1"), method=7)), ((None, -32600),)),
    Case("fractional id", lambda r: line(_with(r(None), id=1.5)), ((None, -32600),)),
    Case("boolean id", lambda r: line(_with(r(None), id=True)), ((None, -32600),)),
    Case("object id", lambda r: line(_with(r(None), id={"a": 1})), ((None, -32600),)),
    Case("id 0", lambda r: line(r(0)), ((0, RESULT),)),
    Case('id "0"', lambda r: line(r("0")), (("0", RESULT),)),
    Case("id -1", lambda r: line(r(-1)), ((-1, RESULT),)),
    Case("id null (a request)", lambda r: line(r(None)), ((None, RESULT),)),
    Case("a 10 KB string id", lambda r: line(r("i" * 10_000)), (("i" * 10_000, RESULT),)),
    Case("a UTF-8 BOM", lambda r: b"\xef\xbb\xbf" + line(r("bom")), (("bom", RESULT),)),
    Case("CRLF line ends", lambda r: line(r("crlf"))[:-1] + b"\r\n", (("crlf", RESULT),)),
    Case(
        "two requests and a blank line in one write",
        lambda r: line(r("a")) + b"\r\n" + line(r("b")),
        (("a", RESULT), ("b", RESULT)),
    ),
    Case(
        "a response to an id never sent",
        lambda r: (
            line({"jsonrpc": "2.0", "id": 987654, "result": {}})
            + line({"jsonrpc": "2.0", "id": "nope", "error": {"code": 1, "message": "x"}})
        ),
    ),
    Case(
        "a response with both result and error, to an id never sent",
        lambda r: line(
            {"jsonrpc": "2.0", "id": 98765, "result": {}, "error": {"code": 1, "message": "x"}}
        ),
    ),
    Case(
        "a malformed error object",
        lambda r: line({"jsonrpc": "2.0", "id": 98764, "error": {"code": "x"}}),
    ),
    Case(
        "$/cancel_request with a malformed requestId",
        lambda r: b"".join(
            line({"jsonrpc": "2.0", "method": "$/cancel_request", "params": p})
            for p in ({"requestId": {"x": 1}}, {"requestId": [1]}, {"requestId": True}, {}, None)
        ),
    ),
    Case(
        "$/cancel_request of unknown ids",
        lambda r: (
            line({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": 5}})
            + line({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": "5"}})
        ),
    ),
    Case(
        "an unknown notification",
        lambda r: line({"jsonrpc": "2.0", "method": "vendor/unknown", "params": {"a": 1}}),
    ),
    Case(
        "an unknown method",
        lambda r: line({"jsonrpc": "2.0", "id": "um", "method": "vendor/unknown"}),
        (("um", -32601),),
    ),
    Case(
        "an unknown extension method",
        lambda r: line({"jsonrpc": "2.0", "id": "ext", "method": "_vendor/x", "params": {}}),
        (("ext", -32601),),
    ),
    Case(
        "an unknown extension notification",
        lambda r: line({"jsonrpc": "2.0", "method": "_vendor/y", "params": {"a": 1}}),
    ),
    Case(
        "params of the wrong shape",
        lambda r: line(_with(r("shape"), params={"cwd": 5, "sessionId": [], "path": {}})),
        (("shape", -32602),),
    ),
]


def _key(msg_id: Any) -> tuple[str, str]:
    return type(msg_id).__name__, repr(msg_id)


async def expect_replies(peer: Any, replies: tuple[tuple[Any, Any], ...]) -> None:
    """Exactly these replies (requests run concurrently: in any order)."""
    got: list[tuple[tuple[str, str], Any]] = []
    for _ in replies:
        msg = await peer.receive()
        assert "method" not in msg, msg
        if "result" in msg:
            assert set(msg) == {"jsonrpc", "id", "result"}, msg
            got.append((_key(msg["id"]), RESULT))
        else:
            msg_id, code = error_of(msg)
            got.append((_key(msg_id), code))
    want = [(_key(i), what) for i, what in replies]
    assert sorted(got, key=repr) == sorted(want, key=repr)


async def nothing_else(peer: Any, *, exited: bool = False) -> None:
    """No message arrived besides those the test took (a reply to the hostile
    input would have come before the echo's, which was written after it)."""
    assert peer.queued == [], peer.queued
    if exited:
        await peer.expect_eof()
    else:
        await peer.expect_silence(0.05)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
async def test_agent_process(case: Case) -> None:
    with trio.fail_after(LIMIT):
        async with open_agent() as peer:
            session = await handshake(peer)
            await peer.send_bytes(case.data(lambda i: valid_request("agent", i)))
            await expect_replies(peer, case.replies)
            await assert_echo(peer, session)
            await assert_echo(peer, await new_session(peer), "a new session too")
            await nothing_else(peer)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
async def test_client_process(case: Case) -> None:
    with trio.fail_after(LIMIT):
        async with open_client("prompts", "--prompts", "2") as client:
            await client.serve_handshake()
            first = await client.next_prompt()
            # Hostile input while the client's prompt is pending.
            await client.peer.send_bytes(case.data(lambda i: valid_request("client", i)))
            await expect_replies(client.peer, case.replies)
            await client.answer_prompt(first, "alive", "and well")
            await client.assert_serves_requests()
            await client.answer_prompt(await client.next_prompt(), "second turn")
            await client.finish()
            await nothing_else(client.peer, exited=True)


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
