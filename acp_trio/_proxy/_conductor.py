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

Each hop has its own id space, and cancellation is per hop: a
``$/cancel_request`` (or a closed connection) ends the incoming request,
which sends ``$/cancel_request`` with the forwarded request's *own* id on
the next connection; every hop answers its own request exactly once. A reply
or error comes back unchanged; an error of the conductor's own (the next
component exited) is a plain ``-32603``.

Two ways to do that, with the same outcome on the wire. Unobserved (no
trace, no instrument, no request deadline) the conductor forwards frame by
frame in each hop's reader, a table per hop mapping ids (see
:class:`_Router`): as cheap as one more process on the path gets in Trio,
two task steps per round trip. Observed, every forwarded request is a
nested call in the scope of a handler for the request that caused it (a
``$/cancel_request``, a deadline or a closed connection cancels that scope),
which is what tracing and instruments see.

With a trace file (``conduct --trace FILE``), every message of every hop is
a JSON line with the hop's number, its peer (``client``, ``proxy N``,
``agent``) and its own ids, and each request the conductor passes on is
linked to the one it came from (``"event": "forward"``), so one request can
be followed through the chain (see :class:`~acp_trio._proxy._trace.TraceLog`).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Sequence
from typing import IO, Any, Literal, Protocol

import attrs
import trio

from acp_trio._core._connection import Connection, ConnectionConfig, Handler
from acp_trio._core._framed import FramedStream
from acp_trio._core._groups import plain_exceptions
from acp_trio._core._handler import effective_instrument
from acp_trio._core._open import connect_connection
from acp_trio._core._requests import RequestContext
from acp_trio._exceptions import ConnectionClosed, RequestError
from acp_trio._jsonrpc import (
    CANCEL_REQUEST_METHOD,
    cancel_request_frame,
    cancel_target,
    cancelled_reply_frame,
    decode_frame,
    encode_frame,
    error_response,
    message_kind,
    notification,
)
from acp_trio._jsonrpc._messages import ERROR_REPLY, NOTIFICATION, REQUEST, RESULT
from acp_trio._proxy._forward_order import ForwardOrder
from acp_trio._proxy._trace import TraceLog
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

    def route(self, index: int, method: str, params: Any) -> tuple[int, str, Any]:
        """Where a message read on hop ``index`` goes: (hop, method, params).
        Raises :class:`RequestError` for a malformed ``proxy/successor``."""
        last = len(self.hops) - 1
        if index == 0:
            return 1, self.downward(1, method), params
        if method == PROXY_SUCCESSOR and index < last:
            inner, inner_params = _unwrap(params)
            below = index + 1
            return below, self.downward(below, inner), inner_params
        if index == 1:
            return 0, method, params  # the first component speaks to the client
        return index - 1, PROXY_SUCCESSOR, _wrap(method, params)

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
        return self.chain.route(self.index, method, params)

    # A notification goes on after the requests read before it (see
    # acp_trio._proxy._forward_order): a session/cancel never overtakes its prompt.

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
    router = _Router(chain) if _unobserved(client_stream, config, log) else None
    with plain_exceptions():
        async with trio.open_nursery() as nursery:
            try:
                for index, command in enumerate(components, start=1):
                    process = await nursery.start(_run_component, command, stderr)
                    chain.processes[index] = process
                    if log is not None:
                        peer = chain.peer(index)
                        log.event(
                            "start", hop=index, peer=peer, command=list(command), pid=process.pid
                        )
                    if router is None:
                        hop_config = attrs.evolve(
                            chain.config(index, config), exit_details=process.exit_details
                        )
                        chain.hops[index] = await connect_connection(
                            nursery, process.stream, _HopHandler(chain, index), config=hop_config
                        )
                if router is None:
                    chain.hops[0] = await connect_connection(
                        nursery,
                        client_stream,
                        _HopHandler(chain, 0),
                        config=chain.config(0, config),
                    )
                else:
                    assert not isinstance(client_stream, FramedStream)
                    await _connect_fast(nursery, chain, router, client_stream, config)
                chain.ready.set()
                task_status.started()
                gone = await _until_any_closed(chain)
                if router is not None:
                    error = await chain._gone(gone, chain.hop(gone).closed_error())
                    router.hop_gone(gone, error)
                if gone != 0:
                    _log.info("chain component %d is gone: stopping the chain", gone)
                    with trio.move_on_after(drain_grace + 1):
                        await _drain_client(chain, drain_grace, router)
            finally:
                nursery.cancel_scope.cancel()
                if log is not None:
                    log.event("stopping")


