"""The typed ACP v2 client side: subclass :class:`Client`, talk to an agent
through :class:`AgentProxy`.

:meth:`AgentProxy.prompt` is a whole turn: it sends ``session/prompt``,
waits for the answer (the prompt inserted, its ``messageId``), then for the
turn's ``state_update: idle``, and returns a :class:`TurnResult`. Cancelling
it (or its deadline passing) sends ``session/cancel`` for the session.
:meth:`AgentProxy.send_prompt` only sends the request.
"""

from __future__ import annotations

import logging
import os
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager, suppress
from typing import Any, Literal, overload

import attrs
import trio

from acp_trio._core._connection import Connection, ConnectionConfig
from acp_trio._core._framed import FramedStream
from acp_trio._core._groups import plain_exceptions
from acp_trio._core._open import open_connection
from acp_trio._core._requests import PendingRequest
from acp_trio._exceptions import (
    ACPError,
    ConnectionClosed,
    RequestError,
    UnsupportedProtocolVersion,
)
from acp_trio._public import NoPublicConstructor
from acp_trio._transports._process import open_agent_process, with_telemetry
from acp_trio._typed._dispatch import (
    Extensible,
    ProxyBase,
    Route,
    TypedHandler,
    adopt_hook_docs,
    one_connection,
)
from acp_trio._version import __version__
from acp_trio.schema import SchemaConverter
from acp_trio.schema._runtime import build_params
from acp_trio.schema.v2 import (
    PROTOCOL_VERSION,
    CancelSessionNotification,
    ClientCapabilities,
    CompleteElicitationNotification,
    ContentBlock,
    CreateElicitationRequest,
    CreateElicitationResponse,
    Error,
    IdleStateUpdate,
    Implementation,
    InitializeRequest,
    InitializeResponse,
    PromptRequest,
    PromptResponse,
    RequestPermissionRequest,
    RequestPermissionResponse,
    SessionId,
    UpdateSessionNotification,
    UserMessage,
    UserMessageChunk,
    converter,
)
from acp_trio.v2._generated_proxies import AgentProxyMethods

__all__ = ["AgentProxy", "Client", "TurnResult", "open_spawned_agent", "open_agent"]

_log = logging.getLogger("acp_trio.v2.client")

#: The ``info`` a v2 client sends unless told otherwise.
DEFAULT_INFO = Implementation(name="acp_trio", version=__version__)

# How many ended turns a session remembers (an idle can be read before the
# prompt's answer that names its message).
_REMEMBERED_TURNS = 64


@attrs.frozen
class TurnResult:
    """How a turn ended: its user message's id, the idle stop reason
    (``end_turn``, ``cancelled``, ``error``, ...; ``None`` if the agent gave
    none) and, for ``error``, the error it reported."""

    message_id: str
    stop_reason: str | None
    error: Error | None = None


