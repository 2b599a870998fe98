"""``check-agent-v2``'s scenario checks: on an agent speaking the v2
scenario vocabulary (``acp_trio.testing.ScenarioAgentV2``'s), each spawns the agent
afresh (stderr captured), offers protocol version 2, and checks one rule of
the v2 lifecycle:

- ``held-prompts``: with ``wait_for_cancel`` running, two more prompts are
  held; ``session/cancel`` ends the turn ``idle`` ``cancelled`` and answers
  both ``-32800``;
- ``tool-call-cancel``: ``tools 2``: ``tool_call/cancel`` of ``tool-0`` ends
  it ``cancelled`` while ``tool-1`` completes; an unknown id is ``-32602``;
- ``error-turn``: ``fail -32042 boom`` ends ``idle`` with ``stopReason:
  "error"`` and that error.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import trio
import trio.testing

from acp_trio._exceptions import RequestError
from acp_trio.schema.v2 import TextContent, UpdateSessionNotification, converter
from acp_trio.v2._client import AgentProxy, Client, open_spawned_agent

__all__ = ["SCENARIO_CHECKS", "run_scenario_check"]


class _Recorder(Client):
    def __init__(self) -> None:
        self.updates: list[dict[str, Any]] = []
        self._changed = trio.Event()

    async def session_update(self, params: UpdateSessionNotification) -> None:
        self.updates.append(converter.unstructure(params)["update"])
        self._changed.set()
        self._changed = trio.Event()

    async def wait_for(self, predicate: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        while True:
            for update in self.updates:
                if predicate(update):
                    return update
            await self._changed.wait()

    def states(self) -> list[tuple[Any, Any]]:
        return [
            (u.get("state"), u.get("stopReason"))
            for u in self.updates
            if u.get("sessionUpdate") == "state_update"
        ]


class _Failed(Exception):
    pass


def _expect(condition: bool, detail: str) -> None:
    if not condition:
        raise _Failed(detail)


def _text(words: str) -> list[Any]:
    return [TextContent(text=words)]


async def _held_prompts(agent: AgentProxy, client: _Recorder) -> None:
    await agent.initialize()
    sid = (await agent.new_session("/")).session_id
    accepted = await agent.send_prompt(sid, _text("wait_for_cancel"))
    await client.wait_for(lambda u: u.get("state") == "running")
    codes: list[int | None] = []

    async def held() -> None:
        try:
            await agent.send_prompt(sid, _text("echo held"))
            codes.append(None)
        except RequestError as exc:
            codes.append(exc.code)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(held)
        nursery.start_soon(held)
        await trio.testing.wait_all_tasks_blocked()
        await agent.cancel(sid)
    idle = await agent.turns.wait(sid, accepted.message_id)
    _expect(idle.stop_reason == "cancelled", f"stopReason {idle.stop_reason!r}, not cancelled")
    _expect(codes == [-32800, -32800], f"held prompts answered {codes}, not -32800 twice")


async def _tool_call_cancel(agent: AgentProxy, client: _Recorder) -> None:
    await agent.initialize()
    sid = (await agent.new_session("/")).session_id
    try:
        await agent.cancel_tool_call(sid, "no-such-call")
        raise _Failed("tool_call/cancel of an unknown id was accepted")
    except RequestError as exc:
        _expect(exc.code == -32602, f"unknown tool call: code {exc.code}, not -32602")
    accepted = await agent.send_prompt(sid, _text("tools 2"))
    for name in ("tool-0", "tool-1"):

        def announced(update: dict[str, Any], name: str = name) -> bool:
            return update.get("toolCallId") == name

        first = await client.wait_for(announced)
        _expect("cancel" in (first.get("capabilities") or {}), f"{name} not cancellable")
    await agent.cancel_tool_call(sid, "tool-0")
    idle = await agent.turns.wait(sid, accepted.message_id)
    finals = {
        u["toolCallId"]: u.get("status")
        for u in client.updates
        if u.get("sessionUpdate") == "tool_call_update"
        and u.get("status") in ("completed", "cancelled", "failed")
    }
    _expect(
        finals == {"tool-0": "cancelled", "tool-1": "completed"},
        f"final statuses {finals}, not tool-0 cancelled and tool-1 completed",
    )
    _expect(idle.stop_reason == "end_turn", f"stopReason {idle.stop_reason!r}, not end_turn")


async def _error_turn(agent: AgentProxy, client: _Recorder) -> None:
    await agent.initialize()
    sid = (await agent.new_session("/")).session_id
    result = await agent.prompt(sid, _text("fail -32042 boom"))
    _expect(result.stop_reason == "error", f"stopReason {result.stop_reason!r}, not error")
    error = result.error
    _expect(error is not None and error.code == -32042, f"error {error}, not code -32042")


SCENARIO_CHECKS: dict[str, Callable[[AgentProxy, _Recorder], Awaitable[None]]] = {
    "held-prompts": _held_prompts,
    "tool-call-cancel": _tool_call_cancel,
    "error-turn": _error_turn,
}


async def run_scenario_check(
    name: str,
    command: Sequence[str],
    seconds: float,
    *,
    cwd: str | os.PathLike[str] | None = None,
    env: dict[str, str] | None = None,
) -> str | None:
    """Run one scenario check on a fresh process; ``None`` if it passed,
    else why it failed."""
    client = _Recorder()
    try:
        with trio.fail_after(seconds):
            async with open_spawned_agent(
                client, command, cwd=cwd, env=env, stderr="capture"
            ) as agent:
                await SCENARIO_CHECKS[name](agent, client)
    except _Failed as exc:
        return str(exc)
    except trio.TooSlowError:
        return f"no result within {seconds:g} s (--prompt-timeout)"
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return None
