"""The scenario agent's vocabulary over ACP v2: :class:`ScenarioAgentV2`.

The same commands as the v1 reference agent (``docs/scenario-agent.md``)
where v2 has their methods, with the v2 lifecycle: the prompt is answered
when inserted, and the turn ends with ``state_update: idle`` and its stop
reason. v2 has no ``fs/*`` or client ``terminal/*`` methods, so ``read``,
``write``, ``nested`` and ``deadline`` answer ``unknown command``; v2 adds
commands for its own entities:

- ``echo <text>``: one agent chunk ``<text>``; ``end_turn``.
- ``stream <n> [<size>]``: ``n`` chunks, ``str(i)`` padded with ``.`` to
  ``size`` (default 16); ``end_turn``.
- ``wait_for_cancel``: waits; ``cancelled`` on ``session/cancel``.
- ``permission``: one ``session/request_permission`` (``requires_action``
  meanwhile), then a chunk ``permission: selected <id>`` or
  ``permission: cancelled``; ``end_turn`` (``cancelled`` if the turn was).
- ``fail <code> [<message>]``: raises that error; ``error`` with the error.
- ``sleep <ms>``: waits ``ms`` milliseconds; ``end_turn``.
- ``tools <n>``: ``n`` cancellable tool calls ``tool-0``...: ``tool-0`` runs
  until ``tool_call/cancel``, the others complete once it has ended;
  ``end_turn``.
- ``terminal``: a cancellable display terminal ``term-1`` that runs until
  ``terminal/cancel``; ``end_turn``.
- ``background``: background work ``bg-<n>`` that runs until
  ``tool_call/cancel`` or ``session/close``; ``end_turn`` at once.
- anything else: one chunk ``unknown command``; ``end_turn``.

A prompt sent while a turn runs is held; ``session/cancel`` answers it
``-32800``. ``python -m acp_trio scenario-agent --v2`` serves this agent and
the v1 one behind the version router.
"""

from __future__ import annotations

import itertools
import uuid

import trio

from acp_trio._exceptions import RequestError
from acp_trio._version import __version__
from acp_trio.schema.v2 import (
    PROTOCOL_VERSION,
    AgentCapabilities,
    AgentMessageChunk,
    Implementation,
    InitializeRequest,
    InitializeResponse,
    NewSessionRequest,
    NewSessionResponse,
    PermissionOption,
    PromptRequest,
    SelectedPermissionOutcome,
    SessionCapabilities,
    TextContent,
)
from acp_trio.testing._scenario import ScenarioAgent
from acp_trio.v2._agent import Agent
from acp_trio.v2._router import run_router
from acp_trio.v2._turn import ToolCallHandle, Turn

__all__ = ["ScenarioAgentV2", "run_scenario_router"]


def _int(word: str, what: str) -> int:
    try:
        return int(word)
    except ValueError:
        raise RequestError.invalid_params({"problem": f"{what} must be an integer"}) from None


class ScenarioAgentV2(Agent):
    """The scenario vocabulary as a v2 agent (see the module doc)."""

    info = Implementation(name="acp_trio-scenario-agent", version=__version__)

    def __init__(self) -> None:
        super().__init__()
        self._ids = itertools.count(1)

    async def initialize(self, params: InitializeRequest) -> InitializeResponse:
        return InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            info=self.info,
            capabilities=AgentCapabilities(session=SessionCapabilities()),
        )

    async def new_session(self, params: NewSessionRequest) -> NewSessionResponse:
        return NewSessionResponse(session_id=f"scenario-v2-{next(self._ids)}")

    async def prompt(self, params: PromptRequest, turn: Turn) -> str | None:
        text = next((b.text.strip() for b in params.prompt if isinstance(b, TextContent)), "")
        words = text.split()
        command = words[0] if words else ""
        message_id = str(uuid.uuid4())

        async def say(line: str) -> None:
            await turn.send(
                AgentMessageChunk(message_id=message_id, content=TextContent(text=line))
            )

        if command == "echo":
            await say(text[len("echo") :].strip())
        elif command == "stream" and len(words) >= 2:
            size = _int(words[2], "size") if len(words) > 2 else 16
            for i in range(_int(words[1], "n")):
                await say(str(i).ljust(size, "."))
        elif command == "wait_for_cancel":
            await trio.sleep_forever()
        elif command == "permission":
            answer = await turn.request_permission(
                turn.session_id,
                "scenario permission",
                [
                    PermissionOption(option_id="allow", name="Allow", kind="allow_once"),
                    PermissionOption(option_id="reject", name="Reject", kind="reject_once"),
                ],
            )
            outcome = answer.outcome
            if isinstance(outcome, SelectedPermissionOutcome):
                await say(f"permission: selected {outcome.option_id}")
            else:
                await say("permission: cancelled")
        elif command == "fail" and len(words) >= 2:
            raise RequestError(_int(words[1], "code"), " ".join(words[2:]) or None)
        elif command == "sleep" and len(words) >= 2:
            await trio.sleep(_int(words[1], "ms") / 1000)
        elif command == "tools" and len(words) >= 2:
            await self._tools(turn, _int(words[1], "n"))
        elif command == "terminal":
            async with turn.terminal("term-1", command="sleep"):
                await trio.sleep_forever()
        elif command == "background":

            async def work(call: ToolCallHandle) -> None:
                await trio.sleep_forever()

            await turn.start_background(f"bg-{next(self._ids)}", work, title="background work")
        else:
            await say("unknown command")
        return "end_turn"

    async def _tools(self, turn: Turn, n: int) -> None:
        first_done = trio.Event()

        async def first() -> None:
            try:
                async with turn.tool_call("tool-0", title="tool 0"):
                    await trio.sleep_forever()
            finally:
                first_done.set()

        async def other(i: int) -> None:
            async with turn.tool_call(f"tool-{i}", title=f"tool {i}"):
                await first_done.wait()

        async with trio.open_nursery() as nursery:
            if n > 0:
                nursery.start_soon(first)
            for i in range(1, n):
                nursery.start_soon(other, i)


async def run_scenario_router() -> None:
    """Serve the v1 and the v2 scenario agents on this process's stdio,
    behind the version router; cancelling it closes the connection (running
    requests answered ``-32800``)."""
    await run_router(v1=ScenarioAgent, v2=ScenarioAgentV2)
