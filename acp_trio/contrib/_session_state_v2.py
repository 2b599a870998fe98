"""What a v2 client knows of a session, folded from its ``session/update``\\ s.

ACP v2 updates are *upserts*: an update names an entity (a message, a tool
call, a terminal, a compaction) by id, the first one for an id creates it,
and every other field is a three-state patch: absent leaves the stored value
unchanged (:data:`~acp_trio.schema.v2.UNSET` in the types), ``null``
clears it (``None``; for a collection, ``null`` and ``[]`` both empty it),
a value replaces it. A concrete ``_meta`` object patches the stored
metadata by top-level key (a key set to ``null`` is removed). Chunks append:
content to a message, one content item to a tool call, bytes to a
terminal's output, content to a compaction's summary.

:class:`SessionAccumulator` applies each
:class:`~acp_trio.schema.v2.UpdateSessionNotification` of one session
(:meth:`~SessionAccumulator.apply`) and keeps a typed snapshot: the
messages by id in order of first appearance, the tool calls and terminals
with their latest state, the plans, commands, config options, session
info, usage, notices and compactions, and the turn's state (``running``,
``requires_action``, ``idle`` with its stop reason or error, and the
background work last reported). Updates of kinds this SDK does not know (a
newer protocol) are kept in :attr:`~SessionAccumulator.unknown`, in order.
Plain synchronous code: no I/O, no Trio. :class:`SessionStates` keeps one
accumulator per session id.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Sequence
from typing import Any, Literal, TypeVar

import attrs

from acp_trio.contrib._keyed import Folding, KeyedStates
from acp_trio.schema.v2 import (
    UNSET,
    AgentMessage,
    AgentMessageChunk,
    AgentThought,
    AgentThoughtChunk,
    AvailableCommand,
    AvailableCommandsUpdate,
    BackgroundWork,
    CompactionSummaryChunk,
    CompactionUpdate,
    ConfigOptionUpdate,
    ContentBlock,
    Error,
    IdleStateUpdate,
    Notice,
    PlanEntry,
    PlanItems,
    PlanUpdate,
    RequiresActionStateUpdate,
    RunningStateUpdate,
    SessionConfigOption,
    SessionInfoUpdate,
    SessionUpdate,
    TerminalCapabilities,
    TerminalExitStatus,
    TerminalOutputChunk,
    TerminalSize,
    TerminalUpdate,
    TextContent,
    ToolCallCapabilities,
    ToolCallContent,
    ToolCallContentChunk,
    ToolCallLocation,
    ToolCallUpdate,
    UnknownPlanUpdateContent,
    UnknownSessionUpdate,
    UnknownStateUpdate,
    UnsetType,
    UpdateSessionNotification,
    UsageUpdate,
    UserMessage,
    UserMessageChunk,
)
from acp_trio.schema.v2._generated_types import ToolCallStatus, ToolKind

__all__ = [
    "Compaction",
    "Message",
    "SessionAccumulator",
    "SessionStates",
    "TerminalState",
    "ToolCallState",
]

MessageKind = Literal["user", "agent", "thought"]
T = TypeVar("T")
Meta = dict[str, Any]


def patch(stored: T, value: T | UnsetType) -> T:
    """``value`` unless it is :data:`UNSET` (absent: unchanged)."""
    return stored if isinstance(value, UnsetType) else value


def patch_list(stored: list[T], value: Sequence[T] | UnsetType | None) -> list[T]:
    """A collection patch: absent keeps ``stored``; ``null`` and ``[]`` clear."""
    if isinstance(value, UnsetType):
        return stored
    return list(value) if value else []


def patch_meta(stored: Meta | None, value: Meta | UnsetType | None) -> Meta | None:
    """A ``_meta`` patch: absent keeps it, ``null`` clears it, an object
    patches it by top-level key (a key set to ``null`` is removed)."""
    if isinstance(value, UnsetType):
        return stored
    if value is None:
        return None
    merged = dict(stored or {})
    for key, item in value.items():
        if item is None:
            merged.pop(key, None)
        else:
            merged[key] = item
    return merged


@attrs.define
class Message:
    """One message of the conversation, by its ``messageId``."""

    kind: MessageKind
    message_id: str
    content: list[ContentBlock] = attrs.Factory(list)
    meta: Meta | None = None

    @property
    def text(self) -> str:
        """The text of its text blocks, joined."""
        return "".join(block.text for block in self.content if isinstance(block, TextContent))


@attrs.define
class ToolCallState:
    """A tool call as last reported; a new one starts ``pending``, kind ``other``."""

    tool_call_id: str
    name: str | None = None
    title: str | None = None
    kind: ToolKind = "other"
    status: ToolCallStatus = "pending"
    content: list[ToolCallContent] = attrs.Factory(list)
    locations: list[ToolCallLocation] = attrs.Factory(list)
    raw_input: Any = None
    raw_output: Any = None
    capabilities: ToolCallCapabilities | None = None
    meta: Meta | None = None


@attrs.define
class TerminalState:
    """An agent-owned terminal as last reported; :attr:`output` is bytes (the
    last snapshot and the chunks after it)."""

    terminal_id: str
    command: str | None = None
    cwd: str | None = None
    output: bytes = b""
    exit_status: TerminalExitStatus | None = None
    size: TerminalSize | None = None
    capabilities: TerminalCapabilities | None = None
    meta: Meta | None = None

    @property
    def exited(self) -> bool:
        """Whether an exit status was reported (and not cleared since)."""
        return self.exit_status is not None


@attrs.define
class Compaction:
    """A context compaction, by its ``compactionId``."""

    compaction_id: str
    status: str = "in_progress"
    summary: list[ContentBlock] = attrs.Factory(list)
    error: str | None = None
    meta: Meta | None = None


ChangeCallback = Callable[["SessionAccumulator", SessionUpdate], None]

_CHUNKS: dict[type, MessageKind] = {
    UserMessageChunk: "user",
    AgentMessageChunk: "agent",
    AgentThoughtChunk: "thought",
}
_MESSAGES: dict[type, MessageKind] = {
    UserMessage: "user",
    AgentMessage: "agent",
    AgentThought: "thought",
}
_STATES: dict[type, str] = {
    RunningStateUpdate: "running",
    IdleStateUpdate: "idle",
    RequiresActionStateUpdate: "requires_action",
}


class SessionAccumulator(Folding[SessionUpdate]):
    """The state of one v2 session, from its updates (see the module)."""

    def __init__(self, session_id: str | None = None) -> None:
        super().__init__(session_id)
        #: Messages by id, in order of first appearance.
        self.messages: dict[str, Message] = {}
        self.tool_calls: dict[str, ToolCallState] = {}
        self.terminals: dict[str, TerminalState] = {}
        #: Plan entries by ``planId``, as last reported.
        self.plans: dict[str, list[PlanEntry]] = {}
        self.available_commands: list[AvailableCommand] = []
        self.config_options: list[SessionConfigOption] = []
        self.title: str | None = None
        self.updated_at: str | None = None
        #: The session info's ``_meta``, patched by key.
        self.info_meta: Meta | None = None
        self.usage: UsageUpdate | None = None
        self.notices: list[Notice] = []
        self.compactions: dict[str, Compaction] = {}
        #: ``"running"``, ``"requires_action"``, ``"idle"``, another state a
        #: newer protocol names, or ``None`` before the first state update.
        self.state: str | None = None
        #: The last idle update's stop reason and error (``None``: not reported).
        self.stop_reason: str | None = None
        self.error: Error | None = None
        #: The background work last reported (``None``: never reported).
        self.background: list[BackgroundWork] | None = None
        #: Updates (and state or plan contents) this SDK does not know, in order.
        self.unknown: list[UnknownSessionUpdate | UnknownStateUpdate | UnknownPlanUpdateContent]
        self.unknown = []

    def apply(self, notification: UpdateSessionNotification) -> None:
        """Fold one update in, then call the :meth:`on_change` callbacks.
        Raises ``ValueError`` for another session's."""
        self._apply(notification.session_id, notification.update)

    def _fold(self, update: SessionUpdate) -> None:
        if isinstance(update, (UserMessageChunk, AgentMessageChunk, AgentThoughtChunk)):
            message = self._message(_CHUNKS[type(update)], update.message_id)
            message.content.append(update.content)
        elif isinstance(update, (UserMessage, AgentMessage, AgentThought)):
            message = self._message(_MESSAGES[type(update)], update.message_id)
            message.content = patch_list(message.content, update.content)
            message.meta = patch_meta(message.meta, update.meta)
        elif isinstance(update, ToolCallUpdate):
            self._tool_call_update(update)
        elif isinstance(update, ToolCallContentChunk):
            self._tool_call(update.tool_call_id).content.append(update.content)
        elif isinstance(update, TerminalUpdate):
            self._terminal_update(update)
        elif isinstance(update, TerminalOutputChunk):
            self._terminal(update.terminal_id).output += _bytes(update.data)
        elif isinstance(update, PlanUpdate):
            if isinstance(update.plan, PlanItems):
                self.plans[update.plan.plan_id] = list(update.plan.entries)
            else:
                self.unknown.append(update.plan)
        elif isinstance(update, AvailableCommandsUpdate):
            self.available_commands = list(update.available_commands)
        elif isinstance(update, ConfigOptionUpdate):
            self.config_options = list(update.config_options)
        elif isinstance(update, SessionInfoUpdate):
            self.title = patch(self.title, update.title)
            self.updated_at = patch(self.updated_at, update.updated_at)
            self.info_meta = patch_meta(self.info_meta, update.meta)
        elif isinstance(update, UsageUpdate):
            self.usage = update
        elif isinstance(update, Notice):
            self.notices.append(update)
        elif isinstance(update, CompactionUpdate):
            compaction = self._compaction(update.compaction_id)
            compaction.status = update.status
            compaction.summary = patch_list(compaction.summary, update.summary)
            compaction.error = patch(compaction.error, update.error)
            compaction.meta = patch_meta(compaction.meta, update.meta)
        elif isinstance(update, CompactionSummaryChunk):
            self._compaction(update.compaction_id).summary.append(update.content)
        elif isinstance(update, (RunningStateUpdate, IdleStateUpdate, RequiresActionStateUpdate)):
            self.state = _STATES[type(update)]
            if update.background is not None:
                self.background = list(update.background)
            if isinstance(update, IdleStateUpdate):
                self.stop_reason, self.error = update.stop_reason, update.error
        elif isinstance(update, UnknownStateUpdate):
            state = update.raw.get("state")
            self.state = state if isinstance(state, str) else self.state
            self.unknown.append(update)
        else:
            self.unknown.append(update)

    def _message(self, kind: MessageKind, message_id: str) -> Message:
        return _entity(self.messages, message_id, lambda: Message(kind, message_id))

    def _tool_call(self, tool_call_id: str) -> ToolCallState:
        return _entity(self.tool_calls, tool_call_id, lambda: ToolCallState(tool_call_id))

    def _tool_call_update(self, update: ToolCallUpdate) -> None:
        call = self._tool_call(update.tool_call_id)
        call.name = patch(call.name, update.name)
        call.title = patch(call.title, update.title)
        if update.kind is not UNSET:
            call.kind = "other" if update.kind is None else update.kind
        if update.status is not UNSET:
            call.status = "pending" if update.status is None else update.status
        call.content = patch_list(call.content, update.content)
        call.locations = patch_list(call.locations, update.locations)
        call.raw_input = patch(call.raw_input, update.raw_input)
        call.raw_output = patch(call.raw_output, update.raw_output)
        call.capabilities = patch(call.capabilities, update.capabilities)
        call.meta = patch_meta(call.meta, update.meta)

    def _terminal(self, terminal_id: str) -> TerminalState:
        return _entity(self.terminals, terminal_id, lambda: TerminalState(terminal_id))

    def _terminal_update(self, update: TerminalUpdate) -> None:
        terminal = self._terminal(update.terminal_id)
        terminal.command = patch(terminal.command, update.command)
        terminal.cwd = patch(terminal.cwd, update.cwd)
        if update.output is not UNSET:
            terminal.output = b"" if update.output is None else _bytes(update.output.data)
        terminal.exit_status = patch(terminal.exit_status, update.exit_status)
        terminal.size = patch(terminal.size, update.size)
        terminal.capabilities = patch(terminal.capabilities, update.capabilities)
        terminal.meta = patch_meta(terminal.meta, update.meta)

    def _compaction(self, compaction_id: str) -> Compaction:
        return _entity(self.compactions, compaction_id, lambda: Compaction(compaction_id))

    def agent_text(self) -> str:
        """The text of every agent message, in order."""
        return "".join(m.text for m in self.messages.values() if m.kind == "agent")

    def unfinished_tool_calls(self) -> list[ToolCallState]:
        """Tool calls not ``completed``, ``failed`` or ``cancelled``."""
        ended = ("completed", "failed", "cancelled")
        return [c for c in self.tool_calls.values() if c.status not in ended]


def _entity(entities: dict[str, T], key: str, make: Callable[[], T]) -> T:
    """The entity of an upsert: the stored one, or a new one (the first update)."""
    entity = entities.get(key)
    if entity is None:
        entity = entities[key] = make()
    return entity


def _bytes(data: str) -> bytes:
    """Base64 terminal bytes; malformed data decodes to nothing."""
    try:
        return base64.b64decode(data)
    except (binascii.Error, ValueError):
        return b""


class SessionStates(KeyedStates[SessionAccumulator, UpdateSessionNotification, ChangeCallback]):
    """One v2 :class:`SessionAccumulator` per session, made on first use:
    ``states[session_id]``, ``apply(notification)`` (returns the state),
    ``on_change(callback)`` for every session, ``forget(session_id)``."""

    def _new(self, session_id: str) -> SessionAccumulator:
        return SessionAccumulator(session_id)