def _unobserved(
    client_stream: trio.abc.Stream | FramedStream, config: ConnectionConfig, log: TraceLog | None
) -> bool:
    """Whether the chain may forward frame by frame (the fast path): nobody
    watches its messages (no trace, no instrument, also none installed for
    every connection), no request has a deadline, and the client's stream
    is a plain one."""
    if log is not None or config.trace is not None or effective_instrument(config) is not None:
        return False
    return config.request_timeout is None and not isinstance(client_stream, FramedStream)


async def _connect_fast(
    nursery: trio.Nursery,
    chain: _Chain,
    router: _Router,
    client_stream: trio.abc.Stream,
    config: ConnectionConfig,
) -> None:
    """Every hop's Connection on a stream that forwards through ``router``
    (the hops' streams all made before any is read)."""
    size = config.max_message_size
    router.hops = [_HopStream(router, 0, client_stream, size)] + [
        _HopStream(router, index, process.stream, size)
        for index, process in sorted(chain.processes.items())
    ]
    for hop in router.hops:
        nursery.start_soon(hop.run_writer, name=f"acp conductor writer {hop.index}")
    for hop in router.hops[1:]:
        hop_config = attrs.evolve(config, exit_details=chain.processes[hop.index].exit_details)
        chain.hops[hop.index] = await connect_connection(nursery, hop, Handler(), config=hop_config)
    chain.hops[0] = await connect_connection(nursery, router.hops[0], Handler(), config=config)


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


async def _drain_client(chain: _Chain, grace: float, router: _Router | None) -> None:
    """After a component is gone: let the client's requests that waited on
    it get their ``-32603`` answers out, then close the client's connection
    (its queued output flushed)."""
    client = chain.hop(0)
    steps = max(1, int(grace / 0.01))
    for _ in range(steps):
        if router is not None:
            if not router.hops[0].taken:
                break
        elif not client.statistics().incoming_in_flight:
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


# ----------------------------------------------------------------------
# The fast path: forwarding frame by frame, in the reader.
#
# A chain that nobody observes (no trace file, no instrument, no per-request
# timeout) forwards in each hop's reader: a frame read is decoded, its id
# replaced by one of the next hop's own (a request) or by the one it answers
# (a reply), and written at once, with no task per request and no handler.
# What the per-request tasks gave is kept by tables: each hop maps the ids of
# the requests it passed on to (hop, id) on the other side, so a
# ``$/cancel_request`` is passed on as a ``$/cancel_request`` of the next
# hop's own id (and answered ``-32800`` at once, as a cancelled handler
# would), a late answer is dropped, and a component that goes answers every
# request waiting on it with ``-32603``. Frames are handled in the order
# read, so a notification never overtakes a request read before it, nor
# the other way round. Anything that is not a well-formed message goes to
# the hop's Connection as before (which answers it as every connection
# does), as does the hop's closing.

# At most this many writes wait for a hop's writer (its peer reads slower
# than we forward) before the reader that forwarded the last one waits too.
_FORWARD_LIMIT = 1024
# Ids of cancelled requests whose late answers are dropped quietly.
_LATE_ANSWERS = 4096


def _send_fd(stream: trio.abc.SendStream) -> int | None:
    if isinstance(stream, trio.StapledStream):
        stream = stream.send_stream
    if isinstance(stream, trio.lowlevel.FdStream):
        return stream.fileno()
    return None


class _Routing(Protocol):
    def route(self, hop: _HopStream, frame: bytes) -> _HopStream | None:
        """Pass ``frame``, read on ``hop``, on: the hop written to, or
        ``None`` for a frame the hop's Connection must handle."""


