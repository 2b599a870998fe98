"""The v2 agent's view of its client: :class:`ClientProxy`, made by the SDK.

Below both the agent side (``_agent``, which makes one per connection) and
the turn (``_turn``, whose :attr:`Turn.client` it is).
"""

from __future__ import annotations

from acp_trio._public import NoPublicConstructor
from acp_trio._typed._dispatch import ProxyBase, adopt_hook_docs
from acp_trio.schema.v2 import ClientCapabilities
from acp_trio.v2._generated_proxies import ClientProxyMethods

__all__ = ["ClientProxy"]


@adopt_hook_docs
class ClientProxy(ClientProxyMethods, ProxyBase, metaclass=NoPublicConstructor):
    """Typed v2 calls from the agent to its client (object or keyword form).
    Cancelling a call cancels its request on the wire (``$/cancel_request``)."""

    #: The client's capabilities, from its ``initialize``.
    capabilities: ClientCapabilities | None = None
