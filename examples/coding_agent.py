"""A coding agent with a fake model (no network), written with the kit.

Each turn: a plan, a thought, streamed text, then a tool call that reads a
file, proposes an edit as a diff, asks permission, writes the file, and
runs a check in the client's terminal. Cancellation (``session/cancel``, a
``$/cancel_request``, the client going away) needs no code here: the turn's
scope is cancelled, the open tool call reports ``failed``, the terminal is
released, and the SDK answers ``stopReason: "cancelled"``. A turn also has
a time limit (``--turn-limit``): past it the turn is cancelled the same
way, each request it still waits on is cancelled on the wire, and the
prompt answers ``-32800``.

    python examples/coding_agent.py                   # an ACP agent on stdio
    python examples/coding_agent.py --turn-limit 30   # turns of at most 30 s

The prompt names the file to fix (an absolute path in the client's
workspace): ``fix /path/to/file.py``.
"""

from __future__ import annotations

import argparse
import os

import trio

import acp_trio
from acp_trio import build, schema


def fake_model(source: str) -> tuple[list[str], str]:
    """What a model would say, and the fixed source."""
    fixed = source.replace("prnt(", "print(")
    words = ["I", "found", "a", "misspelt", "print", "and", "will", "fix", "it."]
    return [w + " " for w in words], fixed


class CodingAgent(acp_trio.Agent):
    info = schema.Implementation(name="acp_trio-coding-agent", version="1.0")
    turn_limit = 300.0  # seconds

    async def new_session(self, params: schema.NewSessionRequest) -> schema.NewSessionResponse:
        return schema.NewSessionResponse(session_id=f"session-{os.urandom(4).hex()}")

    async def prompt(self, params: schema.PromptRequest) -> schema.PromptResponse:
        with trio.fail_after(self.turn_limit):  # at the limit: -32800, nested requests cancelled
            return await self.turn(params)

    async def turn(self, params: schema.PromptRequest) -> schema.PromptResponse:
        sid, client = params.session_id, self.client
        text = " ".join(b.text for b in params.prompt if isinstance(b, schema.TextContent))
        path = text.removeprefix("fix ").strip()
        if not text.startswith("fix /"):
            await client.session_update(sid, build.agent_message("Say: fix /path/to/file.py"))
            return schema.PromptResponse(stop_reason="end_turn")
        await client.session_update(sid, build.plan(["read the file", "fix it", "check it"]))
        await client.session_update(sid, build.agent_thought(f"Reading {path}"))

        async with client.tool_call(sid, f"Fix {os.path.basename(path)}", kind="edit") as call:
            source = (await client.read_text_file(sid, path)).content
            words, fixed = fake_model(source)
            for word in words:
                await client.session_update(sid, build.agent_message(word))
                await trio.sleep(0.01)  # a model streams; a cancel lands here
            await call.add_content(build.diff(path, fixed, old_text=source))
            choice = await client.ask_permission(sid, call)
            if choice is None or not choice.kind.startswith("allow"):
                await call.fail(raw_output={"reason": "not allowed"})
                return schema.PromptResponse(stop_reason="end_turn")
            await client.write_text_file(sid, path, fixed)

            async with client.terminal(sid, "python", ["-m", "py_compile", path]) as term:
                await call.add_content(build.terminal(term.id))
                exit_status = await term.wait_for_exit()
            if exit_status.exit_code != 0:
                await call.fail(raw_output={"exit_code": exit_status.exit_code})

        await client.session_update(sid, build.agent_message("Done."))
        return schema.PromptResponse(stop_reason="end_turn")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="A coding agent (fake model) on stdio")
    parser.add_argument("--turn-limit", type=float, default=300.0, metavar="SECONDS")
    CodingAgent.turn_limit = parser.parse_args().turn_limit
    trio.run(acp_trio.run_agent, CodingAgent)
