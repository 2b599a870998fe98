"""The typed agent side: subclass :class:`Agent`, run it with :func:`run_agent`.

Each client→agent method of ACP v1 is one async method taking its schema
params class and returning its schema result class. The defaults answer
``-32601`` (method not found), except ``initialize`` (answers protocol
version 1) and ``session/cancel`` (nothing to do: the SDK already cancelled
the turn). The ``initialize`` answer sent advertises the session methods
the class overrides (``loadSession``, ``sessionCapabilities`` ``list`` /
``resume`` / ``close`` / ``delete``, ``auth.logout``), added to what the
agent's own ``initialize`` returns: nothing that answer advertises is
changed or removed.

``session/cancel`` is built in. The SDK keeps the scope of each session's
running prompt; on ``session/cancel`` (or ``session/close``) it cancels that
scope at once, every request the prompt was waiting on is cancelled on the
wire with its own ``$/cancel_request``, the turn's ``session/update``s
already sent stay ahead of the answer, and the SDK itself answers the prompt
``stopReason: "cancelled"``. A prompt that arrives on a session whose
previous prompt is still running or finishing waits for it: the prompts of
a session run one at a time, in the order they arrived.

The agent calls the client through :attr:`Agent.client`, a
:class:`ClientProxy` that refuses (with :class:`CapabilityError`, nothing
sent) the fs, terminal and elicitation calls the client did not advertise.

An :class:`Agent` object serves one connection at a time (``self.client``
is that connection's). The serving functions take the agent, or a factory
(its class, or any function of no arguments returning one) that makes one
per connection; serving an object that is already on a connection raises
``RuntimeError``, which names the fix.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import trio

from acp_trio._core._connection import Connection, ConnectionConfig
from acp_trio._core._framed import FramedStream
from acp_trio._core._groups import plain_exceptions
from acp_trio._core._message_stream import MessageStream
from acp_trio._core._open import open_connection, serve_connection
from acp_trio._exceptions import RequestError
from acp_trio._transports import open_stdio_stream
from acp_trio._typed._agent_handler import AGENT_METHODS, AgentHandler
from acp_trio._typed._client_proxy import ClientProxy
from acp_trio._typed._dispatch import (
    Extensible,
    one_connection,
)
from acp_trio.schema import (
    PROTOCOL_VERSION,
    AuthenticateRequest,
    AuthenticateResponse,
    CancelNotification,
    CloseSessionRequest,
    CloseSessionResponse,
    DeleteSessionRequest,
    DeleteSessionResponse,
    Implementation,
    InitializeRequest,
    InitializeResponse,
    ListSessionsRequest,
    ListSessionsResponse,
    LoadSessionRequest,
    LoadSessionResponse,
    LogoutRequest,
    LogoutResponse,
    NewSessionRequest,
    NewSessionResponse,
    PromptRequest,
    PromptResponse,
    ResumeSessionRequest,
    ResumeSessionResponse,
    SchemaConverter,
    SetSessionConfigOptionRequest,
    SetSessionConfigOptionResponse,
    SetSessionModeRequest,
    SetSessionModeResponse,
    converter,
)

__all__ = ["AGENT_METHODS", "Agent", "ClientProxy", "open_client", "run_agent", "serve_agent"]


def _not_found(method: str) -> RequestError:
    return RequestError.method_not_found(method)


class Agent(Extensible):
    """Base class of an ACP agent: override the methods you support.

    :attr:`client` is set by the SDK before any method is called: the proxy
    to the client of the one connection this object serves (to serve many,
    give the serving function a factory, such as the class itself).
    Extension methods (names starting with ``_``) go to
    :meth:`ext_method` / :meth:`ext_notification`, or to handlers added with
    :meth:`add_extension_method` / :meth:`add_extension_notification`.
    """

    client: ClientProxy

    #: Sent as ``agentInfo`` (name, version) by the default :meth:`initialize`.
    info: Implementation | None = None

    async def initialize(self, params: InitializeRequest) -> InitializeResponse:
        """``initialize``: agree on the protocol version and advertise what the
        agent can do.

        Default: the SDK's protocol version, no optional capability, and
        :attr:`info` as ``agentInfo``; the SDK adds the capabilities of the
        methods the class overrides.
        A :class:`~acp_trio.RequestError` raised is answered.
        ``$/cancel_request`` or the connection closing cancels it (let
        ``trio.Cancelled`` propagate: ``-32800`` is answered).
        """
        return InitializeResponse(protocol_version=PROTOCOL_VERSION, agent_info=self.info)

    async def authenticate(self, params: AuthenticateRequest) -> AuthenticateResponse | None:
        """``authenticate``: sign in with one of the advertised auth methods.

        Default: ``-32601`` (method not found).
        A :class:`~acp_trio.RequestError` raised is answered.
        ``$/cancel_request`` or the connection closing cancels it (let
        ``trio.Cancelled`` propagate: ``-32800`` is answered).
        """
        raise _not_found("authenticate")

    async def logout(self, params: LogoutRequest) -> LogoutResponse | None:
        """``logout``: sign out.

        Default: ``-32601`` (method not found). Overriding it advertises it.
        A :class:`~acp_trio.RequestError` raised is answered.
        ``$/cancel_request`` or the connection closing cancels it (let
        ``trio.Cancelled`` propagate: ``-32800`` is answered).
        """
        raise _not_found("logout")

    async def new_session(self, params: NewSessionRequest) -> NewSessionResponse:
        """``session/new``: create a session and answer its id.

        Default: ``-32601`` (method not found).
        A :class:`~acp_trio.RequestError` raised is answered.
        ``$/cancel_request`` or the connection closing cancels it (let
        ``trio.Cancelled`` propagate: ``-32800`` is answered).
        """
        raise _not_found("session/new")

    async def load_session(self, params: LoadSessionRequest) -> LoadSessionResponse | None:
        """``session/load``: replay a stored session's history to the client
        (as ``session/update`` notifications), then answer.

        Default: ``-32601`` (method not found). Overriding it advertises it.
        A :class:`~acp_trio.RequestError` raised is answered.
        ``$/cancel_request`` or the connection closing cancels it (let
        ``trio.Cancelled`` propagate: ``-32800`` is answered).
        """
        raise _not_found("session/load")

    async def list_sessions(self, params: ListSessionsRequest) -> ListSessionsResponse:
        """``session/list``: the sessions this agent knows.

        Default: ``-32601`` (method not found). Overriding it advertises it.
        A :class:`~acp_trio.RequestError` raised is answered.
        ``$/cancel_request`` or the connection closing cancels it (let
        ``trio.Cancelled`` propagate: ``-32800`` is answered).
        """
        raise _not_found("session/list")

    async def resume_session(self, params: ResumeSessionRequest) -> ResumeSessionResponse | None:
        """``session/resume``: take up a stored session without replaying it.

        Default: ``-32601`` (method not found). Overriding it advertises it.
        A :class:`~acp_trio.RequestError` raised is answered.
        ``$/cancel_request`` or the connection closing cancels it (let
        ``trio.Cancelled`` propagate: ``-32800`` is answered).
        """
        raise _not_found("session/resume")

    async def close_session(self, params: CloseSessionRequest) -> CloseSessionResponse | None:
        """``session/close``: forget a session; the SDK cancels its running turn
        first.

        Default: ``-32601`` (method not found). Overriding it advertises it.
        A :class:`~acp_trio.RequestError` raised is answered.
        ``$/cancel_request`` or the connection closing cancels it (let
        ``trio.Cancelled`` propagate: ``-32800`` is answered).
        """
        raise _not_found("session/close")

    async def delete_session(self, params: DeleteSessionRequest) -> DeleteSessionResponse | None:
        """``session/delete``: delete a stored session.

        Default: ``-32601`` (method not found). Overriding it advertises it.
        A :class:`~acp_trio.RequestError` raised is answered.
        ``$/cancel_request`` or the connection closing cancels it (let
        ``trio.Cancelled`` propagate: ``-32800`` is answered).
        """
        raise _not_found("session/delete")

    async def set_session_mode(
        self, params: SetSessionModeRequest
    ) -> SetSessionModeResponse | None:
        """``session/set_mode``: switch a session to another of its modes.

        Default: ``-32601`` (method not found).
        A :class:`~acp_trio.RequestError` raised is answered.
        ``$/cancel_request`` or the connection closing cancels it (let
        ``trio.Cancelled`` propagate: ``-32800`` is answered).
        """
        raise _not_found("session/set_mode")

    async def set_session_config_option(
        self, params: SetSessionConfigOptionRequest
    ) -> SetSessionConfigOptionResponse:
        """``session/set_config_option``: change one of a session's config options
        and answer them all.

        Default: ``-32601`` (method not found).
        A :class:`~acp_trio.RequestError` raised is answered.
        ``$/cancel_request`` or the connection closing cancels it (let
        ``trio.Cancelled`` propagate: ``-32800`` is answered).
        """
        raise _not_found("session/set_config_option")

    async def prompt(self, params: PromptRequest) -> PromptResponse:
        """``session/prompt``: run one turn and answer its stop reason.

        Default: refuse with ``-32601`` (method not found). Raise
        :class:`~acp_trio.RequestError` to answer an error. Turns of one session
        run one at a time, in order. ``session/cancel`` for the session cancels
        this call (``trio.Cancelled`` at the next checkpoint; let it propagate):
        the SDK then answers ``stopReason: "cancelled"`` once the turn's updates
        are written, and every request the turn made of the client is cancelled
        on the wire. ``$/cancel_request`` or the connection closing cancels it
        too, answered ``-32800``.
        """
        raise _not_found("session/prompt")

    async def cancel(self, params: CancelNotification) -> None:
        """``session/cancel``: called, in wire order, after the SDK has already
        cancelled the session's running prompt, if any. Override for extra clean-up.

        A notification: nothing is answered, and an exception is logged, not
        sent. It runs in the connection's notification consumer, which only the
        connection closing cancels.
        """

    async def ext_method(self, method: str, params: Any) -> Any:
        """An extension request (a method whose name starts with ``_``) that no
        handler added with :meth:`add_extension_method` takes.

        Default: refuse with ``-32601`` (method not found).
        A :class:`~acp_trio.RequestError` raised is answered.
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


