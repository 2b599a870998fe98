"""What a connection calls, and how it is tuned: :class:`Handler`,
:class:`ConnectionConfig`, and the request tree it reports (of
:class:`RequestNode` records, which ``_records.py`` defines)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any, Final, Literal, Protocol

import attrs

from acp_trio._core._records import ConnectionStatistics, RequestNode
from acp_trio._core._requests import PendingRequest, RequestContext
from acp_trio._exceptions import RequestError
from acp_trio._jsonrpc import (
    DEFAULT_MAX_MESSAGE_SIZE,
    IncomingRequest,
    OutgoingRequest,
)

__all__ = [
    "ConnectionConfig",
    "ConnectionStatistics",
    "ConnectionInstrument",
    "Handler",
    "Instrumentation",
    "RequestNode",
    "TraceHook",
    "dump_nodes",
    "request_nodes",
]

_log = logging.getLogger("acp_trio.connection")

TraceHook = Callable[[Literal["send", "recv"], bytes], None]


class Handler:
    """What a connection calls for the messages it receives. Subclass it.

    The defaults answer every request ``-32601`` (method not found) and ignore
    every notification, as JSON-RPC and ACP ask.
    """

    async def handle_request(self, ctx: RequestContext, method: str, params: Any) -> Any:
        """Serve one request; return its JSON result or raise
        :class:`RequestError` (answered as the error reply).

        Runs in the request's own cancel scope, inside the connection's nursery:
        the peer's ``$/cancel_request``, the handler's own deadline or the
        connection closing cancels it, and every outgoing request it is waiting
        on is cancelled on the wire. Let ``trio.Cancelled`` propagate: the
        request is answered ``-32800``.
        """
        raise RequestError.method_not_found(method)

    async def handle_notification(self, method: str, params: Any) -> None:
        """Handle one notification, in wire order. Never answered.

        Runs in the single notification consumer: while it runs, later
        notifications wait (and when their queue is full, so does reading),
        and so do the handlers of requests read after it, which start only
        once it is done. Waiting here for a reply of the peer holds all of
        that up; it cannot deadlock (while it waits, requests do not wait
        for it), but a task of its own is usually better. An exception is
        logged, not sent; only the connection closing cancels it.
        """
        _log.debug("ignoring notification %s", method)

    def request_received(self, ctx: RequestContext, params: Any) -> None:
        """Called in the reader when a request is registered, before its
        handler task starts; must not block. For work that a notification
        read right after the request must already find (the typed agent ties
        a prompt to its session here, for ``session/cancel``)."""

    def request_finished(self, ctx: RequestContext) -> None:
        """Called once per request :meth:`request_received` saw, when its reply
        has been decided (whether or not its handler ever ran); must not
        block. Release here what ``request_received`` set up."""

    def intercept_notification(self, method: str, params: Any) -> bool:
        """Called in the reader for each notification before it is queued;
        return ``True`` to consume it there (it must not block). For the few
        notifications that must act at once, like ``session/cancel``."""
        return False


class Instrumentation(Protocol):
    """What :attr:`ConnectionConfig.instrument` is (the OpenTelemetry tracing
    of :mod:`acp_trio.contrib.otel` is one): it is asked once per connection
    for that connection's :class:`ConnectionInstrument`."""

    def instrument(self, handler: Handler) -> ConnectionInstrument:
        """The instrument of a new connection whose handler is ``handler``."""
        ...


class ConnectionInstrument(Protocol):
    """One connection's instrument. Its methods run in the task that sends,
    must not block and must not raise."""

    @property
    def handler(self) -> Handler:
        """The handler the connection uses instead of its own (it sees every
        request and notification received, and passes them on)."""
        ...

    def request_sending(
        self, method: str, params: Any
    ) -> tuple[Any, Callable[[PendingRequest | None], None]]:
        """A request is about to be sent: the params to send instead (a
        copy, never ``params`` changed in place), and a function called
        once with its :class:`PendingRequest` once it is queued (``None``:
        it was not sent)."""
        ...

    def notification_sending(self, method: str, params: Any) -> Any:
        """A notification is about to be sent: the params to send instead."""
        ...


class _Defaults:
    """Process-wide defaults of every connection."""

    #: The instrument of connections whose config names none (the command
    #: line's ``--otel``; :meth:`acp_trio.contrib.otel.Tracing.install`).
    instrument: Instrumentation | None = None


DEFAULTS: Final = _Defaults()


def effective_instrument(config: ConnectionConfig) -> Instrumentation | None:
    """The instrument a connection made with ``config`` gets: the config's
    own, else the one installed for every connection (``None``: none)."""
    return config.instrument if config.instrument is not None else DEFAULTS.instrument


