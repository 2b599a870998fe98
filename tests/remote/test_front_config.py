"""What the front (acp_trio.remote._front.serve_front) makes of a hypercorn
``Config``: TLS (a certificate made here with trustme) is served over TLS on
each profile and plain text there gets nothing; half a TLS configuration is
refused before anything is bound; and the lifespan ``state`` reaches the
native WebSocket's scope as it reaches hypercorn's own."""

from __future__ import annotations

import functools
import json
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest
import trio

from acp_trio import open_agent, schema
from acp_trio.remote import agent_app, hypercorn_config
from acp_trio.remote._front import serve_front
from acp_trio.remote._ws_client import open_websocket_stream
from acp_trio.testing import ScenarioAgent, ScenarioClient

from .conftest import LIMIT

trustme = pytest.importorskip("trustme")

pytestmark = pytest.mark.timeout(LIMIT)

INIT = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {"protocolVersion": 1, "clientCapabilities": {}},
}


def tls_files(tmp_path: Path) -> tuple[ssl.SSLContext, str, str]:
    """A client context trusting a new CA, and the files of a certificate
    for 127.0.0.1 that CA signed (certificate, key)."""
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    certfile, keyfile = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert.private_key_and_cert_chain_pem.write_to_path(str(certfile))
    cert.private_key_pem.write_to_path(str(keyfile))
    client = ssl.create_default_context()
    ca.configure_trust(client)
    return client, str(certfile), str(keyfile)


@asynccontextmanager
async def serving(app: Any, config: Any) -> AsyncIterator[list[str]]:
    async with trio.open_nursery() as nursery:
        binds = await nursery.start(functools.partial(serve_front, app, config))
        try:
            yield binds
        finally:
            nursery.cancel_scope.cancel()


def scenario_app() -> Any:
    return agent_app(ScenarioAgent)


async def test_tls_config_is_served_over_tls_on_every_profile(tmp_path: Path) -> None:
    context, certfile, keyfile = tls_files(tmp_path)
    app = scenario_app()
    config = hypercorn_config(app, "127.0.0.1", 0)
    config.certfile, config.keyfile = certfile, keyfile
    async with serving(app, config) as binds:
        assert len(binds) == 1, binds
        assert binds[0].startswith("https://127.0.0.1:"), binds
        base = binds[0]
        port = int(base.rsplit(":", 1)[1])

        # Plain text on the TLS port gets no HTTP answer: the bytes are not
        # a TLS handshake, so the connection ends (at most a TLS alert).
        plain = await trio.open_tcp_stream("127.0.0.1", port)
        body = json.dumps(INIT).encode()
        await plain.send_all(
            b"POST /acp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Accept: application/json, text/event-stream\r\n"
            b"Content-Length: %d\r\n\r\n" % len(body) + body
        )
        answer = b""
        while data := await plain.receive_some(65536):
            answer += data
        await plain.aclose()
        assert b"HTTP/" not in answer, answer[:200]
        assert b"jsonrpc" not in answer, answer[:200]

        # WebSocket over TLS (wss://): our client, and the scope says wss.
        async with (
            open_websocket_stream(f"wss://127.0.0.1:{port}/acp", ssl_context=context) as stream,
            open_agent(ScenarioClient(), stream) as agent,
        ):
            reply = await agent.initialize(schema.InitializeRequest(protocol_version=1))
            assert reply.protocol_version == 1
            session = await agent.new_session(schema.NewSessionRequest(cwd="/", mcp_servers=[]))
            assert session.session_id

        # Streamable HTTP over TLS, HTTP/1.1 and HTTP/2 (chosen by ALPN).
        for http2 in (False, True):
            async with httpx2.AsyncClient(verify=context, http1=not http2, http2=http2) as http:
                response = await http.post(
                    f"{base}/acp",
                    json=INIT,
                    headers={"Accept": "application/json, text/event-stream"},
                )
                assert response.status_code == 200, response.text
                assert response.http_version == ("HTTP/2" if http2 else "HTTP/1.1")
                assert b'"protocolVersion":1' in response.content.replace(b" ", b"")


async def test_tls_and_insecure_bind_each_served_as_asked(tmp_path: Path) -> None:
    context, certfile, keyfile = tls_files(tmp_path)

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
        elif scope["type"] == "websocket":
            await receive()
            await send({"type": "websocket.accept"})
            await send({"type": "websocket.send", "text": scope["scheme"]})
            await send({"type": "websocket.close"})

    config = hypercorn_config(scenario_app(), "127.0.0.1", 0)
    config.certfile, config.keyfile = certfile, keyfile
    config.insecure_bind = ["127.0.0.1:0"]
    async with serving(app, config) as binds:
        secure = next(b for b in binds if b.startswith("https://"))
        insecure = next(b for b in binds if b.startswith("http://"))
        wss = secure.replace("https://", "wss://") + "/"
        async with open_websocket_stream(wss, ssl_context=context) as stream:
            assert await stream.receive_message() == b"wss"
        async with open_websocket_stream(insecure.replace("http://", "ws://") + "/") as stream:
            assert await stream.receive_message() == b"ws"


@pytest.mark.parametrize("half", ["certfile", "keyfile"])
async def test_half_a_tls_config_is_refused_before_binding(tmp_path: Path, half: str) -> None:
    _, certfile, keyfile = tls_files(tmp_path)
    app = scenario_app()
    config = hypercorn_config(app, "127.0.0.1", 0)
    setattr(config, half, certfile if half == "certfile" else keyfile)
    with pytest.raises(ValueError, match="needs both certfile and keyfile"):
        await serve_front(app, config)


async def test_an_unreadable_certificate_is_refused_before_binding(tmp_path: Path) -> None:
    app = scenario_app()
    config = hypercorn_config(app, "127.0.0.1", 0)
    (tmp_path / "cert.pem").write_text("not a certificate\n")
    (tmp_path / "key.pem").write_text("not a key\n")
    config.certfile, config.keyfile = str(tmp_path / "cert.pem"), str(tmp_path / "key.pem")
    with pytest.raises((ssl.SSLError, OSError)):
        await serve_front(app, config)


async def test_lifespan_state_reaches_the_native_websocket_scope() -> None:
    seen: dict[str, Any] = {}

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            event = await receive()
            assert event["type"] == "lifespan.startup"
            scope["state"]["greeting"] = "set at startup"
            await send({"type": "lifespan.startup.complete"})
            await receive()
            await send({"type": "lifespan.shutdown.complete"})
        elif scope["type"] == "websocket":
            seen["websocket"] = scope
            await receive()
            await send({"type": "websocket.accept"})
            state = scope.get("state", {})
            await send({"type": "websocket.send", "text": state.get("greeting", "no state")})
            state["greeting"] = "changed by a connection"
            await send({"type": "websocket.close"})
        else:  # hypercorn's own HTTP scope, for comparison
            await receive()
            state = scope.get("state", {})
            body = state.get("greeting", "no state").encode()
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": body})

    config = hypercorn_config(scenario_app(), "127.0.0.1", 0)
    async with serving(app, config) as binds:
        base = binds[0]
        for _ in range(2):  # a connection's changes stay its own
            async with open_websocket_stream(base.replace("http://", "ws://") + "/") as stream:
                assert await stream.receive_message() == b"set at startup"
        assert "acp_trio.websocket" in seen["websocket"]["extensions"]  # (ours, not hypercorn's)
        async with httpx2.AsyncClient() as http:
            response = await http.get(base + "/")
        assert response.text == "set at startup"