def _make_agent(agent: Agent | Callable[[], Agent]) -> Agent:
    if isinstance(agent, Agent):
        return agent
    if not callable(agent) or (isinstance(agent, type) and not issubclass(agent, Agent)):
        raise TypeError(
            f"expected your Agent (or a factory of one), got {agent!r}; a Client "
            f"talks to an agent with open_agent(client, stream) or "
            f"open_spawned_agent(client, command)"
        )
    made = agent()
    if not isinstance(made, Agent):
        raise TypeError(f"the agent factory {agent!r} returned {made!r}, not an Agent")
    return made


@contextmanager
def _serving(agent: Agent | Callable[[], Agent]) -> Iterator[Agent]:
    """The agent to serve one connection with, marked busy for the block."""
    made = _make_agent(agent)
    name = type(made).__name__
    error = (
        f"this {name} object is already serving a connection (its .client is that "
        f"connection's client); pass a factory to serve one agent per connection, "
        f"e.g. serve_agent({name}, stream) rather than serve_agent({name}(), stream)"
    )
    with one_connection(made, error):
        yield made


def _agent_handler(
    agent: Agent, schema_converter: SchemaConverter
) -> Callable[[Connection], AgentHandler]:
    def make(connection: Connection) -> AgentHandler:
        proxy = ClientProxy._create(connection, schema_converter)
        agent.client = proxy
        return AgentHandler(agent, proxy, Agent)

    return make


