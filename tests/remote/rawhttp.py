"""Raw HTTP peers for the tests of the server's bounds: an HTTP/1.1 client
that writes exactly the bytes it is given (slow heads, bodies that stop,
``Expect: 100-continue``), and an h2c client on h2 that controls its own
flow-control windows, stream by stream. Both over real loopback sockets,
from any loopback source address (``127.0.0.2`` is another client)."""

from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import h2.config
import h2.connection
import h2.events
import h2.settings
import trio

INIT = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {"protocolVersion": 1, "clientCapabilities": {}},
}


def address(base: str) -> tuple[str, int]:
    host, port = base.removeprefix("http://").rsplit(":", 1)
    return host, int(port)


async def connect(base: str, source: str | None = None) -> trio.SocketStream:
    """A TCP connection to ``base`` (``http://HOST:PORT``), from ``source``
    (a loopback address) when given."""
    host, port = address(base)
    sock = trio.socket.socket(trio.socket.AF_INET, trio.socket.SOCK_STREAM)
    if source is not None:
        await sock.bind((source, 0))
    await sock.connect((host, port))
    return trio.SocketStream(sock)


@asynccontextmanager
async def tcp(base: str, source: str | None = None) -> AsyncIterator[trio.SocketStream]:
    stream = await connect(base, source)
    try:
        yield stream
    finally:
        with trio.CancelScope(shield=True):
            await stream.aclose()


def head(
    method: str,
    path: str = "/acp",
    headers: dict[str, str] | None = None,
    *,
    length: int | None = None,
) -> bytes:
    """A request head (``Content-Length: length`` when given)."""
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1"]
    for name, value in (headers or {}).items():
        lines.append(f"{name}: {value}")
    if length is not None:
        lines.append(f"Content-Length: {length}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


JSON = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


class Response:
    def __init__(self, status: int, headers: dict[str, str], rest: bytes) -> None:
        self.status = status
        self.headers = headers
        self.rest = rest

    def __repr__(self) -> str:
        return f"Response({self.status}, {self.headers}, {self.rest[:80]!r})"


async def read_head(stream: trio.abc.ReceiveStream, buffer: bytearray | None = None) -> Response:
    """The next response head (informational ones included); raises
    ``EOFError`` at the end of the stream."""
    data = buffer if buffer is not None else bytearray()
    while b"\r\n\r\n" not in data:
        chunk = await stream.receive_some()
        if not chunk:
            raise EOFError(f"the server closed after {bytes(data)!r}")
        data += chunk
    end = data.index(b"\r\n\r\n")
    status_line, *lines = bytes(data[:end]).decode("latin-1").split("\r\n")
    headers = {}
    for line in lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    rest = bytes(data[end + 4 :])
    del data[: end + 4]
    return Response(int(status_line.split()[1]), headers, rest)


async def read_response(
    stream: trio.abc.ReceiveStream, buffer: bytearray | None = None
) -> tuple[Response, bytes]:
    """The next final response and its body (by Content-Length)."""
    data = buffer if buffer is not None else bytearray()
    while True:
        response = await read_head(stream, data)
        if response.status >= 200:
            break
    size = int(response.headers.get("content-length", "0"))
    while len(data) < size:
        chunk = await stream.receive_some()
        if not chunk:
            raise EOFError(f"the server closed inside a body: {bytes(data)!r}")
        data += chunk
    body = bytes(data[:size])
    del data[:size]
    return response, body


async def closed(stream: trio.abc.ReceiveStream) -> bool:
    """Whether the server closes the connection (what it still sends is
    read and dropped); ``True`` at EOF or reset."""
    try:
        while await stream.receive_some():
            pass
    except trio.BrokenResourceError:
        pass
    return True


class H2Client:
    """An h2c client (prior knowledge) whose windows the test controls:
    ``window`` is its initial stream window (0: the server may send no DATA
    until the test opens it)."""

    def __init__(self, stream: trio.SocketStream, *, window: int = 65535) -> None:
        self.stream = stream
        config = h2.config.H2Configuration(client_side=True, header_encoding=None)
        self.conn = h2.connection.H2Connection(config=config)
        self.conn.local_settings = h2.settings.Settings(
            client=True, initial_values={h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: window}
        )
        self.statuses: dict[int, int] = {}
        self.headers: dict[int, dict[bytes, bytes]] = {}
        self.bodies: dict[int, bytearray] = {}
        self.ended: set[int] = set()
        self.reset: dict[int, int] = {}
        self.terminated = False
        self.auto_ack = True

    async def start(self) -> None:
        self.conn.initiate_connection()
        await self.flush()

    async def flush(self) -> None:
        data = self.conn.data_to_send()
        if data:
            await self.stream.send_all(data)

    def request(
        self,
        method: str,
        path: str = "/acp",
        headers: dict[str, str] | None = None,
        *,
        end_stream: bool = True,
    ) -> int:
        stream_id: int = self.conn.get_next_available_stream_id()
        pairs = [
            (b":method", method.encode()),
            (b":path", path.encode()),
            (b":scheme", b"http"),
            (b":authority", b"127.0.0.1"),
        ]
        for name, value in (headers or {}).items():
            pairs.append((name.lower().encode(), value.encode()))
        self.conn.send_headers(stream_id, pairs, end_stream=end_stream)
        self.bodies[stream_id] = bytearray()
        return stream_id

    def data(self, stream_id: int, data: bytes, *, end_stream: bool = False) -> None:
        self.conn.send_data(stream_id, data, end_stream=end_stream)

    async def read(self) -> bool:
        """Read once and act on the events; ``False`` at EOF."""
        try:
            data = await self.stream.receive_some()
        except trio.BrokenResourceError:
            data = b""
        if not data:
            self.terminated = True
            return False
        for event in self.conn.receive_data(data):
            self.on(event)
        await self.flush()
        return True

    def on(self, event: Any) -> None:
        if isinstance(event, h2.events.ResponseReceived):
            headers = dict(event.headers)
            status = int(headers[b":status"])
            if status >= 200:
                self.statuses[event.stream_id] = status
                self.headers[event.stream_id] = headers
        elif isinstance(event, h2.events.DataReceived):
            self.bodies.setdefault(event.stream_id, bytearray()).extend(event.data)
            if self.auto_ack:
                self.conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
        elif isinstance(event, h2.events.StreamEnded):
            self.ended.add(event.stream_id)
        elif isinstance(event, h2.events.StreamReset):
            self.reset[event.stream_id] = event.error_code
        elif isinstance(event, h2.events.ConnectionTerminated):
            self.terminated = True

    async def until(self, predicate: Any) -> None:
        """Read until ``predicate()`` holds (the test's watchdog bounds it);
        raises ``EOFError`` if the server closes first."""
        while not predicate():
            if not await self.read():
                if predicate():
                    return
                raise EOFError("the server closed the connection")

    async def response(self, stream_id: int) -> tuple[int, bytes]:
        await self.until(lambda: stream_id in self.ended or stream_id in self.reset)
        return self.statuses.get(stream_id, 0), bytes(self.bodies.get(stream_id, b""))


@asynccontextmanager
async def h2c(
    base: str, *, window: int = 65535, source: str | None = None
) -> AsyncIterator[H2Client]:
    async with tcp(base, source) as stream:
        client = H2Client(stream, window=window)
        await client.start()
        yield client


def dumps(obj: Any) -> bytes:
    return json.dumps(obj).encode()


def set_small_buffers(stream: trio.SocketStream) -> None:
    stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
