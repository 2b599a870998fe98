"""The contract with httpx2's and httpcore2's private names.

The Streamable HTTP client (acp_trio/remote/_http_client.py) reads a
response's body from httpcore2's own stream (httpx2's iterators leave a
generator unclosed when left early), and resets an HTTP/2 stream it leaves
early through httpcore2's HTTP/2 connection (httpcore2 sends no
``RST_STREAM`` itself): names that are not httpx2's or httpcore2's public
API. Each one used is checked here, on the classes and on a live response
over h2c and over HTTP/1.1, so that a release that moves one fails the test
naming it before a user sees it. At run time a missing one is logged once,
as a warning saying what is lost (also checked here), never skipped
silently.
"""

from __future__ import annotations

import ast
import importlib
import importlib.metadata
import inspect
import logging
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing, asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest
import trio

import acp_trio.remote._http_client as http_client
from acp_trio.remote import agent_app
from acp_trio.remote._http_client import h2_stream_parts, raw_chunks, reset_when_left
from acp_trio.testing import ScenarioAgent

from .conftest import LIMIT, running

VERSIONS = ", ".join(
    f"{name} {importlib.metadata.version(name)}" for name in ("httpx2", "httpcore2")
)
USED = "acp_trio/remote/_http_client.py uses it"

#: Each private attribute the client reads, and whose it is.
REACHES = {
    "_stream": "httpx2._client:BoundAsyncStream (the elapsed-time wrapper), "
    "httpcore2._async.connection_pool:PoolByteStream",
    "_httpcore_stream": "httpx2._transports.default:AsyncResponseStream",
    "_connection": "httpcore2._async.http2:HTTP2ConnectionByteStream",
    "_request": "httpcore2._async.http2:HTTP2ConnectionByteStream",
    "_h2_state": "httpcore2._async.http2:AsyncHTTP2Connection",
    "_write_outgoing_data": "httpcore2._async.http2:AsyncHTTP2Connection",
}


def private(dotted: str) -> Any:
    """The object named ``module:attribute``; a failure names it."""
    module_name, _, attribute = dotted.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:  # pragma: no cover (a release that moved it)
        pytest.fail(f"{VERSIONS}: module {module_name} is gone ({exc}); {USED}")
    if not hasattr(module, attribute):  # pragma: no cover
        pytest.fail(f"{VERSIONS}: {dotted} is gone; {USED}")
    return getattr(module, attribute)


def sets_in_init(dotted: str, *names: str) -> None:
    source = inspect.getsource(private(dotted).__init__)
    for name in names:
        assert f"self.{name} = " in source, (
            f"{VERSIONS}: {dotted}.__init__ no longer sets {name}; {USED}"
        )


def test_the_client_reaches_only_the_names_checked_here() -> None:
    """A private name added to the client without a check here fails."""
    tree = ast.parse(Path(http_client.__file__).read_text())
    used: set[str] = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
            and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
        ):
            used.add(node.attr)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "getattr"
            and isinstance(node.args[1], ast.Constant)
        ):
            used.add(str(node.args[1].value))
    assert used == set(REACHES)


def test_the_body_streams() -> None:
    sets_in_init("httpx2._client:BoundAsyncStream", "_stream")
    sets_in_init("httpx2._transports.default:AsyncResponseStream", "_httpcore_stream")
    sets_in_init("httpcore2._async.connection_pool:PoolByteStream", "_stream")
    dotted = "httpcore2._async.connection_pool:PoolByteStream"
    assert "return self._stream.__aiter__()" in inspect.getsource(private(dotted).__aiter__), (
        f"{VERSIONS}: {dotted} no longer iterates its stream's own iterator; {USED}"
    )
    for dotted in (
        "httpcore2._async.http2:HTTP2ConnectionByteStream",
        "httpcore2._async.http11:HTTP11ConnectionByteStream",
    ):
        assert inspect.isasyncgenfunction(private(dotted).__aiter__), (
            f"{VERSIONS}: {dotted}.__aiter__ is no longer an async generator; {USED}"
        )


