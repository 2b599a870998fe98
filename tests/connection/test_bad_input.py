"""Everything a peer (or a handler) can get wrong, and the exact answer to it.
After each bad input the connection still works."""

from __future__ import annotations

import logging
import math
from typing import Any

import pytest
import trio

from acp_trio import (
    LocalProtocolError,
    MessageTooLarge,
    RemoteProtocolError,
    RequestError,
)
from acp_trio.lowlevel import RequestContext

from .conftest import (
    LIMIT,
    FnHandler,
    assert_idle,
    echo_handler,
    err,
    line,
    notif,
    ok,
    raw_connection,
    req,
    settle,
    still_works,
)


def echo() -> FnHandler:
    return FnHandler({"echo": echo_handler})


def error_of(msg: dict[str, Any]) -> tuple[Any, int, str]:
    assert set(msg) == {"jsonrpc", "id", "error"}, msg
    assert msg["jsonrpc"] == "2.0"
    return msg["id"], msg["error"]["code"], msg["error"]["message"]


@pytest.mark.parametrize(
    "data",
    [
        b"{not json",
        b'{"jsonrpc":"2.0","id":1,"method":"echo"',
        b'{"jsonrpc":"2.0","id":1,"method":"echo","params":NaN}',
        b'{"jsonrpc":"2.0","id":1,"method":"\xff\xfe"}',  # invalid UTF-8
        b"\xc3\x28",
    ],
)
async def test_unparsable_frames_get_parse_error_with_null_id(
    autojump_clock: Any, data: bytes
) -> None:
    with trio.fail_after(LIMIT):
        async with raw_connection(echo()) as (conn, peer, _):
            await peer.send(line(data))
            assert error_of(await peer.receive()) == (None, -32700, "Parse error")
            await still_works(peer)
            assert_idle(conn)


@pytest.mark.parametrize(
    "data",
    [
        b'[{"jsonrpc":"2.0","id":1,"method":"echo"}]',  # a batch
        b"[]",
        b"1",
        b'"text"',
        b"null",
        b"true",
        b'{"jsonrpc":"2.0"}',
        b'{"jsonrpc":"2.0","id":{"a":1},"method":"echo"}',
    ],
)
async def test_non_messages_get_invalid_request_with_null_id(
    autojump_clock: Any, data: bytes
) -> None:
    with trio.fail_after(LIMIT):
        async with raw_connection(echo()) as (conn, peer, wire):
            await peer.send(line(data))
            assert error_of(await peer.receive()) == (None, -32600, "Invalid request")
            await peer.expect_silence(5)  # the batch's request was not run
            await still_works(peer)
            assert len(wire.sent()) == 2
            assert_idle(conn)


@pytest.mark.parametrize(
    "message",
    [
        {"jsonrpc": "1.0", "id": 7, "method": "echo"},
        {"id": 7, "method": "echo"},
        {"jsonrpc": "2.0", "id": 7, "method": "echo", "params": "text"},
        {"jsonrpc": "2.0", "id": 7, "method": "echo", "params": 3},
    ],
)
async def test_invalid_request_is_answered_with_its_id(
    autojump_clock: Any, message: dict[str, Any]
) -> None:
    with trio.fail_after(LIMIT):
        async with raw_connection(echo()) as (conn, peer, _):
            await peer.send(message)
            assert error_of(await peer.receive()) == (7, -32600, "Invalid request")
            await peer.expect_silence(5)
            await still_works(peer, 7)
            assert_idle(conn)


async def test_response_with_unknown_id_is_dropped(
    autojump_clock: Any, caplog: pytest.LogCaptureFixture
) -> None:
    with trio.fail_after(LIMIT):
        async with raw_connection(echo()) as (conn, peer, _), trio.open_nursery() as nursery:
            results: list[Any] = []

            async def caller() -> None:
                results.append(await conn.call("get"))

            nursery.start_soon(caller)
            assert await peer.receive() == req(0, "get")
            # "0" is not 0; 99 is nobody; an error reply for nobody either.
            await peer.send(ok("0", "wrong"), ok(99, "wrong"), err(98, 1, "x"))
            await peer.expect_silence(5)
            assert results == []
            assert conn.statistics().outgoing_pending == 1
            await peer.send(ok(0, "right"))
            await settle()
            assert results == ["right"]
            await still_works(peer)
            assert_idle(conn)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 3, warnings


