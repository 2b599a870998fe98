"""Remote ACP: the WebSocket and Streamable HTTP profiles of the transport
RFD (``streamable-http-websocket-transport``), server and client, on Trio.

Needs the ``remote`` extra (``pip install '/path/to/acp_trio[remote]'``,
from a checkout or a wheel): hypercorn (server, Trio worker), wsproto (our
own WebSocket, both sides, with batched writes), httpx2 with httpcore2's
Trio backend and h2 (HTTP client).

- :class:`RemoteApp`: the ASGI app serving ``/acp`` (one ACP connection per
  WebSocket, or per Streamable HTTP connection: POST, GET-SSE, DELETE);
  :func:`agent_app` makes one serving an
  :class:`~acp_trio.Agent` factory; mount either in any ASGI server running
  on Trio, or run it with :func:`serve_remote`.
- :func:`open_websocket_stream`: a client WebSocket as a message stream for
  :func:`~acp_trio.open_agent` / :func:`~acp_trio.lowlevel.open_connection`;
  :func:`open_http_stream` the same over Streamable HTTP;
  :func:`open_remote_stream` picks by URL and profile;
  :func:`open_remote_agent` opens one and a client over it (with
  ``reconnect=``:class:`Reconnect`, it reconnects and takes up its
  sessions when the transport is lost; :class:`ReplyLost`,
  :class:`SessionLost` say what could not be saved).

Everything a connection guarantees on stdio holds over it: each request's
cancel scope, ``$/cancel_request`` both ways, cascade, deadlines, ordering,
and one message-size cap, enforced and reported as on stdio. A server is
bounded in time, agents, connections, bytes and JSON structure
(:class:`ServerLimits`; docs/serving-on-a-network.md).
"""

from acp_trio.remote import _requires as _requires
from acp_trio.remote._app import RemoteApp as RemoteApp
from acp_trio.remote._app import StreamHandler as StreamHandler
from acp_trio.remote._http_client import HttpMessages as HttpMessages
from acp_trio.remote._http_client import HttpStatusError as HttpStatusError
from acp_trio.remote._http_client import open_http_stream as open_http_stream
from acp_trio.remote._limits import REMOTE_MAX_MESSAGE_SIZE as REMOTE_MAX_MESSAGE_SIZE
from acp_trio.remote._limits import ServerLimits as ServerLimits
from acp_trio.remote._limits import library_limit as library_limit
from acp_trio.remote._reconnect import Reconnect as Reconnect
from acp_trio.remote._reconnect import ReplyLost as ReplyLost
from acp_trio.remote._reconnect import SessionLost as SessionLost
from acp_trio.remote._serve import Profile as Profile
from acp_trio.remote._serve import agent_app as agent_app
from acp_trio.remote._serve import hypercorn_config as hypercorn_config
from acp_trio.remote._serve import open_remote_agent as open_remote_agent
from acp_trio.remote._serve import open_remote_stream as open_remote_stream
from acp_trio.remote._serve import serve_remote as serve_remote
from acp_trio.remote._websocket import WebSocket as WebSocket
from acp_trio.remote._websocket import WebSocketClosed as WebSocketClosed
from acp_trio.remote._websocket import WebSocketError as WebSocketError
from acp_trio.remote._websocket import WebSocketRejected as WebSocketRejected
from acp_trio.remote._ws_client import WebSocketMessages as WebSocketMessages
from acp_trio.remote._ws_client import open_websocket_stream as open_websocket_stream
from acp_trio.remote._ws_resume_client import (
    ResumableWebSocketMessages as ResumableWebSocketMessages,
)

__all__ = [
    "REMOTE_MAX_MESSAGE_SIZE",
    "HttpMessages",
    "HttpStatusError",
    "Profile",
    "Reconnect",
    "RemoteApp",
    "ReplyLost",
    "ResumableWebSocketMessages",
    "ServerLimits",
    "SessionLost",
    "StreamHandler",
    "WebSocket",
    "WebSocketClosed",
    "WebSocketError",
    "WebSocketMessages",
    "WebSocketRejected",
    "agent_app",
    "open_remote_agent",
    "hypercorn_config",
    "library_limit",
    "open_http_stream",
    "open_remote_stream",
    "open_websocket_stream",
    "serve_remote",
]

from acp_trio._public import fix_module_names as _fix_module_names

_fix_module_names("acp_trio.remote", globals())
