"""An editor-side client, written with the kit: it spawns an agent, serves
it a workspace (files under one root only) and terminals (after asking),
asks you on the terminal before each tool call the agent wants to run,
renders the session as it changes, and cancels the turn on Ctrl-C.

    python examples/editor_client.py --root DIR --prompt "fix DIR/main.py" -- AGENT_CMD...
    python examples/editor_client.py --root . --prompt "fix $PWD/x.py" -- \\
        python examples/coding_agent.py

Answers to permission questions are read from stdin (``y`` allows once,
anything else rejects); with ``--yes`` every request is allowed. Ctrl-C
during a turn sends ``session/cancel`` and waits for the agent's answer; a
second Ctrl-C leaves.
"""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import trio

import acp_trio
from acp_trio import contrib, schema


def say(text: str) -> None:
    print(text, flush=True)


class Editor(
    contrib.PermissionBrokerMixin,
    acp_trio.contrib.WorkspaceFilesMixin,
    acp_trio.contrib.TerminalsMixin,
    acp_trio.Client,
):
    def __init__(self, root: Path, terminals: acp_trio.contrib.TerminalManager, yes: bool) -> None:
        self.files = acp_trio.contrib.WorkspaceFiles([root])
        self.terminals = terminals
        self.states = contrib.SessionStates()
        self.states.on_change(self.render)
        approver = contrib.auto_allow if yes else contrib.yes_no(self.ask)
        self.permissions = contrib.PermissionBroker(approver, states=self.states)

    def render(self, state: contrib.SessionAccumulator, update: schema.SessionUpdate) -> None:
        if isinstance(update, schema.AgentMessageChunk) and isinstance(
            update.content, schema.TextContent
        ):
            print(update.content.text, end="", flush=True)
        elif isinstance(update, schema.Plan):
            say("\nplan: " + " / ".join(f"[{e.status}] {e.content}" for e in update.entries))
        elif isinstance(update, (schema.ToolCall, schema.ToolCallUpdate)):
            call = state.tool_calls[update.tool_call_id]
            say(f"\ntool call {call.title!r}: {call.status}")

    async def session_update(self, params: schema.SessionNotification) -> None:
        self.states.apply(params)

    async def ask(self, request: contrib.PendingPermission) -> bool:
        say(f"\nallow {request.title!r}? [y/N] ")
        # In a thread the turn's cancel may abandon: a cancelled turn's
        # question is answered "cancelled" by the SDK at once.
        line: str = await trio.to_thread.run_sync(sys.stdin.readline, abandon_on_cancel=True)
        return line.strip().lower() == "y"


async def run_turn(
    agent: acp_trio.AgentProxy,
    sid: str,
    text: str,
    interrupts: AsyncIterator[int],
) -> str | None:
    """One prompt turn; Ctrl-C cancels it (and a second one leaves).
    Returns the stop reason, or how a cancelled turn ended without one."""
    result: list[str | None] = []
    async with trio.open_nursery() as nursery:

        async def turn() -> None:
            result.append((await agent.prompt_text(sid, text)).stop_reason)
            nursery.cancel_scope.cancel()

        async def cancel() -> None:
            # Answered, escalated ($/cancel_request) or abandoned: see
            # docs/how-a-turn-ends.md.
            outcome = await agent.cancel_turn(sid)
            result.append(outcome.stop_reason or outcome.how)
            nursery.cancel_scope.cancel()

        async def on_ctrl_c() -> None:
            cancelling = False
            async for _ in interrupts:
                if cancelling:
                    raise KeyboardInterrupt
                say("\ncancelling the turn (Ctrl-C again to leave)")
                cancelling = True
                nursery.start_soon(cancel)

        nursery.start_soon(turn)
        nursery.start_soon(on_ctrl_c)
    return result[-1] if result else None


async def main(root: Path, prompts: list[str], command: list[str], yes: bool) -> None:
    async def approve(params: schema.CreateTerminalRequest) -> bool:
        say(f"\nrunning {params.command} {' '.join(params.args or ())}")
        return True

    async with acp_trio.contrib.open_terminal_manager(approve, cwd=root) as terminals:
        editor = Editor(root, terminals, yes)
        async with acp_trio.open_spawned_agent(editor, command) as agent:
            await agent.initialize()
            sid = (await agent.new_session(str(root))).session_id
            with trio.open_signal_receiver(signal.SIGINT) as interrupts:
                for text in prompts:
                    stop_reason = await run_turn(agent, sid, text, interrupts)
                    say(f"\nstop reason: {stop_reason or 'none'}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path.cwd())
    parser.add_argument("--prompt", action="append", default=[], help="a prompt (repeatable)")
    parser.add_argument("--yes", action="store_true", help="allow every permission request")
    parser.add_argument("command", nargs="+", help="the agent command, after --")
    args = parser.parse_args()
    trio.run(main, args.root.resolve(), args.prompt or ["hello"], args.command, args.yes)
