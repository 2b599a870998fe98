"""A message is parsed once on its way through the server (issue 47, case
4): the front routes a POSTed or WebSocket message by a peek and checks its
structure without parsing it; only the agent's connection parses it. Over
real loopback sockets (HTTP/1.1 POST, h2c POST, WebSocket), a prompt of
1 MiB of text goes to an in-process agent while every JSON decoder the
server process may use on it is counted: a decode counts when it reads at
least the prompt's text (the whole message, or the member holding the
text; the peek's reads of the small members before it do not)."""

from __future__ import annotations

import json
import json.decoder
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import trio

import acp_trio
from acp_trio import ConnectionConfig
from acp_trio._jsonrpc import _limits as jsonrpc_limits
from acp_trio._jsonrpc import _messages
from acp_trio.lowlevel import Handler, RequestContext
from acp_trio.remote import RemoteApp, _http_connection, open_websocket_stream

from .conftest import LIMIT, running, until, ws_url
from .rawhttp import INIT, JSON, h2c, read_response, tcp
from .rawhttp import head as request_head

MiB = 1024 * 1024
SESSION = "sess-1"


class Decodes:
    """The JSON decodes (where, characters read) of at least ``threshold``
    characters; a decoder called from inside another counted one (the
    standard library's ``decode`` calls its ``raw_decode``) is not counted
    again."""

    def __init__(self, threshold: int) -> None:
        self.threshold = threshold
        self.seen: list[tuple[str, int]] = []
        self._depth = 0

    def _note(self, where: str, span: int) -> None:
        if self._depth == 0 and span >= self.threshold:
            self.seen.append((where, span))

    def spanning(
        self, where: str, function: Callable[..., tuple[Any, int]], *, method: bool = False
    ) -> Callable[..., tuple[Any, int]]:
        """``function(text, start, ...) -> (value, end)`` (a method when
        ``method``), counted by what it read: ``end - start``, or up to
        where it failed."""

        def counted(*args: Any, **kwargs: Any) -> tuple[Any, int]:
            at = 2 if method else 1  # (the index after the text)
            start = args[at] if len(args) > at else kwargs.get("idx", 0)
            self._depth += 1
            try:
                value, end = function(*args, **kwargs)
            except json.JSONDecodeError as exc:
                self._depth -= 1
                self._note(where + " (failed)", exc.pos - start)
                raise
            except BaseException:
                self._depth -= 1
                raise
            self._depth -= 1
            self._note(where, end - start)
            return value, end

        return counted

    def whole(self, where: str, function: Callable[..., Any]) -> Callable[..., Any]:
        """``function(text, ...) -> value``, counted by the text's length."""

        def counted(text: Any, *args: Any, **kwargs: Any) -> Any:
            self._depth += 1
            try:
                return function(text, *args, **kwargs)
            finally:
                self._depth -= 1
                self._note(where, len(text))

        return counted

    def of_decoder(self) -> Callable[..., Any]:
        """``JSONDecoder.decode(self, text)``, counted by the text's length."""
        decode = json.decoder.JSONDecoder.decode

        def counted(decoder: json.decoder.JSONDecoder, text: str, *args: Any) -> Any:
            self._depth += 1
            try:
                return decode(decoder, text, *args)
            finally:
                self._depth -= 1
                self._note("JSONDecoder.decode", len(text))

        return counted


@pytest.fixture
def decodes(monkeypatch: pytest.MonkeyPatch) -> Decodes:
    """Every JSON decoder the server's path may reach, counted: the
    standard library's (its decoder class, ``json.loads`` included, and the
    C scanners acp_trio keeps references to), and orjson's."""
    counter = Decodes(MiB)
    patch = monkeypatch.setattr
    decoder = json.decoder.JSONDecoder
    patch(decoder, "decode", counter.of_decoder())
    patch(
        decoder,
        "raw_decode",
        counter.spanning("JSONDecoder.raw_decode", decoder.raw_decode, method=True),
    )
    patch(_messages, "_scan_once", counter.spanning("decode_frame", _messages._scan_once))
    if _messages._fast_loads is not None:
        patch(
            _messages, "_fast_loads", counter.whole("decode_frame (orjson)", _messages._fast_loads)
        )
    patch(
        jsonrpc_limits,
        "_scanstring",
        counter.spanning("StructureCheck", jsonrpc_limits._scanstring),
    )
    patch(
        _http_connection,
        "_raw_decode",
        counter.spanning("route_of", _http_connection._raw_decode),
    )
    patch(
        _http_connection,
        "_scanstring",
        counter.spanning("route_of (key)", _http_connection._scanstring),
    )
    try:
        import orjson
    except ImportError:
        pass
    else:
        patch(orjson, "loads", counter.whole("orjson.loads", orjson.loads))
    return counter


class Prompted(Handler):
    """An agent that answers ``session/prompt`` at once, noting the length
    of the text it was given (its reply is small: nothing echoed)."""

    def __init__(self) -> None:
        self.texts: list[int] = []

    async def handle_request(self, ctx: RequestContext, method: str, params: Any) -> Any:
        if method == "initialize":
            return {"protocolVersion": 1, "agentCapabilities": {}}
        assert method == "session/prompt"
        self.texts.append(len(params["prompt"][0]["text"]))
        return {"stopReason": "end_turn"}


