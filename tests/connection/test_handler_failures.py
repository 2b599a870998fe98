"""What a handler's failure turns into: exactly one reply, and a connection
that carries on.

- A handler that fails *while it is being cancelled* (a child task raising as
  the cancel reaches it) ends with a group of ``Cancelled`` and that error.
  The request is answered ``-32800``, the error is logged, and nothing
  escapes into the connection: every other request goes on.
- A ``RequestError`` that is the peer's answer to a nested call, left
  uncaught, is not passed on with the peer's code (``-32601`` from the nested
  call would say that *this* method does not exist): the reply is ``-32603``
  naming the nested method and its error.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
import trio

from acp_trio import RequestError
from acp_trio.lowlevel import RequestContext, open_connection

from .conftest import (
    LIMIT,
    FnHandler,
    StreamPair,
    both_streams,
    cancel,
    cancelled,
    echo_handler,
    err,
    ok,
    raw_connection,
    req,
    settle,
    still_works,
)


async def fails_when_cancelled(ctx: RequestContext, params: Any) -> Any:
    """A handler whose child task raises as the cancel reaches it."""

    async def child() -> None:
        try:
            await trio.sleep_forever()
        finally:
            raise ValueError("clean-up failed")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(child)
        await trio.sleep_forever()


def handler() -> FnHandler:
    return FnHandler({"fragile": fails_when_cancelled, "echo": echo_handler, "slow": slow_handler})


async def slow_handler(ctx: RequestContext, params: Any) -> Any:
    await trio.sleep(params[0])
    return "slow"


def logged_failures(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]


@both_streams
@pytest.mark.parametrize("eager", [True, False], ids=["eager", "tasks"])
async def test_a_handler_failing_as_the_peer_cancels_it_is_answered_32800(
    autojump_clock: Any, stream_pair: StreamPair, eager: bool, caplog: pytest.LogCaptureFixture
) -> None:
    with trio.fail_after(LIMIT):
        async with raw_connection(
            handler(), stream_pair=stream_pair, eager_handlers=eager, callers_read_replies=eager
        ) as (conn, peer, _):
            await peer.send(req("other", "slow", [10]), req(1, "fragile"))
            await settle()
            await peer.send(cancel(1))
            assert await peer.receive() == cancelled(1)
            # The connection and the other request carry on.
            await still_works(peer)
            assert await peer.receive() == ok("other", "slow")
            assert trio.current_time() == 10
            assert not conn.closed
    assert logged_failures(caplog) == ["handler for fragile (id 1) failed while being cancelled"]


@pytest.mark.parametrize("eager", [True, False], ids=["eager", "tasks"])
async def test_a_handler_failing_at_its_deadline_is_answered_32800(
    autojump_clock: Any, eager: bool, caplog: pytest.LogCaptureFixture
) -> None:
    with trio.fail_after(LIMIT):
        async with raw_connection(handler(), eager_handlers=eager, request_timeout=5) as (
            conn,
            peer,
            _,
        ):
            await peer.send(req(1, "fragile"), req(2, "fragile"))
            assert {
                (m["id"], m["error"]["code"]) for m in [await peer.receive() for _ in range(2)]
            } == {
                (1, -32800),
                (2, -32800),
            }
            assert trio.current_time() == 5
            await still_works(peer)
            assert not conn.closed
    assert len(logged_failures(caplog)) == 2


@pytest.mark.parametrize("eager", [True, False], ids=["eager", "tasks"])
async def test_handlers_failing_as_the_connection_closes_do_not_escape(
    autojump_clock: Any, eager: bool, caplog: pytest.LogCaptureFixture
) -> None:
    with trio.fail_after(LIMIT):
        # Closed locally: open_connection's block ends without an error.
        async with raw_connection(handler(), eager_handlers=eager) as (conn, peer, wire):
            await peer.send(req(1, "fragile"), req(2, "fragile"))
            await settle()
        assert sorted(m["id"] for m in wire.sent_responses()) == [1, 2]
        assert {m["error"]["code"] for m in wire.sent_responses()} == {-32800}
        # Closed by the peer: the same.
        async with raw_connection(handler(), eager_handlers=eager) as (conn, peer, wire):
            await peer.send(req(3, "fragile"))
            await settle()
            await peer.close_send()
            assert await peer.receive() == cancelled(3)
            await conn.wait_closed()
    assert len(logged_failures(caplog)) == 3


async def test_a_failing_handler_does_not_end_a_connection_pair(autojump_clock: Any) -> None:
    """Both sides acp_trio: the caller's deadline cancels the call on the
    wire; the callee's handler fails as it is cancelled; both go on."""
    sa, sb = trio.testing.memory_stream_pair()
    with trio.fail_after(LIMIT):
        async with (
            open_connection(sa) as a,
            open_connection(sb, handler()) as b,
        ):
            for _ in range(3):
                with trio.move_on_after(1):
                    await a.call("fragile")
            assert await a.call("echo", ["alive"]) == ["alive"]
            assert not a.closed
            assert not b.closed


