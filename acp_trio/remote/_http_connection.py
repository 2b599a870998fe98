"""One ACP connection of the Streamable HTTP profile, server side: the
message stream the connection's handler reads and writes, with the routing
of what it writes onto the connection-scoped and session-scoped streams."""

from __future__ import annotations

import json
from collections import deque
from typing import Any

import trio

from acp_trio._core._message_stream import oversized
from acp_trio._jsonrpc import OversizedFrame

__all__ = ["CONNECTION_SCOPE", "HttpConnection", "Outbox", "ReplayBuffer", "id_key"]

#: The key of the connection-scoped stream (session streams are keyed by id).
CONNECTION_SCOPE: str | None = None

# Replies to these go on the connection-scoped stream, whatever their params.
_CONNECTION_METHODS = frozenset({"initialize", "session/new", "session/load", "session/list"})
# A request for these makes its session known (its stream can be opened).
_SESSION_OPENERS = frozenset({"session/load", "session/resume"})


def id_key(request_id: Any) -> tuple[str, Any]:
    """A dict key for a JSON-RPC id (``1`` and ``"1"`` stay apart)."""
    return (type(request_id).__name__, request_id)


def session_of(message: dict[str, Any]) -> str | None:
    params = message.get("params")
    if isinstance(params, dict):
        session_id = params.get("sessionId")
        if isinstance(session_id, str):
            return session_id
    return None


class ReplayBuffer:
    """The events of one resumable SSE stream sent and maybe not read: the
    last ``size`` of them, each with its cursor (1, 2, 3, ...: the SSE
    ``id:``), so a GET with ``Last-Event-ID`` can resume after any of them.
    Provisional (the durable-transport draft after the RFD)."""

    def __init__(self, size: int) -> None:
        self._events: deque[tuple[int, bytes]] = deque(maxlen=size)
        #: The cursor of the last event sent (0: none yet).
        self.last = 0

    def add(self, message: bytes) -> int:
        """Keep ``message``, about to be sent; returns its cursor."""
        self.last += 1
        self._events.append((self.last, message))
        return self.last

    def after(self, cursor: str) -> list[tuple[int, bytes]] | None:
        """The events sent after ``cursor``, oldest first; ``None`` if it is
        not a cursor of this stream or some event after it was dropped
        from the buffer (the client must fall back: ``409``)."""
        try:
            position = int(cursor)
        except ValueError:
            return None
        if not 0 <= position <= self.last:
            return None
        oldest = self._events[0][0] if self._events else self.last + 1
        if position + 1 < oldest:
            return None  # an event after the cursor is gone
        return [(n, message) for n, message in self._events if n > position]


class Outbox:
    """The bounded queue of one SSE stream: messages wait here while no GET
    reads it (a dropped stream loses nothing queued); when it is full, the
    agent's writes wait, so a client that stops reading slows its agent
    instead of growing the server's memory. With resumable streams, the
    messages sent are kept too (:class:`ReplayBuffer`)."""

    def __init__(self, size: int, replay_size: int = 0) -> None:
        self.send, self.receive = trio.open_memory_channel[bytes](size)
        #: The GET now reading it; a newer GET replaces it.
        self.reader: trio.CancelScope | None = None
        #: The events sent, to replay (resumable streams only).
        self.replay = ReplayBuffer(replay_size) if replay_size > 0 else None


