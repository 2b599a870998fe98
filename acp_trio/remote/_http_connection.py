"""One ACP connection of the Streamable HTTP profile, server side: the
message stream the connection's handler reads and writes, with the routing
of what it writes onto the connection-scoped and session-scoped streams.

Messages are routed by what a peek at their top-level members shows
(:func:`route_of`: ``method``, ``id``, the ``sessionId`` of ``params`` or
``result``), never by parsing them whole: the handler parses each message
once (under ``serve``, the agent's own process does). What waits is bounded
in bytes as well as in messages: the messages POSTed and not yet read
(:attr:`HttpConnection.inbound_budget`), those queued for the SSE streams
(one budget for all of a connection's streams), and each replay buffer."""

from __future__ import annotations

import json.decoder
import re
from collections import deque
from collections.abc import Callable
from typing import Any, Final

import attrs
import trio

from acp_trio._core._message_stream import oversized
from acp_trio._jsonrpc import OversizedFrame, is_request_id

__all__ = [
    "CONNECTION_SCOPE",
    "ByteBudget",
    "HttpConnection",
    "Outbox",
    "ReplayBuffer",
    "Route",
    "id_key",
    "route_of",
    "session_of",
]

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
    """The ``sessionId`` string of a decoded message's ``params``."""
    params = message.get("params")
    if isinstance(params, dict):
        session_id = params.get("sessionId")
        if isinstance(session_id, str):
            return session_id
    return None


@attrs.frozen
class Route:
    """What routing needs of a message: its ``method`` (``None``: none, or
    not a string), whether it has a valid ``id`` and which, and the
    ``sessionId`` string of its ``params`` (or of its ``result``)."""

    method: str | None = None
    has_id: bool = False
    id: Any = None
    session_id: str | None = None


_NOTHING: Final = Route()
_decoder: Final = json.decoder.JSONDecoder()
_raw_decode: Final = _decoder.raw_decode
# The standard library's C string scanner: (text, index after the opening
# quote, strict) -> (the string, index after its closing quote).
_scanstring: Final[Callable[..., tuple[str, int]]] = json.decoder.scanstring  # type: ignore[attr-defined]
_WHITESPACE: Final = re.compile(r"[ \t\n\r]*")


def _skip(text: str, i: int) -> int:
    """Past the JSON whitespace at ``text[i]``."""
    match = _WHITESPACE.match(text, i)
    assert match is not None  # (it matches the empty string)
    return match.end()


#: How much of a message the peek decodes first (the members routing needs
#: come first in practice); the whole message only when they do not.
_PEEK: Final = 64 * 1024


class _Incomplete(Exception):
    pass


def route_of(message: bytes, *, incoming: bool = False) -> Route:
    """The :class:`Route` of ``message``, read from its first top-level
    members without parsing the rest (a member of no interest that comes
    before the ones that are is parsed and dropped). ``incoming``: a
    client's message (only a request's route is needed; a response's is
    not); else one to send (its ``id`` matters only without a ``method``).
    A message that is not a JSON object routes nowhere in particular
    (:data:`CONNECTION_SCOPE`); its handler answers it. Call it on messages
    within the JSON limits (what it parses is bounded by them)."""
    # The shapes compact encoders write (acp_trio's among them), read in C:
    # a request or notification whose params start with its sessionId, a
    # response. Anything else is walked.
    found = _CANONICAL.match(message)
    if found is not None:
        request_id, method, session_id, kind, result_session = found.groups()
        if method is not None:
            # A client's request may put its id after the params: without an
            # id before the method, only a message that ends there is surely
            # a notification; the others are walked.
            ends = message[found.end() - 1 :] == b"}"
            if ends or (session_id is not None and (request_id is not None or not incoming)):
                return Route(
                    method.decode("utf-8", "replace"),
                    request_id is not None,
                    _canonical_id(request_id),
                    None if session_id is None else session_id.decode("utf-8", "replace"),
                )
        elif incoming:
            return _NOTHING  # a client's response: routed by nothing
        elif request_id is not None and (kind == b"error" or result_session is not None):
            return Route(
                None,
                True,
                _canonical_id(request_id),
                None if result_session is None else result_session.decode("utf-8", "replace"),
            )
    if len(message) > _PEEK:
        try:
            return _walk(message[:_PEEK].decode("utf-8", "ignore"), incoming, partial=True)
        except _Incomplete:
            pass
    return _walk(message.decode("utf-8", "replace"), incoming, partial=False)


# {"jsonrpc":"2.0", then an id (an integer of at most 15 digits, or a plain
# string), then either "method":"..." with params starting with a plain
# sessionId (or no params: the message ends), or "result"/"error" (a
# result starting with a plain sessionId).
_PLAIN: Final = rb'"([^"\\\x00-\x1f]{0,256})"'
_CANONICAL: Final = re.compile(
    rb'\{"jsonrpc":"2\.0",(?:"id":(-?(?:0|[1-9][0-9]{0,14})|"[^"\\\x00-\x1f]{0,256}"),)?'
    rb'(?:"method":' + _PLAIN + rb'(?:,"params":\{"sessionId":' + _PLAIN + rb"|\})"
    rb'|"(result|error)":(?:\{"sessionId":' + _PLAIN + rb")?)"
)


