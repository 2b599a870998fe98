"""The proxy side of a proxy chain: :class:`Proxy` and the functions that
serve it (the face is :mod:`acp_trio.proxy`)."""

from __future__ import annotations

import itertools
import logging
from typing import Any, Final

import trio

from acp_trio._core._connection import Connection, ConnectionConfig, Handler
from acp_trio._core._framed import FramedStream
from acp_trio._core._handler import effective_instrument
from acp_trio._core._open import serve_connection
from acp_trio._core._requests import RequestContext
from acp_trio._exceptions import RequestError
from acp_trio._jsonrpc import (
    CANCEL_REQUEST_METHOD,
    cancel_request_frame,
    cancel_target,
    cancelled_reply_frame,
    decode_frame,
    encode_frame,
    message_kind,
)
from acp_trio._jsonrpc._messages import ERROR_REPLY, NOTIFICATION, REQUEST, RESULT
from acp_trio._proxy._conductor import _HopStream, serve_conductor
from acp_trio._proxy._forward_order import ForwardOrder
from acp_trio._transports import open_stdio_stream
from acp_trio.schema import METHODS, SchemaConverter, SchemaValidationError, converter
from acp_trio.schema._generated_proxies import (
    AGENT_METHOD_NAMES,
    CLIENT_METHOD_NAMES,
    AgentProxyMethods,
    ClientProxyMethods,
)

__all__ = [
    "ForwardOrder",
    "PredecessorProxy",
    "Proxy",
    "SuccessorProxy",
    "run_proxy",
    "serve_conductor",
    "serve_proxy",
]

SUCCESSOR = "proxy/successor"
PROXY_INITIALIZE = "proxy/initialize"

_log = logging.getLogger("acp_trio.proxy")


class _Side:
    """Typed calls to one side of the proxy, over the conductor."""

    def __init__(self, proxy: Proxy, wrap: bool) -> None:
        self._proxy = proxy
        self._wrap = wrap

    async def _request(self, method: str, params: Any, result_type: Any) -> Any:
        raw = await self._proxy.forward_request(
            method, self._proxy.converter.unstructure(params), to_successor=self._wrap
        )
        try:
            return self._proxy.converter.structure({} if raw is None else raw, result_type)
        except SchemaValidationError as exc:
            raise RequestError(-32603, f"invalid result for {method}: {exc}") from None

    async def _notify(self, method: str, params: Any) -> None:
        await self._proxy.forward_notification(
            method, self._proxy.converter.unstructure(params), to_successor=self._wrap
        )


class SuccessorProxy(AgentProxyMethods, _Side):
    """What a proxy can ask of its successor: every agent method, in both
    call forms, sent inside ``proxy/successor``. Made by the SDK."""


class PredecessorProxy(ClientProxyMethods, _Side):
    """What a proxy can ask of the client side: every client method, in
    both call forms. Made by the SDK."""


