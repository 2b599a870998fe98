"""acp_trio: an Agent Client Protocol SDK for Trio.

Layers, bottom to top:

- ``acp_trio._jsonrpc``: the sans-IO JSON-RPC 2.0 core (framing, message
  classification, request bookkeeping). No Trio, no schema.
- ``acp_trio._connection``: the Trio connection. The request tree is the
  nursery tree: each incoming request runs in its own cancel scope, and
  cancelling it cancels every nested outgoing request on the wire.
- ``acp_trio._transports``: stdio (agent side), spawning an agent (client
  side), TCP.
- ``acp_trio._agent``, ``acp_trio._client``: the typed Agent and Client APIs
  (schema classes in and out, ``session/cancel`` built in, capability
  checks), over the connection.
- ``acp_trio._workspace``, ``acp_trio._terminals``: safe handlers a client
  can serve an agent's file and terminal requests with.
- ``acp_trio.schema``: attrs classes generated from the ACP JSON Schema and the
  cattrs converter that maps them to and from wire JSON.

This module only re-exports.
"""

from acp_trio import build as build
from acp_trio._agent import AGENT_METHODS as AGENT_METHODS
from acp_trio._agent import Agent as Agent
from acp_trio._agent import open_agent as open_agent
from acp_trio._agent import run_agent as run_agent
from acp_trio._agent import serve_agent as serve_agent
from acp_trio._client import CLIENT_METHODS as CLIENT_METHODS
from acp_trio._client import AgentProxy as AgentProxy
from acp_trio._client import Client as Client
from acp_trio._client import connect_to_agent as connect_to_agent
from acp_trio._client import open_client as open_client
from acp_trio._client_proxy import ClientProxy as ClientProxy
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
from acp_trio._exceptions import CapabilityError as CapabilityError
from acp_trio._exceptions import ConnectionClosed as ConnectionClosed
from acp_trio._exceptions import ErrorCode as ErrorCode
from acp_trio._exceptions import LocalProtocolError as LocalProtocolError
from acp_trio._exceptions import MessageTooLarge as MessageTooLarge
from acp_trio._exceptions import ProtocolError as ProtocolError
from acp_trio._exceptions import RemoteProtocolError as RemoteProtocolError
from acp_trio._exceptions import RequestError as RequestError
from acp_trio._exceptions import TurnNotAnswered as TurnNotAnswered
from acp_trio._exceptions import UnsupportedProtocolVersion as UnsupportedProtocolVersion
from acp_trio._framed import FramedStream as FramedStream
from acp_trio._jsonrpc._messages import json_backend as json_backend
from acp_trio._jsonrpc._messages import use_json_backend as use_json_backend
from acp_trio._pair import open_agent_client_pair as open_agent_client_pair
from acp_trio._requests import CancelCause as CancelCause
from acp_trio._requests import PendingRequest as PendingRequest
from acp_trio._requests import RequestContext as RequestContext
from acp_trio._requests import current_request as current_request
from acp_trio._sessions import AgentSessions as AgentSessions
from acp_trio._terminal_handle import TerminalHandle as TerminalHandle
from acp_trio._terminals import ApproveFunc as ApproveFunc
from acp_trio._terminals import TerminalManager as TerminalManager
from acp_trio._terminals import TerminalsMixin as TerminalsMixin
from acp_trio._terminals import open_terminal_manager as open_terminal_manager
from acp_trio._tool_calls import ToolCallHandle as ToolCallHandle
from acp_trio._transports import AgentProcess as AgentProcess
from acp_trio._transports import open_agent_process as open_agent_process
from acp_trio._transports import open_stdio_stream as open_stdio_stream
from acp_trio._transports import open_tcp_stream as open_tcp_stream
from acp_trio._transports import serve_tcp as serve_tcp
from acp_trio._workspace import WorkspaceFiles as WorkspaceFiles
from acp_trio._workspace import WorkspaceFilesMixin as WorkspaceFilesMixin

__version__ = "0.1.0.dev0"
