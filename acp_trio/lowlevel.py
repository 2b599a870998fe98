"""The JSON-level layer under the typed API: one seam for tools, proxies,
tests and transports of your own. Here a connection speaks JSON-RPC with
plain ``dict`` params and results, and keeps every rule the typed layer
relies on: each incoming request in its own cancel scope, each outgoing one
cancelled on the wire, every request answered once, notifications in wire
order.

The connection:

- :class:`Connection`: a JSON-RPC peer over one stream; made by
  :func:`open_connection` (an ``async with`` block that owns its tasks),
  :func:`connect_connection` (started in your nursery) or
  :func:`serve_connection` (runs until the stream ends).
- :class:`Handler`: what the connection calls for each request and
  notification it receives; subclass it.
- :class:`RequestContext`: an incoming request as its handler sees it (its
  cancel scope, its id, the connection typed as :class:`ConnectionAPI`);
  :func:`current_request` finds it from any task under the handler.
- :class:`PendingRequest`: an outgoing request you hold (from
  ``open_request`` or ``send_request``): its result, its cancel.
- :class:`CancelCause`: why a request was cancelled.
- :class:`RequestNode` and :class:`ConnectionStatistics`: what
  ``request_tree()`` and ``statistics()`` report of what is in flight.
- :data:`CANCEL_REQUEST_METHOD`: the wire name of the per-request cancel.

Transports, the streams a connection runs on:

- :func:`open_stdio_stream`: an agent's own stdin and stdout (fd 1 kept for
  the protocol); :func:`open_tcp_stream`: a TCP connection to an agent.
- :func:`open_agent_process` / :class:`AgentProcess`: a spawned agent and
  its stderr (:class:`StderrStatistics`).
- :class:`FramedStream`: newline-delimited frames over a byte stream.
- :class:`MessageStream` and :class:`BufferedMessageStream`: the seam for
  transports whose unit is a whole message (WebSocket frames, HTTP bodies).

Around it:

- :class:`Instrumentation` and :class:`ConnectionInstrument`: the seam for
  tracing a connection (``acp_trio.contrib.otel`` is one).
- :func:`json_backend` / :func:`use_json_backend`: which JSON library
  encodes and decodes, process-wide.
- :data:`AGENT_METHODS` / :data:`CLIENT_METHODS`: the typed layer's method
  tables (wire name to method name), for proxies and tools that route.

This module only re-exports.
"""

from acp_trio._core._connection import CANCEL_REQUEST_METHOD as CANCEL_REQUEST_METHOD
from acp_trio._core._connection import Connection as Connection
from acp_trio._core._connection import ConnectionStatistics as ConnectionStatistics
from acp_trio._core._connection import Handler as Handler
from acp_trio._core._connection import RequestNode as RequestNode
from acp_trio._core._framed import FramedStream as FramedStream
from acp_trio._core._handler import ConnectionInstrument as ConnectionInstrument
from acp_trio._core._handler import Instrumentation as Instrumentation
from acp_trio._core._message_stream import BufferedMessageStream as BufferedMessageStream
from acp_trio._core._message_stream import MessageStream as MessageStream
from acp_trio._core._open import connect_connection as connect_connection
from acp_trio._core._open import open_connection as open_connection
from acp_trio._core._open import serve_connection as serve_connection
from acp_trio._core._request_base import CancelCause as CancelCause
from acp_trio._core._requests import ConnectionAPI as ConnectionAPI
from acp_trio._core._requests import PendingRequest as PendingRequest
from acp_trio._core._requests import RequestContext as RequestContext
from acp_trio._core._requests import current_request as current_request
from acp_trio._jsonrpc._messages import json_backend as json_backend
from acp_trio._jsonrpc._messages import use_json_backend as use_json_backend
from acp_trio._public import fix_module_names as _fix_module_names
from acp_trio._transports import AgentProcess as AgentProcess
from acp_trio._transports import StderrStatistics as StderrStatistics
from acp_trio._transports import open_agent_process as open_agent_process
from acp_trio._transports import open_stdio_stream as open_stdio_stream
from acp_trio._transports import open_tcp_stream as open_tcp_stream
from acp_trio._typed._agent import AGENT_METHODS as AGENT_METHODS
from acp_trio._typed._client import CLIENT_METHODS as CLIENT_METHODS

_fix_module_names("acp_trio.lowlevel", globals())
