"""Shared helpers for the connection tests.

Rules: loopback only (``trio.testing`` memory streams), the autojump clock for
everything timed, and a ``trio.fail_after`` on every test (virtual seconds).

- :class:`Wire` records what a connection wrote and read (its ``trace`` hook).
- :func:`raw_peer` is the shipped :class:`~acp_trio.testing.ScriptedPeer`:
  it writes exact bytes and parses what comes back, with its own line
  splitter (not the code under test).
- :class:`ProgramPeer` plays the raw side of the random programs;
  :class:`ReaderWire` also records which task read each frame.
- :class:`FnHandler` builds a :class:`~acp_trio.lowlevel.Handler` from plain functions.
- :func:`raw_connection` and :func:`connection_pair` set up the two shapes.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
import trio.lowlevel
import trio.testing
from frames import Message
from frames import cancel as cancel  # the builders, re-exported for the connection tests
from frames import cancelled as cancelled
from frames import err as err
from frames import line as line
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
from acp_trio.testing import ScriptedPeer as ScriptedPeer

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


def raw_peer(stream: trio.abc.Stream) -> ScriptedPeer:
    """The shipped :class:`~acp_trio.testing.ScriptedPeer` on ``stream``, with
    the connection tests' generous read timeout (virtual seconds)."""
    return ScriptedPeer(stream, timeout=30)


class ProgramPeer:
    """The raw side of a random program (the property tests): queues frames,
    writes them whole or split anywhere, and reads everything back until the
    end of the stream, all through a :class:`ScriptedPeer`."""

    def __init__(self, stream: trio.abc.Stream) -> None:
        self.peer = raw_peer(stream)
        #: Every message queued, in order.
        self.written: list[Message] = []
        self.pending: list[bytes] = []
        #: Set by :meth:`reader` at the end of the stream.
        self.eof = trio.Event()

    async def reader(self) -> None:
        """Read until the end of the stream (run it in a task)."""
        await self.peer.receive_all(within=math.inf)
        self.eof.set()

    @property
    def received(self) -> list[Message]:
        """Every message read so far."""
        return [e.message for e in self.peer.transcript if e.direction == "received"]

    def queue(self, msg: Message) -> None:
        self.written.append(msg)
        self.pending.append(line(msg))

    async def flush(self, piece: int | None = None) -> None:
        """Write what is queued: in one write, or in ``piece``-byte writes
        (frames split anywhere)."""
        if self.pending:
            data, self.pending = b"".join(self.pending), []
            step = piece or len(data)
            for i in range(0, len(data), step):
                await self.peer.send_bytes(data[i : i + step])

    def outgoing_requests(self) -> list[Message]:
        return [m for m in self.received if "method" in m and "id" in m]

    def responses(self) -> list[Message]:
        return [m for m in self.received if "method" not in m]


READER = "acp reader"


def this_task() -> trio.lowlevel.Task:
    return trio.lowlevel.current_task()


class ReaderWire(Wire):
    """A :class:`Wire` that also records the task that read each frame (the
    ``trace`` hook runs in the reading task)."""

    def __init__(self) -> None:
        super().__init__()
        self.readers: list[tuple[Any, trio.lowlevel.Task]] = []

    def __call__(self, direction: str, frame: bytes) -> None:
        super().__call__(direction, frame)
        if direction == "recv":
            self.readers.append((self.frames[-1][1], this_task()))

    def reader_of(self, msg: Any) -> trio.lowlevel.Task:
        """The task that read ``msg`` (which must have been read once)."""
        found = [task for m, task in self.readers if m == msg]
        assert len(found) == 1, (msg, found)
        return found[0]

    def read_by(self, task: trio.lowlevel.Task) -> list[Any]:
        return [m for m, t in self.readers if t is task]


class FnHandler(Handler):
    """A Handler from functions: ``requests[method](ctx, params)`` and
    ``notifications[method](method, params)`` (``"*"`` matches any method).
    Every notification is recorded in :attr:`seen`; :attr:`running` counts
    the handler calls (requests and notifications) not returned yet."""

    def __init__(
        self,
        requests: dict[str, RequestFn] | None = None,
        notifications: dict[str, NotificationFn] | None = None,
    ) -> None:
        self.requests = requests or {}
        self.notifications = notifications or {}
        self.seen: list[tuple[str, Any]] = []
        self.running = 0

    async def handle_request(self, ctx: RequestContext, method: str, params: Any) -> Any:
        fn = self.requests.get(method) or self.requests.get("*")
        if fn is None:
            raise RequestError.method_not_found(method)
        self.running += 1
        try:
            return await fn(ctx, params)
        finally:
            self.running -= 1

    async def handle_notification(self, method: str, params: Any) -> None:
        self.seen.append((method, params))
        fn = self.notifications.get(method) or self.notifications.get("*")
        if fn is not None:
            self.running += 1
            try:
                await fn(method, params)
            finally:
                self.running -= 1


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
) -> AsyncIterator[tuple[Connection, ScriptedPeer, Wire]]:
    """A connection (``open_connection``) facing a :class:`ScriptedPeer`."""
    wire = Wire()
    ours, theirs = stream_pair()
    cfg = ConnectionConfig(trace=wire, **config)
    async with open_connection(ours, handler, config=cfg) as conn:
        yield conn, raw_peer(theirs), wire


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


async def still_works(peer: ScriptedPeer, request_id: Any = "check") -> None:
    """The connection still answers a request (the test handler's ``echo``)."""
    await peer.send(req(request_id, "echo", {"still": "works"}))
    assert await peer.receive() == ok(request_id, {"still": "works"})


async def give_up_on_a_call(conn: Connection, peer: ScriptedPeer, request_id: int = 0) -> None:
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
