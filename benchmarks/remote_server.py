"""acp_trio's remote server for the benchmarks, in a process of its own
(as the TypeScript server runs in Node's): the scenario agent over
WebSocket and Streamable HTTP on a free loopback port. Prints one JSON line,
``{"url": "http://127.0.0.1:PORT/acp"}``, then serves until stdin closes or
it is killed.

Its agent and connection caps are raised far above the defaults (16 agents,
half of them per client address): the scale benchmark opens thousands of
connections from one address. Every other bound keeps its default."""

from __future__ import annotations

import functools
import json

import trio

from acp_trio.remote import ServerLimits, agent_app, serve_remote
from acp_trio.testing import ScenarioAgent

BENCHMARK_LIMITS = ServerLimits(
    max_agents=100_000,
    max_agents_per_client=100_000,
    max_connections=100_000,
    max_connections_per_client=100_000,
)


async def main() -> None:
    async with trio.open_nursery() as nursery:
        app = agent_app(ScenarioAgent, limits=BENCHMARK_LIMITS)
        binds = await nursery.start(functools.partial(serve_remote, app, 0))
        print(json.dumps({"url": binds[0] + "/acp"}), flush=True)


if __name__ == "__main__":
    trio.run(main)
