"""A tool call as a Trio block: its start, its updates, and its end on
every exit path.

``async with client.tool_call(session_id, "Edit main.py", kind="edit") as
call:`` sends the ``tool_call`` with status ``in_progress``: the block's
body is the tool running. A call that must wait for something first (the
user's permission, its input still streaming) opens with
``status="pending"`` and calls :meth:`ToolCallHandle.start` when it runs.
Inside, :meth:`ToolCallHandle.update` and :meth:`ToolCallHandle.add_content`
send ``tool_call_update``\\ s. The handle keeps what the client was told
(title, kind, status, content, locations, raw input), and
``client.ask_permission(session_id, call)`` sends all of it, so that the
client, and any proxy on the way, sees what it is asked to allow. Leaving the
block reports the end, unless the block already did (:meth:`complete`,
:meth:`fail`, or an update with a final status):

- the block ends normally: ``completed``;
- it raises: ``failed``, and the exception goes on;
- it is cancelled (``session/cancel``, ``$/cancel_request`` of the prompt,
  a deadline, the connection closing): ``failed`` too, ACP v1 having no
  ``cancelled`` tool-call status (clients mark a cancelled turn's
  unfinished tool calls as cancelled themselves).

The final update is queued at once, without waiting for room in the output
queue and without a checkpoint, so a cancellation can neither lose nor
delay it, and it goes out before the turn's answer, also while the
connection closes (before the ``-32800`` of the closing). Once nothing more
can be written, it is dropped (nobody to tell).
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any, Final, Literal

import attrs
import trio

from acp_trio._exceptions import RemoteProtocolError
from acp_trio._public import NoPublicConstructor
from acp_trio._typed._handle_client import HandleClient
from acp_trio.build import content as content_of
from acp_trio.build import tool_call_start, tool_call_update
from acp_trio.schema import (
    Content,
    ContentBlock,
    Diff,
    PermissionOption,
    RequestPermissionOutcomeCancelled,
    RequestPermissionRequest,
    SelectedPermissionOutcome,
    SessionNotification,
    Terminal,
    ToolCall,
    ToolCallContent,
    ToolCallLocation,
    ToolCallUpdate,
)
from acp_trio.schema._generated_types import ToolCallStatus, ToolKind, UnknownToolCallContent

__all__ = ["ToolCallHandle", "ask_permission", "open_tool_call"]

_FINAL: Final = frozenset({"completed", "failed"})
# The fields of a tool call the handle keeps besides status and content.
_TOLD: Final = ("title", "kind", "locations", "raw_input")

#: What :meth:`ToolCallHandle.add_content` and friends accept: tool-call
#: content (``build.content``, ``build.diff``, ``build.terminal``), or a
#: content block or a string, shown as such (wrapped in ``build.content``).
ToolCallContentLike = ToolCallContent | ContentBlock | str
#: The statuses a tool call may start with.
StartStatus = Literal["pending", "in_progress"]


def _as_content(items: Sequence[ToolCallContentLike]) -> list[ToolCallContent]:
    return [
        item
        if isinstance(item, Content | Diff | Terminal | UnknownToolCallContent)
        else content_of(item)
        for item in items
    ]


class ToolCallHandle(metaclass=NoPublicConstructor):
    """One tool call of a session, made by :meth:`ClientProxy.tool_call`."""

    def __init__(
        self,
        client: HandleClient,
        session_id: str,
        start: ToolCall,
    ) -> None:
        self._client = client
        #: The session the call belongs to.
        self.session_id = session_id
        #: The call's ``toolCallId``.
        self.id = start.tool_call_id
        self._status: ToolCallStatus = start.status or "pending"
        self._content: list[ToolCallContent] = list(start.content or ())
        # What the client was told (every field but raw output), merged
        # from each update sent.
        self._told = ToolCallUpdate(
            tool_call_id=start.tool_call_id,
            title=start.title,
            kind=start.kind,
            locations=start.locations,
            raw_input=start.raw_input,
        )
        # One update at a time, so that concurrent add_content() calls
        # each build on the other's content.
        self._lock = trio.Lock()

    @property
    def status(self) -> ToolCallStatus:
        """The last status sent."""
        return self._status

    @property
    def finished(self) -> bool:
        """Whether a final status (``completed``, ``failed``) was sent."""
        return self._status in _FINAL

    @property
    def content(self) -> tuple[ToolCallContent, ...]:
        """The call's content as the client has it now."""
        return tuple(self._content)

    @property
    def title(self) -> str:
        """The last title sent."""
        return self._told.title or ""

    @property
    def kind(self) -> ToolKind | None:
        """The last kind sent (``None``: none was, which ACP reads as ``other``)."""
        return self._told.kind

    @property
    def locations(self) -> tuple[ToolCallLocation, ...]:
        """The files the call touches, as last sent."""
        return tuple(self._told.locations or ())

    @property
    def raw_input(self) -> Any:
        """The raw input last sent (``None`` if none was)."""
        return self._told.raw_input

    def as_update(self) -> ToolCallUpdate:
        """What the call is about, as the client was told: its id, title,
        kind, content, locations and raw input, as one
        :class:`ToolCallUpdate` (not its status: a permission request is not
        a change of state). What ``ask_permission`` sends for a handle, so
        that whoever decides sees what it is asked to allow."""
        return attrs.evolve(self._told, content=list(self._content) or None)

    def _params(self, update: ToolCallUpdate) -> Any:
        return self._client.converter.unstructure(
            SessionNotification(session_id=self.session_id, update=update)
        )

    async def update(
        self,
        *,
        status: ToolCallStatus | None = None,
        title: str | None = None,
        kind: ToolKind | None = None,
        content: Sequence[ToolCallContentLike] | None = None,
        locations: Sequence[ToolCallLocation] | None = None,
        raw_input: Any = None,
        raw_output: Any = None,
    ) -> None:
        """Send a ``tool_call_update`` with the fields given (``content``
        replaces the call's content; a content block or a string in it is
        wrapped as ``build.content`` does).

        Raises ``RuntimeError`` once the call has a final status and
        :class:`~acp_trio.ConnectionClosed` once the connection is closing. A
        cancellation while waiting for room in the output queue sends nothing
        and changes nothing; the block's exit then still reports the final
        state.
        """
        update = tool_call_update(
            self.id,
            status=status,
            title=title,
            kind=kind,
            content=None if content is None else _as_content(content),
            locations=locations,
            raw_input=raw_input,
            raw_output=raw_output,
        )
        async with self._lock:
            await self._send(update)

    async def _send(self, update: ToolCallUpdate) -> None:
        """Send ``update`` (holding the lock) and record what it changed, as
        soon as it is queued: before the schedule point that follows, so
        that no other task sees the handle behind the wire (a permission
        request asked meanwhile carries it; the block's end after it is
        final)."""
        self._check_open()
        connection = self._client.connection
        params = self._params(update)
        await trio.lowlevel.checkpoint_if_cancelled()
        try:
            connection.notify_nowait("session/update", params)
        except trio.WouldBlock:
            # Waits for room; queued and recorded with no yield in between.
            await connection.notify("session/update", params)
            self._record(update)
            return
        self._record(update)
        await trio.lowlevel.cancel_shielded_checkpoint()

    def _record(self, update: ToolCallUpdate) -> None:
        if update.content is not None:
            self._content = list(update.content)
        if update.status is not None and not self.finished:
            self._status = update.status
        told = {name: getattr(update, name) for name in _TOLD}
        self._told = attrs.evolve(self._told, **{k: v for k, v in told.items() if v is not None})

    async def add_content(self, *items: ToolCallContentLike) -> None:
        """Append content to the call's, in one update (concurrent calls
        each build on the other's content): tool-call content
        (``build.diff(...)``, ``build.terminal(...)``, ``build.content(...)``)
        or a content block or string to show, such as ``build.text("...")``
        (wrapped as ``build.content`` does).

        Raises ``RuntimeError`` once the call has a final status and
        :class:`~acp_trio.ConnectionClosed` once the connection is closing. A
        cancellation while waiting for room in the output queue sends nothing
        and changes nothing; the block's exit then still reports the final
        state.
        """
        async with self._lock:
            update = tool_call_update(self.id, content=[*self._content, *_as_content(items)])
            await self._send(update)

    async def start(self) -> None:
        """Report the call ``in_progress`` (for a call opened with
        ``status="pending"``, once it runs: after the user allowed it, say).
        Does nothing if it already is.

        Raises ``RuntimeError`` once the call has a final status and
        :class:`~acp_trio.ConnectionClosed` once the connection is closing. A
        cancellation while waiting for room in the output queue sends nothing
        and changes nothing.
        """
        async with self._lock:
            self._check_open()
            if self._status != "in_progress":
                await self._send(tool_call_update(self.id, status="in_progress"))

    async def complete(self, *, raw_output: Any = None) -> None:
        """Report the call ``completed`` now (leaving the block then sends
        nothing more).

        Raises ``RuntimeError`` once the call has a final status and
        :class:`~acp_trio.ConnectionClosed` once the connection is closing. A
        cancellation while waiting for room in the output queue sends nothing
        and changes nothing; the block's exit then still reports the final
        state.
        """
        await self.update(status="completed", raw_output=raw_output)

    async def fail(self, *, raw_output: Any = None) -> None:
        """Report the call ``failed`` now (for a failure the block handles
        itself rather than raises).

        Raises ``RuntimeError`` once the call has a final status and
        :class:`~acp_trio.ConnectionClosed` once the connection is closing. A
        cancellation while waiting for room in the output queue sends nothing
        and changes nothing; the block's exit then still reports the final
        state.
        """
        await self.update(status="failed", raw_output=raw_output)

    def _check_open(self) -> None:
        if self.finished:
            raise RuntimeError(f"tool call {self.id!r} already ended ({self._status})")

    def _end_now(self, status: ToolCallStatus) -> None:
        """Queue the final update at once (no wait, no checkpoint)."""
        if self.finished:
            return
        self._status = status
        params = self._params(ToolCallUpdate(tool_call_id=self.id, status=status))
        self._client.connection.notify_past_limit_nowait("session/update", params)