class Proxy:
    """Base class of a chain proxy: override the typed methods you change.

    The names are those of :class:`~acp_trio.Agent` for the client's
    messages (``prompt``, ``new_session``, ``cancel``, ...) and of
    :class:`~acp_trio.Client` for the agent's (``request_permission``,
    ``session_update``, ``read_text_file``, ...); each takes the typed
    params and returns the typed result. Not overridden, a message is
    passed on unchanged (its JSON untouched). ``initialize`` arrives as
    ``proxy/initialize`` and goes on as ``initialize``, as the RFD asks.
    :meth:`client_message` and :meth:`successor_message` see every message
    at the JSON level, before the typed methods.

    The typed methods are ACP v1's. Once the chain has negotiated another
    version (:attr:`protocol_version`, from the ``initialize`` answer that
    passed through, e.g. 2 for a v2 client and agent), they are not called:
    every message passes unchanged, and a proxy that changes v2 messages
    does it at the JSON level, in :meth:`client_message` or
    :meth:`successor_message`.
    """

    converter: SchemaConverter = converter

    def __init__(self) -> None:
        self.connection: Connection | None = None
        self._ready = trio.Event()
        self._order = ForwardOrder()
        self.successor = SuccessorProxy(self, wrap=True)
        self.client = PredecessorProxy(self, wrap=False)
        #: The protocol version the chain negotiated (the ``initialize``
        #: answer that passed through this proxy); ``None`` before it.
        self.protocol_version: int | None = None

    # -- the JSON level

    async def forward_request(self, method: str, params: Any, *, to_successor: bool) -> Any:
        """Send a request on, as JSON, and return its result; the other
        side's error comes back unchanged. Raises :class:`RequestError`, or
        :class:`ConnectionClosed` if the conductor is gone; cancelling the
        caller cancels the request on this hop (``$/cancel_request``)."""
        conn = await self._connection()
        if to_successor:
            method, params = SUCCESSOR, _envelope(method, params)
        self._order.sending()  # no checkpoint from here until the request is queued
        try:
            return await conn.call(method, params)
        except RequestError as exc:
            raise exc.passed_on() from None

    async def forward_notification(self, method: str, params: Any, *, to_successor: bool) -> None:
        """Send a notification on, as JSON. Raises :class:`ConnectionClosed`
        if the conductor is gone; cancelling the caller only stops it waiting
        for room in the output queue."""
        conn = await self._connection()
        if to_successor:
            method, params = SUCCESSOR, _envelope(method, params)
        await conn.notify(method, params)

    async def client_message(self, method: str, params: Any, is_request: bool) -> Any:
        """A message of the client side, bound for the successor. The default
        calls the typed method if this class overrides it, else passes the
        message on. Raises :class:`RequestError` to answer a request with
        an error; cancellation as for :meth:`forward_request`."""
        name = AGENT_METHOD_NAMES.get(method)
        if method == "initialize" and is_request:
            return await self._initialize(params, name)
        if name is not None and self._typed_v1() and _overrides(self, name):
            return await self._typed(name, method, params, is_request)
        if is_request:
            return await self.forward_request(method, params, to_successor=True)
        await self.forward_notification(method, params, to_successor=True)
        return None

    async def successor_message(self, method: str, params: Any, is_request: bool) -> Any:
        """A message of the successor, bound for the client side; as
        :meth:`client_message` (errors, cancellation), with the
        :class:`~acp_trio.Client` names."""
        name = CLIENT_METHOD_NAMES.get(method)
        if name is not None and self._typed_v1() and _overrides(self, name):
            return await self._typed(name, method, params, is_request)
        if is_request:
            return await self.forward_request(method, params, to_successor=False)
        await self.forward_notification(method, params, to_successor=False)
        return None

    async def _typed(self, name: str, method: str, params: Any, is_request: bool) -> Any:
        info = METHODS[method]
        try:
            typed = self.converter.structure(params, info.params)
        except SchemaValidationError as exc:
            raise RequestError.invalid_params({"errors": exc.errors}) from None
        result = await getattr(self, name)(typed)
        return self.converter.unstructure(result) if is_request else None

    def _typed_v1(self) -> bool:
        return self.protocol_version in (None, 1)

    async def _initialize(self, params: Any, name: str | None) -> Any:
        """``initialize``: typed (v1) if overridden and the client asks for
        v1; the negotiated version is recorded from the answer either way."""
        asked = params.get("protocolVersion") if isinstance(params, dict) else None
        if name is not None and asked == 1 and _overrides(self, name):
            result = await self._typed(name, "initialize", params, True)
        else:
            result = await self.forward_request("initialize", params, to_successor=True)
        version = result.get("protocolVersion") if isinstance(result, dict) else None
        if isinstance(version, int) and not isinstance(version, bool):
            self.protocol_version = version
        return result

    async def _connection(self) -> Connection:
        # Messages can be read before serve_proxy has recorded the connection.
        if not self._ready.is_set():
            await self._ready.wait()
        assert self.connection is not None
        return self.connection


def _overrides(proxy: Proxy, name: str) -> bool:
    method = getattr(type(proxy), name, None)
    return method is not None and getattr(Proxy, name, None) is not method


def _envelope(method: str, params: Any) -> dict[str, Any]:
    envelope: dict[str, Any] = {"method": method}
    if params is not None:
        envelope["params"] = params
    return envelope


