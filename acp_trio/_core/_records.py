"""The two records a connection reports: :class:`ConnectionStatistics` and
:class:`RequestNode` (below the per-request objects, which name them in
:class:`~acp_trio._core._requests.ConnectionAPI`)."""

from __future__ import annotations

from typing import Literal

import attrs

from acp_trio._jsonrpc import RequestId

__all__ = ["ConnectionStatistics", "RequestNode"]


@attrs.frozen
class ConnectionStatistics:
    """What :meth:`Connection.statistics` reports: requests in flight each
    way, frames waiting in the output queue, notifications received, handled
    and still queued, bytes of an unfinished input frame, and whether the
    connection is closed.
    """

    incoming_in_flight: int
    outgoing_pending: int
    outbox_frames: int
    notifications_queued: int
    notifications_received: int
    notifications_handled: int
    read_buffer_bytes: int
    closed: bool


@attrs.frozen
class RequestNode:
    """One node of :meth:`Connection.request_tree`."""

    direction: Literal["incoming", "outgoing"]
    id: RequestId
    method: str
    state: str
    children: tuple[RequestNode, ...] = ()
