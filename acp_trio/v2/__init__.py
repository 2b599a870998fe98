"""ACP v2 (Preview upstream): the typed agent and client APIs and the
version routers.

Upstream calls protocol version 2 a *preview*: its schema, and so these
APIs, can still change between releases. v1 stays the default everywhere
else in acp_trio; the v2 types are in :mod:`acp_trio.schema.v2` and never
shared with v1.

- Agent side: subclass :class:`Agent` (its :meth:`Agent.prompt` runs a
  :class:`Turn`), serve it with :func:`serve_agent` / :func:`open_client` /
  :func:`run_agent`, or serve a v1 and a v2 agent on one entry point with
  :func:`serve_router` / :func:`run_router`.
- Client side: subclass :class:`Client`, talk through :class:`AgentProxy`
  (:func:`open_agent`, :func:`open_spawned_agent`), or offer v2 and fall back
  to v1 with :func:`open_any_spawned_agent`.
"""

from acp_trio.v2._agent import AGENT_METHODS as AGENT_METHODS
from acp_trio.v2._agent import Agent as Agent
from acp_trio.v2._agent import open_client as open_client
from acp_trio.v2._agent import run_agent as run_agent
from acp_trio.v2._agent import serve_agent as serve_agent
from acp_trio.v2._client import AgentProxy as AgentProxy
from acp_trio.v2._client import Client as Client
from acp_trio.v2._client import TurnResult as TurnResult
from acp_trio.v2._client import open_agent as open_agent
from acp_trio.v2._client import open_spawned_agent as open_spawned_agent
from acp_trio.v2._client_proxy import ClientProxy as ClientProxy
from acp_trio.v2._router import UNSUPPORTED_PROTOCOL_VERSION as UNSUPPORTED_PROTOCOL_VERSION
from acp_trio.v2._router import Negotiated as Negotiated
from acp_trio.v2._router import choose_version as choose_version
from acp_trio.v2._router import open_any_agent as open_any_agent
from acp_trio.v2._router import open_any_spawned_agent as open_any_spawned_agent
from acp_trio.v2._router import run_router as run_router
from acp_trio.v2._router import serve_router as serve_router
from acp_trio.v2._turn import TerminalHandle as TerminalHandle
from acp_trio.v2._turn import ToolCallHandle as ToolCallHandle
from acp_trio.v2._turn import Turn as Turn

__all__ = [
    "AGENT_METHODS",
    "UNSUPPORTED_PROTOCOL_VERSION",
    "Agent",
    "AgentProxy",
    "Client",
    "ClientProxy",
    "Negotiated",
    "TerminalHandle",
    "ToolCallHandle",
    "Turn",
    "TurnResult",
    "choose_version",
    "open_any_spawned_agent",
    "open_client",
    "open_any_agent",
    "open_agent",
    "open_spawned_agent",
    "run_agent",
    "run_router",
    "serve_agent",
    "serve_router",
]

from acp_trio._public import fix_module_names as _fix_module_names

_fix_module_names("acp_trio.v2", globals())