class _HopStream(FramedStream):
    """One hop's stream, read through the router: the frames it forwards
    never reach the hop's Connection. Every write, the router's and the
    Connection's, goes through :meth:`write`, in order: at once while
    nothing waits (a non-blocking write on a pipe), else queued for the
    hop's writer task (:meth:`run_writer`)."""

    def __init__(
        self,
        router: _Routing,
        index: int,
        stream: trio.abc.Stream,
        max_message_size: int,
    ) -> None:
        super().__init__(stream, stream, max_message_size=max_message_size)
        self.router = router
        self.index = index
        self.connection: Connection | None = None
        #: Requests we sent on this hop: our id -> (hop, id) it came from.
        self.calls: dict[int, tuple[_HopStream, Any]] = {}
        #: Requests read on this hop and passed on: id -> (hop, our id there).
        self.taken: dict[Any, tuple[_HopStream, int]] = {}
        #: Our ids of requests cancelled here (their late answers are dropped).
        self.cancelled: set[int] = set()
        #: The answer to a request bound here once the hop is gone.
        self.gone: RequestError | None = None
        self._next_id = 0
        self._out = stream
        self._fd = _send_fd(stream)
        self._queued: list[bytes] = []
        self._writing = False
        self._broken = False
        self._writer = trio.lowlevel.ParkingLot()
        self._idle = trio.lowlevel.ParkingLot()

    def next_id(self) -> int:
        self._next_id += 1
        return self._next_id

    # -- reading

    async def receive_frame(self) -> bytes | Any:
        route = self.router.route
        while True:
            frame = await FramedStream.receive_frame(self)
            if type(frame) is not bytes:
                return frame  # the end, or an oversized frame: the Connection's
            target = route(self, frame)
            if target is None:
                return frame
            if len(target._queued) >= _FORWARD_LIMIT:
                await target.drained()

    # -- writing

    def write(self, data: bytes) -> None:
        """Write ``data`` (whole frames) after everything written before."""
        if self._broken:
            return
        if not self._queued and not self._writing and self._fd is not None:
            try:
                written = os.write(self._fd, data)
            except BlockingIOError:
                written = 0
            except OSError as exc:
                self._broke(exc)
                return
            if written == len(data):
                return
            data = data[written:]
        self._queued.append(data)
        self._writer.unpark()

    def _broke(self, exc: BaseException) -> None:
        _log.debug("hop %d: writing failed: %r", self.index, exc)
        self._broken = True
        self._queued.clear()
        self._idle.unpark_all()
        # A reader waiting on a pipe whose other end is gone learns it now.
        self.interrupt_reading()

    async def drained(self) -> None:
        """Wait until everything written so far is out (or writing failed)."""
        while (self._queued or self._writing) and not self._broken:
            await self._idle.park()

    async def run_writer(self) -> None:
        """Write what :meth:`write` could not, in order, until cancelled."""
        while True:
            while not self._queued:
                if self._broken:
                    return
                await self._writer.park()
            await self._write_queued()

    async def _write_queued(self) -> None:
        data = b"".join(self._queued)
        self._queued.clear()
        self._writing = True
        try:
            await self._out.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            self._broke(exc)
        finally:
            self._writing = False
            if not self._queued:
                self._idle.unpark_all()

    # The Connection's own frames (its answers to malformed ones) take the
    # same way out.

    def direct_writer(self) -> Callable[[bytes], int] | None:
        return self._write_all

    def _write_all(self, data: bytes) -> int:
        self.write(data)
        return len(data)

    async def send_frames(self, data: bytes) -> None:
        # Taken at once (the frames keep their place among the router's), so
        # that frames wait in the Connection's own queue only while this one
        # is full.
        self.write(data)
        if len(self._queued) >= _FORWARD_LIMIT:
            await self.drained()
        else:
            await trio.lowlevel.checkpoint()

    async def send_batch(self, frames: list[bytes]) -> None:
        await self.send_frames(b"".join(frames))

    async def aclose(self) -> None:
        # What is queued goes out first (the Connection bounds this with its
        # close timeout), written here if the writer task is gone.
        try:
            while not self._broken:
                if self._writing:
                    await self._idle.park()
                elif self._queued:
                    await self._write_queued()
                else:
                    break
        finally:
            self._broken = True
            self._writer.unpark_all()
            await super().aclose()


