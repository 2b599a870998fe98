"""Request bookkeeping for one JSON-RPC peer, with no I/O.

Theory of operation
===================

A connection is symmetric: both sides send requests. :class:`RequestTable`
keeps two registries and enforces the rules that make "every request gets
exactly one response" true by construction. It does no I/O and knows nothing
about tasks; the Trio layer attaches its own per-request object (a cancel
scope, an event) through the ``handle`` slot of each entry.

Incoming requests (the peer asked us)::

    receive_request() --> RUNNING --finish_incoming()--> RESPONDING --> DONE
                            |   ^
     cancel_incoming() -----+   |  (sets cancel_requested; stays RUNNING)
                                |

- :meth:`RequestTable.receive_request` registers the id *before* any handler
  runs, so a ``$/cancel_request`` read right after the request always finds
  it. An id that is already in flight is refused (the caller answers it
  ``-32600``) and the running request is left alone. Requests held (read and
  not yet answered) count bytes, the sizes of their frames: one that would
  take them past ``max_held_bytes`` is refused (``-32603`` "Too many
  requests"), unless none is held (a message the size cap admits is always
  served alone).
- :meth:`RequestTable.cancel_incoming` marks a RUNNING request as cancelled
  and returns it (the caller then cancels its scope). For an unknown id, a
  request already RESPONDING or DONE, a repeated cancel or a malformed id it
  returns ``None``: nothing happens and nothing is answered.
- :meth:`RequestTable.finish_incoming` moves the request to RESPONDING and
  removes its id from the registry *before* the reply is written. It returns
  ``False`` if the request had already been finished, so a second reply can
  never be produced. After it, a late cancel finds nothing.

Outgoing requests (we asked the peer)::

    send_request() --> PENDING --response_received()--> DONE
                         |
                         +--cancel_outgoing()--> PENDING (cancel_sent) --...
                         +--abandon_outgoing()--> DONE (late reply dropped quietly)

- Ids are allocated here, as increasing integers.
- :meth:`RequestTable.cancel_outgoing` returns ``True`` only the first time
  for a pending request: exactly one ``$/cancel_request`` per id.
- :meth:`RequestTable.abandon_outgoing` forgets a request whose caller stopped
  waiting. Nothing of it is kept: since ids are allocated in increasing
  order, :meth:`RequestTable.is_stale` recognises the peer's late reply (an id
  we issued that is no longer pending) without remembering anything, so
  bookkeeping never grows with the number of cancelled requests.
- :meth:`RequestTable.response_received` pops the pending entry. A reply for
  an id that is not pending returns ``None`` (drop it: quietly when
  :meth:`RequestTable.is_stale`, with a warning when we never issued it).
- :meth:`RequestTable.close` empties both registries and returns what was
  pending, so the caller can fail every outgoing call and cancel every
  incoming handler at once.
"""

from __future__ import annotations

import enum
from typing import Any, Generic, TypeVar

import attrs

from acp_trio._exceptions import ErrorCode, RequestError
from acp_trio._jsonrpc._messages import RequestId, is_request_id

__all__ = [
    "IncomingRequest",
    "OutgoingRequest",
    "Phase",
    "RequestTable",
    "cancel_target",
]

H = TypeVar("H")
G = TypeVar("G")


class Phase(enum.Enum):
    RUNNING = "running"  # incoming: handler may run; outgoing: awaiting reply
    RESPONDING = "responding"  # incoming: reply decided, being written
    DONE = "done"


@attrs.define(slots=True, eq=False)
class IncomingRequest(Generic[H]):
    """One request the peer sent us, from registration to reply."""

    id: RequestId
    method: str
    phase: Phase = Phase.RUNNING
    cancel_requested: bool = False
    handle: H | None = None
    #: The size of its frame, counted while it is held.
    size: int = 0


@attrs.define(slots=True, eq=False)
class OutgoingRequest(Generic[G]):
    """One request we sent the peer, until its reply or until abandoned."""

    id: int
    method: str
    phase: Phase = Phase.RUNNING
    cancel_sent: bool = False
    handle: G | None = None


def cancel_target(params: Any) -> tuple[bool, RequestId]:
    """Read the ``requestId`` of ``$/cancel_request`` params.

    Returns ``(True, id)`` for a well-formed one, ``(False, None)`` otherwise
    (a malformed cancel is ignored, never answered).
    """
    if type(params) is dict and "requestId" in params:
        target = params["requestId"]
        if is_request_id(target):
            return True, target
    return False, None