async def serve_agent(
    agent: Agent | Callable[[], Agent],
    stream: trio.abc.Stream | FramedStream | MessageStream,
    *,
    config: ConnectionConfig | None = None,
    schema_converter: SchemaConverter = converter,
    task_status: trio.TaskStatus[Connection] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ``agent`` (or a new one from the factory ``agent``) on
    ``stream`` until the connection closes.

    With a factory, one function serves many connections, e.g.
    ``serve_tcp(functools.partial(serve_agent, MyAgent), port)``. Raises
    ``RuntimeError`` if the agent object is already serving a connection.
    Cancelling the call closes the connection: running handlers are
    cancelled and answered ``-32800`` and queued output is flushed (bounded),
    then ``trio.Cancelled`` propagates.
    """
    with _serving(agent) as made:
        await serve_connection(
            stream, _agent_handler(made, schema_converter), config=config, task_status=task_status
        )


@asynccontextmanager
async def open_client(
    agent: Agent | Callable[[], Agent],
    stream: trio.abc.Stream | FramedStream | MessageStream,
    *,
    config: ConnectionConfig | None = None,
    schema_converter: SchemaConverter = converter,
) -> AsyncIterator[ClientProxy]:
    """Serve ``agent`` (or a new one from the factory ``agent``) on
    ``stream`` for the duration of the block; yields the proxy to the client
    (also at ``agent.client``). Raises ``RuntimeError`` if the agent object
    is already serving a connection.

    Leaving the block, also by an exception or a cancellation, closes the
    connection: running handlers are cancelled and answered ``-32800``,
    pending calls to the client fail, queued output is flushed (bounded).
    """
    with _serving(agent) as made:
        async with open_connection(stream, _agent_handler(made, schema_converter), config=config):
            yield made.client


async def run_agent(
    agent: Agent | Callable[[], Agent],
    *,
    config: ConnectionConfig | None = None,
    schema_converter: SchemaConverter = converter,
    handle_signals: bool = True,
) -> None:
    """Serve ``agent`` (or a new one from the factory ``agent``) on this
    process's stdin and stdout until the client closes them. While it runs,
    ``print()`` goes to stderr.

    With ``handle_signals`` (and called from the main thread), SIGTERM and
    SIGINT shut the agent down in order instead of interrupting it wherever
    it is: running requests are cancelled and answered ``-32800``, queued
    output is flushed, then this returns; after SIGINT it then raises
    ``KeyboardInterrupt``.
    """
    received: list[int] = []
    with _serving(agent) as made:
        async with open_stdio_stream() as stream:
            connection = Connection(stream, _agent_handler(made, schema_converter), config)
            with plain_exceptions():
                async with trio.open_nursery() as nursery:
                    if handle_signals and threading.current_thread() is threading.main_thread():
                        await nursery.start(_close_on_signal, connection, received)
                    await connection.serve()
                    nursery.cancel_scope.cancel()
    if signal.SIGINT in received:
        raise KeyboardInterrupt


async def _close_on_signal(
    connection: Connection,
    received: list[int],
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        task_status.started()
        async for signum in signals:
            received.append(signum)
            connection.close_soon()