def _unwrap(params: Any) -> tuple[str, Any]:
    if not isinstance(params, dict) or not isinstance(params.get("method"), str):
        raise RequestError.invalid_params(
            {"reason": "proxy/successor takes {method: string, params?, _meta?}"}
        )
    return params["method"], params.get("params")


class _ProxyHandler(Handler):
    def __init__(self, proxy: Proxy) -> None:
        self.proxy = proxy
        self.order = proxy._order

    # A notification goes on after the requests read before it (see
    # acp_trio._proxy._forward_order): a session/cancel never overtakes its prompt.

    def request_received(self, ctx: RequestContext, params: Any) -> None:
        self.order.received(ctx)

    def request_finished(self, ctx: RequestContext) -> None:
        self.order.finished(ctx)

    def intercept_notification(self, method: str, params: Any) -> bool:
        self.order.notification_read()
        return False

    async def handle_request(self, ctx: RequestContext, method: str, params: Any) -> Any:
        if method == SUCCESSOR:
            inner, inner_params = _unwrap(params)
            return await self.proxy.successor_message(inner, inner_params, True)
        if method == PROXY_INITIALIZE:
            method = "initialize"
        return await self.proxy.client_message(method, params, True)

    async def handle_notification(self, method: str, params: Any) -> None:
        await self.order.before_notification()
        if method == SUCCESSOR:
            try:
                inner, inner_params = _unwrap(params)
            except RequestError:
                return
            await self.proxy.successor_message(inner, inner_params, False)
            return
        await self.proxy.client_message(method, params, False)


