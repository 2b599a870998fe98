"""What a client knows of a session, folded from its ``session/update``\\ s.

:class:`SessionAccumulator` takes each :class:`SessionNotification` of one
session (:meth:`~SessionAccumulator.apply`) and keeps a typed snapshot:

- :attr:`~SessionAccumulator.messages`: the conversation, one
  :class:`Message` per run of chunks of the same kind (user, agent,
  thought) and ``messageId``; a new id, another kind, or a new tool call in
  between starts a new message (as editors show text around tool calls);
- :attr:`~SessionAccumulator.tool_calls`: each tool call by id, in order of
  appearance, with its latest title, kind, status, content, locations and
  raw input/output (an update replaces only the fields it carries; one for
  an id never announced creates the call, titled ``""``);
- the plan, available commands, current mode, config options, title, usage,
  notices and compactions, each as last reported;
- :attr:`~SessionAccumulator.unknown`: updates of kinds this SDK does not
  know (a newer protocol), kept in order, not dropped.

Callbacks registered with :meth:`~SessionAccumulator.on_change` run after
each update is applied, with the accumulator and the update. Plain
synchronous code: no I/O, no Trio; feed it from ``Client.session_update``.
:class:`SessionStates` keeps one accumulator per session id.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import attrs

from acp_trio.contrib._keyed import Folding, KeyedStates
from acp_trio.schema import (
    UNSET,
    AgentMessageChunk,
    AgentThoughtChunk,
    AvailableCommand,
    AvailableCommandsUpdate,
    CompactionSummaryChunk,
    CompactionUpdate,
    ConfigOptionUpdate,
    ContentBlock,
    CurrentModeUpdate,
    Notice,
    Plan,
    PlanEntry,
    SessionConfigOption,
    SessionInfoUpdate,
    SessionNotification,
    SessionUpdate,
    TextContent,
    ToolCall,
    ToolCallContent,
    ToolCallLocation,
    ToolCallUpdate,
    UnknownSessionUpdate,
    UsageUpdate,
    UserMessageChunk,
)
from acp_trio.schema._generated_types import ToolCallStatus, ToolKind

__all__ = ["Compaction", "Message", "SessionAccumulator", "SessionStates", "ToolCallState"]

MessageKind = Literal["user", "agent", "thought"]


@attrs.define
class Message:
    """One message of the conversation: its chunks' content, in order."""

    kind: MessageKind
    content: list[ContentBlock] = attrs.Factory(list)
    message_id: str | None = None

    @property
    def text(self) -> str:
        """The text of its text blocks, joined."""
        return "".join(block.text for block in self.content if isinstance(block, TextContent))


@attrs.define
class ToolCallState:
    """A tool call as its updates left it."""

    id: str
    title: str = ""
    kind: ToolKind | None = None
    status: ToolCallStatus = "pending"
    content: list[ToolCallContent] = attrs.Factory(list)
    locations: list[ToolCallLocation] = attrs.Factory(list)
    raw_input: Any = None
    raw_output: Any = None


@attrs.define
class Compaction:
    """A compaction of the context, with its summary so far."""

    id: str
    status: str = "in_progress"
    summary: list[ContentBlock] = attrs.Factory(list)
    error: str | None = None


ChangeCallback = Callable[["SessionAccumulator", SessionUpdate], None]

_CHUNK_KINDS: dict[type, MessageKind] = {
    UserMessageChunk: "user",
    AgentMessageChunk: "agent",
    AgentThoughtChunk: "thought",
}


