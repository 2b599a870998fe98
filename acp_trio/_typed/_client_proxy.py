"""The agent's view of its client: :class:`ClientProxy`, made by the SDK.

Every client method takes its request object or its fields (the generated
:class:`~acp_trio.schema._generated_proxies.ClientProxyMethods`); the fs,
terminal and elicitation calls the client did not advertise raise
:class:`~acp_trio.CapabilityError` and send nothing. The kit's handles
(:meth:`ClientProxy.tool_call`, :meth:`ClientProxy.terminal`,
:meth:`ClientProxy.ask_permission`) live here too.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, Final, overload

from acp_trio._core._connection import Connection
from acp_trio._exceptions import CapabilityError
from acp_trio._public import NoPublicConstructor
from acp_trio._typed._dispatch import (
    ProxyBase,
    adopt_hook_docs,
)
from acp_trio._typed._terminal_handle import TerminalHandle, open_terminal
from acp_trio._typed._tool_calls import (
    StartStatus,
    ToolCallContentLike,
    ToolCallHandle,
    ask_permission,
    open_tool_call,
)
from acp_trio.build import ALLOW_OR_REJECT
from acp_trio.schema import (
    AgentMessageChunk,
    ClientCapabilities,
    CreateElicitationRequest,
    CreateElicitationResponse,
    ElicitationFormMode,
    ElicitationSchema,
    ElicitationScope,
    ElicitationUrlMode,
    PermissionOption,
    SchemaConverter,
    SessionNotification,
    SessionUpdate,
    TextContent,
    ToolCallLocation,
    ToolCallUpdate,
    converter,
)
from acp_trio.schema._generated_proxies import ClientProxyMethods
from acp_trio.schema._generated_types import ToolKind

__all__ = ["ClientProxy"]


@adopt_hook_docs
class ClientProxy(ClientProxyMethods, ProxyBase, metaclass=NoPublicConstructor):
    """What an agent can ask of its client. Made by the SDK.

    :attr:`capabilities` are the client's, as sent in ``initialize``. Every
    client method takes its request object or its fields:
    ``await client.read_text_file(session_id, path, line=10)`` is
    ``await client.read_text_file(ReadTextFileRequest(...))``. A method the
    client did not advertise the capability of raises
    :class:`CapabilityError` and sends nothing.
    """

    def __init__(self, connection: Connection, schema_converter: SchemaConverter) -> None:
        super().__init__(connection, schema_converter)
        self.capabilities: ClientCapabilities | None = None
        # The methods already found advertised in ``_allowed_by`` (the
        # capabilities are frozen: the answer holds while they are the same).
        self._allowed_by: ClientCapabilities | None = None
        self._allowed: set[str] = set()

    def _require(self, advertised: bool, what: str, method: str) -> None:
        if not advertised:
            raise CapabilityError(
                f"the client did not advertise {what} (needed for {method}); nothing was sent",
                capability=what,
                method=method,
                peer="client",
            )

    def _caps(self) -> ClientCapabilities:
        return self.capabilities or ClientCapabilities()

    def tool_call(
        self,
        session_id: str,
        title: str,
        *,
        kind: ToolKind | None = None,
        status: StartStatus = "in_progress",
        content: Sequence[ToolCallContentLike] = (),
        locations: Sequence[ToolCallLocation] = (),
        raw_input: Any = None,
        tool_call_id: str | None = None,
    ) -> AbstractAsyncContextManager[ToolCallHandle]:
        """A tool call for the duration of an ``async with`` block: sends
        its ``tool_call`` on entry (a fresh id unless ``tool_call_id``),
        ``in_progress`` since the block's body is the tool running (open it
        ``status="pending"`` to wait for permission first, then
        :meth:`ToolCallHandle.start`); and on exit ``completed`` (the block
        ended), or ``failed`` (it raised, or was cancelled: ACP v1 has no
        cancelled status), unless the block reported a final status itself.
        The final update is queued at once, so cancellation never loses it
        and it precedes the turn's answer. See :class:`ToolCallHandle` for
        the updates in between."""
        return open_tool_call(
            self,
            session_id,
            title,
            kind=kind,
            status=status,
            content=content,
            locations=locations,
            raw_input=raw_input,
            tool_call_id=tool_call_id,
        )

    async def ask_permission(
        self,
        session_id: str,
        tool_call: ToolCallHandle | ToolCallUpdate | str,
        options: Sequence[PermissionOption] = ALLOW_OR_REJECT,
    ) -> PermissionOption | None:
        """Ask the user to allow a tool call (``session/request_permission``)
        and return the option they chose, or ``None`` if the turn was
        cancelled meanwhile (the client answered ``cancelled``).
        ``tool_call`` is the call's handle (what the handle knows is sent:
        title, kind, content, locations, raw input; ``RuntimeError`` if it
        already ended, ``ValueError`` if it is another session's), its id,
        or a :class:`ToolCallUpdate` with what the user should see; ``options``
        defaults to :data:`acp_trio.build.ALLOW_OR_REJECT` (check
        ``option.kind.startswith("allow")``). Raises ``ValueError`` for no
        or repeated option ids, and :class:`RemoteProtocolError` if the
        client picks an option that was not offered."""
        return await ask_permission(self, session_id, tool_call, options)

    def terminal(
        self,
        session_id: str,
        command: str,
        args: Sequence[str] = (),
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        output_byte_limit: int | None = None,
        release_timeout: float = 5.0,
    ) -> AbstractAsyncContextManager[TerminalHandle]:
        """A terminal of the client's for the duration of an ``async with``
        block: ``terminal/create`` on entry (raises :class:`CapabilityError`
        if the client did not advertise ``terminal``), and on exit, however
        the block ends, ``terminal/release``, shielded and bounded by
        ``release_timeout`` seconds. See :class:`TerminalHandle`."""
        return open_terminal(
            self,
            session_id,
            command,
            args,
            cwd=cwd,
            env=env,
            output_byte_limit=output_byte_limit,
            release_timeout=release_timeout,
        )

    async def send_text(self, session_id: str, text: str) -> None:
        """Stream a piece of the agent's reply (an ``agent_message_chunk``).
        Raises :class:`ConnectionClosed` if the connection has ended;
        cancelling the caller only stops it waiting for room in the output
        queue (a notification has no answer to wait for)."""
        if self.converter is converter and type(session_id) is str and type(text) is str:
            # The hot path of streaming: the exact JSON the default converter
            # makes of SessionNotification(session_id, AgentMessageChunk(
            # TextContent(text))), without building and unstructuring the
            # three objects: about half of the agent's cost per chunk.
            content = {"type": "text", "text": text}
            update = {"sessionUpdate": "agent_message_chunk", "content": content}
            await self.connection.notify(
                "session/update", {"sessionId": session_id, "update": update}
            )
            return
        chunk = AgentMessageChunk(content=TextContent(text=text))
        await self._notify(
            "session/update", SessionNotification(session_id=session_id, update=chunk)
        )

    def session_update_nowait(
        self, session_id: str, update: SessionUpdate, *, meta: dict[str, Any] | None = None
    ) -> None:
        """:meth:`session_update` without waiting and without a checkpoint,
        for bursts (a model's tokens as they come): the synchronous form, as
        :meth:`Connection.notify_nowait <acp_trio.lowlevel.Connection.notify_nowait>`.

        Raises ``trio.WouldBlock`` when the output queue is at its limit
        (nothing is sent: fall back to ``await session_update(...)``, which
        waits for room) and :class:`ConnectionClosed` if the connection has
        ended. Being no checkpoint, it cannot be cancelled: a loop of these
        stops at its own checkpoints (``session/cancel`` lands there): a peer
        that keeps up may never fill the queue, so give a loop over tokens
        already at hand a checkpoint every so many. From the Trio thread."""
        params = SessionNotification(session_id=session_id, update=update, meta=meta)
        self.connection.notify_nowait("session/update", self.converter.unstructure(params))

    def send_text_nowait(self, session_id: str, text: str) -> None:
        """:meth:`send_text` without waiting and without a checkpoint (see
        :meth:`session_update_nowait`): raises ``trio.WouldBlock`` when the
        output queue is at its limit, :class:`ConnectionClosed` if the
        connection has ended."""
        if self.converter is converter and type(session_id) is str and type(text) is str:
            content = {"type": "text", "text": text}
            update = {"sessionUpdate": "agent_message_chunk", "content": content}
            self.connection.notify_nowait(
                "session/update", {"sessionId": session_id, "update": update}
            )
            return
        self.session_update_nowait(session_id, AgentMessageChunk(content=TextContent(text=text)))

    async def _request(self, method: str, params: Any, result_type: Any) -> Any:
        # Every typed request passes here: refuse, sending nothing, one the
        # client did not advertise the capability of. (ProxyBase._request's
        # lines, not a call to it: one coroutine less on each round trip.)
        if self.capabilities is not self._allowed_by or method not in self._allowed:
            self._check_advertised(method)
        raw = await self.connection.call(method, self.converter.unstructure(params))
        return self._structure_result(method, raw, result_type)

    def _check_advertised(self, method: str) -> None:
        needs = _CLIENT_NEEDS.get(method)
        if needs is not None:
            advertised, what = needs
            self._require(advertised(self._caps()), what, method)
        if self.capabilities is not self._allowed_by:
            self._allowed_by, self._allowed = self.capabilities, set()
        self._allowed.add(method)

    @overload
    async def create_elicitation(
        self, params: CreateElicitationRequest, /
    ) -> CreateElicitationResponse: ...
    @overload
    async def create_elicitation(
        self,
        message: str,
        scope: ElicitationScope,
        *,
        requested_schema: ElicitationSchema,
        meta: dict[str, Any] | None = None,
    ) -> CreateElicitationResponse: ...
    @overload
    async def create_elicitation(
        self,
        message: str,
        scope: ElicitationScope,
        *,
        url: str,
        elicitation_id: str,
        meta: dict[str, Any] | None = None,
    ) -> CreateElicitationResponse: ...
    async def create_elicitation(
        self,
        message: CreateElicitationRequest | str,
        scope: ElicitationScope | None = None,
        *,
        requested_schema: ElicitationSchema | None = None,
        url: str | None = None,
        elicitation_id: str | None = None,
        meta: dict[str, Any] | None = None,
    ) -> CreateElicitationResponse:
        """Send ``elicitation/create``: pass a :class:`CreateElicitationRequest`
        variant, or ``message, scope`` with ``requested_schema=`` (a form) or
        ``url=`` and ``elicitation_id=`` (a URL to open). Raises
        :class:`CapabilityError` (nothing sent) unless the client advertised
        that mode, ``TypeError`` for arguments that do not fit,
        :class:`RequestError` if the client answers an error; cancelling the
        caller sends ``$/cancel_request`` for it."""
        fields = (scope, requested_schema, url, elicitation_id, meta)
        if not isinstance(message, str):
            if any(field is not None for field in fields):
                raise TypeError("create_elicitation() takes a request or its fields, not both")
            return await self._send_create_elicitation(message)
        if scope is None:
            raise TypeError("create_elicitation() missing 'scope'")
        params: CreateElicitationRequest
        if url is not None or elicitation_id is not None:
            if url is None or elicitation_id is None or requested_schema is not None:
                raise TypeError(
                    "create_elicitation(): a URL elicitation takes url and elicitation_id"
                )
            params = ElicitationUrlMode(
                message=message, scope=scope, url=url, elicitation_id=elicitation_id, meta=meta
            )
        elif requested_schema is not None:
            params = ElicitationFormMode(
                message=message, scope=scope, requested_schema=requested_schema, meta=meta
            )
        else:
            raise TypeError(
                "create_elicitation() needs requested_schema= or url= and elicitation_id="
            )
        return await self._send_create_elicitation(params)

    async def _send_create_elicitation(
        self, params: CreateElicitationRequest
    ) -> CreateElicitationResponse:
        elicitation = self._caps().elicitation
        # The mode is the variant's class: the classes carry no ``mode`` field.
        if isinstance(params, ElicitationUrlMode):
            self._require(
                elicitation is not None and elicitation.url is not None,
                "elicitation.url",
                "elicitation/create",
            )
        else:
            self._require(
                elicitation is not None and elicitation.form is not None,
                "elicitation.form",
                "elicitation/create",
            )
        result: CreateElicitationResponse = await self._request(
            "elicitation/create", params, CreateElicitationResponse
        )
        return result


#: Wire name -> (does the client advertise it, the capability's name), for
#: the client methods that need a capability.
_CLIENT_NEEDS: Final[Mapping[str, tuple[Callable[[ClientCapabilities], bool], str]]] = {
    "fs/read_text_file": (lambda caps: caps.fs.read_text_file, "fs.readTextFile"),
    "fs/write_text_file": (lambda caps: caps.fs.write_text_file, "fs.writeTextFile"),
    **{
        method: (lambda caps: caps.terminal, "terminal")
        for method in (
            "terminal/create",
            "terminal/output",
            "terminal/wait_for_exit",
            "terminal/kill",
            "terminal/release",
        )
    },
}
