"""Time bounds of the server (issue 47, cases 1 and 14): a head deadline and
a body progress deadline (a minimum rate after a grace period) of their
own, independent of keep-alive; on h2c the same per stream. Short limits
here (``ServerLimits``) so the tests are quick; the defaults are timed in
the attack tier (tests/attacks, make test-attacks)."""

from __future__ import annotations

import pytest
import trio

from acp_trio.remote import ServerLimits, agent_app
from acp_trio.remote._websocket import WebSocketClosed
from acp_trio.remote._ws_client import connect_websocket
from acp_trio.testing import ScenarioAgent

from .conftest import LIMIT, running, ws_url
from .rawhttp import INIT, JSON, closed, dumps, h2c, head, read_head, read_response, tcp

TOKEN = "s3cret"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
SHORT = ServerLimits(head_timeout=0.5, body_timeout=0.5, min_body_rate=1000)


def app(limits: ServerLimits = SHORT) -> object:
    return agent_app(ScenarioAgent, token=TOKEN, limits=limits)


async def test_a_connection_that_sends_nothing_is_closed_at_the_head_deadline() -> None:
    with trio.fail_after(LIMIT):
        async with running(app()) as base, tcp(base) as stream:  # type: ignore[arg-type]
            with trio.fail_after(5):  # (the keep-alive timeout is 30 s)
                assert await closed(stream)


async def test_a_head_that_trickles_is_answered_408_at_its_deadline() -> None:
    data = head("POST", headers={**JSON, **AUTH}, length=2)
    with trio.fail_after(LIMIT):
        async with running(app()) as base, tcp(base) as stream:  # type: ignore[arg-type]

            async def trickle() -> None:
                for byte in data[:-4]:
                    await stream.send_all(bytes([byte]))
                    await trio.sleep(0.05)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(trickle)
                with trio.fail_after(5):
                    response = await read_head(stream)
                nursery.cancel_scope.cancel()
            assert response.status == 408
            assert await closed(stream)


async def test_a_later_head_on_a_kept_connection_has_its_own_deadline() -> None:
    with trio.fail_after(LIMIT):
        async with running(app()) as base, tcp(base) as stream:  # type: ignore[arg-type]
            buffer = bytearray()
            await stream.send_all(head("GET", "/other"))
            response, _ = await read_response(stream, buffer)
            assert response.status == 404
            # Half a head, then nothing: held under the head deadline, not
            # the 30 s keep-alive timeout (closed without an answer: a
            # response may be under way on the connection).
            await stream.send_all(b"POST /acp HTTP/1.1\r\nHost: x\r\n")
            with trio.fail_after(5):
                assert await closed(stream)
            assert not buffer


async def test_an_idle_kept_connection_waits_for_the_keep_alive_timeout_not_the_head_deadline() -> (
    None
):
    with trio.fail_after(LIMIT):
        async with running(app()) as base, tcp(base) as stream:  # type: ignore[arg-type]
            buffer = bytearray()
            await stream.send_all(head("GET", "/other"))
            response, _ = await read_response(stream, buffer)
            assert response.status == 404
            await trio.sleep(1.5)  # three head deadlines, idle between requests
            await stream.send_all(head("GET", "/other"))
            response, _ = await read_response(stream, buffer)
            assert response.status == 404


async def test_a_body_that_stops_is_answered_408_and_its_connection_closed() -> None:
    with trio.fail_after(LIMIT):
        async with running(app()) as base, tcp(base) as stream:  # type: ignore[arg-type]
            await stream.send_all(head("POST", headers={**JSON, **AUTH}, length=100) + b"{")
            with trio.fail_after(5):
                response = await read_head(stream)
                assert response.status == 408
                assert await closed(stream)


async def test_a_body_below_the_minimum_rate_is_cut_off() -> None:
    limits = ServerLimits(head_timeout=5, body_timeout=0.5, min_body_rate=1000)
    with trio.fail_after(LIMIT):
        async with running(app(limits)) as base, tcp(base) as stream:  # type: ignore[arg-type]
            await stream.send_all(head("POST", headers={**JSON, **AUTH}, length=10_000))

            async def trickle() -> None:
                for _ in range(10_000):  # 10 bytes every 0.1 s: 100 B/s
                    await stream.send_all(b" " * 10)
                    await trio.sleep(0.1)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(trickle)
                with trio.fail_after(8):
                    response = await read_head(stream)
                nursery.cancel_scope.cancel()
            assert response.status == 408


async def test_a_slow_body_above_the_minimum_rate_is_served() -> None:
    limits = ServerLimits(head_timeout=5, body_timeout=1.0, min_body_rate=1000)
    body = dumps(INIT).ljust(3000)  # (JSON allows trailing blanks)
    with trio.fail_after(LIMIT):
        async with running(app(limits)) as base, tcp(base) as stream:  # type: ignore[arg-type]
            await stream.send_all(head("POST", headers={**JSON, **AUTH}, length=len(body)))
            for start in range(0, len(body), 200):  # 200 bytes every 0.05 s: 4 kB/s
                await stream.send_all(body[start : start + 200])
                await trio.sleep(0.05)
            response, reply = await read_response(stream)
            assert response.status == 200, reply
            assert b'"protocolVersion"' in reply


async def test_h2c_a_stream_whose_body_stops_is_answered_408_and_reset_alone() -> None:
    with trio.fail_after(LIMIT):
        async with running(app()) as base, h2c(base) as client:  # type: ignore[arg-type]
            stalled = client.request("POST", headers={**JSON, **AUTH}, end_stream=False)
            client.data(stalled, b"{")
            await client.flush()
            with trio.fail_after(5):
                await client.until(lambda: stalled in client.reset)
            assert client.statuses[stalled] == 408
            served = client.request("POST", headers={**JSON, **AUTH}, end_stream=False)
            client.data(served, dumps(INIT), end_stream=True)
            await client.flush()
            status, body = await client.response(served)
            assert status == 200
            assert b'"protocolVersion"' in body


async def test_h2c_an_unfinished_header_block_is_bounded_by_the_head_deadline() -> None:
    # A HEADERS frame on stream 1 without END_HEADERS (a CONTINUATION
    # should follow): ":method: GET" (HPACK static index 2).
    frame = b"\x00\x00\x01\x01\x00\x00\x00\x00\x01\x82"
    with trio.fail_after(LIMIT):
        async with running(app()) as base, h2c(base) as client:  # type: ignore[arg-type]
            await client.stream.send_all(frame)
            with trio.fail_after(5):
                assert await closed(client.stream)


async def test_a_websocket_that_sends_no_initialize_is_closed_at_the_body_deadline() -> None:
    with trio.fail_after(LIMIT):
        async with running(app()) as base, trio.open_nursery() as nursery:  # type: ignore[arg-type]
            ws, stream = await connect_websocket(
                ws_url(base),
                nursery,
                token=TOKEN,
                headers=None,
                max_message_size=1 << 20,
                connect_timeout=10,
                write_buffer=65536,
                ssl_context=None,
            )
            try:
                with trio.fail_after(5), pytest.raises(WebSocketClosed) as info:
                    await ws.get_message()
                assert info.value.code == 1008
            finally:
                await ws.aclose()
                await stream.aclose()
            nursery.cancel_scope.cancel()


def test_server_limits_defaults_are_short() -> None:
    limits = ServerLimits()
    assert limits.head_timeout == 10
    assert limits.body_timeout == 10
    assert limits.min_body_rate >= 1024
