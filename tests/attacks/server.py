"""The server under attack, in a process of its own (its memory measured
alone): the scenario agent in process (``serve_remote(agent_app(...))``)
with every default bound, and a token. Prints one JSON line, ``{"url":
...}``, then serves until killed."""

from __future__ import annotations

import functools
import json
import sys

import trio

from acp_trio.remote import agent_app, serve_remote
from acp_trio.testing import ScenarioAgent


async def main(token: str) -> None:
    async with trio.open_nursery() as nursery:
        app = agent_app(ScenarioAgent, token=token)
        binds = await nursery.start(functools.partial(serve_remote, app, 0))
        print(json.dumps({"url": binds[0]}), flush=True)


if __name__ == "__main__":
    trio.run(main, sys.argv[1])