@pytest.mark.parametrize(
    "reply",
    [
        {"jsonrpc": "2.0", "id": 0, "result": 1, "error": {"code": 1, "message": "x"}},
        {"jsonrpc": "2.0", "id": 0, "error": {"code": "1", "message": "x"}},
        {"jsonrpc": "2.0", "id": 0, "error": "bad"},
        {"jsonrpc": "1.0", "id": 0, "result": 1},
    ],
)
async def test_malformed_response_fails_the_pending_call(
    autojump_clock: Any, reply: dict[str, Any]
) -> None:
    with trio.fail_after(LIMIT):
        async with raw_connection(echo()) as (conn, peer, wire), trio.open_nursery() as nursery:
            errors: list[BaseException] = []

            async def caller() -> None:
                try:
                    await conn.call("get")
                except RemoteProtocolError as exc:
                    errors.append(exc)

            nursery.start_soon(caller)
            assert await peer.receive() == req(0, "get")
            await peer.send(reply)
            await settle()
            assert len(errors) == 1
            assert type(errors[0]) is RemoteProtocolError
            assert conn.statistics().outgoing_pending == 0
            # A reply to it arriving later is not a reply to anything.
            await peer.send(ok(0, "late"))
            await still_works(peer)
            # A reply is never answered, not even a malformed one.
            assert wire.sent() == [req(0, "get"), ok("check", {"still": "works"})]
            assert_idle(conn)


async def test_message_over_max_message_size(autojump_clock: Any) -> None:
    big = "x" * 500
    with trio.fail_after(LIMIT):
        async with raw_connection(echo(), max_message_size=200) as (conn, peer, wire):
            # A request: an error reply to its id; the handler never runs.
            request = req(5, "echo", {"data": big})
            size = len(line(request)) - 1
            await peer.send(request)
            assert await peer.receive() == err(
                5, -32600, "Request too large", {"size": size, "limit": 200}
            )
            # A notification: nothing.
            await peer.send(notif("echo", {"data": big}))
            await peer.expect_silence(5)
            # A response: its pending call fails with MessageTooLarge.
            async with trio.open_nursery() as nursery:
                errors: list[MessageTooLarge] = []

                async def caller() -> None:
                    try:
                        await conn.call("get")
                    except MessageTooLarge as exc:
                        errors.append(exc)

                nursery.start_soon(caller)
                assert await peer.receive() == req(0, "get")
                await peer.send(ok(0, big))
            assert len(errors) == 1
            assert (errors[0].size, errors[0].limit) == (len(line(ok(0, big))) - 1, 200)
            # The frame split over many writes is refused the same way.
            data = line(req(6, "echo", {"data": big}))
            for i in range(0, len(data), 7):
                await peer.send_bytes(data[i : i + 7])
            assert await peer.receive() == err(
                6, -32600, "Request too large", {"size": len(data) - 1, "limit": 200}
            )
            # A message of exactly the limit is fine.
            msg = req(8, "echo", {"d": ""})
            pad = 200 - (len(line(msg)) - 1)
            msg = req(8, "echo", {"d": "y" * pad})
            assert len(line(msg)) - 1 == 200
            await peer.send(msg)
            assert await peer.receive() == ok(8, {"d": "y" * pad})
            await still_works(peer)
            assert_idle(conn)
            # Oversized frames are not traced; everything else is.
            assert wire.received() == [msg, req("check", "echo", {"still": "works"})]


async def test_duplicate_in_flight_id_is_refused_and_the_first_still_answered(
    autojump_clock: Any,
) -> None:
    release = trio.Event()
    calls: list[Any] = []

    async def work(ctx: RequestContext, params: Any) -> Any:
        calls.append(params)
        await release.wait()
        return params

    with trio.fail_after(LIMIT):
        async with raw_connection(FnHandler({"work": work})) as (conn, peer, wire):
            await peer.send(req(1, "work", ["first"]), req(1, "work", ["second"]))
            assert error_of(await peer.receive()) == (1, -32600, "Invalid request")
            await peer.expect_silence(5)
            release.set()
            assert await peer.receive() == ok(1, ["first"])
            assert calls == [["first"]]
            assert [m["id"] for m in wire.sent_responses()] == [1, 1]
            # Once answered, the id may be used again.
            await peer.send(req(1, "work", ["third"]))
            assert await peer.receive() == ok(1, ["third"])
            assert_idle(conn)


async def test_unknown_method_and_unknown_notifications(autojump_clock: Any) -> None:
    handler = echo()
    with trio.fail_after(LIMIT):
        async with raw_connection(handler) as (conn, peer, wire):
            await peer.send(req(3, "nope", {"a": 1}))
            assert await peer.receive() == err(3, -32601, "Method not found", {"method": "nope"})
            await peer.send(notif("nope"), notif("$/foo", {"x": 1}), notif("$/progress"))
            await peer.expect_silence(5)
            assert handler.seen == [("nope", None), ("$/foo", {"x": 1}), ("$/progress", None)]
            assert len(wire.sent()) == 1
            assert_idle(conn)


