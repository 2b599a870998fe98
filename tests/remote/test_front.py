"""The server's front (acp_trio.remote._front, through serve_remote):
upgrades served on our WebSocket (an independent client, a first frame in
the upgrade's write, a head split over writes), what it hands to hypercorn
(plain HTTP, upgrades wsproto refuses), a silent client; and our client
against hypercorn's own WebSocket."""

from __future__ import annotations

import base64
import contextlib
import functools
import hashlib
import json
import re
from typing import Any

import httpx2
import hypercorn.trio
import pytest
import trio
import trio.testing
import trio_websocket

from acp_trio import schema
from acp_trio.remote import agent_app, hypercorn_config, open_remote_agent
from acp_trio.remote._front import serve_front
from acp_trio.testing import ScenarioAgent, ScenarioClient

from .conftest import LIMIT, running, ws_url
from .wsraw import GUID, Peer, encode

INIT = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {"protocolVersion": 1, "clientCapabilities": {}},
}
NEW_SESSION = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "session/new",
    "params": {"cwd": "/", "mcpServers": []},
}
KEY = b"dGhlIHNhbXBsZSBub25jZQ=="


def dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def upgrade(
    *,
    key: bytes | None = KEY,
    version: bytes | None = b"13",
    connection: bytes = b"Upgrade",
    host: bytes = b"127.0.0.1",
) -> bytes:
    lines = [b"GET /acp HTTP/1.1", b"Host: " + host, b"Upgrade: websocket"]
    lines.append(b"Connection: " + connection)
    if version is not None:
        lines.append(b"Sec-WebSocket-Version: " + version)
    if key is not None:
        lines.append(b"Sec-WebSocket-Key: " + key)
    return b"\r\n".join([*lines, b"", b""])


def post(body: bytes) -> bytes:
    return (
        b"POST /acp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n" % len(body) + body
    )


async def connect(base: str) -> trio.SocketStream:
    host, port = base.removeprefix("http://").rsplit(":", 1)
    return await trio.open_tcp_stream(host, int(port))