class HttpConnection:
    """The server side of one Streamable HTTP connection, as a
    :class:`~acp_trio._core._message_stream.MessageStream` for its handler."""

    def __init__(
        self, connection_id: str, max_message_size: int, queue_size: int, replay_size: int = 0
    ) -> None:
        self.id = connection_id
        self._max_message_size = max_message_size
        self._queue_size = queue_size
        self._replay_size = replay_size
        self._inbound_send, self._inbound = trio.open_memory_channel[bytes](queue_size)
        self.outboxes: dict[str | None, Outbox] = {
            CONNECTION_SCOPE: Outbox(queue_size, replay_size)
        }
        # The client's requests whose reply goes on a session stream.
        self._reply_session: dict[tuple[str, Any], str] = {}
        self._initialize_id: tuple[str, Any] | None = None
        self._initialize_reply: bytes | None = None
        self.initialized = trio.Event()
        #: Cancelled by DELETE; ends the handler.
        self.cancel_scope = trio.CancelScope()
        self.ended = trio.Event()
        self._closed = False
        #: When a request last touched it (``trio.current_time()``), and how
        #: many SSE streams are open now: what the idle timeout looks at.
        self.last_activity = trio.current_time()
        self.open_streams = 0

    def touch(self) -> None:
        self.last_activity = trio.current_time()

    def idle_for(self) -> float:
        """Seconds without a request and without an open stream (0 while a
        stream is open)."""
        if self.open_streams:
            return 0.0
        return trio.current_time() - self.last_activity

    # -- the HTTP side -------------------------------------------------

    def outbox(self, session_id: str | None) -> Outbox:
        box = self.outboxes.get(session_id)
        if box is None:
            box = self.outboxes[session_id] = Outbox(self._queue_size, self._replay_size)
        return box

    def note_incoming(self, message: dict[str, Any]) -> None:
        """Record where the reply to a client's request goes."""
        method = message.get("method")
        if not isinstance(method, str) or "id" not in message:
            return
        key = id_key(message["id"])
        if method == "initialize":
            self._initialize_id = key
        session_id = session_of(message)
        if session_id is None:
            return
        if method in _SESSION_OPENERS:
            self.outbox(session_id)
        if method not in _CONNECTION_METHODS:
            self._reply_session[key] = session_id

    async def deliver(self, body: bytes) -> None:
        """Hand a POSTed message to the connection (waits while its queue
        is full). Raises ``trio.BrokenResourceError`` once it ended."""
        try:
            await self._inbound_send.send(body)
        except (trio.ClosedResourceError, trio.BrokenResourceError) as exc:
            raise trio.BrokenResourceError("the connection ended") from exc

    def initialize_reply(self) -> bytes | None:
        return self._initialize_reply

    def end(self) -> None:
        """The handler returned: every stream ends."""
        self._inbound_send.close()
        for box in self.outboxes.values():
            box.send.close()
        self.initialized.set()
        self.ended.set()

    # -- the MessageStream side ---------------------------------------

    @property
    def max_message_size(self) -> int:
        return self._max_message_size

    async def receive_message(self) -> bytes | OversizedFrame | None:
        if self._closed:
            raise trio.ClosedResourceError("the connection was closed")
        try:
            data = await self._inbound.receive()
        except trio.EndOfChannel:
            return None
        if len(data) > self._max_message_size:
            return oversized(data, self._max_message_size)
        return data

    async def send_message(self, message: bytes) -> None:
        if self._closed:
            raise trio.ClosedResourceError("the connection was closed")
        is_initialize, target = self._route(message)
        if is_initialize:
            self._initialize_reply = message
            self.initialized.set()
            return
        channel = self.outbox(target).send
        try:
            # Without a checkpoint while there is room: the writer queues a
            # whole batch before the SSE stream wakes up to send it at once.
            try:
                channel.send_nowait(message)
            except trio.WouldBlock:
                await channel.send(message)
        except trio.ClosedResourceError as exc:
            raise trio.BrokenResourceError("the connection ended") from exc

    async def aclose(self) -> None:
        self._closed = True
        self._inbound.close()

    def _route(self, message: bytes) -> tuple[bool, str | None]:
        """(is it the reply to ``initialize``, the scope it goes to)."""
        try:
            obj = json.loads(message)
        except ValueError:
            return False, CONNECTION_SCOPE
        if not isinstance(obj, dict):
            return False, CONNECTION_SCOPE
        if "method" in obj:
            return False, session_of(obj)
        if "id" not in obj:
            return False, CONNECTION_SCOPE
        key = id_key(obj["id"])
        if key == self._initialize_id and self._initialize_reply is None:
            return True, CONNECTION_SCOPE
        result = obj.get("result")
        if isinstance(result, dict) and isinstance(result.get("sessionId"), str):
            self.outbox(result["sessionId"])  # a new session: its stream can be opened
        return False, self._reply_session.pop(key, CONNECTION_SCOPE)
