"""The scenario agent (``stream``, ``read``, ``nested``, ``echo``) written with
the official Python SDK, ``agent-client-protocol`` 0.12.1 (module ``acp``,
asyncio + pydantic), over stdio.

Run with the ``.venv-bench`` interpreter: ``python benchmarks/peers/official_agent.py``.

Cancellation, as far as the SDK allows: ``session/cancel`` cancels the
session's running turn (an asyncio task inside the prompt handler) and the
prompt answers ``stopReason: "cancelled"``. The SDK has no
``$/cancel_request``, so the turn's nested requests (permission, the read of
``/hold``, ``terminal/create``) are abandoned locally, never cancelled on the
wire: the client is left holding them.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import acp
from acp.schema import (
    AgentCapabilities,
    Implementation,
    InitializeResponse,
    NewSessionResponse,
    PermissionOption,
    PromptResponse,
    TextContentBlock,
    ToolCallUpdate,
)

_OPTIONS = [
    PermissionOption(option_id="allow", name="Allow", kind="allow_once"),
    PermissionOption(option_id="reject", name="Reject", kind="reject_once"),
]


class ScenarioAgent:
    """Implements the ``acp.Agent`` protocol (methods found by name)."""

    def __init__(self) -> None:
        self.conn: Any = None
        self.client_capabilities: Any = None
        self._ids = itertools.count(1)
        self._turns: dict[str, set[asyncio.Task[Any]]] = {}

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def initialize(
        self,
        protocol_version: int,
        client_capabilities: Any = None,
        client_info: Any = None,
        **kwargs: Any,
    ) -> InitializeResponse:
        self.client_capabilities = client_capabilities
        return InitializeResponse(
            protocol_version=acp.PROTOCOL_VERSION,
            agent_capabilities=AgentCapabilities(load_session=False),
            agent_info=Implementation(name="official-python-scenario-agent", version="0.12.1"),
        )

    async def new_session(self, cwd: str, mcp_servers: Any = None, **kwargs: Any) -> Any:
        return NewSessionResponse(session_id=f"official-{next(self._ids)}")

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        for task in self._turns.get(session_id, ()):
            task.cancel()

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> PromptResponse:
        text = next((b.text for b in prompt if isinstance(b, TextContentBlock)), "").strip()
        turn = asyncio.ensure_future(self._run(session_id, text))
        self._turns.setdefault(session_id, set()).add(turn)
        try:
            await turn
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if not turn.cancelled() or (current is not None and current.cancelling()):
                raise
            return PromptResponse(stop_reason="cancelled")
        finally:
            turns = self._turns.get(session_id)
            if turns is not None:
                turns.discard(turn)
                if not turns:
                    del self._turns[session_id]
        return PromptResponse(stop_reason="end_turn")

    async def _say(self, session_id: str, text: str) -> None:
        await self.conn.session_update(session_id, acp.update_agent_message_text(text))

    async def _run(self, session_id: str, text: str) -> None:
        command, _, rest = text.partition(" ")
        words = rest.split()
        if command == "echo":
            await self._say(session_id, rest)
        elif command == "stream":
            size = int(words[1]) if len(words) > 1 else 16
            for i in range(int(words[0])):
                await self._say(session_id, str(i).ljust(size, "."))
        elif command == "read":
            total = 0
            for _ in range(int(words[0])):
                got = await self.conn.read_text_file(session_id=session_id, path=words[1])
                total += len(got.content)
            await self._say(session_id, f"read {words[0]} {total}")
        elif command == "nested":
            await self._nested(session_id)
        else:
            await self._say(session_id, "unknown command")

    async def _nested(self, session_id: str) -> None:
        caps = self.client_capabilities
        calls = []
        if caps is not None and caps.terminal:
            calls.append(
                self.conn.create_terminal(session_id=session_id, command="sleep", args=["3600"])
            )
        calls.append(
            self.conn.request_permission(
                session_id=session_id,
                tool_call=ToolCallUpdate(tool_call_id="call-1", title="Run the tests"),
                options=_OPTIONS,
            )
        )
        if caps is not None and caps.fs is not None and caps.fs.read_text_file:
            calls.append(self.conn.read_text_file(session_id=session_id, path="/hold"))
        for answer in await asyncio.gather(*calls):
            await self._say(session_id, type(answer).__name__)


if __name__ == "__main__":
    asyncio.run(acp.run_agent(ScenarioAgent()))
