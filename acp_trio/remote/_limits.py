"""The server's limits: the one size cap (translated into the web libraries'
own limits), and the bounds in time, processes, connections and JSON
structure that keep a server reachable from a network within a known
budget (docs/serving-on-a-network.md has them on one page)."""

from __future__ import annotations

import resource
from typing import Final

import attrs
import trio

from acp_trio._jsonrpc import (
    DEFAULT_MAX_DEPTH,
    DEFAULT_MAX_MESSAGE_SIZE,
    DEFAULT_MAX_VALUES,
    OversizedFrame,
    StructureCheck,
    refused_frame,
    surely_within,
)

__all__ = [
    "DEFAULT_MAX_MESSAGE_SIZE",
    "REMOTE_MAX_MESSAGE_SIZE",
    "Admission",
    "ServerLimits",
    "check_structure",
    "library_limit",
]

_SLACK = 1024 * 1024

#: The default message cap of a server's remote connections (the client's
#: own stays stdio's 64 MiB). Lower than stdio's: a
#: stranger's message is read and parsed on the server's one event loop, and
#: each connection may hold one; 16 MiB still takes a 12 MB image whole.
REMOTE_MAX_MESSAGE_SIZE: Final = 16 * 1024 * 1024


def library_limit(max_message_size: int) -> int:
    """The limit to give a WebSocket or HTTP library for a connection capped
    at ``max_message_size`` bytes.

    A little above the cap, so that a message somewhat over it still reaches
    the connection whole and is answered as on stdio (``-32600`` "Request too
    large" with its size and the limit); only a message far over it (by more
    than the cap or 1 MiB, whichever is smaller) makes the library drop the
    WebSocket (close code 1009) or refuse the body (413), so memory stays
    bounded either way.
    """
    if max_message_size < 1:
        raise ValueError(f"max_message_size must be positive, not {max_message_size}")
    return max_message_size + min(max_message_size, _SLACK)


#: Open files kept aside from the connection cap: the process's own, the
#: listening sockets, and each agent process's pipes.
_RESERVED_FILES: Final = 64
_FILES_PER_AGENT: Final = 4


def open_files_limit() -> int:
    """The process's soft limit on open files (65,536 when unlimited)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return 65536 if soft == resource.RLIM_INFINITY or soft <= 0 else int(soft)


@attrs.frozen(kw_only=True)
class ServerLimits:
    """The bounds of a remote server (:class:`~acp_trio.remote.RemoteApp`,
    :func:`~acp_trio.remote.serve_remote`, ``python -m acp_trio serve``).

    Time (each independent of the 30 s keep-alive timeout, which bounds an
    idle connection between requests):

    - ``head_timeout``: a request head must arrive whole within this many
      seconds of its first byte (a new connection's first head: of the
      connection). On h2c, each frame and each header block likewise. A
      head cut off is answered ``408`` where nothing else is being sent, and
      its connection closed.
    - ``body_timeout`` and ``min_body_rate``: a request body must keep
      coming at ``min_body_rate`` bytes a second after a grace of
      ``body_timeout`` seconds (its deadline: start + ``body_timeout`` +
      bytes received / ``min_body_rate``); else ``408``, the HTTP/1.1
      connection closed (on h2c, that stream reset). A WebSocket's first
      message (``initialize``) must come within ``body_timeout`` (else it is
      closed, code 1008).

    Processes and connections (over the cap: ``503`` with ``Retry-After``,
    ``429`` for a client over its share; a client is an IP address):

    - ``max_agents``: ACP connections at once, each an agent (a process
      under ``serve``); ``max_agents_per_client`` (default: half, at least
      one).
    - ``max_connections``: TCP connections at once (default: the open-files
      limit, less 64 and 4 per agent); ``max_connections_per_client``
      (default: half).

    JSON (checked before a message is parsed, by the JSON-RPC core's
    frame limits): at most ``max_json_depth`` levels
    (deeper: ``-32700``) and ``max_json_values`` values (more: ``-32600``),
    counted outside strings.

    ``retry_after``: the seconds a refused client is told to wait.
    """

    head_timeout: float = 10.0
    body_timeout: float = 10.0
    min_body_rate: float = 16 * 1024
    max_agents: int = 16
    max_agents_per_client: int | None = None
    max_connections: int | None = None
    max_connections_per_client: int | None = None
    max_json_depth: int = DEFAULT_MAX_DEPTH
    max_json_values: int = DEFAULT_MAX_VALUES
    retry_after: int = 5

    def __attrs_post_init__(self) -> None:
        for name in ("head_timeout", "body_timeout", "min_body_rate"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, not {getattr(self, name)}")
        for name in (
            "max_agents",
            "max_agents_per_client",
            "max_connections",
            "max_connections_per_client",
            "max_json_depth",
            "max_json_values",
            "retry_after",
        ):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"{name} must be at least 1, not {value}")

    @property
    def agents_per_client(self) -> int:
        """The agents one client address may run at once (its share)."""
        if self.max_agents_per_client is not None:
            return self.max_agents_per_client
        return max(1, self.max_agents // 2)

    @property
    def connections(self) -> int:
        """The TCP connections served at once (``max_connections``, or what
        the open-files limit leaves)."""
        if self.max_connections is not None:
            return self.max_connections
        spare = open_files_limit() - _RESERVED_FILES - _FILES_PER_AGENT * self.max_agents
        return max(16, spare)

    @property
    def connections_per_client(self) -> int:
        """The TCP connections one client address may hold at once."""
        if self.max_connections_per_client is not None:
            return self.max_connections_per_client
        return max(1, self.connections // 2)

    def body_deadline(self, start: float, received: int) -> float:
        """When a body started at ``start`` with ``received`` bytes so far
        must have made more progress."""
        return start + self.body_timeout + received / self.min_body_rate


async def check_structure(
    message: bytes, limit: int, limits: ServerLimits
) -> bytes | OversizedFrame:
    """``message``, or the marker refusing it (too deep, too many values):
    checked in steps of a few thousand values, yielding between them."""
    depth, values = limits.max_json_depth, limits.max_json_values
    if surely_within(message, depth, values):
        return message
    check = StructureCheck(message, depth, values)
    while not check.step(_CHECK_STEP):
        await trio.lowlevel.checkpoint()
    await trio.lowlevel.checkpoint()
    if check.error is not None:
        return refused_frame(message, limit, check.error)
    return message


#: Values checked between two yields (a few milliseconds).
_CHECK_STEP: Final = 4096


class Admission:
    """The agents running (ACP connections), all and by client: a new one
    is admitted or refused (``503``, or ``429`` for a client over its
    share), never queued."""

    def __init__(self, limits: ServerLimits) -> None:
        self.limits = limits
        self.total = 0
        self.by_client: dict[str | None, int] = {}

    def take(self, client: str | None) -> tuple[int, str] | None:
        """Admit one for ``client``; the refusal (status, text) if not."""
        if self.total >= self.limits.max_agents:
            return 503, f"the server runs its {self.limits.max_agents} agents: try again later"
        if self.by_client.get(client, 0) >= self.limits.agents_per_client:
            return 429, f"your address runs {self.limits.agents_per_client} agents already"
        self.total += 1
        self.by_client[client] = self.by_client.get(client, 0) + 1
        return None

    def give_back(self, client: str | None) -> None:
        self.total -= 1
        left = self.by_client[client] - 1
        if left:
            self.by_client[client] = left
        else:
            del self.by_client[client]

    def retry_after(self) -> list[tuple[bytes, bytes]]:
        return [(b"retry-after", str(self.limits.retry_after).encode())]