class SessionAccumulator(Folding[SessionUpdate]):
    """The state of one session, from its updates (see the module)."""

    def __init__(self, session_id: str | None = None) -> None:
        super().__init__(session_id)
        self.messages: list[Message] = []
        self.tool_calls: dict[str, ToolCallState] = {}
        self.plan: list[PlanEntry] = []
        self.available_commands: list[AvailableCommand] = []
        self.current_mode_id: str | None = None
        self.config_options: list[SessionConfigOption] = []
        self.title: str | None = None
        self.updated_at: str | None = None
        self.usage: UsageUpdate | None = None
        self.notices: list[Notice] = []
        self.compactions: dict[str, Compaction] = {}
        #: Updates of kinds this SDK does not know, in order.
        self.unknown: list[UnknownSessionUpdate] = []
        self._message_ended = False

    def apply(self, notification: SessionNotification) -> None:
        """Fold one update in, then call the :meth:`on_change` callbacks.
        Raises ``ValueError`` for another session's."""
        self._apply(notification.session_id, notification.update)

    def _fold(self, update: SessionUpdate) -> None:
        if isinstance(update, (UserMessageChunk, AgentMessageChunk, AgentThoughtChunk)):
            self._chunk(_CHUNK_KINDS[type(update)], update.content, update.message_id)
        elif isinstance(update, ToolCall):
            self._message_ended = True
            self.tool_calls[update.tool_call_id] = ToolCallState(
                id=update.tool_call_id,
                title=update.title,
                kind=update.kind,
                status=update.status or "pending",
                content=list(update.content or ()),
                locations=list(update.locations or ()),
                raw_input=update.raw_input,
                raw_output=update.raw_output,
            )
        elif isinstance(update, ToolCallUpdate):
            self._tool_call_update(update)
        elif isinstance(update, Plan):
            self.plan = list(update.entries)
        elif isinstance(update, AvailableCommandsUpdate):
            self.available_commands = list(update.available_commands)
        elif isinstance(update, CurrentModeUpdate):
            self.current_mode_id = update.current_mode_id
        elif isinstance(update, ConfigOptionUpdate):
            self.config_options = list(update.config_options)
        elif isinstance(update, SessionInfoUpdate):
            # Absent: unchanged; null: cleared.
            if update.title is not UNSET:
                self.title = update.title
            if update.updated_at is not UNSET:
                self.updated_at = update.updated_at
        elif isinstance(update, UsageUpdate):
            self.usage = update
        elif isinstance(update, Notice):
            self.notices.append(update)
        elif isinstance(update, CompactionUpdate):
            compaction = self._compaction(update.compaction_id)
            compaction.status = update.status
            if isinstance(update.summary, list):
                compaction.summary = list(update.summary)
            if isinstance(update.error, str):
                compaction.error = update.error
        elif isinstance(update, CompactionSummaryChunk):
            self._compaction(update.compaction_id).summary.append(update.content)
        else:
            self.unknown.append(update)

    def _chunk(self, kind: MessageKind, block: ContentBlock, message_id: str | None) -> None:
        last = self.messages[-1] if self.messages and not self._message_ended else None
        self._message_ended = False
        if (
            last is None
            or last.kind != kind
            or (message_id is not None and message_id != last.message_id)
        ):
            last = Message(kind=kind, message_id=message_id)
            self.messages.append(last)
        last.content.append(block)

    def _tool_call_update(self, update: ToolCallUpdate) -> None:
        call = self.tool_calls.get(update.tool_call_id)
        if call is None:
            call = self.tool_calls[update.tool_call_id] = ToolCallState(id=update.tool_call_id)
        if update.title is not None:
            call.title = update.title
        if update.kind is not None:
            call.kind = update.kind
        if update.status is not None:
            call.status = update.status
        if update.content is not None:
            call.content = list(update.content)
        if update.locations is not None:
            call.locations = list(update.locations)
        if update.raw_input is not None:
            call.raw_input = update.raw_input
        if update.raw_output is not None:
            call.raw_output = update.raw_output

    def _compaction(self, compaction_id: str) -> Compaction:
        compaction = self.compactions.get(compaction_id)
        if compaction is None:
            compaction = self.compactions[compaction_id] = Compaction(id=compaction_id)
        return compaction

    @property
    def agent_text(self) -> str:
        """The text of the agent's last message ("" if none)."""
        for message in reversed(self.messages):
            if message.kind == "agent":
                return message.text
        return ""

    def unfinished_tool_calls(self) -> list[ToolCallState]:
        """Tool calls not ``completed`` or ``failed`` (after a cancelled
        turn, a client shows these as cancelled)."""
        return [c for c in self.tool_calls.values() if c.status not in ("completed", "failed")]


class SessionStates(KeyedStates[SessionAccumulator, SessionNotification, ChangeCallback]):
    """One :class:`SessionAccumulator` per session, made on first use::

        class MyClient(acp_trio.Client):
            def __init__(self) -> None:
                self.states = SessionStates()

            async def session_update(self, params):
                self.states.apply(params)

    ``states[session_id]`` is that session's accumulator, ``apply`` folds an
    update in and returns it, ``on_change`` registers a callback for every
    session, ``forget`` drops a session's state.
    """

    def _new(self, session_id: str) -> SessionAccumulator:
        return SessionAccumulator(session_id)