def test_the_http2_connection() -> None:
    dotted = "httpcore2._async.http2:HTTP2ConnectionByteStream"
    sets_in_init(dotted, "_connection", "_request")
    dotted = "httpcore2._async.http2:AsyncHTTP2Connection"
    sets_in_init(dotted, "_h2_state")
    assert "h2.connection.H2Connection(" in inspect.getsource(private(dotted).__init__), (
        f"{VERSIONS}: {dotted}._h2_state is no longer h2's H2Connection; {USED}"
    )
    write = private(dotted)._write_outgoing_data
    assert inspect.iscoroutinefunction(write), f"{VERSIONS}: {dotted}._write_outgoing_data"
    assert list(inspect.signature(write).parameters) == ["self", "request"], (
        f"{VERSIONS}: {dotted}._write_outgoing_data takes other parameters; {USED}"
    )
    # h2's public API, as called.
    import h2.connection

    reset = inspect.signature(h2.connection.H2Connection.reset_stream)
    assert list(reset.parameters)[:3] == ["self", "stream_id", "error_code"]


@asynccontextmanager
async def sse_response(http2: bool) -> AsyncIterator[httpx2.Response]:
    """A live SSE response (the connection's stream, left open by the
    server), over h2c or HTTP/1.1, read through ``reset_when_left``."""
    init = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {"protocolVersion": 1, "clientCapabilities": {}},
    }
    async with (
        running(agent_app(ScenarioAgent)) as base,
        httpx2.AsyncClient(http1=not http2, http2=http2, timeout=30) as client,
    ):
        url = base + "/acp"
        answer = await client.post(url, json=init)
        headers = {
            "Accept": "text/event-stream",
            "Acp-Connection-Id": answer.headers["acp-connection-id"],
        }
        async with (
            client.stream("GET", url, headers=headers) as response,
            reset_when_left(response),
        ):
            assert response.status_code == 200
            yield response


@pytest.mark.parametrize("http2", [True, False], ids=["h2c", "http1"])
async def test_a_live_response_has_what_the_client_reaches(
    http2: bool, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="acp_trio.remote")
    with trio.fail_after(LIMIT):
        async with sse_response(http2) as response:
            async with aclosing(raw_chunks(response)) as chunks:
                assert isinstance(chunks, AsyncGenerator)
                # httpcore2's own generator, not httpx2's.
                code: Any = getattr(chunks, "ag_code", None)
                assert code.co_filename.endswith("http2.py" if http2 else "http11.py")
            parts = h2_stream_parts(response) if http2 else None
            if http2:
                assert parts is not None
                connection, _, stream_id = parts
                stream = connection._h2_state.streams[stream_id]
                assert stream.open
        if parts is not None:
            # Left with its body unread: the client reset the stream.
            assert stream.closed
    assert [r for r in caplog.records if r.name == "acp_trio.remote"] == []


class _Moved(httpx2.AsyncByteStream):
    """A response stream as a httpx2 that moved its internals would hand out."""

    async def __aiter__(self) -> AsyncIterator[bytes]:  # pragma: no cover
        yield b""


async def test_internals_that_moved_are_logged_not_skipped_silently(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(http_client, "_warned", set())
    caplog.set_level(logging.WARNING, logger="acp_trio.remote")
    response = httpx2.Response(200, stream=_Moved(), extensions={"http_version": b"HTTP/2"})
    for _ in range(2):
        # Read as httpx2 reads it, with a warning (once).
        assert raw_chunks(response) is not None
        async with reset_when_left(response):
            pass
    warnings = [r.getMessage() for r in caplog.records if r.name == "acp_trio.remote"]
    assert len(warnings) == 1, warnings
    assert "no longer have the httpcore2 stream under a response's stream" in warnings[0]
    assert "ResourceWarning" in warnings[0]
    assert httpx2.__version__ in warnings[0]
    # An HTTP/2 connection that moved what a reset needs: logged too.
    assert h2_stream_parts(response) is None
    inner = type("Inner", (), {"_stream": object()})()
    stream: Any = response.stream
    stream._stream = type("Outer", (), {"_httpcore_stream": inner})()
    assert h2_stream_parts(response) is None
    warnings = [r.getMessage() for r in caplog.records if r.name == "acp_trio.remote"]
    assert len(warnings) == 2, warnings
    assert "is not reset" in warnings[1]
