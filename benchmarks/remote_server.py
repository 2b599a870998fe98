"""acp_trio's remote server for the benchmarks, in a process of its own
(as the TypeScript server runs in Node's): the scenario agent over
WebSocket and Streamable HTTP on a free loopback port. Prints one JSON line,
``{"url": "http://127.0.0.1:PORT/acp"}``, then serves until stdin closes or
it is killed."""

from __future__ import annotations

import functools
import json

import trio

from acp_trio.remote import agent_app, serve_remote
from acp_trio.testing import ScenarioAgent


async def main() -> None:
    async with trio.open_nursery() as nursery:
        binds = await nursery.start(functools.partial(serve_remote, agent_app(ScenarioAgent), 0))
        print(json.dumps({"url": binds[0] + "/acp"}), flush=True)


if __name__ == "__main__":
    trio.run(main)
