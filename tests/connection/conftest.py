"""Shared helpers for the connection tests.

Rules: loopback only (``trio.testing`` memory streams), the autojump clock for
everything timed, and a ``trio.fail_after`` on every test (virtual seconds).

- :class:`Wire` records what a connection wrote and read (its ``trace`` hook).
- :class:`RawPeer` is a scripted peer: it writes exact bytes and parses what
  comes back, with its own tiny line splitter (not the code under test).
- :class:`FnHandler` builds a :class:`~acp_trio.lowlevel.Handler` from plain functions.
- :func:`raw_connection` and :func:`connection_pair` set up the two shapes.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
import trio.testing
from frames import Message, line
from frames import cancel as cancel  # the builders, re-exported for the connection tests
from frames import cancelled as cancelled
from frames import err as err
from frames import notif as notif
from frames import ok as ok
from frames import req as req

from acp_trio import (
    ConnectionConfig,
    RequestError,
)
from acp_trio.lowlevel import (
    Connection,
    Handler,
    RequestContext,
    open_connection,
)

RequestFn = Callable[[RequestContext, Any], Awaitable[Any]]
NotificationFn = Callable[[str, Any], Awaitable[None]]

#: Virtual seconds a test may take (every test runs under the autojump clock).
LIMIT = 600


@pytest.fixture
def autojump_clock() -> trio.testing.MockClock:
    return trio.testing.MockClock(autojump_threshold=0)


def is_response(msg: Message) -> bool:
    return "method" not in msg and ("result" in msg or "error" in msg)


class Wire:
    """A ``trace`` hook that keeps every frame, parsed when it is JSON."""

    def __init__(self) -> None:
        self.frames: list[tuple[str, Any]] = []

    def __call__(self, direction: str, frame: bytes) -> None:
        assert not frame.endswith(b"\n")
        try:
            value: Any = json.loads(frame)
        except ValueError:
            value = frame
        self.frames.append((direction, value))

    def sent(self) -> list[Any]:
        return [m for d, m in self.frames if d == "send"]

    def received(self) -> list[Any]:
        return [m for d, m in self.frames if d == "recv"]

    def sent_responses(self) -> list[Message]:
        return [m for m in self.sent() if isinstance(m, dict) and is_response(m)]

    def sent_requests(self) -> list[Message]:
        return [m for m in self.sent() if isinstance(m, dict) and "method" in m and "id" in m]

    def sent_cancels(self) -> list[Any]:
        return [
            m["params"]["requestId"]
            for m in self.sent()
            if isinstance(m, dict) and m.get("method") == "$/cancel_request" and "id" not in m
        ]


class RawPeer:
    """One end of a memory stream, driven byte by byte by the test."""

    def __init__(self, stream: trio.abc.Stream) -> None:
        self.stream = stream
        self._buf = b""
        self._eof = False

    async def send(self, *messages: Message | bytes) -> None:
        """Write the messages as one chunk (one ``send_all``)."""
        await self.stream.send_all(b"".join(line(m) for m in messages))

    async def send_raw(self, data: bytes) -> None:
        await self.stream.send_all(data)

    async def send_eof(self) -> None:
        assert isinstance(self.stream, trio.StapledStream)
        await self.stream.send_eof()

    async def _line(self) -> bytes | None:
        while b"\n" not in self._buf:
            if self._eof:
                return None
            data = await self.stream.receive_some(65536)
            if not data:
                self._eof = True
                if self._buf:
                    self._buf += b"\n"
            else:
                self._buf += data
        frame, _, self._buf = self._buf.partition(b"\n")
        return frame

    async def receive(self, within: float = 30) -> Message:
        """The next message; fails on EOF or after ``within`` seconds."""
        with trio.fail_after(within):
            frame = await self._line()
        assert frame is not None, "unexpected EOF"
        value: Message = json.loads(frame)
        return value

    async def receive_n(self, n: int, within: float = 30) -> list[Message]:
        return [await self.receive(within) for _ in range(n)]

    async def expect_silence(self, seconds: float = 5) -> None:
        """Assert that nothing arrives for ``seconds`` (virtual) seconds."""
        with trio.move_on_after(seconds):
            frame = await self._line()
            raise AssertionError(f"expected silence, got {frame!r}")

    async def expect_eof(self, within: float = 30) -> None:
        with trio.fail_after(within):
            frame = await self._line()
        assert frame is None, f"expected EOF, got {frame!r}"


class FnHandler(Handler):
    """A Handler from functions: ``requests[method](ctx, params)`` and
    ``notifications[method](method, params)`` (``"*"`` matches any method).
    Every notification is recorded in :attr:`seen`."""

    def __init__(
        self,
        requests: dict[str, RequestFn] | None = None,
        notifications: dict[str, NotificationFn] | None = None,
    ) -> None:
        self.requests = requests or {}
        self.notifications = notifications or {}
        self.seen: list[tuple[str, Any]] = []

    async def handle_request(self, ctx: RequestContext, method: str, params: Any) -> Any:
        fn = self.requests.get(method) or self.requests.get("*")
        if fn is None:
            raise RequestError.method_not_found(method)
        return await fn(ctx, params)

    async def handle_notification(self, method: str, params: Any) -> None:
        self.seen.append((method, params))
        fn = self.notifications.get(method) or self.notifications.get("*")
        if fn is not None:
            await fn(method, params)


async def sleep_forever_handler(ctx: RequestContext, params: Any) -> Any:
    await trio.sleep_forever()


async def echo_handler(ctx: RequestContext, params: Any) -> Any:
    return params


def pipe_stream_pair() -> tuple[trio.StapledStream[Any, Any], trio.StapledStream[Any, Any]]:
    """Two streams joined by two real OS pipes, as a subprocess's would be."""
    a_read, b_write = os.pipe()
    b_read, a_write = os.pipe()
    a = trio.StapledStream(trio.lowlevel.FdStream(a_write), trio.lowlevel.FdStream(a_read))
    b = trio.StapledStream(trio.lowlevel.FdStream(b_write), trio.lowlevel.FdStream(b_read))
    return a, b


