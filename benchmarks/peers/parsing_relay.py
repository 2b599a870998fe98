"""The parsing relay: one Trio process between a client and its agent that
decodes each message, gives each request an id of its own on the other side
(and each answer its id back), encodes it again and writes it, nothing
else. The floor of ``bench_chain.py``'s conductor and of each proxy: the
same per-hop work as theirs (ids of each hop's own, a ``$/cancel_request``
passed on with the id of the hop it goes to, a late answer dropped) with
none of the machinery.

Per direction, one task: read (``_lean_io.LeanReader``), ``orjson.loads``,
a dict lookup or two, ``orjson.dumps``, and a write at once while nothing
waits (``_lean_io.LeanWriter``, acp_trio's policy; a writer task takes what
a full pipe refuses).

Why nothing honest beats it: a hop that keeps ids per hop has to read the id
of every message, and the only sound way to read and change a JSON value is
to decode and encode it (orjson, the fastest JSON the repository uses); the
tables are one dict each way, the I/O one read and one write per message
with the one schedule point a Trio read must have, and no task, handler or
object per request. A byte-copying relay is cheaper, but it cannot keep ids
per hop, which a conductor must.

    python parsing_relay.py -- AGENT_CMD...
"""

from __future__ import annotations

import itertools
import os
import sys
from typing import Any

import orjson
import trio

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _lean_io import LeanReader, LeanWriter

_dumps = orjson.dumps
_loads = orjson.loads
_LINE = orjson.OPT_APPEND_NEWLINE
CANCEL = "$/cancel_request"


class Direction:
    """Messages read on one side, written to the other: the requests it
    passes on (their ids on the other side) and the answers that come back
    the other way (``back``)."""

    def __init__(self, reader: LeanReader, writer: LeanWriter) -> None:
        self.reader = reader
        self.writer = writer
        # Far from the peers' own (which count from 1 here), so that an id
        # passed on unchanged would show.
        self.ids = itertools.count(1000)
        self.calls: dict[int, Any] = {}  # our id on the far side -> the id read
        self.taken: dict[Any, int] = {}  # the id read -> our id on the far side
        self.back: Direction

    async def run(self) -> None:
        line_of, write = self.reader.line, self.writer.write
        ids, calls, taken = self.ids, self.calls, self.taken
        back_calls, back_taken = self.back.calls, self.back.taken
        while (line := await line_of()) is not None:
            msg = _loads(line)
            if "method" in msg:
                if "id" in msg:  # a request: an id of the far side's own
                    ours = next(ids)
                    calls[ours] = source = msg["id"]
                    taken[source] = ours
                    msg["id"] = ours
                elif msg["method"] == CANCEL:
                    params = msg["params"]
                    ours = taken.pop(params["requestId"], None)
                    if ours is None or calls.pop(ours, None) is None:
                        continue  # answered already
                    params["requestId"] = ours
            else:  # an answer to a request the other direction passed on
                source = back_calls.pop(msg["id"], None)
                if source is None:
                    continue  # late: its request was cancelled
                del back_taken[source]
                msg["id"] = source
            write(_dumps(msg, option=_LINE))


async def main(command: list[str]) -> None:
    agent = await trio.lowlevel.open_process(command, stdin=-1, stdout=-1)
    assert agent.stdin is not None
    assert agent.stdout is not None
    to_agent = LeanWriter(agent.stdin.fileno())
    to_client = LeanWriter(os.dup(1))
    down = Direction(LeanReader(os.dup(0)), to_agent)
    up = Direction(LeanReader(agent.stdout.fileno()), to_client)
    down.back, up.back = up, down
    stdin = agent.stdin

    async def run_down() -> None:
        await down.run()
        await to_agent.flush()
        await stdin.aclose()  # the agent sees the end of its input

    async with trio.open_nursery() as nursery:
        nursery.start_soon(to_agent.run)
        nursery.start_soon(to_client.run)
        nursery.start_soon(run_down)
        await up.run()
        await to_client.flush()
        nursery.cancel_scope.cancel()
    await agent.wait()


if __name__ == "__main__":
    argv = sys.argv[1:]
    if "--" not in argv or argv.index("--") == len(argv) - 1:
        print("usage: parsing_relay.py -- AGENT_CMD...", file=sys.stderr)
        sys.exit(2)
    trio.run(main, argv[argv.index("--") + 1 :])
