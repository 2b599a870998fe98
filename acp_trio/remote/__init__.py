"""Remote ACP: the WebSocket profile of the transport RFD
(``streamable-http-websocket-transport``), server and client, on Trio.

Needs the ``remote`` extra (``pip install 'acp-trio[remote]'``): hypercorn
(server, Trio worker) and trio-websocket (client).

- :class:`RemoteApp`: the ASGI app serving ``/acp`` (one ACP connection per
  WebSocket); :func:`agent_app` makes one serving an
  :class:`~acp_trio.Agent` factory; mount either in any ASGI server running
  on Trio, or run it with :func:`serve_remote`.
- :func:`open_websocket_stream`: a client WebSocket as a message stream for
  :func:`~acp_trio.open_client` / :func:`~acp_trio.open_connection`;
  :func:`connect_remote_agent` does both.

Everything a connection guarantees on stdio holds over it: each request's
cancel scope, ``$/cancel_request`` both ways, cascade, deadlines, ordering,
and one message-size cap, enforced and reported as on stdio.
"""

from acp_trio.remote import _requires as _requires
from acp_trio.remote._app import RemoteApp as RemoteApp
from acp_trio.remote._app import StreamHandler as StreamHandler
from acp_trio.remote._limits import library_limit as library_limit
from acp_trio.remote._serve import agent_app as agent_app
from acp_trio.remote._serve import connect_remote_agent as connect_remote_agent
from acp_trio.remote._serve import hypercorn_config as hypercorn_config
from acp_trio.remote._serve import serve_remote as serve_remote
from acp_trio.remote._ws_client import WebSocketMessages as WebSocketMessages
from acp_trio.remote._ws_client import open_websocket_stream as open_websocket_stream

__all__ = [
    "RemoteApp",
    "StreamHandler",
    "WebSocketMessages",
    "agent_app",
    "connect_remote_agent",
    "hypercorn_config",
    "library_limit",
    "open_websocket_stream",
    "serve_remote",
]