class _Turns:
    """The client's view of each session's turns, from its updates in wire
    order: which user message the running turn is, and how ended ones ended."""

    def __init__(self) -> None:
        self._current: dict[str, str] = {}
        self._ended: dict[str, OrderedDict[str, IdleStateUpdate]] = {}
        self._waiters: dict[tuple[str, str], trio.Event] = {}
        self._closed: Callable[[], ConnectionClosed] | None = None
        # The turns a cancelled prompt() left running: (session, message) ->
        # the time by which their idle is due (the grace).
        self._cancelled: dict[tuple[str, str], float] = {}
        # Cancelled prompts not answered yet (their turn's id unknown).
        self._accepting: dict[PendingRequest, float] = {}
        self._accepting_changed = trio.Event()
        #: The block is being left: updates are no longer handed on.
        self.leaving = False

    def close(self, error: Callable[[], ConnectionClosed]) -> None:
        """The connection is closed: wake every waiter, to raise ``error()``."""
        self._closed = error
        self._cancelled.clear()
        self._accepting.clear()
        self._wake_accepting()
        for event in self._waiters.values():
            event.set()
        self._waiters.clear()

    def cancelled(
        self, session_id: str, pending: PendingRequest, message_id: str | None, grace: float
    ) -> None:
        """A prompt() was cancelled: its turn (``message_id``, or whatever
        id the still pending ``pending`` is answered with) has ``grace``
        seconds to go idle; leaving the block waits that long for it."""
        if self._closed is not None:
            return
        deadline = trio.current_time() + grace
        if message_id is not None:
            self._cancel_due(session_id, message_id, deadline)
            return

        def accepted() -> None:
            # (Also at once, for an answer in that the call had not taken:
            # cancelled while the updates before it were being handled.)
            self._accepting.pop(pending, None)
            with suppress(ACPError, trio.WouldBlock):
                raw = pending.result_nowait()
                if isinstance(raw, dict) and isinstance(raw.get("messageId"), str):
                    self._cancel_due(session_id, raw["messageId"], deadline)
            self._wake_accepting()

        if not pending.done:
            self._accepting[pending] = deadline
        pending.add_done_callback(accepted)

    def _cancel_due(self, session_id: str, message_id: str, deadline: float) -> None:
        if message_id not in self._ended.get(session_id, ()):
            self._cancelled[(session_id, message_id)] = deadline

    def _wake_accepting(self) -> None:
        self._accepting_changed.set()
        self._accepting_changed = trio.Event()

    async def wind_down(self) -> None:
        """Until each cancelled turn has been accepted and gone idle, or its
        grace has passed (then it is left, with a warning). The updates read
        meanwhile are not handed to the application."""
        self.leaving = True
        while self._accepting and self._closed is None:
            deadline = min(self._accepting.values())
            with trio.move_on_at(deadline):
                await self._accepting_changed.wait()
            now = trio.current_time()
            for pending, due in list(self._accepting.items()):
                if due <= now:
                    del self._accepting[pending]
                    _log.warning(
                        "the cancelled session/prompt request %s was not even answered "
                        "within its grace; leaving it",
                        pending.id,
                    )
        while self._cancelled and self._closed is None:
            key, deadline = next(iter(self._cancelled.items()))
            event = self._waiters.setdefault(key, trio.Event())
            with trio.move_on_at(deadline):
                await event.wait()
            if self._cancelled.pop(key, None) is not None:
                self._waiters.pop(key, None)
                _log.warning(
                    "session %r: the cancelled turn of message %r did not end (no idle "
                    "state) within its grace; leaving it",
                    *key,
                )

    def saw(self, params: UpdateSessionNotification) -> None:
        update = params.update
        session_id = params.session_id
        if isinstance(update, UserMessage | UserMessageChunk):
            self._current[session_id] = update.message_id
        elif isinstance(update, IdleStateUpdate) and update.stop_reason is not None:
            message_id = self._current.pop(session_id, None)
            if message_id is None:
                return
            ended = self._ended.setdefault(session_id, OrderedDict())
            ended[message_id] = update
            while len(ended) > _REMEMBERED_TURNS:
                ended.popitem(last=False)
            self._cancelled.pop((session_id, message_id), None)
            waiter = self._waiters.pop((session_id, message_id), None)
            if waiter is not None:
                waiter.set()

    async def wait(self, session_id: str, message_id: str) -> IdleStateUpdate:
        """The idle that ended the turn of ``message_id``; raises
        :class:`ConnectionClosed` if the connection closes before it."""
        ended = self._ended.setdefault(session_id, OrderedDict())
        if message_id not in ended and self._closed is None:
            event = self._waiters.setdefault((session_id, message_id), trio.Event())
            try:
                await event.wait()
            finally:
                self._waiters.pop((session_id, message_id), None)
        if message_id not in ended:
            assert self._closed is not None
            raise self._closed()
        return ended.pop(message_id)


