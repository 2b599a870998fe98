"""Refusal on the head (issue 47, cases 1 and 5): a request the server
will not serve (no token, a wrong token, a browser origin, a body over the
cap, a method or content type it does not take) is answered as soon as its
head is read, without waiting for its body; an HTTP/1.1 connection is then
closed, an h2c stream reset (NO_ERROR, after the answer) with the
connection's other streams going on; ``100 Continue`` goes only to a
request that will be served. Over real loopback sockets, with bodies that
never finish."""

from __future__ import annotations

import pytest
import trio

from acp_trio.remote import agent_app
from acp_trio.remote._limits import library_limit
from acp_trio.testing import ScenarioAgent

from .conftest import LIMIT, running
from .rawhttp import INIT, JSON, closed, dumps, h2c, head, read_head, read_response, tcp

TOKEN = "s3cret"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
#: How long an answer may take (a watchdog: the body never comes, so a
#: server waiting for it never answers).
ANSWER = 10


def app() -> object:
    return agent_app(ScenarioAgent, token=TOKEN, allowed_origins=["https://ok.example"])


def data_frame(stream_id: int, payload: bytes) -> bytes:
    """A raw HTTP/2 DATA frame."""
    return len(payload).to_bytes(3, "big") + b"\x00\x00" + stream_id.to_bytes(4, "big") + payload


REFUSED = {
    "no token": ({**JSON}, 401),
    "a wrong token": ({**JSON, "Authorization": "Bearer nope"}, 401),
    "a foreign origin": ({**JSON, **AUTH, "Origin": "https://evil.example"}, 403),
    "a content type not JSON": ({**AUTH, "Content-Type": "text/plain"}, 415),
}


@pytest.mark.parametrize(("headers", "status"), REFUSED.values(), ids=REFUSED.keys())
async def test_http1_a_refused_post_is_answered_on_its_head_and_closed(
    headers: dict[str, str], status: int
) -> None:
    with trio.fail_after(LIMIT):
        async with running(app()) as base, tcp(base) as stream:  # type: ignore[arg-type]
            # 1 byte of the 100 announced; the rest never comes.
            await stream.send_all(head("POST", headers=headers, length=100) + b"{")
            with trio.fail_after(ANSWER):
                response = await read_head(stream)
                assert response.status == status
                assert await closed(stream)  # (was: no answer, connection held)


async def test_http1_a_body_announced_over_the_cap_is_refused_413_on_its_head() -> None:
    app_ = app()
    size = 4 * 1024**3  # 4 GB announced, 1 byte sent
    with trio.fail_after(LIMIT):
        async with running(app_) as base, tcp(base) as stream:  # type: ignore[arg-type]
            await stream.send_all(head("POST", headers={**JSON, **AUTH}, length=size) + b"{")
            with trio.fail_after(ANSWER):
                response = await read_head(stream)
                assert response.status == 413
                assert await closed(stream)


async def test_http1_a_large_body_without_the_token_is_refused_401_before_it_is_read() -> None:
    chunk = b"x" * 65536
    with trio.fail_after(LIMIT):
        async with running(app()) as base, tcp(base) as stream:  # type: ignore[arg-type]
            await stream.send_all(head("POST", headers=JSON, length=4 * 1024**3))
            received = bytearray()

            async def read() -> None:
                nonlocal received
                while data := await stream.receive_some():
                    received += data

            sent = 0
            with trio.move_on_after(ANSWER):
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(read)
                    try:
                        while b"\r\n\r\n" not in received and sent < 512 * 1024 * 1024:
                            await stream.send_all(chunk)
                            sent += len(chunk)
                    except trio.BrokenResourceError:
                        pass  # closed by the server after its answer
                    await trio.sleep(0.2)
                    nursery.cancel_scope.cancel()
            assert received.startswith(b"HTTP/1.1 401 "), (sent, bytes(received[:80]))


async def test_http1_expect_100_continue_is_not_granted_to_a_refused_request() -> None:
    with trio.fail_after(LIMIT):
        async with running(app()) as base, tcp(base) as stream:  # type: ignore[arg-type]
            await stream.send_all(
                head("POST", headers={**JSON, "Expect": "100-continue"}, length=100)
            )
            with trio.fail_after(ANSWER):
                response = await read_head(stream)
            assert response.status == 401  # (was: 100 Continue, then a wait for the body)
            assert await closed(stream)


async def test_http1_expect_100_continue_is_granted_to_a_request_that_is_served() -> None:
    body = dumps(INIT)
    with trio.fail_after(LIMIT):
        async with running(app()) as base, tcp(base) as stream:  # type: ignore[arg-type]
            await stream.send_all(
                head("POST", headers={**JSON, **AUTH, "Expect": "100-continue"}, length=len(body))
            )
            buffer = bytearray()
            interim = await read_head(stream, buffer)
            assert interim.status == 100
            await stream.send_all(body)
            response, reply = await read_response(stream, buffer)
            assert response.status == 200
            assert b'"protocolVersion"' in reply


async def test_http1_the_connection_goes_on_after_a_request_served_whole() -> None:
    """A refused request whose body came whole is answered, and the
    connection goes on (only a body left unread closes it)."""
    with trio.fail_after(LIMIT):
        async with running(app()) as base, tcp(base) as stream:  # type: ignore[arg-type]
            buffer = bytearray()
            await stream.send_all(head("POST", headers=JSON, length=2) + b"{}")
            response, _ = await read_response(stream, buffer)
            assert response.status == 401
            await stream.send_all(head("GET", "/other"))
            response, _ = await read_response(stream, buffer)
            assert response.status == 404


@pytest.mark.parametrize(("headers", "status"), REFUSED.values(), ids=REFUSED.keys())
async def test_h2c_a_refused_post_is_answered_at_once_its_stream_reset_the_others_served(
    headers: dict[str, str], status: int
) -> None:
    with trio.fail_after(LIMIT):
        async with running(app()) as base, h2c(base) as client:  # type: ignore[arg-type]
            refused = client.request("POST", headers=headers, end_stream=False)
            client.data(refused, b"{")
            await client.flush()
            with trio.fail_after(ANSWER):
                await client.until(lambda: refused in client.reset)
            assert client.statuses[refused] == status
            assert client.reset[refused] == 0  # NO_ERROR: "stop sending, all is said"
            # The rest of that body, sent late (as raw frames: the client's h2
            # knows the stream is reset), is dropped; the connection and its
            # other streams go on.
            await client.stream.send_all(data_frame(refused, b"late" * 1000))
            served = client.request("POST", headers={**JSON, **AUTH}, end_stream=False)
            client.data(served, dumps(INIT), end_stream=True)
            await client.flush()
            status_code, body = await client.response(served)
            assert status_code == 200
            assert b'"protocolVersion"' in body


async def test_h2c_a_body_announced_over_the_cap_is_refused_413_on_its_headers() -> None:
    app_ = app()
    limit = library_limit(app_.max_message_size)  # type: ignore[attr-defined]
    with trio.fail_after(LIMIT):
        async with running(app_) as base, h2c(base) as client:  # type: ignore[arg-type]
            stream_id = client.request(
                "POST",
                headers={**JSON, **AUTH, "Content-Length": str(limit + 1)},
                end_stream=False,
            )
            await client.flush()
            with trio.fail_after(ANSWER):
                await client.until(lambda: stream_id in client.reset)
            assert client.statuses[stream_id] == 413
