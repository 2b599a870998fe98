"""OpenTelemetry spans for a connection's requests, and W3C trace context in ``_meta``.

A request tree is a trace: each request sent is a ``CLIENT`` span, each
request handled a ``SERVER`` span, named by method, with the RPC semantic
conventions (``rpc.system`` ``jsonrpc``, ``rpc.method``,
``rpc.jsonrpc.request_id``, ``rpc.jsonrpc.error_code``). A handled request's
span is the current span while its handler runs (set in the handler's own
context, which its task and the tasks it starts inherit), so the calls it
makes are its children. The current context goes out as ``traceparent``,
``tracestate`` and ``baggage`` in the ``_meta`` of every request and
notification sent; a request received continues the trace its ``_meta``
carries. A request ended by cancellation (``-32800``, ``stopReason:
cancelled``) is marked ``acp.cancelled`` and not as an error; the cancels
(``$/cancel_request`` sent and received, ``session/cancel``, a deadline) are
events on the spans they end. ``session/update`` notifications are counted
on their turn's span (``acp.session_updates``).

Nothing here is imported unless tracing is asked for (the ``otel`` extra).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final, ParamSpec, final

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from acp_trio._core._handler import DEFAULTS, Handler
from acp_trio._core._requests import CancelCause, PendingRequest, RequestContext
from acp_trio._exceptions import RequestError

if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer, TracerProvider

__all__ = ["Tracing"]

_log = logging.getLogger("acp_trio.otel")

P = ParamSpec("P")

_TRACER_NAME: Final = "acp_trio"
_CANCELLED: Final = -32800
_PROMPT: Final = "session/prompt"
_UPDATE: Final = "session/update"
_SESSION_CANCEL: Final = "session/cancel"
_CONTEXT_KEYS: Final = ("traceparent", "tracestate", "baggage")

# The event a span gets for each way a request it stands for is cancelled.
_CAUSE_EVENTS: Final = {
    CancelCause.PEER: "$/cancel_request received",
    CancelCause.SESSION: "session/cancel",
    CancelCause.DEADLINE: "deadline exceeded",
    CancelCause.LOCAL: "cancelled locally",
    CancelCause.SHUTDOWN: "connection closing",
}


@final
class Tracing:
    """OpenTelemetry tracing for connections: pass it as
    ``ConnectionConfig(instrument=Tracing())``.

    ``tracer_provider``: where spans go (the global one by default, as set by
    the OpenTelemetry SDK). ``propagate``: put the current trace context in
    the ``_meta`` of what is sent and continue the one received (on by
    default). ``notification_spans``: also a span for each notification sent
    and handled (off by default: they are counted on their turn's span).
    One ``Tracing`` may serve any number of connections.
    """

    def __init__(
        self,
        tracer_provider: TracerProvider | None = None,
        *,
        propagate: bool = True,
        notification_spans: bool = False,
    ) -> None:
        from acp_trio._version import __version__

        self.tracer: Tracer = trace.get_tracer(
            _TRACER_NAME, __version__, tracer_provider=tracer_provider
        )
        self.propagate = propagate
        self.notification_spans = notification_spans

    def instrument(self, handler: Handler) -> _ConnectionTracing:
        """The tracing of one new connection (the connection asks for it)."""
        return _ConnectionTracing(self, handler)

    def install(self) -> None:
        """Trace every connection made from now on whose config names no
        instrument of its own (what the command line's ``--otel`` does)."""
        DEFAULTS.instrument = self

    def uninstall(self) -> None:
        """Undo :meth:`install` (if this is the one installed)."""
        if DEFAULTS.instrument is self:
            DEFAULTS.instrument = None


def _guard(method: Callable[P, None]) -> Callable[P, None]:
    """``method``, logging what it raises instead: tracing runs in the
    reader and in Trio's cancellation, where nothing may raise."""

    @functools.wraps(method)
    def guarded(*args: P.args, **kwargs: P.kwargs) -> None:
        try:
            method(*args, **kwargs)
        except Exception:
            _log.exception("tracing failed in %s", method.__name__)

    return guarded


def _ignore(pending: PendingRequest | None) -> None:
    pass


@final
class _Turn:
    """What a span of a request accumulates until it ends."""

    __slots__ = ("events", "span", "updates")

    def __init__(self, span: Span) -> None:
        self.span = span
        self.updates = 0
        self.events: set[str] = set()

    def event(self, name: str) -> None:
        if name not in self.events:
            self.events.add(name)
            self.span.add_event(name)


@final
class _Outcome:
    """How a handler ended, as seen around it."""

    __slots__ = ("error", "result")

    def __init__(self) -> None:
        self.result: Any = None
        self.error: BaseException | None = None


class _ConnectionTracing:
    """One connection's tracing (see :class:`Tracing`)."""

    def __init__(self, tracing: Tracing, handler: Handler) -> None:
        self._tracing = tracing
        self._tracer = tracing.tracer
        self.handler: Handler = _TracedHandler(self, handler)
        # The open session/prompt span of each session (either direction).
        self.turns: dict[str, _Turn] = {}
        # The span and outcome of each request received, until it is answered.
        self.incoming: dict[RequestContext, tuple[_Turn, _Outcome]] = {}
        # The session of each request received that names one.
        self.sessions: dict[RequestContext, str] = {}

    # -- sending

    def request_sending(
        self, method: str, params: Any
    ) -> tuple[Any, Callable[[PendingRequest | None], None]]:
        try:
            return self._request_sending(method, params)
        except Exception:  # tracing must never fail a call
            _log.exception("tracing failed for a %s request", method)
            return params, _ignore

    def _request_sending(
        self, method: str, params: Any
    ) -> tuple[Any, Callable[[PendingRequest | None], None]]:
        span = self._tracer.start_span(method, kind=SpanKind.CLIENT, attributes=_rpc(method))
        turn = _Turn(span)
        params = self._inject(params, trace.set_span_in_context(span))
        session = _session_of(params) if method == _PROMPT else None

        def sent(pending: PendingRequest | None) -> None:
            if pending is None:
                span.set_attribute("acp.not_sent", True)
                span.end()
                return
            span.set_attribute("rpc.jsonrpc.request_id", pending.id)
            if session is not None:
                self.turns[session] = turn
            pending.add_done_callback(lambda: self._sent_request_done(turn, pending, session))

        return params, _guard(sent)

    @_guard
    def _sent_request_done(self, turn: _Turn, pending: PendingRequest, session: str | None) -> None:
        if session is not None and self.turns.get(session) is turn:
            del self.turns[session]
        if pending.cancel_sent:
            turn.event("$/cancel_request sent")
        try:
            value = pending.result_nowait()
        except BaseException as exc:  # the request's failure, not ours
            error: BaseException = exc
        else:
            _end(turn, value, None)
            return
        if isinstance(error, RequestError):
            _end(turn, None, error)
        elif pending.cancel_sent or pending.detached:
            # Abandoned (its caller was cancelled, or it was detached).
            _end(turn, None, None, cancelled=pending.cancel_sent)
        else:
            turn.span.record_exception(error)
            turn.span.set_status(Status(StatusCode.ERROR, str(error)))
            _finish(turn)

    def notification_sending(self, method: str, params: Any) -> Any:
        try:
            return self._notification_sending(method, params)
        except Exception:  # tracing must never fail a notification
            _log.exception("tracing failed for a %s notification", method)
            return params

    def _notification_sending(self, method: str, params: Any) -> Any:
        session = _session_of(params)
        if session is not None:
            turn = self.turns.get(session)
            if turn is not None:
                if method == _UPDATE:
                    turn.updates += 1
                elif method == _SESSION_CANCEL:
                    turn.event("session/cancel sent")
            if method == _SESSION_CANCEL:
                # The requests of the session we are handling (permission
                # requests, answered "cancelled" for it).
                for ctx, ctx_session in self.sessions.items():
                    if ctx_session == session:
                        self.incoming[ctx][0].event("session/cancel sent")
        if not self._tracing.notification_spans:
            return self._inject(params, None)
        span = self._tracer.start_span(method, kind=SpanKind.PRODUCER, attributes=_rpc(method))
        try:
            return self._inject(params, trace.set_span_in_context(span))
        finally:
            span.end()

    def _inject(self, params: Any, context: otel_context.Context | None) -> Any:
        if not self._tracing.propagate or type(params) is not dict:
            return params
        carrier: dict[str, str] = {}
        propagate.inject(carrier, context=context)
        if not carrier:
            return params  # no trace: what the params carry passes on as it is
        meta = params.get("_meta")
        if meta is None:
            return {**params, "_meta": carrier}
        if type(meta) is not dict:
            return params  # not ours to fix
        # The context keys are per message: those of a message being passed
        # on (a proxy's) are replaced as a whole, never mixed with ours.
        kept = {key: value for key, value in meta.items() if key not in _CONTEXT_KEYS}
        return {**params, "_meta": {**kept, **carrier}}

    # -- receiving

    def extract(self, params: Any) -> otel_context.Context:
        """The context a message received continues (an empty one if none)."""
        empty = otel_context.Context()
        if not self._tracing.propagate or type(params) is not dict:
            return empty
        meta = params.get("_meta")
        if type(meta) is not dict:
            return empty
        carrier = {key: meta[key] for key in _CONTEXT_KEYS if type(meta.get(key)) is str}
        if not carrier:
            return empty
        try:
            return propagate.extract(carrier, context=empty)
        except Exception:  # a peer's malformed header must not fail its request
            _log.debug("ignoring malformed trace context %r", carrier, exc_info=True)
            return empty

    @_guard
    def request_received(self, ctx: RequestContext, params: Any) -> None:
        span = self._tracer.start_span(
            ctx.method,
            context=self.extract(params),
            kind=SpanKind.SERVER,
            attributes={**_rpc(ctx.method), "rpc.jsonrpc.request_id": _id_attribute(ctx.id)},
        )
        turn = _Turn(span)
        self.incoming[ctx] = (turn, _Outcome())
        session = _session_of(params)
        if session is not None:
            self.sessions[ctx] = session
            if ctx.method == _PROMPT:
                self.turns[session] = turn

    @_guard
    def request_finished(self, ctx: RequestContext) -> None:
        found = self.incoming.pop(ctx, None)
        if found is None:
            return
        turn, outcome = found
        session = self.sessions.pop(ctx, None)
        if session is not None and self.turns.get(session) is turn:
            del self.turns[session]
        cause = ctx.cancel_cause
        if cause is not None:
            turn.event(_CAUSE_EVENTS[cause])
            turn.span.set_attribute("acp.cancel.cause", cause.value)
        error = outcome.error
        if error is None and outcome.result is None and cause is not None:
            # Cut off (or it answered nothing after a cancel): the reply is -32800.
            turn.span.set_attribute("rpc.jsonrpc.error_code", _CANCELLED)
            _end(turn, None, None, cancelled=True)
        elif error is None or isinstance(error, RequestError):
            _end(turn, outcome.result, error)
        else:
            turn.span.record_exception(error)
            turn.span.set_status(Status(StatusCode.ERROR, type(error).__name__))
            turn.span.set_attribute("rpc.jsonrpc.error_code", -32603)
            _finish(turn)

    @_guard
    def notification_received(self, method: str, params: Any) -> None:
        session = _session_of(params)
        if session is None:
            return
        turn = self.turns.get(session)
        if turn is None:
            return
        if method == _UPDATE:
            turn.updates += 1
        elif method == _SESSION_CANCEL:
            turn.event("session/cancel received")


@final
class _TracedHandler(Handler):
    """The connection's handler, each request's span current while it runs."""

    def __init__(self, tracing: _ConnectionTracing, inner: Handler) -> None:
        self._tracing = tracing
        self._inner = inner

    def request_received(self, ctx: RequestContext, params: Any) -> None:
        self._tracing.request_received(ctx, params)
        self._inner.request_received(ctx, params)

    def request_finished(self, ctx: RequestContext) -> None:
        try:
            self._inner.request_finished(ctx)
        finally:
            self._tracing.request_finished(ctx)

    async def handle_request(self, ctx: RequestContext, method: str, params: Any) -> Any:
        found = self._tracing.incoming.get(ctx)
        if found is None:  # (cannot happen: request_received saw it)
            return await self._inner.handle_request(ctx, method, params)
        turn, outcome = found
        # Attached here, in the handler's own context (its task's, or the
        # copy an eager handler runs in): what it calls and starts inherits it.
        token = otel_context.attach(trace.set_span_in_context(turn.span))
        try:
            outcome.result = await self._inner.handle_request(ctx, method, params)
        except Exception as exc:
            outcome.error = exc
            raise
        finally:
            otel_context.detach(token)
        return outcome.result

    def intercept_notification(self, method: str, params: Any) -> bool:
        self._tracing.notification_received(method, params)
        return self._inner.intercept_notification(method, params)

    async def handle_notification(self, method: str, params: Any) -> None:
        tracing = self._tracing
        if not tracing._tracing.notification_spans:
            await self._inner.handle_notification(method, params)
            return
        with tracing._tracer.start_as_current_span(
            method,
            context=tracing.extract(params),
            kind=SpanKind.CONSUMER,
            attributes=_rpc(method),
        ):
            await self._inner.handle_notification(method, params)


def _rpc(method: str) -> dict[str, str]:
    return {"rpc.system": "jsonrpc", "rpc.jsonrpc.version": "2.0", "rpc.method": method}


def _id_attribute(request_id: Any) -> str | int:
    return request_id if type(request_id) is int or type(request_id) is str else str(request_id)


def _session_of(params: Any) -> str | None:
    if type(params) is not dict:
        return None
    session = params.get("sessionId")
    return session if type(session) is str else None


def _end(turn: _Turn, result: Any, error: RequestError | None, *, cancelled: bool = False) -> None:
    """End ``turn``'s span: cancelled (not an error) for ``-32800`` or
    ``stopReason: cancelled``, an error for any other error reply."""
    span = turn.span
    if error is not None:
        span.set_attribute("rpc.jsonrpc.error_code", error.code)
        span.set_attribute("rpc.jsonrpc.error_message", error.message)
        if error.code == _CANCELLED:
            cancelled = True
        else:
            span.set_status(Status(StatusCode.ERROR, error.message))
    elif isinstance(result, Mapping):
        stop = result.get("stopReason")
        if isinstance(stop, str):
            span.set_attribute("acp.stop_reason", stop)
            cancelled = cancelled or stop == "cancelled"
        outcome = result.get("outcome")  # a permission request's
        if isinstance(outcome, Mapping) and outcome.get("outcome") == "cancelled":
            cancelled = True
    if cancelled:
        span.set_attribute("acp.cancelled", True)
    _finish(turn)


def _finish(turn: _Turn) -> None:
    if turn.updates:
        turn.span.set_attribute("acp.session_updates", turn.updates)
    turn.span.end()
