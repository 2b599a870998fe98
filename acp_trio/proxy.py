"""Proxy chains (proxy-chains RFD, Draft): :class:`Proxy`, :func:`run_proxy`,
:func:`serve_proxy`, and the conductor, :func:`serve_conductor`
(``python -m acp_trio conduct``).

A proxy sits between a client and its successor (the next proxy, or the
agent), talking only to the conductor on its stdio. Messages from the client
side arrive as they are; messages for the successor go out wrapped in
``proxy/successor``, and the successor's messages come back wrapped the same
way. :class:`Proxy` hides the envelope: override the typed method you want to
change, with the same name as on :class:`~acp_trio.Agent` (what the client
asks) or :class:`~acp_trio.Client` (what the agent asks); everything else is
passed on unchanged, typed or not.

``self.successor`` calls the successor with the agent proxy's methods (both
call forms), ``self.client`` calls the client side with the client proxy's.
Each is a nested call in the handler's scope: cancelling the incoming request
cancels it, on its own hop, with its own ``$/cancel_request``.

A notification is passed on only after the requests read before it (a
``session/cancel`` never overtakes its prompt); :class:`ForwardOrder` does
that, for a proxy written on a bare :class:`~acp_trio.lowlevel.Handler` too.

This module only re-exports.
"""

from acp_trio._proxy._conductor import serve_conductor as serve_conductor
from acp_trio._proxy._forward_order import ForwardOrder as ForwardOrder
from acp_trio._proxy._proxy import PredecessorProxy as PredecessorProxy
from acp_trio._proxy._proxy import Proxy as Proxy
from acp_trio._proxy._proxy import SuccessorProxy as SuccessorProxy
from acp_trio._proxy._proxy import run_proxy as run_proxy
from acp_trio._proxy._proxy import serve_proxy as serve_proxy
from acp_trio._public import fix_module_names as _fix_module_names

__all__ = [
    "ForwardOrder",
    "PredecessorProxy",
    "Proxy",
    "SuccessorProxy",
    "run_proxy",
    "serve_conductor",
    "serve_proxy",
]

_fix_module_names("acp_trio.proxy", globals())