class RequestTable(Generic[H, G]):
    """The two registries of a peer connection; see the module docstring."""

    __slots__ = ("_first_id", "_next_id", "held_bytes", "incoming", "max_held_bytes", "outgoing")

    def __init__(self, first_id: int = 0, max_held_bytes: int | None = None) -> None:
        self.incoming: dict[RequestId, IncomingRequest[H]] = {}
        self.outgoing: dict[int, OutgoingRequest[G]] = {}
        self._first_id = first_id
        self._next_id = first_id
        #: The bytes of the requests held (read, not yet answered), and
        #: their bound (``None``: none).
        self.held_bytes = 0
        self.max_held_bytes = max_held_bytes

    # Incoming

    def receive_request(
        self, request_id: RequestId, method: str, size: int = 0
    ) -> IncomingRequest[H] | RequestError:
        """Register a request just read (its frame ``size`` bytes); a
        duplicate in-flight id is refused, and so is a request past the
        bound of the bytes held."""
        if request_id in self.incoming:
            return RequestError.invalid_request(f"request id {request_id!r} is already in flight")
        limit = self.max_held_bytes
        if limit is not None and self.held_bytes and self.held_bytes + size > limit:
            return RequestError(
                ErrorCode.INTERNAL_ERROR,
                "Too many requests",
                {"heldRequestBytes": self.held_bytes, "maxHeldRequestBytes": limit},
            )
        entry: IncomingRequest[H] = IncomingRequest(request_id, method, size=size)
        self.incoming[request_id] = entry
        self.held_bytes += size
        return entry

    def cancel_incoming(self, request_id: RequestId) -> IncomingRequest[H] | None:
        """Mark a running request cancelled; ``None`` if there is nothing to do."""
        if not is_request_id(request_id):
            # True == 1 and 1.0 == 1 as dict keys; unhashable ids would raise.
            return None
        entry = self.incoming.get(request_id)
        if entry is None or entry.cancel_requested:
            return None
        entry.cancel_requested = True
        return entry

    def finish_incoming(self, entry: IncomingRequest[H]) -> bool:
        """RUNNING -> RESPONDING; the id leaves the registry. ``False`` if the
        request was already finished (no second reply)."""
        if entry.phase is not Phase.RUNNING:
            return False
        entry.phase = Phase.RESPONDING
        if self.incoming.get(entry.id) is entry:
            del self.incoming[entry.id]
            self.held_bytes -= entry.size
        return True

    def incoming_done(self, entry: IncomingRequest[H]) -> None:
        """The reply was handed to the writer (or the connection is gone)."""
        entry.phase = Phase.DONE
        entry.handle = None

    # Outgoing

    def send_request(self, method: str) -> OutgoingRequest[G]:
        """Allocate an id and register a pending outgoing request."""
        request_id = self._next_id
        self._next_id += 1
        entry: OutgoingRequest[G] = OutgoingRequest(request_id, method)
        self.outgoing[request_id] = entry
        return entry

    def response_received(self, request_id: RequestId) -> OutgoingRequest[G] | None:
        """Pop the pending request a reply is for; ``None`` if there is none."""
        if type(request_id) is not int:
            return None
        entry = self.outgoing.pop(request_id, None)
        if entry is not None:
            entry.phase = Phase.DONE
        return entry

    def is_stale(self, request_id: RequestId) -> bool:
        """Whether a reply id is one we issued that is no longer pending: a
        late reply to an abandoned request, or a duplicate reply."""
        return (
            type(request_id) is int
            and self._first_id <= request_id < self._next_id
            and request_id not in self.outgoing
        )

    def cancel_outgoing(self, entry: OutgoingRequest[G]) -> bool:
        """``True`` exactly once per pending request: send ``$/cancel_request``."""
        if entry.phase is not Phase.RUNNING or entry.cancel_sent:
            return False
        entry.cancel_sent = True
        return True

    def cancel_not_sent(self, entry: OutgoingRequest[G]) -> None:
        """The cancel :meth:`cancel_outgoing` allowed could not be sent: the
        next :meth:`cancel_outgoing` allows it again."""
        entry.cancel_sent = False

    def abandon_outgoing(self, entry: OutgoingRequest[G]) -> None:
        """The caller stopped waiting; drop the entry (a late reply will be
        recognised by :meth:`is_stale`)."""
        if entry.phase is not Phase.RUNNING:
            return
        entry.phase = Phase.DONE
        entry.handle = None
        if self.outgoing.get(entry.id) is entry:
            del self.outgoing[entry.id]

    # Both

    def close(self) -> tuple[list[IncomingRequest[H]], list[OutgoingRequest[G]]]:
        """Empty both registries; return what was in flight."""
        incoming = list(self.incoming.values())
        outgoing = list(self.outgoing.values())
        self.incoming.clear()
        self.outgoing.clear()
        self.held_bytes = 0
        for out in outgoing:
            out.phase = Phase.DONE
        return incoming, outgoing

    def __len__(self) -> int:
        return len(self.incoming) + len(self.outgoing)
