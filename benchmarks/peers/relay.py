"""The stdlib relay: one process on the path, copying lines both ways and
nothing else (blocking reads and writes, a thread per direction, no
parsing). What one more process between a client and its agent costs at
least: the honest limit of one proxy hop.

    python relay.py -- AGENT_CMD...
"""

from __future__ import annotations

import subprocess
import sys
import threading
from typing import BinaryIO


def copy(source: BinaryIO, target: BinaryIO) -> None:
    for line in iter(source.readline, b""):
        target.write(line)
        target.flush()
    target.close()


def main(argv: list[str]) -> int:
    if "--" not in argv or argv.index("--") == len(argv) - 1:
        print("usage: relay.py -- AGENT_CMD...", file=sys.stderr)
        return 2
    command = argv[argv.index("--") + 1 :]
    agent = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert agent.stdin is not None
    assert agent.stdout is not None
    down = threading.Thread(target=copy, args=(sys.stdin.buffer, agent.stdin), daemon=True)
    down.start()
    copy(agent.stdout, sys.stdout.buffer)
    return agent.wait()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