async def test_default_handler_answers_everything_method_not_found(autojump_clock: Any) -> None:
    with trio.fail_after(LIMIT):
        async with raw_connection() as (conn, peer, _):
            await peer.send(req(1, "initialize", {}), notif("session/update", {}))
            assert await peer.receive() == err(
                1, -32601, "Method not found", {"method": "initialize"}
            )
            await peer.expect_silence(5)
            assert_idle(conn)


async def test_handler_errors(autojump_clock: Any, caplog: pytest.LogCaptureFixture) -> None:
    async def crash(ctx: RequestContext, params: Any) -> Any:
        raise KeyError("secret-detail")

    async def refuse(ctx: RequestContext, params: Any) -> Any:
        raise RequestError(-32042, "Custom refusal", {"why": ["a", 1, None]})

    async def refuse_null_data(ctx: RequestContext, params: Any) -> Any:
        raise RequestError(-32000, "Auth", None)

    async def refuse_in_group(ctx: RequestContext, params: Any) -> Any:
        async with trio.open_nursery() as nursery:

            async def fail() -> None:
                raise RequestError.invalid_params({"field": "x"})

            nursery.start_soon(fail)

    async def not_json(ctx: RequestContext, params: Any) -> Any:
        return {"value": object()}

    async def nan(ctx: RequestContext, params: Any) -> Any:
        return [math.nan]

    handler = FnHandler(
        {
            "crash": crash,
            "refuse": refuse,
            "null": refuse_null_data,
            "group": refuse_in_group,
            "object": not_json,
            "nan": nan,
            "echo": echo_handler,
        }
    )
    with trio.fail_after(LIMIT):
        async with raw_connection(handler) as (conn, peer, wire):
            await peer.send(req(1, "crash"))
            assert await peer.receive() == err(1, -32603, "Internal error")
            await peer.send(req(2, "refuse"))
            assert await peer.receive() == err(2, -32042, "Custom refusal", {"why": ["a", 1, None]})
            await peer.send(req(3, "null"))
            assert await peer.receive() == err(3, -32000, "Auth", None)
            await peer.send(req(4, "group"))
            assert await peer.receive() == err(4, -32602, "Invalid params", {"field": "x"})
            await peer.send(req(5, "object"))
            assert await peer.receive() == err(5, -32603, "Internal error", "result is not JSON")
            await peer.send(req(6, "nan"))
            assert await peer.receive() == err(6, -32603, "Internal error", "result is not JSON")
            await still_works(peer)
            assert_idle(conn)
            for _, frame in wire.frames:
                assert "secret-detail" not in str(frame)
                assert "Traceback" not in str(frame)
    # The traceback goes to the log instead.
    assert any("secret-detail" in str(r.exc_info) for r in caplog.records if r.exc_info)


async def test_circular_result_is_an_internal_error(autojump_clock: Any) -> None:
    async def circular(ctx: RequestContext, params: Any) -> Any:
        d: dict[str, Any] = {}
        d["self"] = d
        return d

    handler = FnHandler({"circular": circular, "echo": echo_handler})
    with trio.fail_after(LIMIT):
        async with raw_connection(handler) as (conn, peer, _):
            await peer.send(req(1, "circular"))
            assert await peer.receive() == err(1, -32603, "Internal error", "result is not JSON")
            await still_works(peer)
            assert_idle(conn)


@pytest.mark.parametrize("kind", ["object", "nan", "circular"])
async def test_unencodable_outgoing_message_is_a_local_protocol_error(
    autojump_clock: Any, kind: str
) -> None:
    value: Any
    if kind == "object":
        value = {"x": object()}
    elif kind == "nan":
        value = [math.inf]
    else:
        value = []
        value.append(value)
    with trio.fail_after(LIMIT):
        async with raw_connection(echo()) as (conn, peer, wire):
            with pytest.raises(LocalProtocolError):
                await conn.call("m", value)
            with pytest.raises(LocalProtocolError):
                await conn.notify("m", value)
            with pytest.raises(LocalProtocolError):
                async with conn.open_request("m", value):
                    pass  # pragma: no cover
            await peer.expect_silence(5)
            assert wire.sent() == []
            assert_idle(conn)
            await still_works(peer)


async def test_errors_in_notification_handlers_are_logged_not_fatal(
    autojump_clock: Any, caplog: pytest.LogCaptureFixture
) -> None:
    async def boom(method: str, params: Any) -> None:
        raise RuntimeError("note failed")

    handler = FnHandler({"echo": echo_handler}, {"boom": boom})
    with trio.fail_after(LIMIT):
        async with raw_connection(handler) as (conn, peer, wire):
            await peer.send(notif("boom"), notif("boom"))
            await peer.expect_silence(5)
            await still_works(peer)
            assert len(wire.sent()) == 1
            assert conn.statistics().notifications_handled == 2
    assert sum("boom" in r.getMessage() for r in caplog.records if r.levelno == logging.ERROR) == 2


