"""A conductor: one agent to the client, a chain of proxies and an agent behind it.

The proxy-chains RFD (Draft; ``proxy/initialize`` and ``proxy/successor`` are
in the unstable schema) puts ``proxy₁ → proxy₂ → … → agent`` between a client
and an agent, each component a process of its own on its own JSON-RPC
connection, with its own id space. The conductor routes between them:

- a message from the client goes to the first component as it is;
- a component's ``proxy/successor`` envelope (``{method, params, _meta}``)
  goes to the next component unwrapped (``params`` unchanged; the envelope's
  ``_meta`` is hop-local and dropped);
- any other message of a component goes *up*: to the client for the first
  one, else to the component before it, wrapped in ``proxy/successor``;
- ``initialize`` sent to a component that has a successor is sent as
  ``proxy/initialize`` (same params and reply).

Every forwarded request is a nested call in the scope of the request that
caused it, so cancellation is per hop and never forwarded as a message: a
``$/cancel_request`` (or a deadline, or a closed connection) cancels the
incoming request's scope, which cancels the forwarded call, which sends
``$/cancel_request`` with *its* id on the next connection; every hop answers
its own request exactly once. A reply or error comes back unchanged; an error
of the conductor's own (the next component exited) is a plain ``-32603``.

With a trace file (``conduct --trace FILE``), every message of every hop is
a JSON line with the hop's number, its peer (``client``, ``proxy N``,
``agent``) and its own ids, and each request the conductor passes on is
linked to the one it came from (``"event": "forward"``), so one request can
be followed through the chain (see :class:`~acp_trio._trace.TraceLog`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import IO, Any, Literal

import attrs
import trio

from acp_trio._core._connection import Connection, ConnectionConfig, Handler
from acp_trio._core._framed import FramedStream
from acp_trio._core._groups import plain_exceptions
from acp_trio._core._open import connect_connection
from acp_trio._core._requests import RequestContext
from acp_trio._exceptions import ConnectionClosed, RequestError
from acp_trio._forward_order import ForwardOrder
from acp_trio._trace import TraceLog
from acp_trio._transports import AgentProcess, open_agent_process
from acp_trio._transports._process import StderrMode

__all__ = ["PROXY_INITIALIZE", "PROXY_SUCCESSOR", "serve_conductor"]

_log = logging.getLogger("acp_trio.conductor")

PROXY_SUCCESSOR = "proxy/successor"
PROXY_INITIALIZE = "proxy/initialize"

# How long a call on a hop whose component died waits for the process's exit
# code before answering without it.
_EXIT_GRACE = 2.0


class _Chain:
    """The connections of one chain: ``hops[0]`` is the client's (the
    conductor plays the agent there), ``hops[1:]`` the components', in
    order, the last being the agent."""

    def __init__(self, size: int, trace: TraceLog | None = None) -> None:
        self.hops: list[Connection | None] = [None] * (size + 1)
        # The components' processes, by hop: for the exit code of one gone.
        self.processes: dict[int, AgentProcess] = {}
        self.ready = trio.Event()
        self.trace = trace

    def peer(self, index: int) -> str:
        """The peer of hop ``index``, as the trace names it."""
        if index == 0:
            return "client"
        return "agent" if index == len(self.hops) - 1 else f"proxy {index}"

    def config(self, index: int, config: ConnectionConfig) -> ConnectionConfig:
        """``config`` for hop ``index``, its frames traced if tracing."""
        trace, outer, peer = self.trace, config.trace, self.peer(index)
        if trace is None:
            return config
        where = {"recv": f"{peer}->conductor", "send": f"conductor->{peer}"}

        def hook(direction: Literal["send", "recv"], frame: bytes) -> None:
            trace.hop_frame(index, peer, where[direction], frame)
            if outer is not None:
                outer(direction, frame)

        return attrs.evolve(config, trace=hook)

    def hop(self, index: int) -> Connection:
        conn = self.hops[index]
        assert conn is not None
        return conn

    def downward(self, index: int, method: str) -> str:
        """The method to send component ``index`` for ``method``."""
        has_successor = index < len(self.hops) - 1
        return PROXY_INITIALIZE if method == "initialize" and has_successor else method

    async def call(
        self,
        index: int,
        method: str,
        params: Any,
        cause: tuple[int, Any],
        sending: Callable[[], None],
    ) -> Any:
        """Call ``method`` on hop ``index`` for the request ``cause`` (hop,
        id) being handled; ``sending()`` is called just before it is sent."""
        if not self.ready.is_set():
            await self.ready.wait()
        conn = self.hop(index)
        try:
            sending()  # no checkpoint from here until the request is queued
            if self.trace is None:
                return await conn.call(method, params)
            async with conn.open_request(method, params) as pending:
                self.trace.event(
                    "forward",
                    method=method,
                    **{"from": {"hop": cause[0], "id": cause[1]}},
                    to={"hop": index, "id": pending.id},
                )
                return await pending.result()
        except RequestError as exc:
            raise exc.passed_on() from None  # the successor's own error, unchanged
        except ConnectionClosed as exc:
            raise await self._gone(index, exc) from None

    async def _gone(self, index: int, exc: ConnectionClosed) -> RequestError:
        """The error for a call whose hop closed: it names the component
        and, once the process has exited, its exit code. A write can fail on
        the broken pipe before the dead process is reaped, so its exit is
        awaited for a moment (bounded) when it is not known yet."""
        what = "the client" if index == 0 else f"chain component {index}"
        exit_code = exc.exit_code
        process = self.processes.get(index)
        if exit_code is None and process is not None:
            with trio.move_on_after(_EXIT_GRACE):
                await process.process.wait()
            exit_code = process.returncode
        status = "" if exit_code is None else f" (exit code {exit_code})"
        return RequestError(-32603, f"{what} is gone: {exc.reason}{status}")

    async def notify(self, index: int, method: str, params: Any) -> None:
        if not self.ready.is_set():
            await self.ready.wait()
        try:
            await self.hop(index).notify(method, params)
        except ConnectionClosed:
            _log.debug("dropped %s: hop %d is gone", method, index)


def _unwrap(params: Any) -> tuple[str, Any]:
    if not isinstance(params, dict) or not isinstance(params.get("method"), str):
        raise RequestError.invalid_params(
            {"reason": "proxy/successor takes {method: string, params?, _meta?}"}
        )
    return params["method"], params.get("params")


def _wrap(method: str, params: Any) -> dict[str, Any]:
    envelope: dict[str, Any] = {"method": method}
    if params is not None:
        envelope["params"] = params
    return envelope


@attrs.define
class _HopHandler(Handler):
    """The messages the conductor receives on hop ``index`` (0: from the
    client; else from component ``index``)."""

    chain: _Chain
    index: int
    order: ForwardOrder = attrs.field(factory=ForwardOrder)

    def _route(self, method: str, params: Any) -> tuple[int, str, Any]:
        """Where a message of this hop goes: (hop, method, params)."""
        last = len(self.chain.hops) - 1
        if self.index == 0:
            return 1, self.chain.downward(1, method), params
        if method == PROXY_SUCCESSOR and self.index < last:
            inner, inner_params = _unwrap(params)
            below = self.index + 1
            return below, self.chain.downward(below, inner), inner_params
        if self.index == 1:
            return 0, method, params  # the first component speaks to the client
        return self.index - 1, PROXY_SUCCESSOR, _wrap(method, params)

    # A notification goes on after the requests read before it (see
    # acp_trio._forward_order): a session/cancel never overtakes its prompt.

    def request_received(self, ctx: RequestContext, params: Any) -> None:
        self.order.received(ctx)

    def request_finished(self, ctx: RequestContext) -> None:
        self.order.finished(ctx)

    def intercept_notification(self, method: str, params: Any) -> bool:
        self.order.notification_read()
        return False

    async def handle_request(self, ctx: RequestContext, method: str, params: Any) -> Any:
        target, out_method, out_params = self._route(method, params)
        return await self.chain.call(
            target,
            out_method,
            out_params,
            (self.index, ctx.id),
            lambda: self.order.sending(ctx),
        )

    async def handle_notification(self, method: str, params: Any) -> None:
        await self.order.before_notification()
        try:
            target, out_method, out_params = self._route(method, params)
        except RequestError as exc:
            _log.warning("dropped a malformed proxy/successor notification: %s", exc)
            return
        await self.chain.notify(target, out_method, out_params)


async def serve_conductor(
    client_stream: trio.abc.Stream | FramedStream,
    components: Sequence[Sequence[str]],
    *,
    config: ConnectionConfig | None = None,
    stderr: StderrMode | logging.Logger = "forward",
    drain_grace: float = 2.0,
    trace: IO[str] | None = None,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve the chain ``components`` (commands: proxies first, the agent
    last) as one agent on ``client_stream``, until the client's connection
    closes; then every component is shut down (stdin closed, then SIGTERM,
    then SIGKILL of its process group; see :func:`open_agent_process`).

    Reports readiness through ``task_status`` once every component is
    running. Raises ``ValueError`` for no components and ``OSError`` if one
    cannot be started. If a component exits, the requests waiting on it are
    answered ``-32603`` (given up to ``drain_grace`` seconds to go out) and
    the chain stops, as when the client leaves.
    Cancelling the caller stops the chain the same way.

    With ``trace`` (a text file open for writing), every hop's messages are
    logged to it as JSON lines, with the hop and its own ids (see the
    module's docstring).
    """
    if not components or any(not command for command in components):
        raise ValueError("a chain needs at least one component, each a non-empty command")
    log = None if trace is None else TraceLog(trace, clock=time.monotonic)
    chain = _Chain(len(components), log)
    config = config or ConnectionConfig()
    with plain_exceptions():
        async with trio.open_nursery() as nursery:
            processes = []
            try:
                for index, command in enumerate(components, start=1):
                    process = await nursery.start(_run_component, command, stderr)
                    processes.append(process)
                    chain.processes[index] = process
                    if log is not None:
                        peer = chain.peer(index)
                        log.event(
                            "start", hop=index, peer=peer, command=list(command), pid=process.pid
                        )
                    hop_config = attrs.evolve(
                        chain.config(index, config), exit_details=process.exit_details
                    )
                    chain.hops[index] = await connect_connection(
                        nursery, process.stream, _HopHandler(chain, index), config=hop_config
                    )
                client = await connect_connection(
                    nursery, client_stream, _HopHandler(chain, 0), config=chain.config(0, config)
                )
                chain.hops[0] = client
                chain.ready.set()
                task_status.started()
                gone = await _until_any_closed(chain)
                if gone != 0:
                    _log.info("chain component %d is gone: stopping the chain", gone)
                    with trio.move_on_after(drain_grace + 1):
                        await _drain_client(chain, drain_grace)
            finally:
                nursery.cancel_scope.cancel()
                if log is not None:
                    log.event("stopping")


async def _until_any_closed(chain: _Chain) -> int:
    """Wait until a hop's connection closes; return its index."""
    closed: list[int] = []
    async with trio.open_nursery() as nursery:
        for index, conn in enumerate(chain.hops):
            assert conn is not None

            async def watch(index: int = index, conn: Connection = conn) -> None:
                await conn.wait_closed()
                closed.append(index)
                nursery.cancel_scope.cancel()

            nursery.start_soon(watch)
    return closed[0]


async def _drain_client(chain: _Chain, grace: float) -> None:
    """After a component is gone: let the client's requests that waited on
    it get their ``-32603`` answers out, then close the client's connection
    (its queued output flushed)."""
    client = chain.hop(0)
    steps = max(1, int(grace / 0.01))
    for _ in range(steps):
        if not client.statistics().incoming_in_flight:
            break
        await trio.sleep(0.01)
    await client.aclose()


async def _run_component(
    command: Sequence[str],
    stderr: StderrMode | logging.Logger,
    task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED,
) -> None:
    async with open_agent_process(command, stderr=stderr) as process:
        task_status.started(process)
        await trio.sleep_forever()