class _Router:
    """The fast path's routing, one object per chain (see above)."""

    def __init__(self, chain: _Chain) -> None:
        self.chain = chain
        self.hops: list[_HopStream] = []

    def route(self, hop: _HopStream, frame: bytes) -> _HopStream | None:
        """Pass ``frame``, read on ``hop``, on. Returns the hop written to
        (``hop`` itself for an answer of our own), or ``None`` for a frame
        the hop's Connection must handle."""
        value = decode_frame(frame)
        kind = message_kind(value)
        if kind in (RESULT, ERROR_REPLY):
            request_id = value["id"]
            call = hop.calls.pop(request_id, None) if type(request_id) is int else None
            if call is None:
                if type(request_id) is int and request_id in hop.cancelled:
                    hop.cancelled.discard(request_id)  # the answer to a cancelled one
                    return hop
                return None
            source, source_id = call
            del source.taken[source_id]
            value["id"] = source_id
            source.write(encode_frame(value))
            return source
        if kind == REQUEST:
            return self._request(hop, value["id"], value["method"], value.get("params"))
        if kind == NOTIFICATION:
            method, params = value["method"], value.get("params")
            if method == CANCEL_REQUEST_METHOD:
                self._cancel(hop, params)
                return hop
            try:
                index, out_method, out_params = self.chain.route(hop.index, method, params)
            except RequestError as exc:
                _log.warning("dropped a malformed proxy/successor notification: %s", exc)
                return hop
            target = self.hops[index]
            target.write(encode_frame(notification(out_method, out_params)))
            return target
        return None

    def _request(
        self, hop: _HopStream, request_id: Any, method: str, params: Any
    ) -> _HopStream | None:
        if request_id in hop.taken:
            error = RequestError.invalid_request(f"request id {request_id!r} is already in use")
            hop.write(encode_frame(error_response(request_id, error)))
            return hop
        try:
            index, out_method, out_params = self.chain.route(hop.index, method, params)
        except RequestError as exc:
            hop.write(encode_frame(error_response(request_id, exc)))
            return hop
        target = self.hops[index]
        if target.gone is not None:
            hop.write(encode_frame(error_response(request_id, target.gone)))
            return hop
        # Registered even on a hop that is closing: once its error is known
        # (hop_gone), every request waiting on it is answered with it.
        target._next_id = out_id = target._next_id + 1
        target.calls[out_id] = (hop, request_id)
        hop.taken[request_id] = (target, out_id)
        out: dict[str, Any] = {"jsonrpc": "2.0", "id": out_id, "method": out_method}
        if out_params is not None:
            out["params"] = out_params
        target.write(encode_frame(out))
        return target

    def _cancel(self, hop: _HopStream, params: Any) -> None:
        """``$/cancel_request`` of a request read on ``hop``: cancelled on
        the hop it went to, with that hop's id, and answered ``-32800``."""
        ok, request_id = cancel_target(params)
        taken = hop.taken.pop(request_id, None) if ok else None
        if taken is None:
            return  # not in flight (answered already): ignored
        target, out_id = taken
        if target.calls.pop(out_id, None) is not None:
            if len(target.cancelled) >= _LATE_ANSWERS:
                target.cancelled.clear()
            target.cancelled.add(out_id)
            target.write(cancel_request_frame(out_id))
        hop.write(cancelled_reply_frame(request_id))

    def hop_gone(self, index: int, error: RequestError) -> None:
        """Hop ``index`` closed: the requests waiting on it get ``error``,
        and those it made are cancelled where they went."""
        hop = self.hops[index]
        hop.gone = error
        for source, source_id in hop.calls.values():
            if source.taken.pop(source_id, None) is not None:
                source.write(encode_frame(error_response(source_id, error)))
        hop.calls.clear()
        for target, out_id in hop.taken.values():
            if target.calls.pop(out_id, None) is not None:
                target.cancelled.add(out_id)
                target.write(cancel_request_frame(out_id))
        hop.taken.clear()