@pytest.mark.parametrize(
    "response",
    [
        # Codex's adapter answers our notifications like this.
        {"jsonrpc": "2.0", "error": {"code": -32601, "message": "Method not found"}},
        {"jsonrpc": "2.0", "result": None},
        {"jsonrpc": "2.0", "id": 1.5, "result": 1},
        {"jsonrpc": "2.0", "id": [1], "error": {"code": 1, "message": "x"}},
        {"jsonrpc": "1.0", "error": {"code": 1, "message": "x"}},
        {"error": "broken"},
    ],
    ids=["no-id-error", "no-id-result", "float-id", "list-id", "wrong-version", "bare"],
)
async def test_a_response_without_a_usable_id_is_never_answered(
    autojump_clock: Any, response: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    with trio.fail_after(LIMIT):
        async with raw_connection(echo()) as (conn, peer, wire):
            for _ in range(3):
                await peer.send(response)
            await peer.expect_silence(5)
            await still_works(peer)
            assert wire.sent() == [ok("check", {"still": "works"})]
            assert_idle(conn)
    # Logged once (the first, quoting the line), not once per message.
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1, warnings
    assert "not answered" in warnings[0]
    assert '"jsonrpc"' in warnings[0] or '"error"' in warnings[0]


async def test_the_logged_line_of_a_bad_response_is_cut_short(
    autojump_clock: Any, caplog: pytest.LogCaptureFixture
) -> None:
    response = {"jsonrpc": "2.0", "error": {"code": 1, "message": "x" * 5000}}
    with trio.fail_after(LIMIT):
        async with raw_connection(echo()) as (_, peer, _):
            await peer.send(response)
            await still_works(peer)
    (warning,) = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warning) < 600
    assert f"({len(line(response)) - 1} bytes)" in warning


@pytest.mark.parametrize("where", ["first", "last", "before-the-last", "unknown"])
async def test_an_oversized_request_is_answered_wherever_its_id_is(
    autojump_clock: Any, where: str
) -> None:
    """The id is read from the head or from the members after the big value;
    a message that shows neither what it is nor its id is answered with
    ``id: null``. (The limit is beyond what the head of a dropped line
    holds.)"""
    big = b"x" * 300_000
    frames = {
        "first": b'{"jsonrpc":"2.0","id":7,"method":"echo","params":{"d":"%s"}}',
        "last": b'{"jsonrpc":"2.0","method":"echo","params":{"d":"%s"},"id":7}',
        "before-the-last": b'{"jsonrpc":"2.0","method":"echo","params":{"d":"%s"},"id":7,"x":{}}',
        "unknown": b'{"params":{"d":"%s"},"jsonrpc":"2.0"}',
    }
    frame = frames[where] % big
    with trio.fail_after(LIMIT):
        async with raw_connection(echo(), max_message_size=100_000) as (conn, peer, _):
            await peer.send(line(frame))
            expected_id = None if where == "unknown" else 7
            assert await peer.receive() == err(
                expected_id, -32600, "Request too large", {"size": len(frame), "limit": 100_000}
            )
            await still_works(peer)
            assert_idle(conn)


async def test_an_oversized_notification_is_not_answered(autojump_clock: Any) -> None:
    """``method`` and no ``id`` before or after the one big value: a
    notification, which is never answered (only an id between two values
    too big to keep could hide; that one goes unanswered too)."""
    big = b"x" * 300_000
    with trio.fail_after(LIMIT):
        async with raw_connection(echo(), max_message_size=100_000) as (conn, peer, wire):
            await peer.send(
                line(b'{"jsonrpc":"2.0","method":"session/update","params":{"d":"%s"}}' % big),
                line(b'{"method":"session/cancel","pad":"%s","jsonrpc":"2.0"}' % big),
            )
            await peer.expect_silence(5)
            await still_works(peer)
            assert wire.sent() == [ok("check", {"still": "works"})]
            assert_idle(conn)


async def test_an_oversized_reply_with_its_id_last_fails_its_call_unanswered(
    autojump_clock: Any,
) -> None:
    big = "x" * 300_000
    with trio.fail_after(LIMIT):
        async with raw_connection(echo(), max_message_size=100_000) as (conn, peer, wire):
            async with trio.open_nursery() as nursery:

                async def answer() -> None:
                    assert await peer.receive() == req(0, "get")
                    await peer.send(line(b'{"jsonrpc":"2.0","result":"%s","id":0}' % big.encode()))

                nursery.start_soon(answer)
                with pytest.raises(MessageTooLarge):
                    await conn.call("get")
            await still_works(peer)
            assert wire.sent() == [req(0, "get"), ok("check", {"still": "works"})]
            assert_idle(conn)
