"""A client that spawns any ACP agent and streams its answer to the terminal.

    python examples/client.py "your prompt" -- AGENT COMMAND...

for example ``python examples/client.py "hello there" -- python examples/echo_agent.py``.
Press Ctrl-C to cancel the turn (``session/cancel``); the agent is shut down
when the client exits.
"""

import os
import sys

import trio

import acp_trio
from acp_trio import schema


class PrintingClient(acp_trio.Client):
    async def session_update(self, params: schema.SessionNotification) -> None:
        update = params.update
        if isinstance(update, schema.AgentMessageChunk) and isinstance(
            update.content, schema.TextContent
        ):
            print(update.content.text, end="", flush=True)


async def main(prompt: str, command: list[str]) -> None:
    async with acp_trio.open_spawned_agent(PrintingClient(), command) as agent:
        await agent.initialize()
        session = await agent.new_session(os.getcwd())
        result = await agent.prompt_text(session.session_id, prompt)
        print(f"\n[stopReason: {result.stop_reason}]")


if __name__ == "__main__":
    if "--" not in sys.argv[1:] or sys.argv.index("--") != 2:
        sys.exit(__doc__)
    trio.run(main, sys.argv[1], sys.argv[3:])
