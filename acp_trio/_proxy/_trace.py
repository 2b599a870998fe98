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
gets ``grace`` seconds before it is stopped), or on SIGTERM, SIGINT or
SIGHUP. Stopping the agent is the usual escalation on its whole process
group: its stdin is closed, then SIGTERM, then SIGKILL, and it is reaped
before we exit. After a signal to us the waits are short (under a second in
all), because whoever sent it may SIGKILL us soon after (``open_spawned_agent``
does after 2 s) and the agent, in a session of its own, would outlive us.
The exit status is the agent's (128 + N for a signal N); the ``exit`` line
names the signal we received, if any.
"""

from __future__ import annotations

import datetime
import json
import signal
import sys
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import IO, Any, Literal

import trio

from acp_trio._jsonrpc import LineDecoder, OversizedFrame
from acp_trio._transports import open_agent_process, open_stdio_stream
from acp_trio._transports._process import _signal_group

__all__ = ["TraceLog", "run_trace"]

Direction = Literal["client->agent", "agent->client"]

_CHUNK = 65536

# Stopping the agent: seconds from the close of its stdin to SIGTERM, and from
# SIGTERM to SIGKILL; after a signal to us, at most the hurried ones.
_STOP_GRACE = 0.5
_TERM_GRACE = 2.0
_HURRIED_STOP_GRACE = 0.25
_HURRIED_TERM_GRACE = 0.5

_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


class TraceLog:
    """JSON lines, one per message, flushed as they are written.

    ``clock`` gives the ``elapsed`` seconds (Trio's clock by default; the
    conductor's per-hop trace uses :func:`time.monotonic`, as its records are
    written from a connection's trace hook, where Trio must not be called).
    """

    def __init__(self, file: IO[str], *, clock: Callable[[], float] = trio.current_time) -> None:
        self._file = file
        self._clock = clock
        self._start = clock()
        self._decoders: dict[Direction, LineDecoder] = {
            "client->agent": LineDecoder(),
            "agent->client": LineDecoder(),
        }

    def _write(self, record: dict[str, Any]) -> None:
        now = datetime.datetime.now(datetime.UTC)
        stamped = {
            "time": now.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            "elapsed": round(self._clock() - self._start, 6),
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
        except (ValueError, RecursionError):  # RecursionError: nested too deeply
            self._write({"direction": direction, "raw": frame.decode("utf-8", "replace")})
            return
        self._write({"direction": direction, "message": message})

    def hop_frame(self, hop: int, peer: str, direction: str, frame: bytes) -> None:
        """One whole message on hop ``hop`` of a chain (the conductor's
        connection to ``peer``), ``direction`` as seen from the conductor."""
        try:
            message = json.loads(frame)
        except (ValueError, RecursionError):
            self._write({"hop": hop, "peer": peer, "direction": direction, "raw": repr(frame)})
            return
        self._write({"hop": hop, "peer": peer, "direction": direction, "message": message})

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


class _Stopping:
    """The signals we received, and the waits they cut short.

    A signal ends the forwarding and caps every wait of the agent's stop,
    the one under way included, at its hurried length; a second signal
    ends the current wait at once.
    """

    def __init__(self) -> None:
        self.signal: signal.Signals | None = None
        self.forwarding = trio.CancelScope()
        self._waits: dict[trio.CancelScope, float] = {}

    def received(self, signum: int) -> None:
        first = self.signal is None
        if first:
            self.signal = signal.Signals(signum)
        self.forwarding.cancel()
        now = trio.current_time()
        for scope, hurried in self._waits.items():
            scope.deadline = min(scope.deadline, now + hurried if first else now)

    @contextmanager
    def wait(self, seconds: float, hurried: float) -> Iterator[None]:
        """A ``move_on_after(seconds)``, or ``hurried`` once signalled."""
        if self.signal is not None:
            seconds = min(seconds, hurried)
        with trio.move_on_after(seconds) as scope:
            self._waits[scope] = hurried
            try:
                yield
            finally:
                del self._waits[scope]


async def _watch_signals(signals: AsyncIterator[int], stopping: _Stopping) -> None:
    async for signum in signals:
        stopping.received(signum)


async def _forward(
    stdio: trio.StapledStream[trio.abc.Stream, trio.abc.Stream],
    agent: trio.StapledStream[trio.abc.SendStream, trio.abc.ReceiveStream],
    log: TraceLog,
    grace: float,
) -> None:
    async with trio.open_nursery() as nursery:

        async def client_to_agent() -> None:
            await _pump(stdio.receive_stream, agent.send_stream, "client->agent", log)
            # The client closed: pass the end of input on and give the agent
            # time to finish (its output is still forwarded meanwhile).
            with suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                await agent.send_stream.aclose()
            await trio.sleep(grace)
            nursery.cancel_scope.cancel()

        async def agent_to_client() -> None:
            await _pump(agent.receive_stream, stdio.send_stream, "agent->client", log)
            nursery.cancel_scope.cancel()

        nursery.start_soon(client_to_agent)
        nursery.start_soon(agent_to_client)


async def _stop_agent(
    process: trio.Process, stdin: trio.abc.SendStream, stopping: _Stopping
) -> None:
    """Close stdin, then SIGTERM, then SIGKILL the agent's group; reap it.

    Done here rather than left to ``open_agent_process`` so that a signal
    arriving meanwhile can shorten the waits (see the module's docstring).
    """
    pgid = process.pid  # the agent leads its own group
    with suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError):
        await stdin.aclose()
    with stopping.wait(_STOP_GRACE, _HURRIED_STOP_GRACE):
        await process.wait()
    if process.returncode is None:
        _signal_group(pgid, signal.SIGTERM)
        with stopping.wait(_TERM_GRACE, _HURRIED_TERM_GRACE):
            await process.wait()
    if process.returncode is None:
        _signal_group(pgid, signal.SIGKILL)
        await process.wait()


def _exit_status(code: int | None) -> int:
    if code is None:
        return 1
    return 128 - code if code < 0 else code


async def run_trace(command: Sequence[str], *, log: IO[str], grace: float = 2.0) -> int:
    """Proxy our stdio to the agent ``command``, logging to the text file
    ``log``. Returns the agent's exit status (127 if it cannot start).
    Handles SIGTERM, SIGINT and SIGHUP (call it from the main thread)."""
    trace = TraceLog(log)
    stopping = _Stopping()
    # Our handlers stay installed until the agent is reaped: a signal must
    # never find the default action (our death, the agent left running).
    with trio.open_signal_receiver(*_SIGNALS) as signals:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_watch_signals, signals, stopping)
            try:
                status, details = await _run(command, trace, stopping, grace)
            finally:
                nursery.cancel_scope.cancel()
    if stopping.signal is not None:
        details["signal"] = stopping.signal.name
    trace.event("exit", code=status, **details)
    return status


async def _run(
    command: Sequence[str], trace: TraceLog, stopping: _Stopping, grace: float
) -> tuple[int, dict[str, Any]]:
    async with open_stdio_stream() as stdio:
        try:
            # Its own shutdown is the fallback after an error, and stops what
            # the agent left in its group: short waits, as after a signal.
            async with open_agent_process(
                command,
                stderr="inherit",
                shutdown_grace=_HURRIED_STOP_GRACE,
                terminate_grace=_HURRIED_TERM_GRACE,
            ) as agent:
                trace.event("start", command=list(command), pid=agent.pid)
                with stopping.forwarding:
                    await _forward(stdio, agent.stream, trace, grace)
                await _stop_agent(agent.process, agent.stream.send_stream, stopping)
        except OSError as exc:
            print(f"acp_trio trace: cannot start {list(command)}: {exc}", file=sys.stderr)
            return 127, {"error": str(exc)}
        return _exit_status(agent.returncode), {}
