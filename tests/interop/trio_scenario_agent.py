"""A small acp_trio scenario agent (docs/scenario-agent.md) for the
interop tests: ``echo``, ``stream``, ``read``, ``wait_for_cancel``,
``nested`` and ``permission``, over stdio with :func:`acp_trio.run_agent`.

There is no cancellation code here: ``session/cancel`` and
``$/cancel_request`` cancel the prompt's scope, the SDK cancels every nested
request on the wire and answers the prompt.

Run: ``python tests/interop/trio_scenario_agent.py``.
"""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable
from functools import partial

import trio

import acp_trio
from acp_trio import schema

_sessions = itertools.count(1)


def _permission(session_id: str) -> schema.RequestPermissionRequest:
    return schema.RequestPermissionRequest(
        session_id=session_id,
        tool_call=schema.ToolCallUpdate(tool_call_id="call-1", title="Run the tests"),
        options=[
            schema.PermissionOption(option_id="allow", name="Allow", kind="allow_once"),
            schema.PermissionOption(option_id="reject", name="Reject", kind="reject_once"),
        ],
    )


class ScenarioAgent(acp_trio.Agent):
    async def initialize(self, params: schema.InitializeRequest) -> schema.InitializeResponse:
        return schema.InitializeResponse(
            protocol_version=schema.PROTOCOL_VERSION,
            agent_info=schema.Implementation(name="acp-trio-scenario-agent", version="0.1"),
        )

    async def new_session(self, params: schema.NewSessionRequest) -> schema.NewSessionResponse:
        return schema.NewSessionResponse(session_id=f"trio-session-{next(_sessions)}")

    async def prompt(self, params: schema.PromptRequest) -> schema.PromptResponse:
        text = next(
            (b.text for b in params.prompt if isinstance(b, schema.TextContent)), ""
        ).strip()
        command, _, rest = text.partition(" ")
        words = rest.split(" ")
        sid = params.session_id
        say = self.client.send_text
        if command == "echo":
            await say(sid, rest)
        elif command == "stream":
            size = int(words[1]) if len(words) > 1 else 16
            for i in range(int(words[0])):
                await say(sid, str(i).ljust(size, "."))
        elif command == "read":
            total = 0
            for _ in range(int(words[0])):
                got = await self.client.read_text_file(
                    schema.ReadTextFileRequest(session_id=sid, path=words[1])
                )
                total += len(got.content)
            await say(sid, f"read {words[0]} {total}")
        elif command == "wait_for_cancel":
            await trio.sleep_forever()
        elif command == "permission":
            answer = await self.client.request_permission(_permission(sid))
            outcome = answer.outcome
            if isinstance(outcome, schema.SelectedPermissionOutcome):
                await say(sid, f"permission: selected {outcome.option_id}")
            else:
                await say(sid, "permission: cancelled")
        elif command == "nested":
            await self._nested(sid)
        else:
            await say(sid, "unknown command")
        return schema.PromptResponse(stop_reason="end_turn")

    async def _nested(self, sid: str) -> None:
        caps = self.client.capabilities or schema.ClientCapabilities()
        calls: list[Callable[[], Awaitable[object]]] = []
        if caps.terminal:
            terminal = schema.CreateTerminalRequest(session_id=sid, command="sleep", args=["3600"])
            calls.append(partial(self.client.create_terminal, terminal))
        calls.append(partial(self.client.request_permission, _permission(sid)))
        if caps.fs.read_text_file:
            hold = schema.ReadTextFileRequest(session_id=sid, path="/hold")
            calls.append(partial(self.client.read_text_file, hold))
        answers: list[str] = []

        async def run(call: Callable[[], Awaitable[object]]) -> None:
            answers.append(type(await call()).__name__)

        async with trio.open_nursery() as nursery:
            for call in calls:
                nursery.start_soon(run, call)
        for answer in answers:
            await self.client.send_text(sid, answer)


if __name__ == "__main__":
    trio.run(acp_trio.run_agent, ScenarioAgent())
