"""The Trio relay: ``relay.py`` on Trio's I/O, copying bytes both ways and
nothing else (one task per direction: wait until readable, read, write).
What one more Trio process on the path costs at least: the floor for the
conductor, as the stdlib relay is the floor for any process.

    python trio_relay.py -- AGENT_CMD...
"""

from __future__ import annotations

import os
import sys

import trio


async def copy(source: int, target: int) -> None:
    while True:
        await trio.lowlevel.wait_readable(source)
        try:
            data = os.read(source, 65536)
        except BlockingIOError:
            continue
        if not data:
            return
        while data:
            try:
                data = data[os.write(target, data) :]
            except BlockingIOError:
                await trio.lowlevel.wait_writable(target)


async def main(command: list[str]) -> None:
    agent = await trio.lowlevel.open_process(command, stdin=-1, stdout=-1)
    assert isinstance(agent.stdin, trio.lowlevel.FdStream)
    assert isinstance(agent.stdout, trio.lowlevel.FdStream)
    for fd in (0, 1):
        os.set_blocking(fd, False)
    stdin = agent.stdin

    async def down() -> None:
        await copy(0, stdin.fileno())
        await stdin.aclose()  # the agent sees the end of its input

    async with trio.open_nursery() as nursery:
        nursery.start_soon(down)
        await copy(agent.stdout.fileno(), 1)
        nursery.cancel_scope.cancel()
    await agent.wait()


if __name__ == "__main__":
    argv = sys.argv[1:]
    if "--" not in argv or argv.index("--") == len(argv) - 1:
        print("usage: trio_relay.py -- AGENT_CMD...", file=sys.stderr)
        sys.exit(2)
    trio.run(main, argv[argv.index("--") + 1 :])