StreamPair = Callable[[], tuple[trio.abc.Stream, trio.abc.Stream]]

#: Runs a test (taking ``stream_pair``) over memory streams and over pipes.
both_streams = pytest.mark.parametrize(
    "stream_pair",
    [trio.testing.memory_stream_pair, pipe_stream_pair],
    ids=["memory", "pipes"],
)


@asynccontextmanager
async def raw_connection(
    handler: Handler | None = None,
    *,
    stream_pair: Callable[[], tuple[trio.abc.Stream, trio.abc.Stream]] = (
        trio.testing.memory_stream_pair
    ),
    **config: Any,
) -> AsyncIterator[tuple[Connection, RawPeer, Wire]]:
    """A connection (``open_connection``) facing a :class:`RawPeer`."""
    wire = Wire()
    ours, theirs = stream_pair()
    cfg = ConnectionConfig(trace=wire, **config)
    async with open_connection(ours, handler, config=cfg) as conn:
        yield conn, RawPeer(theirs), wire


@asynccontextmanager
async def connection_pair(
    handler_a: Handler | None = None,
    handler_b: Handler | None = None,
    config_a: dict[str, Any] | None = None,
    config_b: dict[str, Any] | None = None,
) -> AsyncIterator[tuple[Connection, Connection, Wire, Wire]]:
    """Two connections talking over a memory stream pair."""
    wire_a, wire_b = Wire(), Wire()
    sa, sb = trio.testing.memory_stream_pair()
    cfg_a = ConnectionConfig(trace=wire_a, **(config_a or {}))
    cfg_b = ConnectionConfig(trace=wire_b, **(config_b or {}))
    async with (
        open_connection(sa, handler_a, config=cfg_a) as a,
        open_connection(sb, handler_b, config=cfg_b) as b,
    ):
        yield a, b, wire_a, wire_b


async def still_works(peer: RawPeer, request_id: Any = "check") -> None:
    """The connection still answers a request (the test handler's ``echo``)."""
    await peer.send(req(request_id, "echo", {"still": "works"}))
    assert await peer.receive() == ok(request_id, {"still": "works"})


async def give_up_on_a_call(conn: Connection, peer: RawPeer, request_id: int = 0) -> None:
    """Call ``slow`` (the next id is ``request_id``), give up after a second:
    the peer sees the request and its ``$/cancel_request``."""
    with trio.move_on_after(1):
        await conn.call("slow")
    assert await peer.receive() == req(request_id, "slow")
    assert await peer.receive() == cancel(request_id)


async def settle() -> None:
    """Let every task run until all are blocked (nothing left to do now)."""
    await trio.testing.wait_all_tasks_blocked()


def assert_idle(conn: Connection) -> None:
    """Nothing in flight in the connection's registries and queues."""
    stats = conn.statistics()
    assert stats.incoming_in_flight == 0, stats
    assert stats.outgoing_pending == 0, stats
    assert stats.notifications_queued == 0, stats
    assert conn.request_tree() == []
