"""acp_trio: an Agent Client Protocol SDK for Trio.

The everyday names are here: :class:`Agent` and :class:`Client` with their
peer proxies, the functions that serve and connect them, the author's kit
(:mod:`acp_trio.build`, tool-call / terminal handles, :class:`AgentSessions`)
and the errors. The rest lives in namespaces, one per layer:

- :mod:`acp_trio.schema`: attrs classes generated from the ACP JSON Schema
  and the cattrs converter for them (``acp_trio.schema.v2`` for ACP v2).
- :mod:`acp_trio.lowlevel`: the JSON-level :class:`~acp_trio.lowlevel.Connection`
  (each incoming request in its own cancel scope; the request tree is the
  nursery tree), byte-stream transports and the message-stream seam.
- :mod:`acp_trio.contrib`: application helpers (safe workspace files,
  terminals, session state, permission broker).
- :mod:`acp_trio.testing`: the test kit (scenario agent and client, fakes,
  ``check-agent`` / ``check-client``, pytest plugin).

Under them, private packages, one per layer: ``_jsonrpc`` (the sans-IO
JSON-RPC core: no Trio, no schema), ``_core`` (the Trio core: connection,
requests, incoming-request runner, outbox, framing), ``_transports``
(stdio, processes, TCP), ``_typed`` (dispatch, agent, client, proxies,
sessions, handles). ``docs/architecture.md`` draws a request's way through
them.

One naming rule says which side of a connection a function gives you:
``open_X`` gives you X, the peer at the other end (``open_agent(client,
stream)``, ``open_spawned_agent(client, command)``, ``open_remote_agent``
give you the agent; ``open_client(agent, stream)`` gives you the client), and
``serve_X`` / ``run_X`` serve your X until the peer leaves (``serve_agent``,
``run_agent``, ``serve_proxy``).

This module only re-exports.
"""

from acp_trio import build as build
from acp_trio import contrib as contrib
from acp_trio import lowlevel as lowlevel
from acp_trio import schema as schema
from acp_trio._core._connection import ConnectionConfig as ConnectionConfig
from acp_trio._exceptions import ACPError as ACPError
from acp_trio._exceptions import CapabilityError as CapabilityError
from acp_trio._exceptions import ConnectionClosed as ConnectionClosed
from acp_trio._exceptions import ErrorCode as ErrorCode
from acp_trio._exceptions import LocalProtocolError as LocalProtocolError
from acp_trio._exceptions import MessageTooLarge as MessageTooLarge
from acp_trio._exceptions import PromptNotSent as PromptNotSent
from acp_trio._exceptions import ProtocolError as ProtocolError
from acp_trio._exceptions import RemoteProtocolError as RemoteProtocolError
from acp_trio._exceptions import RequestError as RequestError
from acp_trio._exceptions import TurnNotAnswered as TurnNotAnswered
from acp_trio._exceptions import UnsupportedProtocolVersion as UnsupportedProtocolVersion
from acp_trio._exceptions import passing_errors_on as passing_errors_on
from acp_trio._public import fix_module_names as _fix_module_names
from acp_trio._transports import serve_tcp as serve_tcp
from acp_trio._typed._agent import Agent as Agent
from acp_trio._typed._agent import open_client as open_client
from acp_trio._typed._agent import run_agent as run_agent
from acp_trio._typed._agent import serve_agent as serve_agent
from acp_trio._typed._client import AgentProxy as AgentProxy
from acp_trio._typed._client import Client as Client
from acp_trio._typed._client import open_agent as open_agent
from acp_trio._typed._client import open_spawned_agent as open_spawned_agent
from acp_trio._typed._client_proxy import ClientProxy as ClientProxy
from acp_trio._typed._pair import open_agent_client_pair as open_agent_client_pair
from acp_trio._typed._sessions import AgentSessions as AgentSessions
from acp_trio._typed._terminal_handle import TerminalHandle as TerminalHandle
from acp_trio._typed._tool_calls import ToolCallHandle as ToolCallHandle
from acp_trio._typed._turn import AbandonPolicy as AbandonPolicy
from acp_trio._typed._turn import CancelOutcome as CancelOutcome
from acp_trio._version import __version__ as __version__

_fix_module_names("acp_trio", globals())