@adopt_hook_docs
class AgentProxy(AgentProxyMethods, ProxyBase, metaclass=NoPublicConstructor):
    """Typed v2 calls from the client to its agent. Each method takes the
    params object or its fields (required ones positional, ``session_id``
    first; the rest as keywords). :meth:`prompt` is a whole turn;
    :meth:`send_prompt` only the request."""

    def __init__(self, connection: Connection, schema_converter: SchemaConverter) -> None:
        super().__init__(connection, schema_converter)
        self.turns = _Turns()
        #: The agent's ``initialize`` answer, once there is one.
        self.initialized: InitializeResponse | None = None
        #: Seconds a turn whose :meth:`prompt` was cancelled has to reach its
        #: ``idle`` state: leaving :func:`open_agent` waits that long for it
        #: (shielded) before closing the connection.
        self.cancel_grace: float = 5.0

    async def _send_initialize(self, params: InitializeRequest) -> InitializeResponse:
        """``info`` defaults to acp_trio's. Raises
        :class:`~acp_trio.UnsupportedProtocolVersion` (and closes the
        connection) if the agent answers another version than 2 (see
        :func:`acp_trio.v2.open_any_agent` to fall back to v1)."""
        # The keyword form's default for the required ``info`` is None.
        info: Implementation | None = params.info
        if info is None:
            params = attrs.evolve(params, info=DEFAULT_INFO)
        raw = await self.connection.call("initialize", self.converter.unstructure(params))
        answered = raw.get("protocolVersion") if isinstance(raw, dict) else None
        if answered != PROTOCOL_VERSION:
            # Checked before the shape: a v1 answer has no ``info``.
            self.connection.close_soon()
            version = answered if isinstance(answered, int) else -1
            raise UnsupportedProtocolVersion(version, PROTOCOL_VERSION)
        result: InitializeResponse = self._structure_result("initialize", raw, InitializeResponse)
        self.initialized = result
        return result

    @overload
    async def prompt(self, params: PromptRequest, /) -> TurnResult: ...
    @overload
    async def prompt(
        self,
        session_id: SessionId,
        prompt: Sequence[ContentBlock],
        *,
        meta: dict[str, Any] | None = ...,
    ) -> TurnResult: ...
    async def prompt(self, *args: Any, **kwargs: Any) -> TurnResult:
        """A whole turn (``session_id``, ``prompt``): send ``session/prompt``
        and wait for the turn's ``idle`` state. Cancelling the call (a
        deadline, a cancel scope) sends ``session/cancel`` for the session
        at once, then lets the cancellation go on; leaving
        :func:`open_agent` then gives that turn :attr:`cancel_grace` seconds
        to go idle before the connection closes. Raises :class:`RequestError` if the
        prompt was refused (``-32800`` if cancelled before it was inserted),
        :class:`~acp_trio.ConnectionClosed` if the connection closes before
        the turn's ``idle``."""
        params = build_params(
            PromptRequest, "prompt", ("session_id", "prompt"), ("prompt",), args, kwargs, None
        )
        # Sent, not called: a cancel while the prompt waits to be accepted
        # sends session/cancel first, as for a turn already running (which
        # it may be: the agent may have started it before answering).
        pending = await self.connection.send_request(
            "session/prompt", self.converter.unstructure(params)
        )
        message_id: str | None = None
        try:
            raw = await pending.result()
            accepted: PromptResponse = self._structure_result("session/prompt", raw, PromptResponse)
            message_id = accepted.message_id
            idle = await self.turns.wait(params.session_id, message_id)
        except trio.Cancelled:
            # Queued at once, past the output limit: never lost to this
            # cancellation, never waiting for room.
            cancel = self.converter.unstructure(
                CancelSessionNotification(session_id=params.session_id)
            )
            self.connection.notify_past_limit_nowait("session/cancel", cancel)
            self.turns.cancelled(params.session_id, pending, message_id, self.cancel_grace)
            raise
        return TurnResult(accepted.message_id, idle.stop_reason, idle.error)


def _not_found(method: str) -> RequestError:
    return RequestError.method_not_found(method)


class Client(Extensible):
    """Base class of an ACP v2 client: override what you handle.

    :attr:`agent` is the proxy to the agent of the one connection this
    object is on. Session updates go to :meth:`session_update` in wire
    order (fold them with :class:`acp_trio.contrib.v2.SessionAccumulator`).
    """

    agent: AgentProxy

    async def session_update(self, params: UpdateSessionNotification) -> None:
        """``session/update``: one upsert, chunk or state. Default: ignore.
        Runs in wire order in the notification consumer, which only the
        connection closing cancels."""

    async def request_permission(
        self, params: RequestPermissionRequest
    ) -> RequestPermissionResponse:
        """``session/request_permission``. Default: ``-32601``. ``$/cancel_request`` cancels it (let
        ``trio.Cancelled`` propagate: ``-32800`` is answered)."""
        raise _not_found("session/request_permission")

    async def create_elicitation(
        self, params: CreateElicitationRequest
    ) -> CreateElicitationResponse:
        """``elicitation/create``. Default: ``-32601``. ``$/cancel_request`` cancels it (let
        ``trio.Cancelled`` propagate: ``-32800`` is answered)."""
        raise _not_found("elicitation/create")

    async def complete_elicitation(self, params: CompleteElicitationNotification) -> None:
        """``elicitation/complete``. Default: ignore. Runs in the notification
        consumer, which only the connection closing cancels."""

    async def ext_method(self, method: str, params: Any) -> Any:
        """An extension request no added handler takes. Default: ``-32601``. ``$/cancel_request``
        cancels it (let ``trio.Cancelled`` propagate: ``-32800`` is answered)."""
        raise _not_found(method)

    async def ext_notification(self, method: str, params: Any) -> None:
        """An extension notification no added handler takes; ignored. Runs in
        the notification consumer, which only the connection closing cancels."""

    def capabilities(self) -> ClientCapabilities:
        """The capabilities :func:`open_agent` sends in ``initialize``."""
        return ClientCapabilities()


