"""A sub-agent for the relay and process tests (acp_trio, on its stdio).

``python sub_agent.py RECORD``: every frame it reads or writes is appended
to RECORD as one line (``recv session/cancel``, ``send <answer>
{"stopReason": "cancelled"}``...), and ``<eof>`` once its stdin closed and
it is about to exit. Its stderr says ``sub: turn started`` / ``sub: turn
ended``, and ``sub: bye`` last of all, as it exits on its own.

The prompt's text picks the turn:

- ``wait``: one update (``started``), then wait until cancelled;
- ``mute``: one update, then ignore both cancels and never answer; it also
  ignores SIGTERM and its stdin closing (only SIGKILL ends it);
- ``exit``: one update, then exit with code 3 the moment ``session/cancel``
  is read (before the SDK could answer the turn).
"""

import functools
import json
import os
import signal
import sys

import trio

import acp_trio
from acp_trio import ConnectionConfig, schema

RECORD = sys.argv[1]
MODE = {"turn": ""}


def record(line: str) -> None:
    with open(RECORD, "a") as file:
        file.write(line + "\n")
        file.flush()


def trace(direction: str, frame: bytes) -> None:
    msg = json.loads(frame)
    if direction == "recv" and msg.get("method") == "session/cancel" and MODE["turn"] == "exit":
        record("<exit>")
        os._exit(3)
    what = msg.get("method")
    if what is None:
        what = "<answer> " + json.dumps(msg.get("result", msg.get("error")), sort_keys=True)
    record(f"{direction} {what}")


class Sub(acp_trio.Agent):
    def __init__(self) -> None:
        super().__init__()
        self.mode = ""

    async def initialize(self, params: schema.InitializeRequest) -> schema.InitializeResponse:
        return schema.InitializeResponse(protocol_version=1, meta={"pid": os.getpid()})

    async def new_session(self, params: schema.NewSessionRequest) -> schema.NewSessionResponse:
        return schema.NewSessionResponse(session_id="sub-1")

    async def prompt(self, params: schema.PromptRequest) -> schema.PromptResponse:
        self.mode = MODE["turn"] = params.prompt[0].text  # type: ignore[union-attr]
        print("sub: turn started", file=sys.stderr, flush=True)
        await self.client.send_text(params.session_id, "started")
        try:
            if self.mode == "mute":
                signal.signal(signal.SIGTERM, signal.SIG_IGN)
                with trio.CancelScope(shield=True):
                    await trio.sleep_forever()
            await trio.sleep_forever()
        finally:
            print("sub: turn ended", file=sys.stderr, flush=True)
        raise AssertionError("not reached")


trio.run(
    functools.partial(
        acp_trio.run_agent, Sub(), config=ConnectionConfig(trace=trace), handle_signals=False
    )
)
record("<eof>")
print("sub: bye", file=sys.stderr, flush=True)
