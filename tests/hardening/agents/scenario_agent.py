"""The scenario agent with knobs, for the hardening tests.

Serves :class:`acp_trio.testing.ScenarioAgent` on stdio through
``acp_trio.run_agent`` (the shipped scenario agent is not modified), with:

- ``--max-message-size BYTES`` (or env ``ACP_HARDENING_MAX_MESSAGE_SIZE``):
  the connection's message size cap;
- ``--stderr-flood BYTES``: ``initialize`` writes that many bytes to stderr
  (blocking writes) before it answers;
- ``--log PATH``: append one line per event (``cancelled <prompt>``,
  ``exit``) to PATH, flushed at once;
- ``--child``: start a grandchild (``sleep 3600``) at startup, in this
  process group; ``--stubborn-child`` makes it ignore SIGTERM;
- ``--ignore-eof``: keep running (an hour) after the client closed our
  stdin; ``--ignore-term``: ignore SIGTERM (while serving, the SDK's own
  handler still closes the connection on it).

``initialize`` answers with ``_meta`` = ``{"pid", "pgid", "children"}``.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from typing import Any

import attrs
import trio

import acp_trio
from acp_trio.schema import (
    InitializeRequest,
    InitializeResponse,
    PromptRequest,
    PromptResponse,
    TextContent,
)
from acp_trio.testing import ScenarioAgent


class HardeningAgent(ScenarioAgent):
    def __init__(self, args: argparse.Namespace, children: list[int]) -> None:
        super().__init__()
        self.args = args
        self.children = children

    def log(self, text: str) -> None:
        if self.args.log:
            with open(self.args.log, "a", encoding="utf-8") as file:
                file.write(text + "\n")

    async def initialize(self, params: InitializeRequest) -> InitializeResponse:
        remaining = self.args.stderr_flood
        chunk = b"e" * 65535 + b"\n"
        while remaining > 0:
            # Blocking writes: a client that does not drain stderr blocks us.
            remaining -= os.write(2, chunk[: min(remaining, len(chunk))])
        result = await super().initialize(params)
        meta: dict[str, Any] = {
            "pid": os.getpid(),
            "pgid": os.getpgrp(),
            "children": self.children,
        }
        return attrs.evolve(result, meta=meta)

    async def prompt(self, params: PromptRequest) -> PromptResponse:
        try:
            return await super().prompt(params)
        except trio.Cancelled:
            texts = [b.text for b in params.prompt if isinstance(b, TextContent)]
            self.log(f"cancelled {texts[0] if texts else ''}")
            raise


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--max-message-size",
        type=int,
        default=int(os.environ.get("ACP_HARDENING_MAX_MESSAGE_SIZE", "0")) or None,
    )
    parser.add_argument("--stderr-flood", type=int, default=0)
    parser.add_argument("--log")
    parser.add_argument("--child", action="store_true")
    parser.add_argument("--stubborn-child", action="store_true")
    parser.add_argument("--ignore-eof", action="store_true")
    parser.add_argument("--ignore-term", action="store_true")
    args = parser.parse_args()
    if args.ignore_term:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    children: list[int] = []
    if args.child or args.stubborn_child:
        code = "import signal, time\n"
        if args.stubborn_child:
            code += "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        code += "time.sleep(3600)\n"
        child = subprocess.Popen(
            [sys.executable, "-c", code],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
        )
        children.append(child.pid)
    config = None
    if args.max_message_size:
        config = acp_trio.ConnectionConfig(max_message_size=args.max_message_size)
    agent = HardeningAgent(args, children)
    try:
        trio.run(lambda: acp_trio.run_agent(agent, config=config))
        if args.ignore_eof:
            time.sleep(3600)
    finally:
        agent.log("exit")


if __name__ == "__main__":
    main()
