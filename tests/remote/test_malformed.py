"""Malformed requests (issue 47, cases 10, 11 and 12): each is answered
with a 4xx status or a JSON-RPC error, never a 500 and never a hang; an h2c
body that arrives after its request was answered is dropped without
ending the connection. Over real loopback sockets."""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio

from acp_trio.remote import agent_app
from acp_trio.testing import ScenarioAgent

from .conftest import LIMIT, running
from .rawhttp import INIT, JSON, H2Client, dumps, h2c, read_response, tcp
from .rawhttp import head as request_head

ANSWER = 10


async def initialized(client: H2Client) -> tuple[dict[str, str], int]:
    """Initialize over ``client``; the connection's headers and the id of
    its connection-scoped SSE stream (open)."""
    init = client.request("POST", headers=JSON, end_stream=False)
    client.data(init, dumps(INIT), end_stream=True)
    await client.flush()
    status, _ = await client.response(init)
    assert status == 200
    headers = {"Acp-Connection-Id": client.headers[init][b"acp-connection-id"].decode()}
    events = client.request("GET", headers={**headers, "Accept": "text/event-stream"})
    await client.flush()
    await client.until(lambda: events in client.statuses)
    return headers, events


async def post(client: H2Client, headers: dict[str, str], body: bytes) -> int:
    stream_id = client.request("POST", headers={**JSON, **headers}, end_stream=False)
    sent = 0
    while True:
        size = min(
            client.conn.local_flow_control_window(stream_id),
            client.conn.max_outbound_frame_size,
            len(body) - sent,
        )
        if size <= 0 and sent < len(body):
            await client.read()
            continue
        client.data(stream_id, body[sent : sent + size], end_stream=sent + size == len(body))
        sent += size
        await client.flush()
        if sent == len(body):
            break
    with trio.fail_after(ANSWER):
        await client.until(lambda: stream_id in client.statuses)
    return client.statuses[stream_id]


def events_of(client: H2Client, stream_id: int) -> list[dict[str, Any]]:
    text = client.bodies[stream_id].decode()
    return [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: ")]


BAD_IDS = {
    "an object id": {"a": 1},
    "an array id": [1, 2],
    "a float id": 1.5,
    "a boolean id": True,
}


@pytest.mark.parametrize("bad", BAD_IDS.values(), ids=BAD_IDS.keys())
async def test_a_request_with_a_malformed_id_is_answered_not_500(bad: Any) -> None:
    with trio.fail_after(LIMIT):
        async with running(agent_app(ScenarioAgent)) as base, h2c(base) as client:
            headers, events = await initialized(client)
            # With a session id: the reply would go on that session's stream.
            params = {"sessionId": "s1", "prompt": []}
            message = {"jsonrpc": "2.0", "id": bad, "method": "session/prompt", "params": params}
            status = await post(client, headers, dumps(message))
            assert status == 202  # (was 500: TypeError)
            # The agent answers it -32600 (id null), on the connection stream.
            await client.until(
                lambda: any(
                    e.get("error", {}).get("code") == -32600 for e in events_of(client, events)
                )
            )
            # And the connection goes on.
            ping = {"jsonrpc": "2.0", "id": 5, "method": "session/new", "params": {"cwd": "/"}}
            ping["params"]["mcpServers"] = []  # type: ignore[index]
            assert await post(client, headers, dumps(ping)) == 202
            await client.until(lambda: any(e.get("id") == 5 for e in events_of(client, events)))


async def test_a_post_nested_100000_deep_is_answered_32700_not_500() -> None:
    body = b'{"jsonrpc":"2.0","id":3,"method":"x","params":{"a":' + b"[" * 100_000
    body += b"]" * 100_000 + b"}}"
    with trio.fail_after(LIMIT):
        async with running(agent_app(ScenarioAgent)) as base, h2c(base) as client:
            headers, events = await initialized(client)
            assert await post(client, headers, body) == 202  # (was 500: RecursionError)
            await client.until(
                lambda: any(
                    e.get("error", {}).get("code") == -32700 for e in events_of(client, events)
                )
            )


async def test_h2c_a_get_body_after_its_404_does_not_end_the_connection() -> None:
    with trio.fail_after(LIMIT):
        async with running(agent_app(ScenarioAgent)) as base, h2c(base) as client:
            get = client.request(
                "GET",
                headers={"Accept": "text/event-stream", "Acp-Connection-Id": "nope"},
                end_stream=False,
            )
            await client.flush()
            await client.until(lambda: get in client.ended)
            assert client.statuses[get] == 404
            # Its body, after the answer (was: KeyError in hypercorn, the
            # whole connection ended); raw, if the client's h2 knows the
            # stream reset.
            if get in client.reset:
                await client.stream.send_all(
                    b"\x00\x00\x09\x00\x01" + get.to_bytes(4, "big") + b"late body"
                )
            else:
                client.data(get, b"late body", end_stream=True)
                await client.flush()
            headers, _ = await initialized(client)
            assert headers["Acp-Connection-Id"]
            assert not client.terminated


MALFORMED = {
    "not JSON": b"{nope",
    "a JSON string": b'"hello"',
    "an empty object": b"{}",
    "a batch": dumps([INIT]),
    "bad UTF-8": b'{"jsonrpc":"2.0","id":1,"method":"\xff"}',
    "NaN": b'{"jsonrpc":"2.0","id":1,"method":"x","params":{"a":NaN}}',
    "a huge number": b'{"jsonrpc":"2.0","id":1,"method":"x","params":{"a":1' + b"0" * 5000 + b"}}",
    "an empty body": b"",
    "whitespace": b"   \r\n  ",
    "a BOM": b"\xef\xbb\xbf" + dumps(INIT),
}


@pytest.mark.parametrize("body", MALFORMED.values(), ids=MALFORMED.keys())
@pytest.mark.parametrize("connection", [False, True], ids=["initialize", "later"])
async def test_a_malformed_body_is_a_4xx_or_a_json_rpc_error_never_a_500(
    body: bytes, connection: bool
) -> None:
    with trio.fail_after(LIMIT):
        async with running(agent_app(ScenarioAgent)) as base:
            headers = {**JSON}
            if connection:
                async with tcp(base) as stream:
                    init = dumps(INIT)
                    await stream.send_all(request_head("POST", headers=JSON, length=len(init)))
                    await stream.send_all(init)
                    response, _ = await read_response(stream)
                    headers["Acp-Connection-Id"] = response.headers["acp-connection-id"]
            async with tcp(base) as stream:
                await stream.send_all(request_head("POST", headers=headers, length=len(body)))
                await stream.send_all(body)
                with trio.fail_after(ANSWER):
                    response, _ = await read_response(stream)
            if body.startswith(b"\xef\xbb\xbf") and not connection:
                assert response.status == 200  # (a BOM is tolerated, as on stdio)
            elif body.startswith(b"["):
                assert response.status == 501  # (the RFD's answer to a batch)
            else:
                assert 400 <= response.status < 500 or response.status == 202, response