class _ClientHandler(TypedHandler):
    def __init__(self, client: Client, proxy: AgentProxy) -> None:
        self.client = client
        self.proxy = proxy
        requests = {
            "session/request_permission": Route(
                RequestPermissionRequest, client.request_permission
            ),
            "elicitation/create": Route(CreateElicitationRequest, client.create_elicitation),
        }
        notifications = {
            "session/update": Route(UpdateSessionNotification, self._session_update),
            "elicitation/complete": Route(
                CompleteElicitationNotification, client.complete_elicitation
            ),
        }
        super().__init__(
            requests,
            notifications,
            client.ext_method,
            client.ext_notification,
            client._extension_handlers(),
            schema_converter=proxy.converter,
        )

    async def _session_update(self, params: UpdateSessionNotification) -> None:
        self.proxy.turns.saw(params)
        # Leaving drops the updates not handled yet (as closing does): the
        # wind-down reads on only for the cancelled turns' idle states.
        if not self.proxy.turns.leaving:
            await self.client.session_update(params)


@asynccontextmanager
async def open_agent(
    client: Client,
    stream: trio.abc.Stream | FramedStream,
    *,
    config: ConnectionConfig | None = None,
    schema_converter: SchemaConverter = converter,
    cancel_grace: float = 5.0,
) -> AsyncIterator[AgentProxy]:
    """Talk v2 to an agent on ``stream`` for the block; yields the proxy
    (also at ``client.agent``). Call :meth:`AgentProxy.initialize` first.
    Leaving the block, also by an exception or a cancellation, first gives
    each turn a cancelled :meth:`AgentProxy.prompt` left running
    ``cancel_grace`` seconds to go idle (shielded), then closes the
    connection: pending calls fail with :class:`~acp_trio.ConnectionClosed`."""

    def make(connection: Connection) -> _ClientHandler:
        proxy = AgentProxy._create(connection, schema_converter)
        client.agent = proxy
        return _ClientHandler(client, proxy)

    if not isinstance(client, Client):
        raise TypeError(
            f"open_agent takes your v2 Client (the agent is at the other end of the "
            f"stream), got {client!r}; an Agent is served with "
            f"acp_trio.v2.open_client(agent, stream) or acp_trio.v2.serve_agent(agent, stream)"
        )
    if isinstance(cancel_grace, bool) or not isinstance(cancel_grace, int | float):
        raise ValueError(f"cancel_grace must be a number of seconds, not {cancel_grace!r}")
    if not cancel_grace >= 0:
        raise ValueError(f"cancel_grace must be a number of seconds >= 0, not {cancel_grace!r}")
    error = f"this {type(client).__name__} object is already connected to an agent"
    with one_connection(client, error), plain_exceptions():
        async with trio.open_nursery() as nursery:
            async with open_connection(stream, make, config=config) as connection:
                agent = client.agent
                agent.cancel_grace = cancel_grace
                nursery.start_soon(_end_turns_on_close, connection, agent)
                try:
                    yield agent
                finally:
                    with trio.CancelScope(shield=True):
                        await agent.turns.wind_down()
            nursery.cancel_scope.cancel()


async def _end_turns_on_close(connection: Connection, proxy: AgentProxy) -> None:
    # A prompt waiting for an idle that can no longer come gets
    # ConnectionClosed. Shielded: the block's own cleanup may still wait for
    # an idle when the scope around it is cancelled (the connection closes
    # when the block is left, and this ends with it).
    with trio.CancelScope(shield=True):
        await connection.wait_closed()
    proxy.turns.close(connection.closed_error)


@asynccontextmanager
async def open_spawned_agent(
    client: Client,
    command: Sequence[str],
    *,
    cwd: str | os.PathLike[str] | None = None,
    env: dict[str, str] | None = None,
    config: ConnectionConfig | None = None,
    stderr: Literal["forward", "capture"] = "forward",
    telemetry: Mapping[str, str] | None = None,
    cancel_grace: float = 5.0,
    shutdown_grace: float = 2.0,
    terminate_grace: float = 2.0,
) -> AsyncIterator[AgentProxy]:
    """Spawn the agent ``command`` and talk v2 to it over its stdio (see
    :func:`acp_trio.open_agent` over a spawned process); call :meth:`AgentProxy.initialize`
    first. Leaving the block, also by an exception or a cancellation, gives
    cancelled turns ``cancel_grace`` seconds to go idle, closes the
    connection, then stops and reaps the process (shielded, bounded: stdin
    closed, ``shutdown_grace``, SIGTERM, ``terminate_grace``, SIGKILL); its
    stderr is forwarded to its last line.
    ``telemetry``: ``OTEL_*`` settings added to its environment unless already set
    there (as :func:`acp_trio.open_spawned_agent`)."""
    agent_env = with_telemetry(env, telemetry)
    async with open_agent_process(
        command,
        cwd=cwd,
        env=agent_env,
        stderr=stderr,
        shutdown_grace=shutdown_grace,
        terminate_grace=terminate_grace,
    ) as process:
        config = attrs.evolve(config or ConnectionConfig(), exit_details=process.exit_details)
        async with open_agent(
            client, process.stream, config=config, cancel_grace=cancel_grace
        ) as agent:
            yield agent
