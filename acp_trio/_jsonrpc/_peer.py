"""One JSON-RPC 2.0 peer with no I/O: frames in, events out; calls in, bytes out.

In the shape of h11: :meth:`Peer.receive` takes one frame (the bytes of one
message, or the :class:`OversizedFrame` marker of one too large to keep) and
returns at most one event; :meth:`Peer.send_request`, :meth:`Peer.respond`,
:meth:`Peer.respond_error`, :meth:`Peer.cancel` and :meth:`Peer.notify`
return the bytes to write (each a whole frame with its ``\\n``). The I/O
layer writes those bytes, and writes :class:`SendFrame` events too: they are
the answers the protocol itself owes (a refused duplicate id, a parse error,
an oversized request).

Every protocol rule lives here, with the request-state table
(:class:`RequestTable`):

- one classifier, :func:`message_kind`, decides what a decoded value is;
- a request is registered before anything else sees it, so a
  ``$/cancel_request`` read right after it finds it; a duplicate in-flight
  id is refused ``-32600`` and the running request is left alone;
- every request gets exactly one reply: :meth:`Peer.respond` and friends
  return ``None`` for a request already answered;
- a response or a notification is never answered, whatever is wrong with
  it; an unparsable frame is answered ``-32700`` unless its first bytes show
  a reply (then the call it answers, if pending, fails);
- an oversized frame is answered (``-32600`` "Request too large", with
  ``id: null`` when its id cannot be read) only when it may be a request; an
  oversized reply fails its call; a frame its transport refused for its
  structure (:class:`RefusedFrame`: too deep, too many values) the same way,
  with the transport's error;
- requests held (read, not yet answered) count the bytes of their frames:
  one past ``max_held_bytes`` is answered ``-32603`` "Too many requests" at
  once (see :class:`RequestTable`);
- a reply to a request no longer pending (abandoned, answered twice) is
  dropped quietly, one to an id never issued with a warning;
- a malformed ``$/cancel_request`` is ignored, never answered; each
  outgoing request is cancelled on the wire at most once.

The events are plain slotted objects (one per frame, on the hot path).
"""

from __future__ import annotations

import logging
from typing import Any, Final, Generic, TypeVar

from acp_trio._exceptions import (
    ErrorCode,
    LocalProtocolError,
    MessageTooLarge,
    RemoteProtocolError,
    RequestError,
)
from acp_trio._jsonrpc._framing import OversizedFrame
from acp_trio._jsonrpc._limits import RefusedFrame
from acp_trio._jsonrpc._messages import (
    CANCEL_REQUEST_METHOD,
    ERROR_REPLY,
    INVALID,
    NOTIFICATION,
    REQUEST,
    RESULT,
    TEMPLATE_FORK,
    TEMPLATE_FRAME_MAX,
    InvalidMessage,
    RequestId,
    _explain_invalid,
    cancel_request_frame,
    cancelled_reply_frame,
    decode_frame,
    encode_frame,
    error_response,
    match_cancel_request,
    match_cancelled_reply,
    message_kind,
    notification,
    request,
    response,
)
from acp_trio._jsonrpc._peek import peek_id, peek_oversized
from acp_trio._jsonrpc._state import IncomingRequest, OutgoingRequest, RequestTable, cancel_target

__all__ = [
    "CancelReceived",
    "NotificationReceived",
    "Peer",
    "ReplyReceived",
    "RequestReceived",
    "SendFrame",
]

_log = logging.getLogger("acp_trio.connection")

H = TypeVar("H")
G = TypeVar("G")

# How much of an unparsable frame is searched for the id of a reply.
_PEEK_SIZE: Final = 64 * 1024

# Method names shared by the requests in flight: at most this many, each at
# most this long (against a peer that invents names).
_MAX_METHOD_NAMES: Final = 256
_MAX_SHARED_NAME: Final = 128


class RequestReceived(Generic[H]):
    """A request, registered in the table (``entry``); answer it once."""

    __slots__ = ("entry", "params")

    def __init__(self, entry: IncomingRequest[H], params: Any) -> None:
        self.entry = entry
        self.params = params


