"""Builders for the schema objects agents and clients make most.

Each function takes keyword arguments with the protocol's defaults and
returns the generated schema class, ready to send::

    from acp_trio import build

    await client.session_update(session_id, build.agent_message("Looking..."))
    await client.session_update(
        session_id,
        build.tool_call_start(
            "call-1", "Edit main.py", kind="edit",
            content=[build.diff("main.py", new_text, old_text=old_text)],
            locations=[build.location("main.py", line=3)],
        ),
    )

Collections are accepted as any ``Sequence`` (a ``list[Diff]`` built first
passes ``mypy --strict`` where the schema field is a ``list`` of the union)
and copied into a fresh list. Plain strings stand for text wherever a
content block is expected. Nothing here sends anything, checks for
cancellation or touches a connection: these are plain functions.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any, Final

from acp_trio.schema import (
    AgentMessageChunk,
    AgentThoughtChunk,
    Annotations,
    AudioContent,
    AvailableCommand,
    AvailableCommandsUpdate,
    BlobResourceContents,
    ConfigOptionUpdate,
    Content,
    ContentBlock,
    CurrentModeUpdate,
    Diff,
    EmbeddedResource,
    ImageContent,
    PermissionOption,
    Plan,
    PlanEntry,
    ResourceLink,
    SessionConfigOption,
    Terminal,
    TextContent,
    TextResourceContents,
    ToolCall,
    ToolCallContent,
    ToolCallLocation,
    ToolCallUpdate,
    UnstructuredCommandInput,
    UserMessageChunk,
)
from acp_trio.schema._generated_types import (
    PermissionOptionKind,
    PlanEntryPriority,
    PlanEntryStatus,
    ToolCallStatus,
    ToolKind,
)

__all__ = [
    "ALLOW_ONCE",
    "ALLOW_OR_REJECT",
    "REJECT_ONCE",
    "agent_message",
    "agent_thought",
    "audio",
    "available_commands",
    "blob_resource",
    "command",
    "config_options",
    "content",
    "current_mode",
    "diff",
    "image",
    "location",
    "permission_option",
    "plan",
    "plan_entry",
    "resource_link",
    "terminal",
    "text",
    "text_resource",
    "tool_call_start",
    "tool_call_update",
    "user_message",
]

# ----------------------------------------------------------------------
# Content blocks


def text(text: str, *, annotations: Annotations | None = None) -> TextContent:
    """A text content block."""
    return TextContent(text=text, annotations=annotations)


def _data(data: str | bytes) -> str:
    return base64.b64encode(data).decode("ascii") if isinstance(data, bytes) else data


def image(
    data: str | bytes,
    mime_type: str,
    *,
    uri: str | None = None,
    annotations: Annotations | None = None,
) -> ImageContent:
    """An image block. ``data`` is base64 text, or raw ``bytes`` (encoded
    here). Clients accept images only with ``promptCapabilities.image``."""
    return ImageContent(data=_data(data), mime_type=mime_type, uri=uri, annotations=annotations)


def audio(
    data: str | bytes, mime_type: str, *, annotations: Annotations | None = None
) -> AudioContent:
    """An audio block (``data`` as for :func:`image`)."""
    return AudioContent(data=_data(data), mime_type=mime_type, annotations=annotations)


def resource_link(
    uri: str,
    name: str,
    *,
    title: str | None = None,
    description: str | None = None,
    mime_type: str | None = None,
    size: int | None = None,
    annotations: Annotations | None = None,
) -> ResourceLink:
    """A link to a resource the other side can fetch."""
    return ResourceLink(
        uri=uri,
        name=name,
        title=title,
        description=description,
        mime_type=mime_type,
        size=size,
        annotations=annotations,
    )


def text_resource(
    uri: str,
    text: str,
    *,
    mime_type: str | None = None,
    annotations: Annotations | None = None,
) -> EmbeddedResource:
    """A resource embedded with its text (a file's contents, say)."""
    return EmbeddedResource(
        resource=TextResourceContents(uri=uri, text=text, mime_type=mime_type),
        annotations=annotations,
    )


def blob_resource(
    uri: str,
    blob: str | bytes,
    *,
    mime_type: str | None = None,
    annotations: Annotations | None = None,
) -> EmbeddedResource:
    """A binary resource embedded as base64 (``bytes`` are encoded here)."""
    return EmbeddedResource(
        resource=BlobResourceContents(uri=uri, blob=_data(blob), mime_type=mime_type),
        annotations=annotations,
    )


def _block(value: str | ContentBlock) -> ContentBlock:
    return TextContent(text=value) if isinstance(value, str) else value


# ----------------------------------------------------------------------
# Tool-call content and locations


def content(block: str | ContentBlock) -> Content:
    """Tool-call content showing a content block (a string is text)."""
    return Content(content=_block(block))


def diff(path: str, new_text: str, *, old_text: str | None = None) -> Diff:
    """Tool-call content showing a change to the file at ``path``
    (absolute); ``old_text=None`` means a new file."""
    return Diff(path=path, new_text=new_text, old_text=old_text)


def terminal(terminal_id: str) -> Terminal:
    """Tool-call content embedding a terminal the client created
    (``terminal/create``): the client shows its live output."""
    return Terminal(terminal_id=terminal_id)


def location(path: str, *, line: int | None = None) -> ToolCallLocation:
    """A file (and line) a tool call works on, for "follow along"."""
    return ToolCallLocation(path=path, line=line)


# ----------------------------------------------------------------------
# Session updates


def agent_message(block: str | ContentBlock, *, message_id: str | None = None) -> AgentMessageChunk:
    """A piece of the agent's reply (``agent_message_chunk``)."""
    return AgentMessageChunk(content=_block(block), message_id=message_id)


def agent_thought(block: str | ContentBlock, *, message_id: str | None = None) -> AgentThoughtChunk:
    """A piece of the agent's reasoning (``agent_thought_chunk``)."""
    return AgentThoughtChunk(content=_block(block), message_id=message_id)


def user_message(block: str | ContentBlock, *, message_id: str | None = None) -> UserMessageChunk:
    """A piece of a user message (``user_message_chunk``: a replayed
    history, for ``session/load``)."""
    return UserMessageChunk(content=_block(block), message_id=message_id)


def _list(items: Sequence[Any] | None) -> list[Any] | None:
    return None if items is None else list(items)


def tool_call_start(
    tool_call_id: str,
    title: str,
    *,
    kind: ToolKind | None = None,
    status: ToolCallStatus = "pending",
    content: Sequence[ToolCallContent] = (),
    locations: Sequence[ToolCallLocation] = (),
    raw_input: Any = None,
) -> ToolCall:
    """A new tool call (``tool_call``), ``pending`` unless told otherwise.
    ``kind`` picks the icon (``read``, ``edit``, ``execute``, ...)."""
    return ToolCall(
        tool_call_id=tool_call_id,
        title=title,
        kind=kind,
        status=status,
        content=list(content) or None,
        locations=list(locations) or None,
        raw_input=raw_input,
    )


def tool_call_update(
    tool_call_id: str,
    *,
    status: ToolCallStatus | None = None,
    title: str | None = None,
    kind: ToolKind | None = None,
    content: Sequence[ToolCallContent] | None = None,
    locations: Sequence[ToolCallLocation] | None = None,
    raw_input: Any = None,
    raw_output: Any = None,
) -> ToolCallUpdate:
    """A change to a tool call (``tool_call_update``): only the fields
    given are sent. ``content`` (and ``locations``) replace the call's whole
    collection; ``content=[]`` clears it."""
    return ToolCallUpdate(
        tool_call_id=tool_call_id,
        status=status,
        title=title,
        kind=kind,
        content=_list(content),
        locations=_list(locations),
        raw_input=raw_input,
        raw_output=raw_output,
    )


def plan_entry(
    content: str,
    *,
    priority: PlanEntryPriority = "medium",
    status: PlanEntryStatus = "pending",
) -> PlanEntry:
    """One step of a plan."""
    return PlanEntry(content=content, priority=priority, status=status)


def plan(entries: Sequence[PlanEntry | str]) -> Plan:
    """The agent's whole plan (``plan``; each one replaces the last). A
    string is a ``pending`` step of ``medium`` priority. Raises
    ``TypeError`` for a single string (a list of steps is needed)."""
    if isinstance(entries, str):
        raise TypeError("plan() takes a sequence of steps, not one string: plan([step])")
    return Plan(entries=[plan_entry(e) if isinstance(e, str) else e for e in entries])


def command(name: str, description: str, *, hint: str | None = None) -> AvailableCommand:
    """A slash command the agent offers; ``hint`` describes the input it
    takes after its name (shown when it is typed)."""
    return AvailableCommand(
        name=name,
        description=description,
        input=None if hint is None else UnstructuredCommandInput(hint=hint),
    )


def available_commands(commands: Sequence[AvailableCommand]) -> AvailableCommandsUpdate:
    """The commands the agent offers now (``available_commands_update``)."""
    return AvailableCommandsUpdate(available_commands=list(commands))


def current_mode(mode_id: str) -> CurrentModeUpdate:
    """The session's mode changed (``current_mode_update``)."""
    return CurrentModeUpdate(current_mode_id=mode_id)


def config_options(options: Sequence[SessionConfigOption]) -> ConfigOptionUpdate:
    """The session's configuration options now (``config_option_update``)."""
    return ConfigOptionUpdate(config_options=list(options))


# ----------------------------------------------------------------------
# Permission options


def permission_option(option_id: str, name: str, kind: PermissionOptionKind) -> PermissionOption:
    """One choice of a permission request: ``kind`` is ``allow_once``,
    ``allow_always``, ``reject_once`` or ``reject_always``. Raises
    ``ValueError`` for another kind."""
    if kind not in _KINDS:
        raise ValueError(f"permission option kind must be one of {sorted(_KINDS)}, not {kind!r}")
    return PermissionOption(option_id=option_id, name=name, kind=kind)


_KINDS: Final = frozenset({"allow_once", "allow_always", "reject_once", "reject_always"})

#: "Allow" once.
ALLOW_ONCE: Final = PermissionOption(option_id="allow", name="Allow", kind="allow_once")
#: "Reject" once.
REJECT_ONCE: Final = PermissionOption(option_id="reject", name="Reject", kind="reject_once")
#: The usual pair of choices, allow first.
ALLOW_OR_REJECT: Final[tuple[PermissionOption, ...]] = (ALLOW_ONCE, REJECT_ONCE)