def prose(size: int) -> str:
    """Text with few brackets and commas: the structure check's quick count
    passes it."""
    line = "The quick brown fox jumps over the lazy dog again and again.\n"
    return (line * (size // len(line) + 1))[:size]


def source(size: int) -> str:
    """Source code: brackets, commas, quotes and escapes enough that the
    quick count cannot tell, and the exact count runs."""
    line = 'print(f(a, [b, {"c": d}], e), g(h, i, j), "\\t", k[1, 2, 3])\n'
    return (line * (size // len(line) + 1))[:size]


def compact(obj: Any, **options: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), **options).encode()


def prompt_request(text: str, shape: str) -> bytes:
    """A ``session/prompt`` request with ``text``, its members laid out as
    one encoder or another writes them."""
    params: dict[str, Any] = {"sessionId": SESSION, "prompt": [{"type": "text", "text": text}]}
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": 2, "method": "session/prompt"}
    if shape == "id last":
        del message["id"]
        return compact({**message, "params": params, "id": 2})
    message["params"] = params
    if shape == "keys sorted":
        return compact(message, sort_keys=True)
    if shape == "spaced":
        return json.dumps(message).encode()
    if shape == "newline at the end":
        return compact(message) + b"\n"
    assert shape in ("compact", "compact, source code")
    return compact(message)


SHAPES = {
    # acp_trio's own encoder: routed by the quick match, never walked.
    "compact": prose,
    # The quick count cannot tell: the exact structure check runs.
    "compact, source code": source,
    # json.dumps' default separators: walked, sessionId found first.
    "spaced": prose,
    # Encoders that sort keys: the prompt comes before the sessionId.
    "keys sorted": prose,
    # The id after the params.
    "id last": prose,
    # A body or frame with a line end after the message.
    "newline at the end": prose,
}


async def post_http1(base: str, body: bytes, headers: dict[str, str]) -> tuple[int, dict[str, str]]:
    async with tcp(base) as stream:
        head = request_head("POST", headers={**JSON, **headers}, length=len(body))
        await stream.send_all(head + body)
        response, _ = await read_response(stream)
        return response.status, response.headers


async def through_http1(base: str, message: bytes, agent: Prompted) -> None:
    status, headers = await post_http1(base, compact(INIT), {})
    assert status == 200
    connection = {"Acp-Connection-Id": headers["acp-connection-id"]}
    status, _ = await post_http1(base, message, connection)
    assert status == 202
    await until(lambda: bool(agent.texts))


async def through_h2c(base: str, message: bytes, agent: Prompted) -> None:
    async with h2c(base) as client:
        init = client.request("POST", headers=JSON, end_stream=False)
        client.data(init, compact(INIT), end_stream=True)
        await client.flush()
        status, _ = await client.response(init)
        assert status == 200
        connection = {"Acp-Connection-Id": client.headers[init][b"acp-connection-id"].decode()}
        post = client.request(
            "POST",
            headers={**JSON, **connection, "Content-Length": str(len(message))},
            end_stream=False,
        )
        await client.flush()
        sent = 0
        while sent < len(message):
            window = min(
                client.conn.local_flow_control_window(post),
                client.conn.max_outbound_frame_size,
                len(message) - sent,
            )
            if window <= 0:
                await client.read()
                continue
            client.data(
                post, message[sent : sent + window], end_stream=sent + window == len(message)
            )
            sent += window
            await client.flush()
        status, _ = await client.response(post)
        assert status == 202
        await until(lambda: bool(agent.texts))


async def through_websocket(base: str, message: bytes, agent: Prompted) -> None:
    async with open_websocket_stream(ws_url(base), max_message_size=16 * MiB) as stream:
        await stream.send_message(compact(INIT))
        assert isinstance(await stream.receive_message(), bytes)
        await stream.send_message(message)
        reply = await stream.receive_message()
        assert isinstance(reply, bytes)
        assert json.loads(reply)["result"] == {"stopReason": "end_turn"}
    assert agent.texts


TRANSPORTS = {
    "HTTP/1.1 POST": through_http1,
    "h2c POST": through_h2c,
    "WebSocket": through_websocket,
}


# Where the path still parses a message twice (found by this test; each
# marker goes once its place parses once: strict, an unexpected pass fails).
PARSED_TWICE = {
    "compact, source code": (
        TRANSPORTS,
        "the exact structure check (StructureCheck in acp_trio/_jsonrpc/_limits.py, "
        "from check_structure) decodes every string with json's scanstring, the prompt's "
        "text included, before the agent parses it",
    ),
    "keys sorted": (
        ("HTTP/1.1 POST", "h2c POST"),
        "route_of (acp_trio/remote/_http_connection.py, _session_id) decodes each member "
        "of params before sessionId, the prompt included",
    ),
    "id last": (
        ("HTTP/1.1 POST", "h2c POST"),
        "route_of (acp_trio/remote/_http_connection.py) walks a message whose id is not "
        "before its method: without reading on, a request with its id last cannot be "
        "told from a notification (tests/remote/test_route_of.py)",
    ),
}


def cases() -> Iterator[Any]:
    for transport in TRANSPORTS:
        for shape in SHAPES:
            where, reason = PARSED_TWICE.get(shape, ((), ""))
            marks = [pytest.mark.xfail(reason=reason, strict=True)] if transport in where else []
            yield pytest.param(transport, shape, marks=marks, id=f"{transport}-{shape}")


@pytest.mark.parametrize(("transport", "shape"), list(cases()))
async def test_a_prompt_is_parsed_once_on_its_way_to_the_agent(
    decodes: Decodes, transport: str, shape: str
) -> None:
    agent = Prompted()

    async def handle(stream: Any) -> None:
        await acp_trio.lowlevel.serve_connection(stream, agent, config=ConnectionConfig())

    text = SHAPES[shape](MiB)
    message = prompt_request(text, shape)
    with trio.fail_after(LIMIT):
        async with running(RemoteApp(handle)) as base:
            await TRANSPORTS[transport](base, message, agent)
    assert agent.texts == [len(text)]  # the agent had the whole prompt
    assert len(decodes.seen) == 1, decodes.seen
