"""acp_trio: an Agent Client Protocol SDK for Trio.

Layers, bottom to top:

- ``acp_trio._jsonrpc``: the sans-IO JSON-RPC 2.0 core (framing, message
  classification, request bookkeeping). No Trio, no schema.
- ``acp_trio._connection``: the Trio connection. The request tree is the
  nursery tree: each incoming request runs in its own cancel scope, and
  cancelling it cancels every nested outgoing request on the wire.
- ``acp_trio._transports``: stdio (agent side), spawning an agent (client
  side), TCP.
- ``acp_trio.schema``: attrs classes generated from the ACP JSON Schema and the
  cattrs converter that maps them to and from wire JSON.

This module only re-exports.
"""

from acp_trio._connection import CANCEL_REQUEST_METHOD as CANCEL_REQUEST_METHOD
from acp_trio._connection import Connection as Connection
from acp_trio._connection import ConnectionConfig as ConnectionConfig
from acp_trio._connection import ConnectionStatistics as ConnectionStatistics
from acp_trio._connection import Handler as Handler
from acp_trio._connection import RequestNode as RequestNode
from acp_trio._connection import connect_connection as connect_connection
from acp_trio._connection import open_connection as open_connection
from acp_trio._connection import serve_connection as serve_connection
from acp_trio._exceptions import ACPError as ACPError
from acp_trio._exceptions import ConnectionClosed as ConnectionClosed
from acp_trio._exceptions import ErrorCode as ErrorCode
from acp_trio._exceptions import LocalProtocolError as LocalProtocolError
from acp_trio._exceptions import MessageTooLarge as MessageTooLarge
from acp_trio._exceptions import ProtocolError as ProtocolError
from acp_trio._exceptions import RemoteProtocolError as RemoteProtocolError
from acp_trio._exceptions import RequestError as RequestError
from acp_trio._framed import FramedStream as FramedStream
from acp_trio._requests import CancelCause as CancelCause
from acp_trio._requests import PendingRequest as PendingRequest
from acp_trio._requests import RequestContext as RequestContext
from acp_trio._requests import current_request as current_request
from acp_trio._transports import AgentProcess as AgentProcess
from acp_trio._transports import open_agent_process as open_agent_process
from acp_trio._transports import open_stdio_stream as open_stdio_stream
from acp_trio._transports import open_tcp_stream as open_tcp_stream
from acp_trio._transports import serve_tcp as serve_tcp

__version__ = "0.1.0.dev0"