# Errors of nested calls


async def test_an_uncaught_error_of_a_nested_call_becomes_32603_naming_it(
    autojump_clock: Any, caplog: pytest.LogCaptureFixture
) -> None:
    async def prompt(ctx: RequestContext, params: Any) -> Any:
        # Lets the peer's error through, as a handler that forgot a try does.
        return await ctx.connection.call("session/request_permission")

    async def own(ctx: RequestContext, params: Any) -> Any:
        raise RequestError(-32602, "bad params", {"field": "x"})

    async def passes_it_on(ctx: RequestContext, params: Any) -> Any:
        try:
            return await ctx.connection.call("fs/read_text_file")
        except RequestError as exc:
            # Deliberately the peer's error, as it is.
            raise exc.passed_on() from exc

    handlers = FnHandler({"prompt": prompt, "own": own, "passes": passes_it_on})
    with trio.fail_after(LIMIT):
        async with raw_connection(handlers) as (_, peer, _):
            await peer.send(req(1, "prompt"))
            assert await peer.receive() == req(0, "session/request_permission")
            await peer.send(err(0, -32601, "Method not found", {"method": "x"}))
            assert await peer.receive() == err(
                1,
                -32603,
                "Internal error: session/request_permission failed: Method not found",
                {
                    "method": "session/request_permission",
                    "error": {
                        "code": -32601,
                        "message": "Method not found",
                        "data": {"method": "x"},
                    },
                },
            )
            # A RequestError the handler raises itself keeps its code...
            await peer.send(req(2, "own"))
            assert await peer.receive() == err(2, -32602, "bad params", {"field": "x"})
            # ... and so does a new one made from the peer's.
            await peer.send(req(3, "passes"))
            assert await peer.receive() == req(1, "fs/read_text_file")
            await peer.send(err(1, -32002, "Resource not found"))
            assert await peer.receive() == err(3, -32002, "Resource not found")
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "session/request_permission" in warnings[0]


async def test_a_nested_error_inside_a_group_is_named_too(autojump_clock: Any) -> None:
    async def fan_out(ctx: RequestContext, params: Any) -> Any:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(ctx.connection.call, "fs/read_text_file")
        return "never"

    with trio.fail_after(LIMIT):
        async with raw_connection(FnHandler({"fan": fan_out})) as (_, peer, _):
            await peer.send(req(1, "fan"))
            assert await peer.receive() == req(0, "fs/read_text_file")
            await peer.send(err(0, -32601, "Method not found"))
            reply = await peer.receive()
            assert reply["error"]["code"] == -32603
            assert reply["error"]["data"]["method"] == "fs/read_text_file"


async def test_the_nested_method_is_on_the_error_a_caller_sees(autojump_clock: Any) -> None:
    with trio.fail_after(LIMIT):
        async with raw_connection(FnHandler()) as (conn, peer, _):
            async with trio.open_nursery() as nursery:

                async def answer() -> None:
                    assert await peer.receive() == req(0, "terminal/create")
                    await peer.send(err(0, -32000, "Authentication required"))

                nursery.start_soon(answer)
                with pytest.raises(RequestError) as info:
                    await conn.call("terminal/create")
            assert info.value.code == -32000
            assert info.value.reply_to == "terminal/create"
            assert RequestError(-32000).reply_to is None
