"""Reconnecting to a remote agent when its transport is lost beyond repair:
a message stream that outlives its transports. When one is lost (a
WebSocket closed, the HTTP connection gone: ``404``, a resumed stream
refused: ``409``), it opens another (backoff with jitter), sends
``initialize`` again (and ``authenticate`` if it was sent), and takes up
each session it saw opened: ``session/resume`` if the agent offers it
(``sessionCapabilities.resume``), else ``session/load`` (``loadSession``;
the history it replays before its reply is not passed on: the client has
it; over Streamable HTTP the reply and the history travel on different SSE
streams, so history arriving after the reply is passed on), else the
session is lost. The connection above never sees the change of transport.

What was in flight is settled, never left hanging: our requests sent on the
lost transport fail with :class:`ReplyLost` (their replies are gone: the
agent may or may not have done the work); the agent's requests still
running in our handlers are cancelled (``$/cancel_request``) and their
answers dropped (the agent that asked is gone); a call naming a session
that could not be taken up fails with :class:`SessionLost`.
"""

from __future__ import annotations

import json
import logging
import random
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import attrs
import httpx2
import trio

from acp_trio._core._groups import plain_exceptions
from acp_trio._core._message_stream import MessageStream
from acp_trio._exceptions import ACPError, ConnectionClosed
from acp_trio._jsonrpc import OversizedFrame
from acp_trio.remote._http_connection import id_key, session_of
from acp_trio.remote._websocket import WebSocketClosed, WebSocketError

__all__ = ["Reconnect", "ReconnectingStream", "ReplyLost", "SessionLost", "open_reconnecting"]

_log = logging.getLogger("acp_trio.remote")

# Our own requests during a reconnection carry string ids with this prefix;
# so do the agent's requests after a reconnection (its ids start again).
_OURS = "acp-trio/reconnect/"
_THEIRS = "acp-trio/epoch/"

# Requests whose success opens (or takes up) a session, and where its id is.
_OPENERS_RESULT = frozenset({"session/new", "session/fork"})
_OPENERS_PARAMS = frozenset({"session/load", "session/resume"})
# The fields of the opener's params that resuming or loading needs again.
_KEPT = ("cwd", "mcpServers", "additionalDirectories")

# What losing a transport (or failing to open one) raises.
_TRANSPORT_ERRORS = (
    OSError,
    trio.BrokenResourceError,
    trio.TooSlowError,
    ACPError,
    WebSocketError,
    WebSocketClosed,
    httpx2.HTTPError,
)


@attrs.frozen
class Reconnect:
    """How :func:`~acp_trio.remote.open_remote_agent` reconnects when the
    transport is lost: up to ``attempts`` tries in a row (``None``: no
    limit), the first after ``initial_delay`` seconds, each next one twice
    as late up to ``max_delay``, each delay with jitter (between half and
    all of it); each request the reconnection makes may take ``timeout``
    seconds."""

    attempts: int | None = 8
    initial_delay: float = 0.1
    max_delay: float = 10.0
    #: Seconds each request of a reconnection (``initialize``, taking up a
    #: session) may take before the try counts as failed.
    timeout: float = 60.0

    def delay(self, failures: int) -> float:
        """The wait before try number ``failures`` (1-based), with jitter."""
        base = min(self.max_delay, self.initial_delay * 2.0 ** min(failures - 1, 30))
        return float(base * (0.5 + random.random() / 2))


class ReplyLost(ConnectionClosed):
    """The transport carrying this request was lost before its reply came.
    The stream reconnected, but the reply is gone: the agent may have done
    the work or not (for ``session/prompt``: the turn may have ended, been
    cancelled when the agent saw the connection go, or still be running on
    an HTTP connection the server has not ended yet; the session's updates
    sent meanwhile are lost too). ``method``: the request's method;
    ``session_id``: the session it named, if any."""

    def __init__(self, method: str, session_id: str | None = None) -> None:
        where = f" (session {session_id!r})" if session_id is not None else ""
        super().__init__(
            f"the connection to the agent was lost while {method}{where} was in flight; "
            f"it was reconnected but the reply is lost: whether the agent did it is unknown"
        )
        self.method = method
        self.session_id = session_id


class SessionLost(ACPError):
    """A call named a session that could not be taken up after a
    reconnection: the agent offers neither ``session/resume`` nor
    ``session/load``, or refused both. ``reason`` says which."""

    def __init__(self, session_id: str, reason: str) -> None:
        super().__init__(f"session {session_id!r} was lost with the connection: {reason}")
        self.session_id = session_id
        self.reason = reason

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.session_id, self.reason), self.__dict__)


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


def _parse(message: bytes) -> dict[str, Any] | None:
    try:
        obj = json.loads(message)
    except ValueError:
        return None
    return obj if isinstance(obj, dict) else None