@attrs.frozen(kw_only=True)
class ConnectionConfig:
    """Tunables of a connection. All sizes are counts unless named bytes."""

    #: Largest message accepted, in bytes (a larger one is refused, the
    #: connection carries on).
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE
    #: Deadline for every incoming request, in seconds (``None``: none). At
    #: the deadline the handler is cancelled, its nested requests are
    #: cancelled on the wire, and the reply is ``-32800``.
    request_timeout: float | None = None
    #: Notifications read but not yet handled; when full, reading pauses.
    max_queued_notifications: int = 1024
    #: Frames queued for writing before senders of requests and
    #: notifications wait (replies and cancels never wait).
    outbox_limit: int = 1024
    #: Bytes of frames queued for writing before those senders wait too
    #: (``None``: twice ``max_message_size``).
    max_outbox_bytes: int | None = None
    #: Incoming requests running at once. Beyond it requests wait their turn,
    #: registered (a cancel for one is answered at once), and reading goes on:
    #: the replies, cancels and end of stream that running handlers wait for
    #: are never held up by requests that wait.
    max_concurrent_requests: int = 16384
    #: Requests waiting for a free slot. A request read while this many wait
    #: is answered ``-32603`` ("Too many requests", with the limits in
    #: ``data``) at once, without running; reading never stops for requests.
    max_queued_requests: int = 16384
    #: Bytes of the requests held (read, not yet answered: running or
    #: waiting), counted as the sizes of their frames. A request that would
    #: take them past this is answered ``-32603`` ("Too many requests") at
    #: once, unless none is held. ``None``: twice ``max_message_size``.
    max_held_request_bytes: int | None = None
    #: Seconds that closing may take to cancel handlers and flush output.
    close_timeout: float = 5.0
    #: Called with ("send" | "recv", frame) for every frame, without its line
    #: end (tracing, tests). It runs wherever a frame is read or sent, which
    #: includes Trio's cancellation of a waiting call (outside any task when
    #: a deadline expires): keep it quick, do not call Trio, and do not raise.
    trace: TraceHook | None = None
    #: For a peer that is a process we spawned: returns (exit code, stderr
    #: tail), either ``None`` when unknown; added to ConnectionClosed.
    exit_details: Callable[[], tuple[int | None, bytes | None]] | None = None
    #: Start a request's handler in the reader task, which hands reading to a
    #: new task as soon as the handler first waits (a handler that answers
    #: without waiting then costs no task). ``False``: a new task for every
    #: request, from the start. Handlers see no difference either way.
    eager_handlers: bool = True
    #: Let a task waiting for the reply to its call read the stream itself
    #: while the reader has nothing else to do, so the reply wakes it
    #: directly (one hand-over between tasks less per call: about 16 % more
    #: sequential round trips). Only over pipes (stdio, a spawned agent).
    #: ``False``: only the reader task reads. Callers see no difference.
    callers_read_replies: bool = True
    #: Watches every request and notification sent and received, and may
    #: add to their ``_meta`` (tracing: :mod:`acp_trio.contrib.otel`).
    #: ``None`` (the default): the process-wide one, if one was installed
    #: (``Tracing.install()``, ``--otel``), else nothing, at no cost.
    instrument: Instrumentation | None = None

    def outbox_byte_limit(self) -> int:
        """The bound of the bytes queued for writing (see
        :attr:`max_outbox_bytes`)."""
        limit = self.max_outbox_bytes
        return 2 * self.max_message_size if limit is None else limit

    def held_request_limit(self) -> int:
        """The bound of the bytes of requests held (see
        :attr:`max_held_request_bytes`)."""
        held = self.max_held_request_bytes
        return 2 * self.max_message_size if held is None else held


def request_nodes(
    incoming: Iterable[IncomingRequest[RequestContext]],
    outgoing: Iterable[OutgoingRequest[PendingRequest]],
) -> list[RequestNode]:
    """The request tree of a connection whose requests in flight are these:
    each incoming request with the outgoing requests its handler is waiting
    on, then the outgoing requests made outside any handler."""
    nodes: list[RequestNode] = []
    incoming, outgoing = list(incoming), list(outgoing)  # (a snapshot)
    for entry in incoming:
        ctx = entry.handle
        state = entry.phase.value
        children: tuple[RequestNode, ...] = ()
        if ctx is not None:
            if ctx.cancel_cause is not None:
                state += f", cancelled ({ctx.cancel_cause.value})"
            children = tuple(_node(p) for p in sorted(ctx.children, key=lambda p: p.id))
        nodes.append(RequestNode("incoming", entry.id, entry.method, state, children))
    for out in outgoing:
        if out.handle is not None and out.handle.parent is None:
            nodes.append(_node(out.handle))
    return nodes


def _node(pending: PendingRequest) -> RequestNode:
    state = "cancel sent" if pending.cancel_sent else "pending"
    return RequestNode("outgoing", pending.id, pending.method, state)


def dump_nodes(nodes: list[RequestNode]) -> str:
    """A request tree as indented text."""
    lines: list[str] = []

    def walk(node: RequestNode, depth: int) -> None:
        arrow = "<-" if node.direction == "incoming" else "->"
        lines.append(f"{'  ' * depth}{arrow} {node.method} id={node.id!r} [{node.state}]")
        for child in node.children:
            walk(child, depth + 1)

    for node in nodes:
        walk(node, 0)
    return "\n".join(lines) if lines else "(no requests in flight)"
