"""Process and connection bounds (issue 47, cases 2 and 10): a cap on ACP
connections (one agent each: a process under ``serve``) and on TCP
connections, answered 503 with ``Retry-After`` (429 for one client over its
own share, a client told apart by its address), never by growing; an
``initialize`` that is not a valid request never starts an agent. Clients
on 127.0.0.1 and 127.0.0.2 (two loopback addresses, two clients)."""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio
import trio.lowlevel

from acp_trio import ConnectionConfig
from acp_trio._core._message_stream import MessageStream
from acp_trio._typed._agent import serve_agent
from acp_trio.remote import RemoteApp, ServerLimits, WebSocketRejected, open_websocket_stream
from acp_trio.testing import ScenarioAgent

from .conftest import LIMIT, running, until, ws_url
from .rawhttp import INIT, JSON, closed, dumps, read_head, read_response, tcp
from .rawhttp import head as request_head

OTHER = "127.0.0.2"


class Counting(RemoteApp):
    """The scenario agent on every ACP connection, counting the agents
    started."""

    def __init__(self, limits: ServerLimits, **options: Any) -> None:
        self.started = 0
        super().__init__(self._agent, limits=limits, **options)

    async def _agent(self, stream: MessageStream) -> None:
        self.started += 1
        await serve_agent(ScenarioAgent, stream, config=ConnectionConfig())


async def post_init(
    base: str, body: bytes = dumps(INIT), source: str | None = None
) -> tuple[int, dict[str, str], bytes]:
    async with tcp(base, source) as stream:
        await stream.send_all(request_head("POST", headers=JSON, length=len(body)) + body)
        response, reply = await read_response(stream)
        return response.status, response.headers, reply


async def delete(base: str, connection_id: str) -> int:
    async with tcp(base) as stream:
        await stream.send_all(request_head("DELETE", headers={"Acp-Connection-Id": connection_id}))
        response, _ = await read_response(stream)
        return response.status


async def test_initialize_beyond_max_agents_is_answered_503_with_retry_after() -> None:
    app = Counting(ServerLimits(max_agents=2, max_agents_per_client=2))
    with trio.fail_after(LIMIT):
        async with running(app) as base:
            first = await post_init(base)
            second = await post_init(base)
            assert (first[0], second[0]) == (200, 200)
            status, headers, _ = await post_init(base)
            assert status == 503  # (was: a third agent, and a 300th)
            assert int(headers["retry-after"]) >= 1
            assert app.started == 2
            # A slot freed is a slot taken again.
            assert await delete(base, first[1]["acp-connection-id"]) == 202
            await until(lambda: len(app.http.connections) == 1)
            assert (await post_init(base))[0] == 200
            assert app.started == 3


async def test_a_websocket_beyond_max_agents_is_refused_503_on_its_upgrade() -> None:
    app = Counting(ServerLimits(max_agents=1))
    with trio.fail_after(LIMIT):
        async with running(app) as base:
            assert (await post_init(base))[0] == 200
            with pytest.raises(WebSocketRejected) as info:
                async with open_websocket_stream(ws_url(base)):
                    pass  # pragma: no cover
            assert info.value.status_code == 503
            assert app.started == 1


async def test_one_client_over_its_share_gets_429_and_another_is_served() -> None:
    app = Counting(ServerLimits(max_agents=4, max_agents_per_client=2))
    with trio.fail_after(LIMIT):
        async with running(app) as base:
            assert (await post_init(base, source=OTHER))[0] == 200
            assert (await post_init(base, source=OTHER))[0] == 200
            status, headers, _ = await post_init(base, source=OTHER)
            assert status == 429
            assert int(headers["retry-after"]) >= 1
            assert (await post_init(base))[0] == 200  # another client
            assert app.started == 3


async def test_a_connection_beyond_max_connections_is_answered_503_and_closed() -> None:
    app = Counting(ServerLimits(max_connections=3, max_connections_per_client=3))
    with trio.fail_after(LIMIT):
        async with running(app) as base, tcp(base) as a, tcp(base) as b, tcp(base) as c:
            await trio.sleep(0.2)  # (the three are accepted)
            async with tcp(base) as extra:
                response = await read_head(extra)
                assert response.status == 503  # (was: accepted, an open file each)
                assert int(response.headers["retry-after"]) >= 1
                assert await closed(extra)
            for stream in (a, b, c):  # the three admitted are served
                await stream.send_all(request_head("GET", "/other"))
                response, _ = await read_response(stream)
                assert response.status == 404


async def test_one_client_over_its_connection_share_gets_429_and_another_is_served() -> None:
    app = Counting(ServerLimits(max_connections=10, max_connections_per_client=2))
    with trio.fail_after(LIMIT):
        async with running(app) as base, tcp(base, OTHER), tcp(base, OTHER):
            await trio.sleep(0.2)
            async with tcp(base, OTHER) as extra:
                response = await read_head(extra)
                assert response.status == 429
                assert await closed(extra)
            async with tcp(base) as mine:
                await mine.send_all(request_head("GET", "/other"))
                response, _ = await read_response(mine)
                assert response.status == 404


NOT_INITIALIZE = {
    "no id": {"jsonrpc": "2.0", "method": "initialize", "params": {"protocolVersion": 1}},
    "an object id": {**INIT, "id": {"a": 1}},
    "an array id": {**INIT, "id": [1]},
    "a null id": {**INIT, "id": None},
    "a boolean id": {**INIT, "id": True},
    "no jsonrpc": {k: v for k, v in INIT.items() if k != "jsonrpc"},
    "params a string": {**INIT, "params": "x"},
    "another method": {**INIT, "method": "session/new"},
    "a reply": {"jsonrpc": "2.0", "id": 0, "result": {}},
}


@pytest.mark.parametrize("message", NOT_INITIALIZE.values(), ids=NOT_INITIALIZE.keys())
async def test_an_initialize_that_is_not_a_valid_request_starts_no_agent(
    message: dict[str, Any],
) -> None:
    app = Counting(ServerLimits())
    with trio.fail_after(LIMIT):
        async with running(app) as base:
            with trio.fail_after(10):  # (was: a hang until the idle timeout)
                status, _, body = await post_init(base, dumps(message))
            assert status == 400
            error = json.loads(body)["error"]
            assert error["code"] == -32600
            assert app.started == 0
            assert not app.http.connections


async def test_a_websocket_whose_first_message_is_not_initialize_starts_no_agent() -> None:
    app = Counting(ServerLimits())
    bad = dumps({**INIT, "id": {"a": 1}})
    with trio.fail_after(LIMIT):
        async with running(app) as base:
            async with open_websocket_stream(ws_url(base)) as stream:
                await stream.send_message(bad)
                reply = await stream.receive_message()
                assert isinstance(reply, bytes)
                assert json.loads(reply)["error"]["code"] == -32600
                assert await stream.receive_message() is None  # closed (1008)
            assert app.started == 0
            await trio.lowlevel.checkpoint()
            assert not app.connections
