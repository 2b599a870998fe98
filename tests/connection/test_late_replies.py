"""The frames of a cancel, byte for byte, and what becomes of the answers
that come after it.

A cancelled call sends ``$/cancel_request`` and its handler-side twin
answers ``-32800``; both are written from templates, so these tests compare
the bytes with what the JSON encoder makes of the same messages. The peer's
late answer to a request we gave up on is dropped quietly when it is a valid
reply, and still warned about when it is malformed.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
import trio
import trio.testing

from acp_trio import LocalProtocolError
from acp_trio.lowlevel import RequestContext

from .conftest import (
    LIMIT,
    FnHandler,
    ScriptedPeer,
    StreamPair,
    assert_idle,
    both_streams,
    cancel,
    echo_handler,
    err,
    give_up_on_a_call,
    line,
    ok,
    raw_connection,
    req,
    settle,
    still_works,
)


async def raw_frame(peer: ScriptedPeer) -> bytes:
    return await peer.receive_line() + b"\n"


async def hang(ctx: RequestContext, params: Any) -> Any:
    await trio.sleep_forever()


@both_streams
@pytest.mark.parametrize("request_id", [0, 7, -3, 2**64, "s-1", ""])
async def test_a_cancelled_handler_answers_exactly_the_encoded_32800(
    autojump_clock: Any, stream_pair: StreamPair, request_id: Any
) -> None:
    handler = FnHandler({"hang": hang, "echo": echo_handler})
    with trio.fail_after(LIMIT):
        async with raw_connection(handler, stream_pair=stream_pair) as (conn, peer, _):
            await peer.send(req(request_id, "hang"))
            await settle()
            await peer.send(cancel(request_id))
            expected = err(request_id, -32800, "Request cancelled")
            assert await raw_frame(peer) == line(expected)
            await still_works(peer)
            assert_idle(conn)


@both_streams
async def test_a_cancelled_call_sends_exactly_the_encoded_cancel(
    autojump_clock: Any, stream_pair: StreamPair
) -> None:
    with trio.fail_after(LIMIT):
        async with raw_connection(stream_pair=stream_pair) as (conn, peer, _):
            for request_id in range(12):
                with trio.move_on_after(1):
                    await conn.call("slow")
                assert await peer.receive() == req(request_id, "slow")
                assert await raw_frame(peer) == line(cancel(request_id))
                await peer.send(err(request_id, -32800, "Request cancelled"))
            await settle()
            assert_idle(conn)


@both_streams
@pytest.mark.parametrize(
    "late",
    [
        err(0, -32800, "Request cancelled"),
        err(0, -32800, "Request cancelled", {"partial": True}),
        err(0, 1234, "something else"),
        ok(0, {"partial": "result"}),
    ],
    ids=["cancelled", "cancelled-with-data", "other-error", "result"],
)
async def test_a_valid_late_answer_is_dropped_quietly(
    autojump_clock: Any,
    stream_pair: StreamPair,
    late: dict[str, Any],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="acp_trio.connection")
    with trio.fail_after(LIMIT):
        async with raw_connection(FnHandler({"echo": echo_handler}), stream_pair=stream_pair) as (
            conn,
            peer,
            _,
        ):
            await give_up_on_a_call(conn, peer)
            await peer.send(late, late)  # late, then repeated
            await peer.expect_silence(5)
            await still_works(peer)
            assert_idle(conn)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    dropped = [r.getMessage() for r in caplog.records if "late or repeated" in r.getMessage()]
    assert dropped == ["dropping late or repeated reply to request 0"] * 2


@both_streams
@pytest.mark.parametrize(
    "late",
    [
        {"jsonrpc": "2.0", "id": 0, "error": {"code": "-32800", "message": "x"}},
        {"jsonrpc": "2.0", "id": 0, "error": {"code": -32800}},
        {"jsonrpc": "2.0", "id": 0, "error": "cancelled"},
        {"jsonrpc": "1.0", "id": 0, "error": {"code": -32800, "message": "x"}},
        {"jsonrpc": "2.0", "id": 0, "error": {"code": -32800, "message": "x"}, "result": 1},
    ],
    ids=["code-not-int", "no-message", "error-not-object", "wrong-version", "both"],
)
async def test_a_malformed_late_answer_is_still_warned_about(
    autojump_clock: Any,
    stream_pair: StreamPair,
    late: dict[str, Any],
    caplog: pytest.LogCaptureFixture,
) -> None:
    with trio.fail_after(LIMIT):
        async with raw_connection(FnHandler({"echo": echo_handler}), stream_pair=stream_pair) as (
            conn,
            peer,
            _,
        ):
            await give_up_on_a_call(conn, peer)
            await peer.send(late)
            await peer.expect_silence(5)  # (no reply to a reply)
            await still_works(peer)
            assert_idle(conn)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, warnings
    assert "invalid response" in warnings[0]
    assert "not answered" in warnings[0]


@both_streams
async def test_an_error_answer_to_a_live_call_still_reaches_it(
    autojump_clock: Any, stream_pair: StreamPair
) -> None:
    """The quiet path is for ids we gave up on only: an error for a pending
    call goes the usual way."""
    with trio.fail_after(LIMIT):
        async with raw_connection(stream_pair=stream_pair) as (conn, peer, _):
            with trio.move_on_after(1):
                await conn.call("first")
            assert await peer.receive() == req(0, "first")
            assert await peer.receive() == cancel(0)
            async with trio.open_nursery() as nursery:
                errors: list[Any] = []

                async def second() -> None:
                    try:
                        await conn.call("second")
                    except Exception as exc:
                        errors.append(exc)

                nursery.start_soon(second)
                assert await peer.receive() == req(1, "second")
                await peer.send(err(0, -32800, "Request cancelled"), err(1, -32800, "cut short"))
            (error,) = errors
            assert error.code == -32800
            assert error.message == "cut short"
            assert_idle(conn)


async def test_an_abandoned_request_raises_a_fresh_error_each_time(autojump_clock: Any) -> None:
    with trio.fail_after(LIMIT):
        async with raw_connection() as (conn, peer, _):
            seen: list[BaseException] = []
            for name in ("one", "two"):
                async with conn.open_request(name) as pending:
                    await peer.receive()
                for _ in range(2):
                    with pytest.raises(LocalProtocolError, match="abandoned") as info:
                        await pending.result()
                    seen.append(info.value)
            assert len({id(e) for e in seen}) == 4
            # No traceback collected across raises.
            assert all(len(list(_frames(e.__traceback__))) < 10 for e in seen)


def _frames(tb: Any) -> Any:
    while tb is not None:
        yield tb
        tb = tb.tb_next


@both_streams
@pytest.mark.parametrize(
    "late",
    [
        err(0, -32800, "Request cancelled"),  # acp_trio's own bytes: matched, not decoded
        err(0, -32800, "cut short", {"partial": True}),
        {"error": {"message": "x", "code": 7}, "id": 0, "jsonrpc": "2.0"},  # any key order
    ],
    ids=["template", "other-error", "reordered"],
)
async def test_a_valid_late_error_is_dropped_quietly(
    autojump_clock: Any,
    stream_pair: StreamPair,
    late: dict[str, Any],
    caplog: pytest.LogCaptureFixture,
) -> None:
    with trio.fail_after(LIMIT):
        async with raw_connection(FnHandler({"echo": echo_handler}), stream_pair=stream_pair) as (
            conn,
            peer,
            _,
        ):
            await give_up_on_a_call(conn, peer)
            await peer.send(late)
            await peer.expect_silence(5)
            await still_works(peer)
            assert_idle(conn)
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []


@both_streams
@pytest.mark.parametrize("request_id", [1, 99, "0", -1])
async def test_an_error_for_an_id_never_issued_is_warned_about(
    autojump_clock: Any,
    stream_pair: StreamPair,
    request_id: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Only ids we issued and gave up on are dropped quietly: an error reply
    to any other id (one not issued yet, a string, a negative number) is
    warned about, even right after a cancel."""
    with trio.fail_after(LIMIT):
        async with raw_connection(FnHandler({"echo": echo_handler}), stream_pair=stream_pair) as (
            conn,
            peer,
            _,
        ):
            await give_up_on_a_call(conn, peer)
            await peer.send(err(request_id, -32800, "Request cancelled"))
            await peer.expect_silence(5)
            await still_works(peer)
            assert_idle(conn)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [f"dropping reply to unknown request id {request_id!r}"]
