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

Each side is one long-lived process fed the cases one after the other (a
process per case cost a minute of the suite's time and proved no more: the
same rules are tested sans-IO in ``tests/jsonrpc`` and in memory in
``tests/connection/test_bad_input.py``); so each case also shows that the
connection survived every case before it. A failure names its case.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
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
    valid_request,
)

RESULT = "result"
#: Real seconds for the whole catalogue against one process (each case has LIMIT).
WHOLE = 100


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


def _named(case: Case, exc: BaseException) -> None:
    """Say which case was running in whatever failed."""
    exc.add_note(f"in the catalogue case {case.name!r}")


async def test_agent_process() -> None:
    """One agent process, fed every case in turn: after each, nothing else
    arrived and the agent still answers, in the first session and in a new
    one (so the connection survives the whole catalogue, not just one)."""
    assert len({c.name for c in CASES}) == len(CASES)
    with trio.fail_after(WHOLE):
        async with open_agent() as peer:
            session = await handshake(peer)
            for case in CASES:
                try:
                    with trio.fail_after(LIMIT):
                        await peer.send_bytes(case.data(lambda i: valid_request("agent", i)))
                        await expect_replies(peer, case.replies)
                        await assert_echo(peer, session)
                        await assert_echo(peer, await new_session(peer), "a new session too")
                        await nothing_else(peer)
                except BaseException as exc:
                    _named(case, exc)
                    raise


async def test_client_process() -> None:
    """One client process, fed every case in turn, each while one of its
    prompts is pending: after each, that prompt gets exactly the updates sent
    for it, the client still answers a request and runs its next turn; at the
    end nothing is left in flight and it exits cleanly."""
    with trio.fail_after(WHOLE):
        async with open_client("prompts", "--prompts", str(2 * len(CASES))) as client:
            await client.serve_handshake()
            for case in CASES:
                try:
                    with trio.fail_after(LIMIT):
                        first = await client.next_prompt()
                        # Hostile input while the client's prompt is pending.
                        await client.peer.send_bytes(
                            case.data(lambda i: valid_request("client", i))
                        )
                        await expect_replies(client.peer, case.replies)
                        await client.answer_prompt(first, "alive", "and well")
                        await client.assert_serves_requests()
                        await client.answer_prompt(await client.next_prompt(), "second turn")
                        # Nothing read meanwhile (its next prompt follows at once).
                        assert client.peer.queued == [], client.peer.queued
                except BaseException as exc:
                    _named(case, exc)
                    raise
            await client.finish()
            await nothing_else(client.peer, exited=True)