class ReconnectingStream(MessageStream):
    """A :class:`~acp_trio._core._message_stream.MessageStream` over a
    sequence of transports (see the module). Made by
    :func:`open_reconnecting`."""

    def __init__(
        self,
        open_stream: Callable[[], AbstractAsyncContextManager[MessageStream]],
        policy: Reconnect,
        max_message_size: int,
    ) -> None:
        self._open = open_stream
        self._policy = policy
        self._max_message_size = max_message_size
        self._inbound_send, self._inbound = trio.open_memory_channel[bytes | OversizedFrame](64)
        #: Called to settle one of our pending requests with an error
        #: (``Connection.fail_request``), set once the connection exists.
        self.fail_request: Callable[[Any, ACPError], bool] | None = None
        self._inner: MessageStream | None = None
        self._epoch = 0
        self._epoch_scope: trio.CancelScope | None = None
        self._ready = trio.Event()
        self._closed = False
        self._broken: BaseException | None = None
        # What a reconnection replays.
        self._initialize: dict[str, Any] | None = None
        self._authenticate: dict[str, Any] | None = None
        #: The sessions to take up: id -> the fields resuming needs.
        self.sessions: dict[str, dict[str, Any]] = {}
        #: The sessions that could not be taken up: id -> why.
        self.lost_sessions: dict[str, str] = {}
        # Our requests in flight: id key -> (id, method, params, epoch).
        self._pending: dict[tuple[str, Any], tuple[Any, str, dict[str, Any], int]] = {}
        # The agent's requests in flight (as our handlers see their ids).
        self._theirs: set[tuple[str, Any]] = set()
        # Our own requests (reconnection): id -> (event, reply slot).
        self._waiting: dict[str, tuple[trio.Event, list[dict[str, Any]]]] = {}
        self._calls = 0
        self._loading: set[str] = set()  # sessions being loaded: updates dropped
        #: How many times the transport was replaced.
        self.reconnects = 0
        self._finished = trio.Event()
        self._backoff = trio.CancelScope()

    @property
    def max_message_size(self) -> int:
        return self._max_message_size

    @property
    def closed(self) -> bool:
        """Whether :meth:`aclose` was called."""
        return self._closed

    def _closed_now(self) -> bool:
        return self._closed

    # -- the MessageStream side -------------------------------------------

    async def receive_message(self) -> bytes | OversizedFrame | None:
        if self._closed:
            raise trio.ClosedResourceError("the stream was closed")
        try:
            return await self._inbound.receive()
        except trio.EndOfChannel:
            if self._broken is not None:
                raise trio.BrokenResourceError(str(self._broken)) from self._broken
            return None

    async def send_message(self, message: bytes) -> None:
        if self._closed:
            raise trio.ClosedResourceError("the stream was closed")
        obj = _parse(message)
        if obj is not None and "method" not in obj:
            replied = self._outgoing_reply(obj, message)
            if replied is None:
                return
            message = replied
        while True:
            await self._ready.wait()
            if self._inner is not None or self._broken is not None or self._closed:
                break
        # No checkpoint from here to the send: a request is recorded in the
        # epoch it is sent in, and sessions lost in it are known.
        inner, epoch = self._inner, self._epoch
        if inner is None:  # given up, or closed
            if self._broken is not None:
                raise trio.BrokenResourceError(str(self._broken)) from self._broken
            raise trio.ClosedResourceError("the stream was closed")
        if obj is not None and "method" in obj and self._refused(obj):
            return
        if obj is not None and "method" in obj and "id" in obj:
            self._note_request(obj, epoch)
        try:
            await inner.send_message(message)
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            _log.debug("send failed, reconnecting: %r", exc)
            self._lose(epoch)

    async def aclose(self) -> None:
        self._closed = True
        self._inbound_send.close()
        self._inner = None
        self._ready.set()  # wakes the senders waiting: they fail
        self._backoff.cancel()
        if self._epoch_scope is not None:
            self._epoch_scope.cancel()

    # -- bookkeeping ------------------------------------------------------

    def _refused(self, obj: dict[str, Any]) -> bool:
        """Whether a request or notification names a lost session (a
        request is then failed with :class:`SessionLost`)."""
        session_id = session_of(obj)
        if session_id is None or session_id not in self.lost_sessions:
            return False
        if obj.get("method") in _OPENERS_PARAMS:
            return False  # the client tries to take it up itself
        if "id" in obj and self.fail_request is not None:
            self.fail_request(obj["id"], SessionLost(session_id, self.lost_sessions[session_id]))
        return True

    def _note_request(self, obj: dict[str, Any], epoch: int) -> None:
        method = obj["method"]
        params = obj.get("params")
        params = params if isinstance(params, dict) else {}
        if method == "initialize":
            self._initialize = params
        elif method == "authenticate":
            self._authenticate = params
        self._pending[id_key(obj["id"])] = (obj["id"], method, params, epoch)

    def _outgoing_reply(self, obj: dict[str, Any], message: bytes) -> bytes | None:
        """Our handler's answer to one of the agent's requests: as the
        agent gave its id, or ``None`` (dropped) if that agent is gone."""
        key = id_key(obj.get("id"))
        if key not in self._theirs:
            return None
        self._theirs.discard(key)
        request_id = obj.get("id")
        if isinstance(request_id, str) and request_id.startswith(_THEIRS):
            _, _, original = request_id[len(_THEIRS) :].partition(":")
            obj["id"] = json.loads(original)
            return _dumps(obj)
        return message

    def _incoming(self, obj: dict[str, Any], message: bytes) -> bytes | None:
        """A message from the agent: bookkeeping; what to hand on (``None``:
        nothing)."""
        method = obj.get("method")
        if method is None:
            request_id = obj.get("id")
            if isinstance(request_id, str) and request_id in self._waiting:
                event, slot = self._waiting.pop(request_id)
                slot.append(obj)
                event.set()
                if request_id.endswith("/session/load"):
                    # What follows is not history any more (one load at a time).
                    self._loading.clear()
                return None
            found = self._pending.pop(id_key(request_id), None)
            if found is not None and "result" in obj:
                self._succeeded(found[1], found[2], obj["result"])
            return message
        if method == "session/update" and session_of(obj) in self._loading:
            return None  # history replayed by session/load: the client has it
        if "id" in obj:
            if self._epoch > 0:
                obj["id"] = f"{_THEIRS}{self._epoch}:{json.dumps(obj['id'])}"
                message = _dumps(obj)
            self._theirs.add(id_key(obj["id"]))
        elif method == "$/cancel_request" and self._epoch > 0:
            params = obj.get("params")
            if isinstance(params, dict) and "requestId" in params:
                params["requestId"] = f"{_THEIRS}{self._epoch}:{json.dumps(params['requestId'])}"
                message = _dumps(obj)
        return message

    def _succeeded(self, method: str, params: dict[str, Any], result: Any) -> None:
        session_id: Any = None
        if method in _OPENERS_RESULT and isinstance(result, dict):
            session_id = result.get("sessionId")
        elif method in _OPENERS_PARAMS:
            session_id = params.get("sessionId")
        elif method == "session/close":
            self.sessions.pop(str(params.get("sessionId")), None)
        if isinstance(session_id, str):
            self.sessions[session_id] = {k: params[k] for k in _KEPT if k in params}
            self.lost_sessions.pop(session_id, None)

    # -- the transports ---------------------------------------------------

    def _lose(self, epoch: int) -> None:
        if epoch == self._epoch and self._epoch_scope is not None:
            self._epoch_scope.cancel()

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Hold a transport, and another when it is lost, until closed or
        out of attempts. Reports once the first transport is open (its
        failure to open is raised)."""
        try:
            await self._run(task_status)
        finally:
            self._finished.set()

    async def _run(self, task_status: trio.TaskStatus[None]) -> None:
        failures = 0
        first = True
        while not self._closed:
            cause: BaseException | None = None
            try:
                async with self._open() as inner:
                    if first:
                        first = False
                        task_status.started()
                    if await self._hold(inner):
                        failures = 0
            except _TRANSPORT_ERRORS as exc:
                if first:
                    raise
                cause = exc
            if self.closed:
                return
            await self._lost()
            failures += 1
            if self._policy.attempts is not None and failures > self._policy.attempts:
                self._broken = cause or trio.BrokenResourceError("the transport was lost")
                _log.warning("giving up reconnecting after %d tries: %r", failures - 1, cause)
                self._inbound_send.close()
                self._ready.set()  # wakes the senders waiting: they fail
                return
            delay = self._policy.delay(failures)
            _log.info("transport lost (%r); reconnecting in %.2f s", cause, delay)
            with trio.CancelScope() as self._backoff:
                if self._closed_now():  # (aclose() may have run while we settled)
                    return
                await trio.sleep(delay)
            self._epoch += 1
            self.reconnects += 1

    async def _hold(self, inner: MessageStream) -> bool:
        """Use ``inner`` until it is lost; whether it was ready for use."""
        with trio.CancelScope() as scope:
            self._epoch_scope = scope
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._pump, inner, scope)
                if self._epoch > 0:
                    try:
                        await self._restore(inner)
                    except _TRANSPORT_ERRORS as exc:
                        # (Caught here: out of the nursery it would come
                        # wrapped in an exception group.)
                        _log.info("reconnecting failed: %r", exc)
                        scope.cancel()
                        await trio.sleep_forever()
                if not self._closed:
                    self._inner = inner
                    self._ready.set()
                await trio.sleep_forever()
        # Lost: nothing more is sent on it (closing it may take a while).
        was_ready = self._inner is inner
        if was_ready:
            self._inner = None
            self._ready = trio.Event()
        return was_ready

    async def _pump(self, inner: MessageStream, scope: trio.CancelScope) -> None:
        try:
            while True:
                message = await inner.receive_message()
                if message is None:
                    break
                if not isinstance(message, OversizedFrame):
                    obj = _parse(message)
                    if obj is not None:
                        handed = self._incoming(obj, message)
                        if handed is None:
                            continue
                        message = handed
                try:
                    await self._inbound_send.send(message)
                except (trio.ClosedResourceError, trio.BrokenResourceError):
                    break
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            _log.debug("transport lost: %r", exc)
        scope.cancel()

    async def _lost(self) -> None:
        """Settle what was in flight on the transport just lost."""
        self._epoch_scope = None
        self._loading.clear()
        for _, (event, _slot) in list(self._waiting.items()):
            event.set()  # an empty slot: no reply
        self._waiting.clear()
        lost = [p for p in self._pending.values() if p[3] == self._epoch]
        for request_id, method, params, _epoch in lost:
            self._pending.pop(id_key(request_id), None)
            if self.fail_request is not None:
                session_id = params.get("sessionId")
                error = ReplyLost(method, session_id if isinstance(session_id, str) else None)
                self.fail_request(request_id, error)
        theirs, self._theirs = self._theirs, set()
        for key in theirs:
            params = {"requestId": key[1]}
            notice = {"jsonrpc": "2.0", "method": "$/cancel_request", "params": params}
            try:
                await self._inbound_send.send(_dumps(notice))
            except (trio.ClosedResourceError, trio.BrokenResourceError):
                return

    async def _call(self, inner: MessageStream, method: str, params: Any) -> dict[str, Any]:
        """One request of ours on ``inner``; its reply."""
        self._calls += 1
        request_id = f"{_OURS}{self._epoch}/{self._calls}/{method}"
        event, slot = trio.Event(), list[dict[str, Any]]()
        self._waiting[request_id] = (event, slot)
        message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        await inner.send_message(_dumps(message))
        with trio.move_on_after(self._policy.timeout):
            await event.wait()
        if not slot:
            self._waiting.pop(request_id, None)
            raise trio.BrokenResourceError(f"{method} was not answered while reconnecting")
        reply: dict[str, Any] = slot[0]
        return reply

    async def _restore(self, inner: MessageStream) -> None:
        """Initialize the new connection as the first was, and take up
        every session."""
        if self._initialize is None:
            return
        reply = await self._call(inner, "initialize", self._initialize)
        result = reply.get("result")
        if not isinstance(result, dict):
            raise trio.BrokenResourceError(f"initialize was refused on reconnecting: {reply}")
        if self._authenticate is not None:
            await self._call(inner, "authenticate", self._authenticate)
        capabilities = result.get("agentCapabilities") or {}
        session_caps = capabilities.get("sessionCapabilities") or {}
        can_resume = isinstance(session_caps.get("resume"), dict)
        can_load = capabilities.get("loadSession") is True
        for session_id, kept in list(self.sessions.items()):
            params = {"sessionId": session_id, "mcpServers": [], **kept}
            if can_resume:
                reply = await self._call(inner, "session/resume", params)
            elif can_load:
                self._loading.add(session_id)  # until the reply comes (see _incoming)
                reply = await self._call(inner, "session/load", params)
            else:
                self._forget(session_id, "the agent offers neither session/resume nor session/load")
                continue
            if "error" in reply:
                self._forget(session_id, f"the agent refused to take it up: {reply['error']}")

    def _forget(self, session_id: str, reason: str) -> None:
        _log.warning("session %s lost: %s", session_id, reason)
        self.sessions.pop(session_id, None)
        self.lost_sessions[session_id] = reason


@asynccontextmanager
async def open_reconnecting(
    open_stream: Callable[[], AbstractAsyncContextManager[MessageStream]],
    policy: Reconnect,
    max_message_size: int,
) -> AsyncIterator[ReconnectingStream]:
    """A :class:`ReconnectingStream` for the block, its first transport
    open (or its failure raised)."""
    stream = ReconnectingStream(open_stream, policy, max_message_size)
    with plain_exceptions():
        async with trio.open_nursery() as nursery:
            await nursery.start(stream.run)
            try:
                yield stream
            finally:
                await stream.aclose()
                # The transport closes politely (not cancelled: a WebSocket
                # waits for the peer's close frame), bounded.
                with trio.move_on_after(5):
                    await stream._finished.wait()
                nursery.cancel_scope.cancel()
