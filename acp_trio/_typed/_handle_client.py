"""What the kit's handles (:class:`~acp_trio.ToolCallHandle`,
:class:`~acp_trio.TerminalHandle`) need of the agent's view of its client:
:class:`HandleClient`, which :class:`~acp_trio.ClientProxy` is.

The handles sit below the proxy that makes them (``_tool_calls`` and
``_terminal_handle`` import this module, ``_client_proxy`` imports them), so
neither module imports the other.
"""

from __future__ import annotations

from typing import Any, Protocol

from acp_trio._core._connection import Connection
from acp_trio.schema import (
    ClientCapabilities,
    KillTerminalRequest,
    KillTerminalResponse,
    ReleaseTerminalRequest,
    ReleaseTerminalResponse,
    RequestPermissionRequest,
    RequestPermissionResponse,
    SchemaConverter,
    TerminalOutputRequest,
    TerminalOutputResponse,
    WaitForTerminalExitRequest,
    WaitForTerminalExitResponse,
)

__all__ = ["HandleClient"]


class HandleClient(Protocol):
    """The client calls a handle makes, and the connection and converter it
    sends them over."""

    @property
    def connection(self) -> Connection: ...

    @property
    def converter(self) -> SchemaConverter: ...

    def _require(self, advertised: bool, what: str, method: str) -> None: ...

    def _caps(self) -> ClientCapabilities: ...

    def _structure_result(self, method: str, raw: Any, result_type: Any) -> Any: ...

    async def request_permission(
        self, params: RequestPermissionRequest, /
    ) -> RequestPermissionResponse: ...

    async def terminal_output(self, params: TerminalOutputRequest, /) -> TerminalOutputResponse: ...

    async def wait_for_terminal_exit(
        self, params: WaitForTerminalExitRequest, /
    ) -> WaitForTerminalExitResponse: ...

    async def kill_terminal(self, params: KillTerminalRequest, /) -> KillTerminalResponse: ...

    async def release_terminal(
        self, params: ReleaseTerminalRequest, /
    ) -> ReleaseTerminalResponse: ...