@asynccontextmanager
async def open_tool_call(
    client: HandleClient,
    session_id: str,
    title: str,
    *,
    kind: ToolKind | None = None,
    status: StartStatus = "in_progress",
    content: Sequence[ToolCallContentLike] = (),
    locations: Sequence[ToolCallLocation] = (),
    raw_input: Any = None,
    tool_call_id: str | None = None,
) -> AsyncIterator[ToolCallHandle]:
    """The implementation of :meth:`ClientProxy.tool_call`."""
    if status in _FINAL:
        raise ValueError(f"a tool call starts pending or in_progress, not {status}")
    if tool_call_id is None:
        tool_call_id = f"call_{secrets.token_hex(8)}"
    start = tool_call_start(
        tool_call_id,
        title,
        kind=kind,
        status=status,
        content=_as_content(content),
        locations=locations,
        raw_input=raw_input,
    )
    params = client.converter.unstructure(SessionNotification(session_id=session_id, update=start))
    await client.connection.notify("session/update", params)
    handle = ToolCallHandle._create(client, session_id, start)
    try:
        yield handle
    except BaseException:
        handle._end_now("failed")
        raise
    handle._end_now("completed")


async def ask_permission(
    client: HandleClient,
    session_id: str,
    tool_call: ToolCallHandle | ToolCallUpdate | str,
    options: Sequence[PermissionOption],
) -> PermissionOption | None:
    """The implementation of :meth:`ClientProxy.ask_permission`."""
    if not options:
        raise ValueError("a permission request needs at least one option")
    ids = [option.option_id for option in options]
    if len(set(ids)) != len(ids):
        raise ValueError(f"permission option ids must differ: {ids}")
    if isinstance(tool_call, ToolCallHandle):
        if tool_call.finished:
            raise RuntimeError(
                f"tool call {tool_call.id!r} already ended ({tool_call.status}): "
                "there is nothing left to allow"
            )
        if tool_call.session_id != session_id:
            raise ValueError(
                f"tool call {tool_call.id!r} belongs to session {tool_call.session_id!r}, "
                f"not {session_id!r}"
            )
        update = tool_call.as_update()
    elif isinstance(tool_call, str):
        update = ToolCallUpdate(tool_call_id=tool_call)
    else:
        update = tool_call
    response = await client.request_permission(
        RequestPermissionRequest(session_id=session_id, tool_call=update, options=list(options))
    )
    outcome = response.outcome
    if isinstance(outcome, RequestPermissionOutcomeCancelled):
        return None
    if isinstance(outcome, SelectedPermissionOutcome):
        for option in options:
            if option.option_id == outcome.option_id:
                return option
        raise RemoteProtocolError(
            f"the client chose permission option {outcome.option_id!r}, "
            f"which was not offered (offered: {ids})"
        )
    raise RemoteProtocolError(f"the client answered the permission request with {outcome!r}")