class NotificationReceived:
    """A notification (never ``$/cancel_request``: the peer acts on those)."""

    __slots__ = ("method", "params")

    def __init__(self, method: str, params: Any) -> None:
        self.method = method
        self.params = params


class CancelReceived(Generic[H]):
    """A well-formed ``$/cancel_request`` for a request still running, now
    marked cancelled (the first cancel for it only)."""

    __slots__ = ("entry",)

    def __init__(self, entry: IncomingRequest[H]) -> None:
        self.entry = entry


class ReplyReceived(Generic[G]):
    """The end of one of our requests (popped from the table): its result,
    or ``error`` (the peer's :class:`RequestError`, or the protocol error of
    a reply that was malformed, unparsable or too large)."""

    __slots__ = ("entry", "error", "result")

    def __init__(self, entry: OutgoingRequest[G], result: Any, error: BaseException | None) -> None:
        self.entry = entry
        self.result = result
        self.error = error


class SendFrame:
    """An answer the protocol owes (to a request refused before any handler
    saw it): write ``data``."""

    __slots__ = ("data", "request_id")

    def __init__(self, request_id: RequestId, data: bytes) -> None:
        self.request_id = request_id
        self.data = data


Event = RequestReceived[H] | NotificationReceived | CancelReceived[H] | ReplyReceived[G] | SendFrame