async def serve_proxy(
    proxy: Proxy,
    stream: trio.abc.Stream | FramedStream,
    *,
    config: ConnectionConfig | None = None,
    task_status: trio.TaskStatus[Connection] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ``proxy`` on ``stream`` (its connection to the conductor) until
    the connection closes; reports the connection through ``task_status``.
    Raises ``RuntimeError`` if the proxy already serves a connection;
    cancelling the caller closes the connection (running requests answered
    ``-32800``).

    A message the proxy does not change (no typed method of its own for
    it, and no :meth:`~Proxy.client_message` or :meth:`~Proxy.successor_message`
    of its own) is passed on frame by frame as it is read, without a task
    or a handler, unless a message read before it is still being handled;
    cancellation and ids stay per hop as for the others. Not with
    ``config`` asking for tracing, an instrument or request deadlines, nor
    on a :class:`~acp_trio.lowlevel.FramedStream`.
    """
    if proxy.connection is not None:
        raise RuntimeError("this proxy already serves a connection")
    config = config or ConnectionConfig()
    router = _PassThrough(proxy) if _may_pass_through(proxy, stream, config) else None

    async def run(task_status: trio.TaskStatus[Connection] = trio.TASK_STATUS_IGNORED) -> None:
        served: trio.abc.Stream | FramedStream = stream
        if router is not None:
            assert not isinstance(stream, FramedStream)
            served = router.hop = _HopStream(router, 0, stream, config.max_message_size)
            nursery.start_soon(router.hop.run_writer, name="acp proxy writer")
        await serve_connection(served, _ProxyHandler(proxy), config=config, task_status=task_status)

    async with trio.open_nursery() as nursery:
        proxy.connection = await nursery.start(run)
        proxy._ready.set()
        task_status.started(proxy.connection)
        await proxy.connection.wait_closed()
        nursery.cancel_scope.cancel()


# Ids of the requests passed on frame by frame: far from the connection's own
# (which count from 0), below 2**53 for peers that read JSON numbers as doubles.
_PASS_IDS: Final = 1 << 40
_OBSERVING = ("client_message", "successor_message", "forward_request", "forward_notification")
_NONE: Final = object()


def _may_pass_through(
    proxy: Proxy, stream: trio.abc.Stream | FramedStream, config: ConnectionConfig
) -> bool:
    if isinstance(stream, FramedStream) or config.trace is not None:
        return False
    if effective_instrument(config) is not None or config.request_timeout is not None:
        return False
    return all(getattr(type(proxy), name) is getattr(Proxy, name) for name in _OBSERVING)


class _PassThrough:
    """A proxy's fast path (see :func:`serve_proxy`): the messages it does
    not change, passed on in the reader, with a table of ids."""

    def __init__(self, proxy: Proxy) -> None:
        self.proxy = proxy
        self.hop: _HopStream
        self._order = proxy._order
        self._ids = itertools.count(_PASS_IDS)
        self._calls: dict[int, Any] = {}  # our id -> the id it was read with
        self._taken: dict[Any, int] = {}  # id read -> our id
        # The methods the proxy changes (a typed method of its own, for ACP
        # v1): its class decides, once, rather than two lookups a message.
        self._own_agent = frozenset(
            method for method, name in AGENT_METHOD_NAMES.items() if _overrides(proxy, name)
        )
        self._own_client = frozenset(
            method for method, name in CLIENT_METHOD_NAMES.items() if _overrides(proxy, name)
        )

    def route(self, hop: _HopStream, frame: bytes) -> _HopStream | None:
        value = decode_frame(frame)
        kind = message_kind(value)
        if kind in (REQUEST, NOTIFICATION):
            method = value["method"]
            if kind == NOTIFICATION and method == CANCEL_REQUEST_METHOD:
                return self._cancel(hop, value.get("params"))
            # Nothing read before it may still be on its way (handled by
            # the proxy's handlers), or it would overtake it.
            if not self._order.all_passed_on:
                return None
            conn = self.proxy.connection
            if conn is None or not conn.output_settled():
                return None
            params = value.get("params")
            if method == SUCCESSOR:
                if type(params) is not dict:
                    return None  # answered by the handler (invalid params)
                method = params.get("method")
                if type(method) is not str:
                    return None
                if method in self._own_client and self.proxy._typed_v1():
                    return None
                params = params.get("params")
            elif method in ("initialize", PROXY_INITIALIZE) or (
                method in self._own_agent and self.proxy._typed_v1()
            ):
                return None  # initialize, or a method the proxy changes
            else:
                params = _envelope(method, params)
                method = SUCCESSOR
            if kind == NOTIFICATION:
                out: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
            else:
                request_id = value["id"]
                if request_id in self._taken:
                    return None  # the connection refuses it
                ours = next(self._ids)
                self._calls[ours] = request_id
                self._taken[request_id] = ours
                out = {"jsonrpc": "2.0", "id": ours, "method": method}
            if params is not None:
                out["params"] = params
            hop.write(encode_frame(out))
            return hop
        if kind in (RESULT, ERROR_REPLY):
            request_id = value["id"]
            if type(request_id) is not int or request_id < _PASS_IDS:
                return None  # an answer to the connection's own request
            source_id = self._calls.pop(request_id, _NONE)
            if source_id is _NONE:
                _log.debug("dropping a late answer to request %d", request_id)
                return hop
            value["id"] = source_id
            del self._taken[source_id]
            self._answer(hop, encode_frame(value))
            return hop
        return None

    def _cancel(self, hop: _HopStream, params: Any) -> _HopStream | None:
        """A ``$/cancel_request`` of a request passed on: cancelled there
        with our id, and answered ``-32800``."""
        ok, request_id = cancel_target(params)
        ours = self._taken.pop(request_id, None) if ok else None
        if ours is None:
            return None  # the connection's own request, if any
        if self._calls.pop(ours, None) is not None:
            hop.write(cancel_request_frame(ours))
        hop.write(cancelled_reply_frame(request_id))
        return hop

    def _answer(self, hop: _HopStream, frame: bytes) -> None:
        """Pass an answer on, after the notifications read before it (as
        the connection hands a reply over only after them) and what the
        proxy's handlers queued before it."""
        conn = self.proxy.connection
        assert conn is not None
        if conn.output_settled():
            hop.write(frame)
            return

        async def in_order() -> None:
            while conn.statistics().outbox_frames:
                await hop.drained()
                await trio.lowlevel.checkpoint()
            hop.write(frame)

        if not conn.run_in_notification_order_soon(in_order):
            hop.write(frame)


async def run_proxy(proxy: Proxy, *, config: ConnectionConfig | None = None) -> None:
    """Serve ``proxy`` on this process's stdin and stdout (as the conductor
    spawns it) until they close. Cancelling the caller closes the connection."""
    async with open_stdio_stream() as stream:
        await serve_proxy(proxy, stream, config=config)
