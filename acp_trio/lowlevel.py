"""The JSON-level layer under the typed API, for tools, proxies and other
transports: a :class:`Connection` speaks JSON-RPC with ``dict`` params and
results, runs each incoming request in its own cancel scope
(:class:`RequestContext`, whose ``connection`` is typed as the
:class:`ConnectionAPI` a handler uses) and cancels each outgoing one on the
wire (:class:`PendingRequest`). Plus the byte-stream transports it runs on, the
message-stream seam (:class:`MessageStream`, and
:class:`BufferedMessageStream` for one that reads and writes in bursts), the method tables of the
typed API, and the process-wide JSON library switch.

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
from acp_trio._core._requests import CancelCause as CancelCause
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