class Peer(Generic[H, G]):
    """The sans-IO peer; see the module docstring. ``H`` and ``G`` are what
    the I/O layer keeps in the ``handle`` of incoming and outgoing entries."""

    __slots__ = ("_method_names", "_unanswerable", "table", "templates")

    def __init__(self, max_held_bytes: int | None = None) -> None:
        self.table: RequestTable[H, G] = RequestTable(max_held_bytes=max_held_bytes)
        #: Take the exact bytes of acp_trio's own ``$/cancel_request`` and
        #: ``-32800`` reply (what a cascade of cancels is made of) without
        #: decoding them. Any other spelling takes the general way, with the
        #: same outcome.
        self.templates = True
        self._method_names: dict[str, str] = {}
        # Peer responses we could not use and did not answer (logged once).
        self._unanswerable = 0

    # ------------------------------------------------------------------
    # Receiving

    def receive(self, frame: bytes | OversizedFrame) -> Event[H, G] | None:
        """Act on one frame; the event for the I/O layer, or ``None`` when
        there is nothing to do (a dropped reply, an ignored cancel)."""
        if type(frame) is not bytes:
            if type(frame) is RefusedFrame:
                return self._oversized(frame, frame.error)
            assert type(frame) is OversizedFrame
            return self._oversized(frame)
        if len(frame) <= TEMPLATE_FRAME_MAX and self.templates:
            # One template tried per frame: the two differ at this byte.
            if frame.startswith(b"m", TEMPLATE_FORK):
                if (target := match_cancel_request(frame)) is not None:
                    return self._cancel(target)
            elif (reply_id := match_cancelled_reply(frame)) is not None and self.table.is_stale(
                reply_id
            ):
                _log.debug("dropping late or repeated reply to request %r", reply_id)
                return None
        value = decode_frame(frame)
        kind = message_kind(value)
        if kind == NOTIFICATION:
            method = value["method"]
            if method == CANCEL_REQUEST_METHOD:
                ok, cancelled = cancel_target(value.get("params"))
                if ok:
                    return self._cancel(cancelled)
                _log.debug("ignoring malformed %s: %r", method, value.get("params"))
                return None
            return NotificationReceived(method, value.get("params"))
        if kind == RESULT:
            entry = self.table.response_received(value["id"])
            if entry is None:
                self._unexpected_reply(value["id"])
                return None
            return ReplyReceived(entry, value["result"], None)
        if kind == REQUEST:
            return self._request(value["id"], value["method"], value.get("params"), len(frame))
        if kind == ERROR_REPLY:
            entry = self.table.response_received(value["id"])
            if entry is None:
                self._unexpected_reply(value["id"])
                return None
            return ReplyReceived(entry, None, RequestError.from_error_object(value["error"]))
        assert kind == INVALID
        message = value if type(value) is InvalidMessage else _explain_invalid(value)
        return self._invalid(message, frame)

    def _request(
        self, request_id: RequestId, method: str, params: Any, size: int = 0
    ) -> Event[H, G]:
        names = self._method_names
        known = names.get(method)
        if known is not None:
            method = known  # one string per name for every request in flight
        elif len(method) <= _MAX_SHARED_NAME:
            if len(names) >= _MAX_METHOD_NAMES:
                names.clear()
            names[method] = method
        entry = self.table.receive_request(request_id, method, size)
        if isinstance(entry, RequestError):
            _log.warning("refusing request %r: %s", request_id, entry.data)
            return SendFrame(request_id, encode_frame(error_response(request_id, entry)))
        return RequestReceived(entry, params)

    def _cancel(self, target: RequestId) -> CancelReceived[H] | None:
        entry = self.table.cancel_incoming(target)
        if entry is None:
            _log.debug("ignoring %s for %r: not running", CANCEL_REQUEST_METHOD, target)
            return None
        return CancelReceived(entry)

    def _unexpected_reply(self, request_id: RequestId) -> None:
        if self.table.is_stale(request_id):
            _log.debug("dropping late or repeated reply to request %r", request_id)
        else:
            _log.warning("dropping reply to unknown request id %r", request_id)

    def fail(self, request_id: RequestId, error: BaseException) -> ReplyReceived[G] | None:
        """Our request ``request_id`` is over with ``error``, as if the peer
        had answered it so (its reply is known lost, or too broken to use):
        the event, or ``None`` if it is not pending."""
        entry = self.table.response_received(request_id)
        return None if entry is None else ReplyReceived(entry, None, error)

    def _invalid(self, message: InvalidMessage, frame: bytes) -> Event[H, G] | None:
        if message.is_response:
            # Never a reply to a reply, even a malformed one (some agents
            # answer our notifications with error responses without an id).
            self._unanswerable += 1
            log = _log.warning if self._unanswerable == 1 else _log.debug
            log(
                "ignoring an invalid response from the peer (%s; not answered%s): %s",
                message.error.data,
                ", further ones are logged at debug level" if self._unanswerable == 1 else "",
                _shorten(frame),
            )
            if message.response_id is not None:
                return self.fail(
                    message.response_id,
                    RemoteProtocolError(f"malformed reply: {message.error.data}"),
                )
            return None
        _log.warning("invalid message from peer: %s", message.error)
        if message.error.code == ErrorCode.PARSE_ERROR:
            # Unparsable (bad UTF-8, NaN, cut short), but its first bytes may
            # still show it is the reply to one of our calls: fail that call
            # rather than leave it waiting forever, and do not answer it.
            found = peek_id(frame[:_PEEK_SIZE])
            if found is not None and found[0] == "response":
                if found[1] is not None:
                    return self.fail(
                        found[1], RemoteProtocolError(f"unparsable reply: {message.error.data}")
                    )
                return None
        reply_id = message.reply_id
        return SendFrame(reply_id, encode_frame(error_response(reply_id, message.error)))

    def _oversized(
        self, frame: OversizedFrame, refusal: RequestError | None = None
    ) -> Event[H, G] | None:
        error: Exception = MessageTooLarge(frame.size, frame.limit) if refusal is None else refusal
        kind, found, request_id = peek_oversized(frame.head, frame.tail)
        _log.warning("%s", error)
        if kind == "response":
            # Never answered; the call it answers (if its id shows) fails.
            if found and request_id is not None:
                return self.fail(request_id, error)
            return None
        if kind == "notification":
            return None  # never answered
        # A request, or what cannot be told apart from one: answered, with
        # ``id: null`` when its id cannot be read, as JSON-RPC asks, rather
        # than left without an answer.
        if refusal is None:
            refusal = RequestError(
                RequestError.invalid_request().code,
                "Request too large",
                {"size": frame.size, "limit": frame.limit},
            )
        if not found:
            request_id = None
        return SendFrame(request_id, encode_frame(error_response(request_id, refusal)))

    # ------------------------------------------------------------------
    # Answering incoming requests: each returns the frame of the one reply,
    # or None when the request was already answered.

    def respond(self, entry: IncomingRequest[H], result: Any) -> bytes | None:
        """The successful reply to ``entry``."""
        return self.reply(entry, response(entry.id, result))

    def respond_error(self, entry: IncomingRequest[H], error: RequestError) -> bytes | None:
        """The error reply to ``entry``."""
        return self.reply(entry, error_response(entry.id, error))

    def reply(self, entry: IncomingRequest[H], obj: dict[str, Any] | None) -> bytes | None:
        """The reply ``obj`` (a whole response object) to ``entry``, or its
        ``-32800`` when ``obj`` is ``None``. The request leaves the table
        (a late cancel finds nothing); the caller calls :meth:`done` once
        the frame is handed to its writer."""
        if not self.table.finish_incoming(entry):
            return None
        if obj is None:
            return cancelled_reply_frame(entry.id)
        return encode_reply(entry.id, obj)

    def done(self, entry: IncomingRequest[H]) -> None:
        """The reply of ``entry`` was handed to the writer (or never will be)."""
        self.table.incoming_done(entry)

    # ------------------------------------------------------------------
    # Our requests and notifications

    def send_request(self, method: str, params: Any = None) -> tuple[OutgoingRequest[G], bytes]:
        """Register a request; its entry (with its new id) and its frame.
        Raises :class:`LocalProtocolError` if ``params`` is not JSON (nothing
        is registered then). Call :meth:`forget` if the frame is never sent."""
        entry: OutgoingRequest[G] = self.table.send_request(method)
        try:
            data = encode_message(request(entry.id, method, params))
        except BaseException:
            self.table.response_received(entry.id)
            raise
        return entry, data

    def forget(self, entry: OutgoingRequest[G]) -> None:
        """A request whose frame was never sent: no reply will come."""
        self.table.response_received(entry.id)

    def cancel(self, entry: OutgoingRequest[G]) -> bytes | None:
        """The ``$/cancel_request`` for ``entry``: the first time only, while
        it is pending. Call :meth:`cancel_not_sent` if it cannot be written."""
        if self.table.cancel_outgoing(entry):
            return cancel_request_frame(entry.id)
        return None

    def cancel_not_sent(self, entry: OutgoingRequest[G]) -> None:
        """The frame :meth:`cancel` gave was not written: it may be given again."""
        self.table.cancel_not_sent(entry)

    def abandon(self, entry: OutgoingRequest[G]) -> None:
        """We stopped waiting for ``entry``; its late reply is dropped quietly."""
        self.table.abandon_outgoing(entry)

    def notify(self, method: str, params: Any = None) -> bytes:
        """The frame of a notification (:class:`LocalProtocolError` if
        ``params`` is not JSON)."""
        try:
            return encode_frame(notification(method, params))
        except (TypeError, ValueError, RecursionError) as exc:  # RecursionError: a cycle
            raise LocalProtocolError(f"message cannot be encoded as JSON: {exc}") from exc

    def close(self) -> tuple[list[IncomingRequest[H]], list[OutgoingRequest[G]]]:
        """Empty the table; return what was in flight each way."""
        return self.table.close()


def encode_message(obj: Any) -> bytes:
    """:func:`encode_frame`, raising :class:`LocalProtocolError` for what JSON
    cannot express."""
    try:
        return encode_frame(obj)
    except (TypeError, ValueError, RecursionError) as exc:  # RecursionError: a cycle
        raise LocalProtocolError(f"message cannot be encoded as JSON: {exc}") from exc


def encode_reply(request_id: RequestId, obj: dict[str, Any]) -> bytes:
    """The frame of a reply; a result JSON cannot express becomes ``-32603``
    (a request is answered whatever its handler returned)."""
    try:
        return encode_frame(obj)
    except (TypeError, ValueError, RecursionError) as exc:  # RecursionError: a cycle
        _log.error("reply to %r cannot be encoded: %s", request_id, exc)
        return encode_frame(
            error_response(request_id, RequestError.internal_error("result is not JSON"))
        )


# How much of a frame a log message quotes.
_QUOTE_SIZE: Final = 200


def _shorten(frame: bytes) -> str:
    text = frame[:_QUOTE_SIZE].decode("utf-8", "replace")
    if len(frame) > _QUOTE_SIZE:
        text += f"... ({len(frame)} bytes)"
    return text