async def read_head(stream: trio.abc.ReceiveStream) -> tuple[bytes, dict[bytes, bytes], bytes]:
    """The response's status line, its headers (lower-case names) and what
    came after the head."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = await stream.receive_some()
        assert chunk, f"EOF before the response head: {data!r}"
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    status, *lines = head.split(b"\r\n")
    headers = {}
    for line in lines:
        name, _, value = line.partition(b":")
        headers[name.strip().lower()] = value.strip()
    return status, headers, rest


def accepted(status: bytes, headers: dict[bytes, bytes]) -> None:
    """The upgrade was accepted, by our front (hypercorn's own 101 names it)."""
    assert status.startswith(b"HTTP/1.1 101 ")
    assert headers[b"sec-websocket-accept"] == base64.b64encode(hashlib.sha1(KEY + GUID).digest())
    assert re.fullmatch(rb"[0-9a-f]{32}", headers[b"acp-connection-id"])
    assert b"server" not in headers  # (hypercorn's: "server: hypercorn-h11")


async def rpc(peer: Peer, request: dict[str, Any]) -> dict[str, Any]:
    await peer.send(1, dumps(request))
    frame = await peer.frame()
    assert (frame.opcode, frame.masked) == (1, False)
    reply: dict[str, Any] = json.loads(frame.payload)
    assert reply["id"] == request["id"]
    return reply


async def close(peer: Peer) -> None:
    await peer.send(8, (1000).to_bytes(2, "big"))
    frame = await peer.frame()
    assert (frame.opcode, frame.payload) == (8, (1000).to_bytes(2, "big"))
    assert await peer.at_eof()


async def test_an_independent_client_talks_json_rpc_over_our_websocket() -> None:
    with trio.fail_after(LIMIT):
        async with (
            running(agent_app(ScenarioAgent)) as base,
            trio_websocket.open_websocket_url(ws_url(base)) as ws,
        ):
            headers = dict(ws.handshake_headers)
            assert re.fullmatch(rb"[0-9a-f]{32}", headers[b"acp-connection-id"])
            assert b"server" not in headers  # our front's 101, not hypercorn's
            await ws.send_message(dumps(INIT).decode())
            reply = json.loads(await ws.get_message())
            assert reply["id"] == 0
            assert reply["result"]["protocolVersion"] == 1
            await ws.send_message(dumps(NEW_SESSION).decode())
            reply = json.loads(await ws.get_message())
            assert reply["id"] == 1
            assert reply["result"]["sessionId"]


async def test_a_first_frame_in_the_upgrades_write_is_answered() -> None:
    with trio.fail_after(LIMIT):
        async with running(agent_app(ScenarioAgent)) as base, await connect(base) as stream:
            await stream.send_all(upgrade() + encode(1, dumps(INIT), mask=True))
            status, headers, rest = await read_head(stream)
            accepted(status, headers)
            peer = Peer(stream, mask=True, buffer=rest)
            frame = await peer.frame()
            assert (frame.opcode, frame.masked) == (1, False)
            reply = json.loads(frame.payload)
            assert reply["id"] == 0
            assert reply["result"]["protocolVersion"] == 1
            assert (await rpc(peer, NEW_SESSION))["result"]["sessionId"]
            await close(peer)


async def test_an_upgrade_wsproto_refuses_is_answered_with_a_4xx() -> None:
    with trio.fail_after(LIMIT):
        async with running(agent_app(ScenarioAgent)) as base, await connect(base) as stream:
            await stream.send_all(upgrade(connection=b"keep-alive"))  # no Connection: Upgrade
            status, headers, _ = await read_head(stream)
            assert re.fullmatch(rb"HTTP/1\.1 4\d\d .*", status)
            assert headers[b"server"] == b"hypercorn-h11"


async def refused(base: str, request_head: bytes) -> tuple[bytes, dict[bytes, bytes]]:
    """The status line and headers of the answer to ``request_head``, after
    which the server closes the connection."""
    async with await connect(base) as stream:
        await stream.send_all(request_head)
        status, headers, rest = await read_head(stream)
        while data := await stream.receive_some():
            rest += data
        assert len(rest) == int(headers[b"content-length"])  # then EOF
        return status, headers


@pytest.mark.parametrize(
    "key",
    [
        None,
        b"",
        b"abc=",
        base64.b64encode(b"k" * 15),
        base64.b64encode(b"k" * 17),
        b"dGhlIHNhbXBsZSBub25jZQ",  # (16 bytes, unpadded)
        b"dGhlIHNhbXBsZSBub25j!Q==",
    ],
    ids=["none", "empty", "short", "15 bytes", "17 bytes", "no padding", "not base64"],
)
async def test_a_key_not_16_bytes_in_base64_is_refused_400(key: bytes | None) -> None:
    with trio.fail_after(LIMIT):
        async with running(agent_app(ScenarioAgent)) as base:
            status, headers = await refused(base, upgrade(key=key))
            assert status.startswith(b"HTTP/1.1 400 ")
            assert headers[b"connection"] == b"close"


@pytest.mark.parametrize(
    ("version", "code"),
    [(b"8", 426), (b"12", 426), (b"13, 8", 426), (b"", 426), (None, 400)],
    ids=["8", "12", "two", "empty", "none"],
)
async def test_a_version_other_than_13_is_refused_naming_13(
    version: bytes | None, code: int
) -> None:
    with trio.fail_after(LIMIT):
        async with running(agent_app(ScenarioAgent)) as base:
            status, headers = await refused(base, upgrade(version=version))
            assert status.startswith(b"HTTP/1.1 %d " % code)
            assert headers[b"sec-websocket-version"] == b"13"
            assert headers[b"connection"] == b"close"


@pytest.mark.parametrize("http2", [False, True], ids=["http1", "h2c"])
async def test_plain_http_goes_through_the_front(http2: bool) -> None:
    headers = {"Content-Type": "application/json"}
    with trio.fail_after(LIMIT):
        async with (
            running(agent_app(ScenarioAgent)) as base,
            httpx2.AsyncClient(http1=not http2, http2=http2, timeout=30) as client,
        ):
            response = await client.post(base + "/acp", content=dumps(INIT), headers=headers)
            assert response.status_code == 200
            assert response.http_version == ("HTTP/2" if http2 else "HTTP/1.1")
            assert re.fullmatch(r"[0-9a-f]{32}", response.headers["acp-connection-id"])
            assert response.json()["result"]["protocolVersion"] == 1


async def test_a_post_whose_head_comes_in_two_writes_is_served() -> None:
    request = post(dumps(INIT))
    with trio.fail_after(LIMIT):
        async with running(agent_app(ScenarioAgent)) as base, await connect(base) as stream:
            await stream.send_all(request[:30])  # (in the middle of a header)
            await trio.sleep(0.05)
            await stream.send_all(request[30:])
            status, headers, rest = await read_head(stream)
            assert status.startswith(b"HTTP/1.1 200 ")
            assert re.fullmatch(rb"[0-9a-f]{32}", headers[b"acp-connection-id"])
            while len(rest) < int(headers[b"content-length"]):
                rest += await stream.receive_some()
            assert json.loads(rest)["result"]["protocolVersion"] == 1


async def test_an_upgrade_whose_head_comes_in_two_writes_is_ours() -> None:
    request = upgrade()
    cut = request.index(b"websocket") + 3  # in the middle of "Upgrade: websocket"
    with trio.fail_after(LIMIT):
        async with running(agent_app(ScenarioAgent)) as base, await connect(base) as stream:
            await stream.send_all(request[:cut])
            await trio.sleep(0.05)
            await stream.send_all(request[cut:])
            status, headers, rest = await read_head(stream)
            accepted(status, headers)  # the front waited for the whole head
            peer = Peer(stream, mask=True, buffer=rest)
            assert (await rpc(peer, INIT))["result"]["protocolVersion"] == 1
            await close(peer)


async def test_our_client_talks_to_hypercorns_own_websocket() -> None:
    app = agent_app(ScenarioAgent)
    config = hypercorn_config(app, "127.0.0.1", 0)
    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            binds = await nursery.start(functools.partial(hypercorn.trio.serve, app, config))  # type: ignore[arg-type]
            client = ScenarioClient()
            url = ws_url(binds[0])
            async with open_remote_agent(client, url, profile="websocket") as agent:
                await agent.initialize(client.initialize_request())
                session = await agent.new_session(schema.NewSessionRequest(cwd="/", mcp_servers=[]))
                result = await agent.prompt_text(session.session_id, "stream 50 4")
                assert result.stop_reason == "end_turn"
                assert client.texts(session.session_id) == [str(i).ljust(4, ".") for i in range(50)]
            nursery.cancel_scope.cancel()


async def test_a_silent_client_holds_up_no_one_and_is_dropped() -> None:
    app = agent_app(ScenarioAgent)
    config = hypercorn_config(app, "127.0.0.1", 0)
    config.keep_alive_timeout = 2.0  # the bound on reading a request head
    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            base = (await nursery.start(functools.partial(serve_front, app, config)))[0]
            async with await connect(base) as silent, await connect(base) as partial:
                await partial.send_all(b"GET /acp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
                # Others are served meanwhile, over WebSocket and HTTP.
                await served(base)
                async with await connect(base) as stream:
                    await stream.send_all(post(dumps(INIT)))
                    status, _, _ = await read_head(stream)
                    assert status.startswith(b"HTTP/1.1 200 ")
                # Both idle connections are closed by the server in the end.
                for stream in (silent, partial):
                    data = b""
                    with contextlib.suppress(trio.BrokenResourceError):
                        while chunk := await stream.receive_some():
                            data += chunk
                    assert data == b"" or data.startswith(b"HTTP/1.1 4")
            nursery.cancel_scope.cancel()


async def served(base: str) -> None:
    """A WebSocket client is served at ``base``."""
    async with await connect(base) as stream:
        await stream.send_all(upgrade())
        status, headers, rest = await read_head(stream)
        accepted(status, headers)
        peer = Peer(stream, mask=True, buffer=rest)
        assert (await rpc(peer, INIT))["result"]["protocolVersion"] == 1
        await close(peer)


@pytest.mark.parametrize(
    "request_head",
    [
        upgrade(host=b"\xc3\xa9.example"),
        upgrade(connection=b"Upgrade, \xc3\xa9"),
    ],
    ids=["host", "connection"],
)
async def test_an_upgrade_with_non_ascii_bytes_leaves_the_server_running(
    request_head: bytes,
) -> None:
    with trio.fail_after(LIMIT):
        async with running(agent_app(ScenarioAgent)) as base:
            async with await connect(base) as stream:
                await stream.send_all(request_head)
                data = b""
                with contextlib.suppress(trio.BrokenResourceError):
                    while b"\r\n\r\n" not in data and (chunk := await stream.receive_some()):
                        data += chunk
                # Refused, dropped, or (hypercorn takes a Host it can decode)
                # accepted: either way the server goes on.
                assert data == b"" or re.match(rb"HTTP/1\.1 (4\d\d|101) ", data)
            await served(base)


async def test_an_upgrade_with_an_empty_host_label_is_accepted() -> None:
    with trio.fail_after(LIMIT):
        async with running(agent_app(ScenarioAgent)) as base, await connect(base) as stream:
            await stream.send_all(upgrade(host=b"a..b"))
            status, headers, _ = await read_head(stream)
            accepted(status, headers)


async def test_an_idle_http1_connection_is_closed_and_a_busy_one_kept() -> None:
    """The front's idle-timeout task (in place of hypercorn's): each
    request on a kept-alive connection starts the wait again, so requests
    closer together than the timeout keep it open past it; once none
    comes for the timeout, the server closes it."""
    app = agent_app(ScenarioAgent)
    config = hypercorn_config(app, "127.0.0.1", 0)
    # (Wide margins: a gap between requests is 0.3 s plus the request, far
    # under the timeout even on a loaded machine.)
    config.keep_alive_timeout = 2.0
    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            base = (await nursery.start(functools.partial(serve_front, app, config)))[0]
            async with await connect(base) as stream:
                started = trio.current_time()
                # Nine requests 0.3 s apart: 2.7 s on one connection, past the timeout.
                for _ in range(9):
                    await stream.send_all(post(dumps({"jsonrpc": "2.0", "id": 1})))
                    status, headers, rest = await read_head(stream)
                    assert status.startswith(b"HTTP/1.1 400 ")  # (no initialize first)
                    while len(rest) < int(headers[b"content-length"]):
                        rest += await stream.receive_some()
                    await trio.sleep(0.3)
                assert trio.current_time() - started > config.keep_alive_timeout
                # Then idle: closed by the server.
                assert await stream.receive_some() == b""
            nursery.cancel_scope.cancel()
