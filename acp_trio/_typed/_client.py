"""The typed client side: subclass :class:`Client`, connect to an agent.

Each agent→client method of ACP v1 is one async method of :class:`Client`
taking its schema params class. The defaults answer ``-32601`` for requests
and ignore notifications.

:class:`AgentProxy` is what the client calls. :meth:`AgentProxy.initialize`
negotiates the protocol version (an agent answering one we do not speak
raises :class:`UnsupportedProtocolVersion` and the connection is closed) and
records the agent's capabilities; calls the agent did not advertise
(``session/load``, ``session/list``, ``session/resume``, ``session/close``,
``session/delete``, ``logout``) raise :class:`CapabilityError` without
sending anything, and every call made before ``initialize`` raises
:class:`LocalProtocolError`.

``session/cancel`` is built in: :meth:`AgentProxy.cancel` sends it, and
every ``session/request_permission`` of that session that is pending (or
arrives before the cancelled prompt is answered) is answered with the
``cancelled`` outcome by the SDK; an answer the application gives later is
not sent. The local cancel decides the answer at once: a ``$/cancel_request``
for the same request read after it (the agent's reaction to this cancel)
does not turn the answer into ``-32800``.

A cancelled :meth:`AgentProxy.prompt` (a deadline, a scope, an enclosing
request's cancel) is a ``session/cancel`` too, sent from the cancelled call
without waiting; the turn then climbs the cancel ladder (``_turn.py``:
``$/cancel_request`` after :attr:`AgentProxy.cancel_grace`, abandoned after
:attr:`AgentProxy.escalation_grace` more), and the session's next prompt
goes out once it has ended. :meth:`AgentProxy.cancel_turn` cancels and
waits for that end. Leaving :func:`open_agent` lets cancelled turns end
before the connection closes (``docs/how-a-turn-ends.md``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, Final

import attrs
import trio

from acp_trio._core._connection import Connection, ConnectionConfig
from acp_trio._core._framed import FramedStream
from acp_trio._core._message_stream import MessageStream
from acp_trio._core._open import open_connection
from acp_trio._core._requests import RequestContext, current_request
from acp_trio._exceptions import (
    RequestError,
)
from acp_trio._transports._process import StderrMode, open_agent_process, with_telemetry
from acp_trio._typed._agent_proxy import AgentProxy
from acp_trio._typed._dispatch import (
    Extensible,
    Route,
    SessionScopes,
    TypedHandler,
    implemented,
    one_connection,
)
from acp_trio._typed._early_updates import EarlyUpdates
from acp_trio._typed._turn import AbandonPolicy, TurnBook
from acp_trio.schema import (
    METHODS,
    ClientCapabilities,
    CompleteElicitationNotification,
    CreateElicitationRequest,
    CreateElicitationResponse,
    CreateTerminalRequest,
    CreateTerminalResponse,
    ElicitationCapabilities,
    ElicitationFormCapabilities,
    ElicitationUrlCapabilities,
    FileSystemCapabilities,
    KillTerminalRequest,
    KillTerminalResponse,
    ReadTextFileRequest,
    ReadTextFileResponse,
    ReleaseTerminalRequest,
    ReleaseTerminalResponse,
    RequestPermissionOutcomeCancelled,
    RequestPermissionRequest,
    RequestPermissionResponse,
    SchemaConverter,
    SessionNotification,
    TerminalOutputRequest,
    TerminalOutputResponse,
    WaitForTerminalExitRequest,
    WaitForTerminalExitResponse,
    WriteTextFileRequest,
    WriteTextFileResponse,
    converter,
)
from acp_trio.schema._generated_proxies import CLIENT_METHOD_NAMES

__all__ = ["CLIENT_METHODS", "AgentProxy", "Client", "open_agent", "open_spawned_agent"]

#: Wire name -> :class:`Client` method name, for every method a client handles.
CLIENT_METHODS: Final[dict[str, str]] = dict(CLIENT_METHOD_NAMES)

_CANCELLED = RequestPermissionResponse(outcome=RequestPermissionOutcomeCancelled())


def _not_found(method: str) -> RequestError:
    return RequestError.method_not_found(method)


_TERMINAL_METHODS: Final = (
    "create_terminal",
    "terminal_output",
    "wait_for_terminal_exit",
    "kill_terminal",
    "release_terminal",
)


def _implemented_capabilities(client: Client) -> ClientCapabilities:
    """The client capabilities ``client`` serves: the ``fs`` methods its
    class overrides (itself or through :class:`WorkspaceFilesMixin`),
    ``terminal`` if it overrides all five ``terminal/*`` methods (as
    :class:`TerminalsMixin` does), and both elicitation modes if it
    overrides :meth:`Client.create_elicitation`: what
    :meth:`AgentProxy.initialize` advertises unless told otherwise."""
    fs = FileSystemCapabilities(
        read_text_file=implemented(client, Client, "read_text_file"),
        write_text_file=implemented(client, Client, "write_text_file"),
    )
    terminal = all(implemented(client, Client, attr) for attr in _TERMINAL_METHODS)
    elicitation = None
    if implemented(client, Client, "create_elicitation"):
        elicitation = ElicitationCapabilities(
            form=ElicitationFormCapabilities(), url=ElicitationUrlCapabilities()
        )
    return ClientCapabilities(fs=fs, terminal=terminal, elicitation=elicitation)


# The value of an InitializeRequest made without client_capabilities.


class Client(Extensible):
    """Base class of an ACP client: override what you handle.

    :attr:`agent` is set by the SDK when the connection opens: the proxy to
    the agent of the one connection this object is on (make one client
    object per connection).
    """

    agent: AgentProxy

    async def session_update(self, params: SessionNotification) -> None:
        """``session/update``: streamed output of a session (message chunks, tool
        calls, plan, ...), in wire order. Ignored by default.

        A notification: nothing is answered, and an exception is logged, not
        sent. It runs in the connection's notification consumer, which only the
        connection closing cancels; while it runs, later notifications wait.
        """

    async def request_permission(
        self, params: RequestPermissionRequest
    ) -> RequestPermissionResponse:
        """``session/request_permission``: ask the user whether the agent may run
        a tool call, and answer the option chosen.

        Default: ``-32601`` (method not found). A :class:`~acp_trio.RequestError`
        raised is answered.
        When the application cancels the turn (``session/cancel``, e.g.
        :meth:`AgentProxy.cancel_turn`), the SDK cancels this call and answers
        ``outcome: cancelled`` itself; a late answer is refused.
        ``$/cancel_request`` or the connection closing cancels it (let
        ``trio.Cancelled`` propagate: ``-32800`` is answered).
        """
        raise _not_found("session/request_permission")

    async def read_text_file(self, params: ReadTextFileRequest) -> ReadTextFileResponse:
        """``fs/read_text_file``: answer a text file's content (``line`` and
        ``limit`` select lines). :class:`~acp_trio.contrib.WorkspaceFilesMixin` serves it
        safely from a workspace.

        Default: ``-32601`` (method not found). A :class:`~acp_trio.RequestError`
        raised is answered.
        ``$/cancel_request`` or the connection closing cancels it (let
        ``trio.Cancelled`` propagate: ``-32800`` is answered).
        """
        raise _not_found("fs/read_text_file")

    async def write_text_file(self, params: WriteTextFileRequest) -> WriteTextFileResponse | None:
        """``fs/write_text_file``: write a text file. :class:`~acp_trio.contrib.WorkspaceFilesMixin`
        serves it safely into a workspace.

        Default: ``-32601`` (method not found). A :class:`~acp_trio.RequestError`
        raised is answered.
        ``$/cancel_request`` or the connection closing cancels it (let
        ``trio.Cancelled`` propagate: ``-32800`` is answered).
        """
        raise _not_found("fs/write_text_file")

    async def create_terminal(self, params: CreateTerminalRequest) -> CreateTerminalResponse:
        """``terminal/create``: start a command and answer its terminal id.
        :class:`~acp_trio.contrib.TerminalsMixin` serves the terminal methods safely.

        Default: ``-32601`` (method not found). A :class:`~acp_trio.RequestError`
        raised is answered.
        ``$/cancel_request`` or the connection closing cancels it (let
        ``trio.Cancelled`` propagate: ``-32800`` is answered).
        """
        raise _not_found("terminal/create")

    async def terminal_output(self, params: TerminalOutputRequest) -> TerminalOutputResponse:
        """``terminal/output``: a terminal's output so far and its exit status.

        Default: ``-32601`` (method not found). A :class:`~acp_trio.RequestError`
        raised is answered.
        ``$/cancel_request`` or the connection closing cancels it (let
        ``trio.Cancelled`` propagate: ``-32800`` is answered).
        """
        raise _not_found("terminal/output")

    async def wait_for_terminal_exit(
        self, params: WaitForTerminalExitRequest
    ) -> WaitForTerminalExitResponse:
        """``terminal/wait_for_exit``: wait for a terminal's command to exit and
        answer its exit status.

        Default: ``-32601`` (method not found). A :class:`~acp_trio.RequestError`
        raised is answered.
        ``$/cancel_request`` or the connection closing cancels it (let
        ``trio.Cancelled`` propagate: ``-32800`` is answered).
        """
        raise _not_found("terminal/wait_for_exit")

    async def kill_terminal(self, params: KillTerminalRequest) -> KillTerminalResponse | None:
        """``terminal/kill``: stop a terminal's command; the id stays valid.

        Default: ``-32601`` (method not found). A :class:`~acp_trio.RequestError`
        raised is answered.
        ``$/cancel_request`` or the connection closing cancels it (let
        ``trio.Cancelled`` propagate: ``-32800`` is answered).
        """
        raise _not_found("terminal/kill")

    async def release_terminal(
        self, params: ReleaseTerminalRequest
    ) -> ReleaseTerminalResponse | None:
        """``terminal/release``: stop a terminal's command if needed and forget
        the id.

        Default: ``-32601`` (method not found). A :class:`~acp_trio.RequestError`
        raised is answered.
        ``$/cancel_request`` or the connection closing cancels it (let
        ``trio.Cancelled`` propagate: ``-32800`` is answered).
        """
        raise _not_found("terminal/release")

    async def create_elicitation(
        self, params: CreateElicitationRequest
    ) -> CreateElicitationResponse:
        """``elicitation/create``: ask the user for structured input on the
        agent's behalf.

        Default: ``-32601`` (method not found). A :class:`~acp_trio.RequestError`
        raised is answered.
        ``$/cancel_request`` or the connection closing cancels it (let
        ``trio.Cancelled`` propagate: ``-32800`` is answered).
        """
        raise _not_found("elicitation/create")

    async def complete_elicitation(self, params: CompleteElicitationNotification) -> None:
        """``elicitation/complete``: the agent is done with an elicitation.
        Ignored by default (clients ignore unknown elicitation ids).

        A notification: nothing is answered, and an exception is logged, not
        sent. It runs in the connection's notification consumer, which only the
        connection closing cancels.
        """

    async def ext_method(self, method: str, params: Any) -> Any:
        """An extension request (a method whose name starts with ``_``) that no
        handler added with :meth:`add_extension_method` takes.

        Default: ``-32601`` (method not found). A :class:`~acp_trio.RequestError`
        raised is answered.
        ``$/cancel_request`` or the connection closing cancels it (let
        ``trio.Cancelled`` propagate: ``-32800`` is answered).
        """
        raise _not_found(method)

    async def ext_notification(self, method: str, params: Any) -> None:
        """An extension notification (name starting with ``_``) that no handler
        added with :meth:`add_extension_notification` takes; ignored by default.

        Runs in wire order in the connection's notification consumer, which only
        the connection closing cancels; an exception is logged, not sent.
        """


class _ClientHandler(TypedHandler):
    """Routes agent→client messages to a :class:`Client`, and answers the
    permission requests of a cancelled turn itself."""

    def __init__(
        self, client: Client, schema_converter: SchemaConverter, connection: Connection
    ) -> None:
        self.client = client
        self.early = EarlyUpdates(client.session_update, connection.run_in_notification_order_soon)
        self.permissions = SessionScopes()
        # The request behind each pending permission handler's scope.
        self._permission_requests: dict[trio.CancelScope, RequestContext] = {}
        # The proxy's turns (the proxy sets it, once made).
        self.turns: TurnBook
        # The block is being left: updates are not handed on any more (the
        # connection still reads, for the cancelled turns' answers).
        self.leaving = False
        requests: dict[str, Route] = {}
        notifications: dict[str, Route] = {}
        for wire, attr in CLIENT_METHODS.items():
            info = METHODS[wire]
            if info.kind == "request" and not implemented(client, Client, attr):
                continue  # -32601, whatever the params
            table = requests if info.kind == "request" else notifications
            table[wire] = Route(info.params, getattr(client, attr))
        notifications["session/update"] = Route(SessionNotification, self._session_update)
        if "session/request_permission" in requests:
            requests["session/request_permission"] = Route(
                RequestPermissionRequest, self._request_permission
            )
        super().__init__(
            requests,
            notifications,
            client.ext_method,
            client.ext_notification,
            client._extension_handlers(),
            schema_converter=schema_converter,
        )

    async def _session_update(self, params: SessionNotification) -> None:
        # Leaving drops the updates not handled yet, as closing always did:
        # the wind-down reads on only to see the cancelled turns end (behind
        # a backlog a slow UI would take long to work through).
        if not self.leaving:
            await self.early.receive(params)

    async def _request_permission(
        self, params: RequestPermissionRequest
    ) -> RequestPermissionResponse:
        session_id = params.session_id
        if self.turns.permission_is_stale(session_id):
            return _CANCELLED
        ctx = current_request()
        with self.permissions.register(session_id) as scope:
            if ctx is not None:
                self._permission_requests[scope] = ctx
            try:
                with scope:
                    try:
                        result = await self.client.request_permission(params)
                    except Exception:
                        if not scope.cancel_called:
                            raise
            finally:
                self._permission_requests.pop(scope, None)
            # Once the turn is cancelled, a late answer is refused.
            if scope.cancel_called:
                return _CANCELLED
            return result

    def implemented_capabilities(self) -> ClientCapabilities:
        """The client capabilities :attr:`client`'s class implements."""
        return _implemented_capabilities(self.client)

    def cancel_permissions(self, session_id: str) -> None:
        """The local ``session/cancel``: answer the session's pending
        permission requests ``cancelled``.

        The answer is decided here, so a ``$/cancel_request`` for one of them
        read before its handler resumes (the agent's reaction to this very
        cancel, say) must not turn it into ``-32800``: the request becomes
        cooperative, and the peer's cancel then only marks it. One the peer
        cancelled before this call keeps its ``-32800``.
        """
        for scope in self.permissions.scopes(session_id):
            ctx = self._permission_requests.get(scope)
            if ctx is not None and ctx.cancel_cause is None:
                ctx.cooperative = True
            scope.cancel()


def _client_handler(
    client: Client, schema_converter: SchemaConverter
) -> Callable[[Connection], _ClientHandler]:
    def make(connection: Connection) -> _ClientHandler:
        handler = _ClientHandler(client, schema_converter, connection)
        client.agent = AgentProxy._create(connection, schema_converter, handler)
        return handler

    return make


@asynccontextmanager
async def open_agent(
    client: Client,
    stream: trio.abc.Stream | FramedStream | MessageStream,
    *,
    config: ConnectionConfig | None = None,
    schema_converter: SchemaConverter = converter,
    cancel_grace: float = 5.0,
    escalation_grace: float = 2.0,
    abandon_policy: AbandonPolicy = "free_session",
) -> AsyncIterator[AgentProxy]:
    """Talk to an agent on ``stream`` for the duration of the block; yields
    the proxy to the agent (also at ``client.agent``). Call
    :meth:`AgentProxy.initialize` first. Raises ``RuntimeError`` if
    ``client`` is already on another connection.

    ``cancel_grace``, ``escalation_grace`` and ``abandon_policy`` set the
    proxy's cancel ladder (see :meth:`AgentProxy.cancel_turn`; also
    attributes of the proxy).

    Leaving the block, also by an exception or a cancellation, first lets
    each cancelled turn end (shielded; each within its ladder's bound,
    ``cancel_grace + escalation_grace``), then closes the connection:
    running handlers are cancelled and answered ``-32800``, pending calls to
    the agent fail with :class:`ConnectionClosed`, queued output is flushed
    (bounded). So a prompt cancelled by the same cancel that leaves the
    block (a relay's turn, cancelled with the sub-agent it opened) still
    ends the protocol's way: ``session/cancel`` first, and the agent's
    answer to it.
    """
    if not isinstance(client, Client):
        raise TypeError(
            f"open_agent takes your Client (the agent is at the other end of the "
            f"stream), got {client!r}; an Agent is served with "
            f"open_client(agent, stream) or serve_agent(agent, stream)"
        )
    name = type(client).__name__
    error = (
        f"this {name} object is already connected to an agent (its .agent is that "
        f"connection's agent); use one client object per connection"
    )
    with one_connection(client, error):
        async with open_connection(
            stream, _client_handler(client, schema_converter), config=config
        ):
            agent = client.agent
            agent.cancel_grace = cancel_grace
            agent.escalation_grace = escalation_grace
            agent.abandon_policy = abandon_policy
            try:
                yield agent
            finally:
                with trio.CancelScope(shield=True):
                    await agent._wind_down()


@asynccontextmanager
async def open_spawned_agent(
    client: Client,
    command: Sequence[str],
    *,
    cwd: str | os.PathLike[str] | None = None,
    env: dict[str, str] | None = None,
    stderr: StderrMode | logging.Logger = "forward",
    config: ConnectionConfig | None = None,
    schema_converter: SchemaConverter = converter,
    telemetry: Mapping[str, str] | None = None,
    cancel_grace: float = 5.0,
    escalation_grace: float = 2.0,
    abandon_policy: AbandonPolicy = "free_session",
    shutdown_grace: float = 2.0,
    terminate_grace: float = 2.0,
) -> AsyncIterator[AgentProxy]:
    """Spawn the agent ``command`` (any ACP agent, any SDK) and talk to it
    over its stdio. If it dies, calls fail with :class:`ConnectionClosed`
    carrying its exit code and the tail of its stderr. Leaving the block
    shuts it down, also when it is left by an exception or a cancellation:
    each cancelled turn is let end (see :func:`open_agent`), the connection
    is closed, then the process is stopped and reaped (see
    :func:`open_agent_process`: stdin closed, ``shutdown_grace`` seconds to
    exit, SIGTERM, ``terminate_grace`` seconds, SIGKILL), shielded and
    bounded in time.

    The agent's stderr is where its tracebacks go, so by default
    (``stderr="forward"``) its lines appear on our stderr, prefixed
    ``"name[pid]: "``, every one of them until it exits however the block
    is left; ``"log"`` or a :class:`logging.Logger` logs them instead,
    ``"capture"`` only keeps the tail, ``"inherit"`` and ``"discard"`` as in
    :func:`open_agent_process`.

    ``cancel_grace``, ``escalation_grace`` and ``abandon_policy`` set the
    cancel ladder (:meth:`AgentProxy.cancel_turn`); ``abandon_policy=
    "stop_process"`` stops this process when a cancelled turn is abandoned.

    ``telemetry``: ``OTEL_*`` settings for the agent, so that it exports its
    traces where we do (``acp_trio.contrib.otel.otlp_environment()``); each
    is added to its environment unless that (``env``, or ours) already sets
    it.
    """
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
            client,
            process.stream,
            config=config,
            schema_converter=schema_converter,
            cancel_grace=cancel_grace,
            escalation_grace=escalation_grace,
        ) as agent:
            agent._turns.stop_process = process.stop_soon
            agent.abandon_policy = abandon_policy
            yield agent
