"""How long after a deadline around ``AgentProxy.prompt()`` its
``session/cancel`` is written, against agents of three SDKs.

The acp_trio client streams a long ``stream`` turn from each agent, sets a
deadline once the first chunk arrived, and takes the time from the deadline
to the ``session/cancel`` frame handed to the pipe (the trace hook sees it
as it is written), then waits for the turn's late ``cancelled`` answer
before the next turn. Prints the median and the worst of the runs.

    .venv/bin/python benchmarks/prompt_deadline.py [--runs 20]

Agents: the official Python SDK's (``benchmarks/peers/official_agent.py``,
needs ``agent-client-protocol``), the TypeScript SDK's
(``tests/interop/ts_agent.mjs``, needs node and ``npm ci`` there), and
acp_trio's scenario agent; a missing one is skipped with the reason.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import statistics
import sys
from pathlib import Path

import trio

import acp_trio
from acp_trio import schema
from acp_trio.testing import SCENARIO_AGENT_COMMAND

ROOT = Path(__file__).resolve().parent.parent
STREAM = "stream 100000000 8"


def agents() -> dict[str, list[str] | str]:
    """Name -> command, or the reason it cannot run here."""
    found: dict[str, list[str] | str] = {}
    if importlib.util.find_spec("acp") is None:
        found["official-python-sdk"] = "agent-client-protocol is not installed"
    else:
        found["official-python-sdk"] = [
            sys.executable,
            str(ROOT / "benchmarks" / "peers" / "official_agent.py"),
        ]
    node = shutil.which("node")
    interop = ROOT / "tests" / "interop"
    if node is None:
        found["typescript-sdk"] = "node is not on PATH"
    elif not (interop / "node_modules" / "@agentclientprotocol" / "sdk").is_dir():
        found["typescript-sdk"] = "run npm ci in tests/interop"
    else:
        found["typescript-sdk"] = [node, str(interop / "ts_agent.mjs")]
    found["acp_trio"] = list(SCENARIO_AGENT_COMMAND)
    return found


class FirstChunk(acp_trio.Client):
    def __init__(self) -> None:
        self.first_chunk = trio.Event()

    async def session_update(self, params: schema.SessionNotification) -> None:
        # A turn's first chunk is "0.......": later ones of a cancelled turn
        # (the agent may send a few before it stops) must not count.
        content = getattr(params.update, "content", None)
        if isinstance(content, schema.TextContent) and content.text.startswith("0."):
            self.first_chunk.set()


async def measure(command: list[str], runs: int) -> list[float]:
    """Milliseconds from each deadline to its ``session/cancel``."""
    cancels: list[float] = []

    def trace(direction: str, frame: bytes) -> None:
        if direction == "send" and b'"session/cancel"' in frame:
            cancels.append(trio.current_time())

    client = FirstChunk()
    config = acp_trio.ConnectionConfig(trace=trace)
    latencies: list[float] = []
    async with acp_trio.open_spawned_agent(
        client, command, config=config, stderr="discard"
    ) as agent:
        await agent.initialize()
        new = schema.NewSessionRequest(cwd=os.getcwd(), mcp_servers=[])
        session_id = (await agent.new_session(new)).session_id
        for _ in range(runs):
            client.first_chunk = trio.Event()
            sent_before = len(cancels)
            with trio.CancelScope() as scope:
                async with trio.open_nursery() as nursery:

                    async def deadline_once_streaming(scope: trio.CancelScope = scope) -> None:
                        await client.first_chunk.wait()
                        scope.deadline = trio.current_time() + 0.05

                    nursery.start_soon(deadline_once_streaming)
                    await agent.prompt_text(session_id, STREAM)
            if not scope.cancelled_caught or len(cancels) != sent_before + 1:
                raise RuntimeError("the turn ended before its deadline, or no session/cancel")
            latencies.append((cancels[-1] - scope.deadline) * 1000)
        # The last cancelled turn's answer arrives before the next prompt.
        result = await agent.prompt_text(session_id, "echo done")
        if result.stop_reason != "end_turn":
            raise RuntimeError(f"the turn after the cancels ended {result.stop_reason!r}")
    return latencies


async def main(runs: int) -> None:
    print(f"deadline -> session/cancel written, {runs} turns each (ms)")
    for name, command in agents().items():
        if isinstance(command, str):
            print(f"  {name:<22} skipped: {command}")
            continue
        with trio.fail_after(60 + runs * 10):
            latencies = await measure(command, runs)
        print(f"  {name:<22} median {statistics.median(latencies):.3f}  max {max(latencies):.3f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    trio.run(main, parser.parse_args().runs)