def _canonical_id(raw: bytes | None) -> int | str | None:
    if raw is None:
        return None
    if raw[:1] == b'"':
        return raw[1:-1].decode("utf-8", "replace")
    return int(raw)


def _walk(text: str, incoming: bool, *, partial: bool) -> Route:
    if text.startswith("\ufeff"):
        text = text[1:]
    method: str | None = None
    request_id: Any = None
    session_id: str | None = None
    has_id = seen_id = seen_method = nested = False
    try:
        i = _skip(text, 0)
        if text[i : i + 1] != "{":
            return _NOTHING
        i = _skip(text, i + 1)
        closing = text[i : i + 1] == "}"
        while not closing:
            key, i = _member(text, i)
            if incoming and key in ("result", "error"):
                return _NOTHING  # a client's response: routed by nothing
            if key in ("params", "result") and text[i : i + 1] == "{" and not nested:
                nested = True
                session_id, i, closing = _session_id(text, i)
                if not closing and not _enough(seen_method, seen_id, nested, incoming):
                    i = _rest_of_object(text, i)
                closing = False
            else:
                value, i = _raw_decode(text, i)
                if key == "method":
                    seen_method = True
                    method = value if isinstance(value, str) else None
                elif key == "id":
                    seen_id = True
                    has_id, request_id = is_request_id(value), value
            if _enough(seen_method, seen_id, nested, incoming):
                break
            i, closing = _next_member(text, i)
    except (ValueError, IndexError, RecursionError) as exc:
        if partial:
            raise _Incomplete from exc
    return Route(method, has_id, request_id if has_id else None, session_id)


def _enough(seen_method: bool, seen_id: bool, nested: bool, incoming: bool) -> bool:
    """Whether the members seen tell the route: a request's method, id and
    params; a message to send with a method, its method and params."""
    return seen_method and nested and (seen_id or not incoming)


def _member(text: str, i: int) -> tuple[str, int]:
    """The key of the member at ``text[i]`` (its opening quote), and where
    its value starts."""
    if text[i : i + 1] != '"':
        raise ValueError("no key")
    key, i = _scanstring(text, i + 1)
    i = _skip(text, i)
    if text[i : i + 1] != ":":
        raise ValueError("no colon")
    return key, _skip(text, i + 1)


def _next_member(text: str, i: int) -> tuple[int, bool]:
    """After a value: where the next member starts, or that the object
    closes (``True``)."""
    i = _skip(text, i)
    c = text[i : i + 1]
    if c == "}":
        return i + 1, True
    if c != ",":
        raise ValueError("no comma")
    return _skip(text, i + 1), False


def _session_id(text: str, i: int) -> tuple[str | None, int, bool]:
    """The ``sessionId`` string of the object at ``text[i]``; where the
    search stopped (after its value, or after the object); whether the
    object was closed."""
    i = _skip(text, i + 1)
    if text[i : i + 1] == "}":
        return None, i + 1, True
    while True:
        key, i = _member(text, i)
        value, i = _raw_decode(text, i)
        if key == "sessionId":
            return (value if isinstance(value, str) else None), i, False
        i, closed = _next_member(text, i)
        if closed:
            return None, i, True


def _rest_of_object(text: str, i: int) -> int:
    """From after a member's value to after its object's end."""
    while True:
        i, closed = _next_member(text, i)
        if closed:
            return i
        _, i = _member(text, i)
        _, i = _raw_decode(text, i)


