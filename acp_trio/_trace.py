"""``python -m acp_trio trace --log FILE -- AGENT_CMD...``: a logging proxy.

Configure it in an editor in place of the agent's command. It spawns the
agent, forwards bytes unchanged both ways (our stdin to the agent's stdin,
the agent's stdout to our stdout; the agent's stderr is our stderr), and
appends one JSON line per message to FILE::

    {"time": "2026-08-22T15:38:24.123456Z", "elapsed": 0.0123,
     "direction": "client->agent", "message": {...}}

``message`` is the parsed JSON; a line that is not JSON is logged as
``"raw"`` text instead. A ``"event": "start"`` line (command, pid) opens each
run and an ``"event": "exit"`` line (exit code) ends it.

It exits when either side closes: at the end of the agent's output, or when
the client closes our stdin (the agent's stdin is closed then, and the agent
gets ``grace`` seconds before it is terminated). The exit status is the
agent's (128 + N for a signal N).
"""

from __future__ import annotations

import datetime
import json
import signal
import sys
from collections.abc import Sequence
from contextlib import suppress
from typing import IO, Any, Literal

import trio

from acp_trio._jsonrpc import LineDecoder, OversizedFrame
from acp_trio._transports import open_agent_process, open_stdio_stream

__all__ = ["TraceLog", "run_trace"]

Direction = Literal["client->agent", "agent->client"]

_CHUNK = 65536


class TraceLog:
    """JSON lines, one per message, flushed as they are written."""

    def __init__(self, file: IO[str]) -> None:
        self._file = file
        self._start = trio.current_time()
        self._decoders: dict[Direction, LineDecoder] = {
            "client->agent": LineDecoder(),
            "agent->client": LineDecoder(),
        }

    def _write(self, record: dict[str, Any]) -> None:
        now = datetime.datetime.now(datetime.UTC)
        stamped = {
            "time": now.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            "elapsed": round(trio.current_time() - self._start, 6),
            **record,
        }
        self._file.write(json.dumps(stamped, ensure_ascii=False) + "\n")
        self._file.flush()

    def event(self, name: str, **fields: Any) -> None:
        self._write({"event": name, **fields})

    def _line(self, direction: Direction, frame: bytes | OversizedFrame) -> None:
        if isinstance(frame, OversizedFrame):
            self._write({"direction": direction, "raw": f"<{frame.size} bytes, too long to log>"})
            return
        try:
            message = json.loads(frame)
        except ValueError:
            self._write({"direction": direction, "raw": frame.decode("utf-8", "replace")})
            return
        self._write({"direction": direction, "message": message})

    def feed(self, direction: Direction, data: bytes) -> None:
        for frame in self._decoders[direction].feed(data):
            self._line(direction, frame)

    def end(self, direction: Direction) -> None:
        for frame in self._decoders[direction].feed_eof():
            self._line(direction, frame)


async def _pump(
    source: trio.abc.ReceiveStream,
    sink: trio.abc.SendStream,
    direction: Direction,
    log: TraceLog,
) -> None:
    """Forward until the source ends or the sink breaks; log what passed."""
    try:
        while data := await source.receive_some(_CHUNK):
            await sink.send_all(data)
            log.feed(direction, bytes(data))
    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
        pass
    finally:
        log.end(direction)


async def _forward(
    stdio: trio.StapledStream[trio.abc.Stream, trio.abc.Stream],
    agent: trio.StapledStream[trio.abc.SendStream, trio.abc.ReceiveStream],
    log: TraceLog,
    grace: float,
) -> None:
    async with trio.open_nursery() as nursery:

        async def client_to_agent() -> None:
            await _pump(stdio.receive_stream, agent.send_stream, "client->agent", log)
            # The client closed: pass the end of input on, give the agent
            # time to finish, then stop (the agent is terminated on exit).
            with suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                await agent.send_stream.aclose()
            await trio.sleep(grace)
            nursery.cancel_scope.cancel()

        async def agent_to_client() -> None:
            await _pump(agent.receive_stream, stdio.send_stream, "agent->client", log)
            nursery.cancel_scope.cancel()

        async def on_signal() -> None:
            with trio.open_signal_receiver(signal.SIGTERM, signal.SIGHUP) as signals:
                async for _ in signals:
                    nursery.cancel_scope.cancel()

        nursery.start_soon(client_to_agent)
        nursery.start_soon(agent_to_client)
        nursery.start_soon(on_signal)


def _exit_status(code: int | None) -> int:
    if code is None:
        return 1
    return 128 - code if code < 0 else code


async def run_trace(command: Sequence[str], *, log: IO[str], grace: float = 2.0) -> int:
    """Proxy our stdio to the agent ``command``, logging to the text file
    ``log``. Returns the agent's exit status (127 if it cannot start)."""
    trace = TraceLog(log)
    async with open_stdio_stream() as stdio:
        try:
            async with open_agent_process(
                command, stderr="inherit", shutdown_grace=0.5, terminate_grace=2.0
            ) as agent:
                trace.event("start", command=list(command), pid=agent.pid)
                await _forward(stdio, agent.stream, trace, grace)
        except OSError as exc:
            print(f"acp_trio trace: cannot start {list(command)}: {exc}", file=sys.stderr)
            trace.event("exit", code=127, error=str(exc))
            return 127
        status = _exit_status(agent.returncode)
        trace.event("exit", code=status)
        return status
