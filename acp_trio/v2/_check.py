"""``check-agent-v2``: check an ACP v2 (Preview) agent speaking the scenario
vocabulary (``acp_trio.v2.ScenarioAgent``'s) over stdio.

Each check spawns the agent afresh, offers protocol version 2, and checks
one rule of the v2 lifecycle:

- ``unsupported-version``: ``initialize`` asking for version 0 is answered
  ``-32022`` with ``data: {requested, supported}``, and the connection stays
  usable (a v2 ``initialize`` then succeeds);
- ``lifecycle``: ``echo``: the prompt is answered with a ``messageId``, its
  ``user_message`` carries it, ``running`` then exactly one ``idle`` with
  ``end_turn`` follow;
- ``held-prompts``: with ``wait_for_cancel`` running, two more prompts are
  held; ``session/cancel`` ends the turn ``idle`` ``cancelled`` and answers
  both ``-32800``;
- ``tool-call-cancel``: ``tools 2``: ``tool_call/cancel`` of ``tool-0`` ends
  it ``cancelled`` while ``tool-1`` completes; an unknown id is ``-32602``;
- ``error-turn``: ``fail -32042 boom`` ends ``idle`` with ``stopReason:
  "error"`` and that error.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import attrs
import trio
import trio.testing

from acp_trio._exceptions import RequestError
from acp_trio.schema.v2 import TextContent, UpdateSessionNotification, converter
from acp_trio.v2._client import AgentProxy, Client, open_spawned_agent

__all__ = ["CheckResult", "check_agent_v2", "main"]


@attrs.frozen
class CheckResult:
    name: str
    passed: bool
    detail: str = ""


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


async def _unsupported_version(agent: AgentProxy, client: _Recorder) -> None:
    try:
        await agent.connection.call(
            "initialize", {"protocolVersion": 0, "info": {"name": "x", "version": "0"}}
        )
    except RequestError as exc:
        _expect(exc.code == -32022, f"initialize with version 0: code {exc.code}, not -32022")
        data = exc.data if exc.has_data else None
        _expect(
            isinstance(data, dict)
            and data.get("requested") == 0
            and 2 in data.get("supported", []),
            f"-32022 data should be {{requested: 0, supported: [.., 2]}}, got {json.dumps(data)}",
        )
    else:
        raise _Failed("initialize with version 0 was accepted")
    await agent.initialize()


async def _lifecycle(agent: AgentProxy, client: _Recorder) -> None:
    await agent.initialize()
    sid = (await agent.new_session("/")).session_id
    accepted = await agent.send_prompt(sid, _text("echo hi"))
    user = await client.wait_for(lambda u: u.get("sessionUpdate") == "user_message")
    _expect(user.get("messageId") == accepted.message_id, "user_message messageId differs")
    idle = await agent.turns.wait(sid, accepted.message_id)
    _expect(idle.stop_reason == "end_turn", f"stopReason {idle.stop_reason!r}, not end_turn")
    await trio.sleep(0.2)  # a second idle would be a second ending
    states = client.states()
    _expect(states[:1] == [("running", None)], f"first state {states[:1]}, not running")
    ends = [s for s in states if s[0] == "idle" and s[1] is not None]
    _expect(len(ends) == 1, f"{len(ends)} idle updates with a stop reason, not 1")


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


CHECKS: dict[str, Callable[[AgentProxy, _Recorder], Awaitable[None]]] = {
    "unsupported-version": _unsupported_version,
    "lifecycle": _lifecycle,
    "held-prompts": _held_prompts,
    "tool-call-cancel": _tool_call_cancel,
    "error-turn": _error_turn,
}


async def check_agent_v2(command: Sequence[str], *, seconds: float = 20.0) -> list[CheckResult]:
    """Run every check on a fresh ``command`` process each; return the results."""
    results = []
    for name, check in CHECKS.items():
        client = _Recorder()
        try:
            with trio.fail_after(seconds):
                async with open_spawned_agent(client, command) as agent:
                    await check(agent, client)
        except _Failed as exc:
            results.append(CheckResult(name, False, str(exc)))
        except trio.TooSlowError:
            results.append(CheckResult(name, False, f"no result within {seconds} s"))
        except Exception as exc:
            results.append(CheckResult(name, False, f"{type(exc).__name__}: {exc}"))
        else:
            results.append(CheckResult(name, True))
    return results


def main(command: Sequence[str], *, as_json: bool = False) -> int:
    """Print the results; 0 if every check passed, 1 otherwise."""
    results = trio.run(check_agent_v2, command)
    if as_json:
        print(json.dumps([attrs.asdict(r) for r in results], indent=2))
    else:
        for r in results:
            print(
                f"{'PASS' if r.passed else 'FAIL'} {r.name}" + (f": {r.detail}" if r.detail else "")
            )
        verdict = all(r.passed for r in results)
        print("CONFORMS (ACP v2 Preview)" if verdict else "DOES NOT CONFORM (ACP v2 Preview)")
    return 0 if all(r.passed for r in results) else 1