class ByteBudget:
    """Bytes that may wait somewhere: taken before they wait, given back
    once they no longer do. A taker waits while the budget would be
    overdrawn, unless nothing is taken (one message the size cap admitted
    always fits alone)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self._lot = trio.lowlevel.ParkingLot()

    def try_take(self, size: int) -> bool:
        if self.used and self.used + size > self.limit:
            return False
        self.used += size
        return True

    async def take(self, size: int) -> None:
        await trio.lowlevel.checkpoint_if_cancelled()
        while not self.try_take(size):
            await self._lot.park()

    def give(self, size: int) -> None:
        self.used -= size
        self._lot.unpark_all()


class ReplayBuffer:
    """The events of one resumable SSE stream sent and maybe not read: the
    last ``size`` of them, each with its cursor (1, 2, 3, ...: the SSE
    ``id:``), so a GET with ``Last-Event-ID`` can resume after any of them.
    Provisional (the durable-transport draft after the RFD)."""

    def __init__(self, size: int, max_bytes: int | None = None) -> None:
        self._events: deque[tuple[int, bytes]] = deque(maxlen=size)
        #: The cursor of the last event sent (0: none yet).
        self.last = 0
        # The bytes kept, and their bound (the oldest go first past it).
        self._bytes = 0
        self._max_bytes = max_bytes

    def add(self, message: bytes) -> int:
        """Keep ``message``, about to be sent; returns its cursor."""
        self.last += 1
        events = self._events
        if len(events) == events.maxlen:
            self._bytes -= len(events[0][1])
        events.append((self.last, message))
        self._bytes += len(message)
        if self._max_bytes is not None:
            while len(events) > 1 and self._bytes > self._max_bytes:
                self._bytes -= len(events.popleft()[1])
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

    def __init__(
        self,
        size: int,
        replay_size: int = 0,
        budget: ByteBudget | None = None,
        replay_bytes: int | None = None,
    ) -> None:
        self.send, self.receive = trio.open_memory_channel[bytes](size)
        #: The GET now reading it; a newer GET replaces it.
        self.reader: trio.CancelScope | None = None
        #: The events sent, to replay (resumable streams only).
        self.replay = ReplayBuffer(replay_size, replay_bytes) if replay_size > 0 else None
        #: The bytes its messages hold while they wait (shared by the
        #: connection's streams).
        self.budget = budget if budget is not None else ByteBudget(2**62)

    def taken(self, message: bytes) -> None:
        """``message`` left the queue (to be sent)."""
        self.budget.give(len(message))


class HttpConnection:
    """The server side of one Streamable HTTP connection, as a
    :class:`~acp_trio._core._message_stream.MessageStream` for its handler.

    ``queue_bytes``: the bound of the bytes waiting in each direction (POSTed
    and not yet read; queued for its SSE streams, all of them together);
    twice the size cap by default."""

    def __init__(
        self,
        connection_id: str,
        max_message_size: int,
        queue_size: int,
        replay_size: int = 0,
        queue_bytes: int | None = None,
    ) -> None:
        self.id = connection_id
        self._max_message_size = max_message_size
        self._queue_size = queue_size
        self._replay_size = replay_size
        limit = 2 * max_message_size if queue_bytes is None else queue_bytes
        #: The bytes of POST bodies being read or waiting to be read by the
        #: handler (a POST takes its share before its body is read).
        self.inbound_budget = ByteBudget(limit)
        self._outbound_budget = ByteBudget(limit)
        self._replay_bytes = limit
        self._inbound_send, self._inbound = trio.open_memory_channel[
            tuple[bytes | OversizedFrame, int]
        ](queue_size)
        self.outboxes: dict[str | None, Outbox] = {CONNECTION_SCOPE: self._new_outbox()}
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

    def _new_outbox(self) -> Outbox:
        return Outbox(
            self._queue_size, self._replay_size, self._outbound_budget, self._replay_bytes
        )

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
            box = self.outboxes[session_id] = self._new_outbox()
        return box

    def note_incoming(self, route: Route) -> None:
        """Record where the reply to a client's request goes."""
        if route.method is None or not route.has_id:
            return
        key = id_key(route.id)
        if route.method == "initialize":
            self._initialize_id = key
        session_id = route.session_id
        if session_id is None:
            return
        if route.method in _SESSION_OPENERS:
            self.outbox(session_id)
        if route.method not in _CONNECTION_METHODS:
            self._reply_session[key] = session_id

    async def deliver(self, message: bytes | OversizedFrame, taken: int) -> None:
        """Hand a POSTed message to the connection (waits while its queue
        is full), with the bytes it took of :attr:`inbound_budget` (given
        back once the handler reads it). Raises ``trio.BrokenResourceError``
        once it ended."""
        try:
            await self._inbound_send.send((message, taken))
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
            data, taken = await self._inbound.receive()
        except trio.EndOfChannel:
            return None
        self.inbound_budget.give(taken)
        if type(data) is bytes and len(data) > self._max_message_size:
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
        box = self.outbox(target)
        size = len(message)
        if not box.budget.try_take(size):
            await box.budget.take(size)
        channel = box.send
        try:
            # Without a checkpoint while there is room: the writer queues a
            # whole batch before the SSE stream wakes up to send it at once.
            try:
                channel.send_nowait(message)
            except trio.WouldBlock:
                await channel.send(message)
        except trio.ClosedResourceError as exc:
            box.budget.give(size)
            raise trio.BrokenResourceError("the connection ended") from exc
        except BaseException:
            box.budget.give(size)
            raise

    async def aclose(self) -> None:
        self._closed = True
        self._inbound.close()

    def _route(self, message: bytes) -> tuple[bool, str | None]:
        """(is it the reply to ``initialize``, the scope it goes to)."""
        route = route_of(message)
        if route.method is not None:
            return False, route.session_id
        if not route.has_id:
            return False, CONNECTION_SCOPE
        key = id_key(route.id)
        if key == self._initialize_id and self._initialize_reply is None:
            return True, CONNECTION_SCOPE
        if route.session_id is not None:
            self.outbox(route.session_id)  # a new session: its stream can be opened
        return False, self._reply_session.pop(key, CONNECTION_SCOPE)
