"""The one size cap, translated into the web libraries' own limits."""

from __future__ import annotations

from acp_trio._jsonrpc import DEFAULT_MAX_MESSAGE_SIZE

__all__ = ["DEFAULT_MAX_MESSAGE_SIZE", "library_limit"]

_SLACK = 1024 * 1024


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
