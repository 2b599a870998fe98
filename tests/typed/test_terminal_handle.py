"""``ClientProxy.terminal``: the terminal is released on every exit path
(return, exception, ``session/cancel``, ``$/cancel_request``, a deadline),
over memory and pipes; a create cancelled before its answer releases what
the client made anyway; with a real ``TerminalsMixin`` client no process
is left running after a cancelled turn."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import trio

from acp_trio import CapabilityError, Client, RequestError
from acp_trio.contrib import TerminalsMixin, open_terminal_manager
from acp_trio.schema import (
    ClientCapabilities,
    CreateTerminalRequest,
    CreateTerminalResponse,
    InitializeRequest,
    PromptRequest,
    PromptResponse,
    TextContent,
)

from .conftest import (
    INIT,
    NEW_SESSION,
    REAL_LIMIT,
    RecordingClient,
    ScriptedAgent,
    limit,
    open_pair,
)

ENDINGS = ["return", "raise", "session_cancel", "cancel_request", "deadline", "kill"]


def terminal_script(ending: str, inside: trio.Event, seen: list[Any]) -> Any:
    async def script(agent: ScriptedAgent, params: PromptRequest) -> PromptResponse:
        sid = params.session_id
        with trio.move_on_after(1 if ending == "deadline" else 10_000):
            async with agent.client.terminal(sid, "make", ["test"], cwd="/w") as term:
                seen.append(term.id)
                seen.append((await term.output()).output)
                if ending == "kill":
                    await term.kill()
                seen.append((await term.wait_for_exit()).exit_code)
                inside.set()
                if ending == "raise":
                    raise ValueError("the tool broke")
                if ending in ("session_cancel", "cancel_request", "deadline"):
                    await trio.sleep_forever()
        assert term.released
        with pytest.raises(RuntimeError, match="released"):
            await term.output()
        return PromptResponse(stop_reason="end_turn")

    return script


@pytest.mark.parametrize("transport", ["memory", "pipes"])
@pytest.mark.parametrize("ending", ENDINGS)
async def test_the_terminal_is_released_on_every_exit_path(
    ending: str, transport: str, request: pytest.FixtureRequest
) -> None:
    if transport == "memory":
        request.getfixturevalue("autojump_clock")
    inside = trio.Event()
    seen: list[Any] = []
    agent = ScriptedAgent(terminal_script(ending, inside, seen))
    client = RecordingClient()
    outcome: list[Any] = []
    with trio.fail_after(limit(transport)):
        async with open_pair(agent, client, transport) as (to_agent, _to_client, a_wire, _c):
            await to_agent.initialize(INIT)
            sid = (await to_agent.new_session(NEW_SESSION)).session_id
            prompt = PromptRequest(session_id=sid, prompt=[TextContent(text="go")])
            scope = trio.CancelScope()
            async with trio.open_nursery() as nursery:

                async def run() -> None:
                    if ending == "cancel_request":
                        with scope:  # cancelling a bare call sends $/cancel_request
                            await to_agent.connection.call(
                                "session/prompt", to_agent.converter.unstructure(prompt)
                            )
                        outcome.append("cancelled")
                        return
                    try:
                        outcome.append((await to_agent.prompt(prompt)).stop_reason)
                    except RequestError as exc:
                        outcome.append(exc.code)

                nursery.start_soon(run)
                await inside.wait()
                if ending == "session_cancel":
                    await to_agent.cancel(sid)
                elif ending == "cancel_request":
                    scope.cancel()
            prompt_id = a_wire.received_request_id("session/prompt")
            while not a_wire.sent_responses(prompt_id):  # noqa: ASYNC110
                await trio.sleep(0.01)
    assert seen == ["term-1", "ok\n", 0]
    names = [entry[0] for entry in client.log]
    expected = ["terminal", "output", *(["kill"] if ending == "kill" else []), "wait", "release"]
    assert names == expected
    assert outcome == [
        {
            "return": "end_turn",
            "kill": "end_turn",
            "deadline": "end_turn",
            "raise": -32603,
            "session_cancel": "cancelled",
            "cancel_request": "cancelled",
        }[ending]
    ]
    # The release was sent, and answered, before the prompt was answered.
    frames = a_wire.frames
    release_id = a_wire.request_id("terminal/release")
    answered_release = next(
        i for i, (d, m) in enumerate(frames) if d == "recv" and m.get("id") == release_id
    )
    answered_prompt = next(
        i
        for i, (d, m) in enumerate(frames)
        if d == "send" and "method" not in m and m.get("id") == prompt_id
    )
    assert answered_release < answered_prompt


class LateCreator(RecordingClient):
    """Makes the terminal even though the request is cancelled meanwhile
    (it read the cancel too late), and answers with it."""

    def __init__(self) -> None:
        super().__init__()
        self.creating = trio.Event()

    async def create_terminal(self, params: CreateTerminalRequest) -> CreateTerminalResponse:
        self.log.append(("terminal", params.command))
        self.creating.set()
        with trio.CancelScope(shield=True):
            await trio.sleep(1)
        return CreateTerminalResponse(terminal_id="late-1")


async def test_a_terminal_made_after_its_create_was_cancelled_is_released(
    autojump_clock: Any,
) -> None:
    async def script(agent: ScriptedAgent, params: PromptRequest) -> PromptResponse:
        async with agent.client.terminal(params.session_id, "make"):
            raise AssertionError("the block should not be entered")

    agent = ScriptedAgent(script)
    client = LateCreator()
    with trio.fail_after(600):
        async with open_pair(agent, client) as (to_agent, _to_client, a_wire, _c):
            await to_agent.initialize(INIT)
            sid = (await to_agent.new_session(NEW_SESSION)).session_id
            async with trio.open_nursery() as nursery:
                results: list[str] = []

                async def run() -> None:
                    results.append((await to_agent.prompt_text(sid, "go")).stop_reason)

                nursery.start_soon(run)
                await client.creating.wait()
                await to_agent.cancel(sid)
            assert results == ["cancelled"]
            # The create was cancelled on the wire; the late terminal is
            # released once its answer arrives.
            assert a_wire.sent_cancels() == [a_wire.request_id("terminal/create")]
            while ("release", "late-1") not in client.log:  # noqa: ASYNC110
                await trio.sleep(0.1)


async def test_a_client_without_terminals_is_refused_before_sending(
    autojump_clock: Any,
) -> None:
    async def script(agent: ScriptedAgent, params: PromptRequest) -> PromptResponse:
        with pytest.raises(CapabilityError, match="terminal"):
            async with agent.client.terminal(params.session_id, "make"):
                pass
        return PromptResponse(stop_reason="end_turn")

    agent = ScriptedAgent(script)
    client = RecordingClient()
    async with open_pair(agent, client) as (to_agent, *_):
        await to_agent.initialize(
            InitializeRequest(protocol_version=1, client_capabilities=ClientCapabilities())
        )
        sid = (await to_agent.new_session(NEW_SESSION)).session_id
        assert (await to_agent.prompt_text(sid, "go")).stop_reason == "end_turn"
    assert client.log == []


class Editor(TerminalsMixin, Client):
    pass


async def test_a_cancelled_turn_leaves_no_process_running(tmp_path: Path) -> None:
    started = trio.Event()
    pids: list[int] = []

    async def script(agent: ScriptedAgent, params: PromptRequest) -> PromptResponse:
        # The shell says its pid, then becomes the long command (same pid).
        command = ["-c", "echo $$; exec sleep 3600"]
        async with agent.client.terminal(params.session_id, "sh", command) as term:
            started.set()
            await term.wait_for_exit()
        return PromptResponse(stop_reason="end_turn")

    async def approve(params: CreateTerminalRequest) -> bool:
        return True

    with trio.fail_after(REAL_LIMIT):
        async with open_terminal_manager(approve, cwd=tmp_path) as terminals:
            client = Editor()
            client.terminals = terminals
            async with open_pair(ScriptedAgent(script), client) as (to_agent, *_):
                await to_agent.initialize()
                sid = (await to_agent.new_session(NEW_SESSION)).session_id
                async with trio.open_nursery() as nursery:
                    results: list[str] = []

                    async def run() -> None:
                        results.append((await to_agent.prompt_text(sid, "go")).stop_reason)

                    nursery.start_soon(run)
                    await started.wait()
                    (terminal_id,) = terminals.terminal_ids()
                    while not (said := terminals.output(terminal_id).output).endswith("\n"):  # noqa: ASYNC110
                        await trio.sleep(0.01)
                    pids.append(int(said))
                    await to_agent.cancel(sid)
                assert results == ["cancelled"]
                # Released by the agent's block: the manager no longer has it,
                # and the command is gone while the manager still runs.
                assert terminals.terminal_ids() == []
                while process_exists(pids[0]):  # noqa: ASYNC110
                    await trio.sleep(0.05)
    assert len(pids) == 1


def process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
