"""Transports: where a connection's byte stream comes from.

- ``_stdio``: an agent's own stdin/stdout (fd 1 reserved for the protocol).
- ``_process``: spawn an agent and own its lifetime (process group, stderr).
- ``_tcp``: agents that listen on a port.
"""

from acp_trio._transports._process import AgentProcess as AgentProcess
from acp_trio._transports._process import open_agent_process as open_agent_process
from acp_trio._transports._stderr import StderrStatistics as StderrStatistics
from acp_trio._transports._stdio import open_stdio_stream as open_stdio_stream
from acp_trio._transports._tcp import open_tcp_stream as open_tcp_stream
from acp_trio._transports._tcp import serve_tcp as serve_tcp
