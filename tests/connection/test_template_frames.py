"""The reader's short cut for the two frames of a cancel cascade.

``$/cancel_request`` and the ``-32800`` reply, in the exact bytes acp_trio
writes, are taken without decoding; every other spelling of the same
messages goes the general way. These tests hold both ways to one outcome:
the same handler cancelled, the same late reply dropped quietly, the same
warning for a reply nobody asked for, the same frame seen by ``trace``.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

from acp_trio._jsonrpc import (
    TEMPLATE_FRAME_MAX,
    cancel_request_frame,
    cancelled_reply_frame,
    match_cancel_request,
    match_cancelled_reply,
)
from acp_trio.lowlevel import RequestContext

from .conftest import (
    LIMIT,
    FnHandler,
    StreamPair,
    assert_idle,
    both_streams,
    echo_handler,
    give_up_on_a_call,
    ok,
    raw_connection,
    req,
    settle,
    still_works,
)

CANCEL_HEAD = b'{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":'
REPLY_HEAD = b'{"jsonrpc":"2.0","id":'
REPLY_TAIL = b',"error":{"code":-32800,"message":"Request cancelled"}}'


def cancel_spellings(request_id: int) -> dict[str, bytes]:
    """The same cancel, written several ways; only the first is the template."""
    return {
        "template": b"%s%d}}" % (CANCEL_HEAD, request_id),
        "spaces": b'{"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": %d}}'
        % request_id,
        "reordered": b'{"method":"$/cancel_request","params":{"requestId":%d},"jsonrpc":"2.0"}'
        % request_id,
        "extra-param": (
            b'{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":%d,"why":"x"}}'
            % request_id
        ),
    }


def reply_spellings(request_id: int) -> dict[str, bytes]:
    return {
        "template": b"%s%d%s" % (REPLY_HEAD, request_id, REPLY_TAIL),
        "spaces": b'{"jsonrpc": "2.0", "id": %d, "error": {"code": -32800, "message": '
        b'"Request cancelled"}}' % request_id,
        "other-message": b'{"jsonrpc":"2.0","id":%d,"error":{"code":-32800,"message":"stop"}}'
        % request_id,
        "with-data": b'{"jsonrpc":"2.0","id":%d,"error":{"code":-32800,"message":'
        b'"Request cancelled","data":{"partial":true}}}' % request_id,
    }


# ---------------------------------------------------------------------------
# The matchers, sans IO


@pytest.mark.parametrize("request_id", [0, 1, 9, 10, 12345, 10**15 - 1])
def test_the_templates_read_back_their_own_ids(request_id: int) -> None:
    cancel = cancel_request_frame(request_id)
    reply = cancelled_reply_frame(request_id)
    assert cancel.endswith(b"\n")
    assert reply.endswith(b"\n")
    assert match_cancel_request(cancel[:-1]) == request_id
    assert match_cancelled_reply(reply[:-1]) == request_id
    assert len(cancel) - 1 <= TEMPLATE_FRAME_MAX
    assert len(reply) - 1 <= TEMPLATE_FRAME_MAX
    # And neither is taken for the other.
    assert match_cancel_request(reply[:-1]) is None
    assert match_cancelled_reply(cancel[:-1]) is None


@pytest.mark.parametrize(
    "digits",
    [
        b"",
        b"-1",
        b"01",
        b"00",
        b"1.0",
        b"1e3",
        b" 1",
        b"1 ",
        b"+1",
        b"1" * 16,
        b'"1"',
        b"null",
        b"true",
        b"\xd9\xa1",  # ARABIC-INDIC DIGIT ONE, in UTF-8: not an ASCII digit
        b'1},"x":{"y":2',
    ],
)
def test_anything_but_a_plain_short_integer_goes_the_general_way(digits: bytes) -> None:
    assert match_cancel_request(CANCEL_HEAD + digits + b"}}") is None
    assert match_cancelled_reply(REPLY_HEAD + digits + REPLY_TAIL) is None


@pytest.mark.parametrize("request_id", [3, 10**15 - 1])
def test_near_misses_of_the_template_are_not_taken(request_id: int) -> None:
    cancel = cancel_request_frame(request_id)[:-1]
    reply = cancelled_reply_frame(request_id)[:-1]
    for frame, match in ((cancel, match_cancel_request), (reply, match_cancelled_reply)):
        assert match(frame + b"\n") is None  # the reader strips the newline first
        assert match(frame + b" ") is None
        assert match(b" " + frame) is None
        assert match(frame[:-1]) is None
        assert match(frame.replace(b'"2.0"', b'"1.0"')) is None
    assert match_cancel_request(cancel.replace(b"requestId", b"requestID")) is None
    assert match_cancelled_reply(reply.replace(b"-32800", b"-32801")) is None


@given(
    st.one_of(
        st.binary(max_size=120),
        # Near-numbers, where a loose matcher would slip.
        st.text(alphabet="0123456789-+.eE }", max_size=20).map(str.encode),
    )
)
def test_any_bytes_matched_are_the_message_they_claim(data: bytes) -> None:
    for frame in (data, CANCEL_HEAD + data + b"}}", REPLY_HEAD + data + REPLY_TAIL):
        target = match_cancel_request(frame)
        if target is not None:
            assert json.loads(frame) == {
                "jsonrpc": "2.0",
                "method": "$/cancel_request",
                "params": {"requestId": target},
            }
        reply_id = match_cancelled_reply(frame)
        if reply_id is not None:
            assert json.loads(frame) == {
                "jsonrpc": "2.0",
                "id": reply_id,
                "error": {"code": -32800, "message": "Request cancelled"},
            }


@given(st.integers(min_value=0, max_value=10**15 - 1))
def test_every_id_the_templates_can_hold_reads_back(request_id: int) -> None:
    assert match_cancel_request(cancel_request_frame(request_id)[:-1]) == request_id
    assert match_cancelled_reply(cancelled_reply_frame(request_id)[:-1]) == request_id


# ---------------------------------------------------------------------------
# Through a connection: both ways, one outcome


async def hang(ctx: RequestContext, params: Any) -> Any:
    await trio.sleep_forever()


@both_streams
@pytest.mark.parametrize("spelling", list(cancel_spellings(0)))
@pytest.mark.parametrize("request_id", [0, 7, 10**15 - 1, 10**15])
async def test_every_spelling_of_a_cancel_cancels_the_handler(
    autojump_clock: Any, stream_pair: StreamPair, spelling: str, request_id: int
) -> None:
    handler = FnHandler({"hang": hang, "echo": echo_handler})
    with trio.fail_after(LIMIT):
        async with raw_connection(handler, stream_pair=stream_pair) as (conn, peer, wire):
            await peer.send(req(request_id, "hang"))
            await settle()
            frame = cancel_spellings(request_id)[spelling]
            await peer.send_bytes(frame + b"\n")
            reply = await peer.receive()
            assert reply["id"] == request_id
            assert reply["error"]["code"] == -32800
            await still_works(peer)
            assert_idle(conn)
    # The trace hook saw the cancel as it came, whichever way it was taken.
    assert json.loads(frame) in wire.received()


@both_streams
@pytest.mark.parametrize("spelling", list(cancel_spellings(0)))
async def test_every_spelling_of_a_cancel_for_nothing_running_is_ignored(
    autojump_clock: Any, stream_pair: StreamPair, spelling: str
) -> None:
    handler = FnHandler({"echo": echo_handler})
    with trio.fail_after(LIMIT):
        async with raw_connection(handler, stream_pair=stream_pair) as (conn, peer, _):
            await peer.send_bytes(cancel_spellings(41)[spelling] + b"\n")
            await peer.expect_silence(5)
            await peer.send(req(1, "echo", [1]))
            assert await peer.receive() == ok(1, [1])
            assert_idle(conn)


@both_streams
@pytest.mark.parametrize("spelling", list(reply_spellings(0)))
async def test_every_spelling_of_a_late_32800_is_dropped_quietly(
    autojump_clock: Any,
    stream_pair: StreamPair,
    spelling: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="acp_trio.connection")
    with trio.fail_after(LIMIT):
        async with raw_connection(FnHandler({"echo": echo_handler}), stream_pair=stream_pair) as (
            conn,
            peer,
            wire,
        ):
            for request_id in range(3):
                await give_up_on_a_call(conn, peer, request_id)
            frames = [reply_spellings(i)[spelling] for i in range(3)]
            await peer.send_bytes(b"\n".join(frames) + b"\n")
            await peer.expect_silence(5)
            await still_works(peer)
            assert_idle(conn)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    dropped = [r.getMessage() for r in caplog.records if "late or repeated" in r.getMessage()]
    assert dropped == [f"dropping late or repeated reply to request {i}" for i in range(3)]
    assert [json.loads(f) for f in frames] == [m for m in wire.received() if "error" in m]


@both_streams
async def test_a_template_32800_to_a_live_call_reaches_it(
    autojump_clock: Any, stream_pair: StreamPair
) -> None:
    """The short cut drops only replies to ids we gave up on: the same bytes
    for a call still waiting are its answer."""
    with trio.fail_after(LIMIT):
        async with raw_connection(stream_pair=stream_pair) as (conn, peer, _):
            errors: list[Any] = []

            async def call() -> None:
                try:
                    await conn.call("work")
                except Exception as exc:
                    errors.append(exc)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(call)
                assert await peer.receive() == req(0, "work")
                await peer.send_bytes(cancelled_reply_frame(0))
            (error,) = errors
            assert (error.code, error.message) == (-32800, "Request cancelled")
            assert_idle(conn)


@both_streams
@pytest.mark.parametrize("request_id", [5, 10**15 - 1])
async def test_a_template_32800_to_an_id_never_issued_is_warned_about(
    autojump_clock: Any,
    stream_pair: StreamPair,
    request_id: int,
    caplog: pytest.LogCaptureFixture,
) -> None:
    with trio.fail_after(LIMIT):
        async with raw_connection(FnHandler({"echo": echo_handler}), stream_pair=stream_pair) as (
            conn,
            peer,
            _,
        ):
            await peer.send_bytes(cancelled_reply_frame(request_id))
            await peer.expect_silence(5)
            await peer.send(req(1, "echo", [1]))
            assert await peer.receive() == ok(1, [1])
            assert_idle(conn)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [f"dropping reply to unknown request id {request_id}"]
