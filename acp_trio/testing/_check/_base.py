"""The checks' vocabulary: verdict signals, the check registry, constants, helpers."""

from __future__ import annotations

from collections.abc import (
    Awaitable,
    Callable,
    Sequence,
)
from typing import Any, Final

import attrs

from acp_trio._exceptions import RequestError
from acp_trio.testing._check._report import Level, Rule
from acp_trio.testing._check._wire import (
    WireEntry,
)

STOP_REASONS: Final = frozenset(
    {"end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled"}
)
CANCELLED: Final = -32800
#: The session updates that are a turn's output; the others (available
#: commands, session info and title, mode, config options, usage) tell the
#: session's state and may come at any time.
TURN_OUTPUT: Final = frozenset(
    {
        "agent_message_chunk",
        "agent_thought_chunk",
        "user_message_chunk",
        "plan",
        "tool_call",
        "tool_call_update",
    }
)
#: Where the scenario vocabulary is described, for the hints that name it.
SCENARIO_DOCS: Final = "docs/scenario-agent.md in acp_trio's source"
#: A prompt that keeps a model busy for a while, for agents without the
#: scenario vocabulary (``wait_for_cancel`` means nothing to a model).
LONG_PROMPT: Final = (
    "Count from 1 to 3000, one number per line, with no other text. Do not use any tool."
)
NESTED: Final = ("fs/read_text_file", "terminal/create", "session/request_permission")
# How long to wait for cancels of nested requests after the prompt's answer,
# and for unwanted replies to notifications.
GRACE: Final = 1.0
QUIET: Final = 0.3
# The wire lines (and stderr lines) a failure shows, and their width.
EVIDENCE_LINES: Final = 12
EVIDENCE_WIDTH: Final = 300


def _wire_line(entry: WireEntry) -> str:
    arrow = ">" if entry.direction == "sent" else "<"
    text = entry.data.decode("utf-8", "replace")
    if len(text) > EVIDENCE_WIDTH:
        text = text[: EVIDENCE_WIDTH - 3] + "..."
    return f"{arrow} [{entry.session}] {text}"


class _Fail(Exception):
    def __init__(self, reason: str, evidence: Sequence[WireEntry] = ()) -> None:
        super().__init__(reason)
        self.reason = reason
        #: The lines that prove it (default: the check's last lines).
        self.evidence = tuple(evidence)


class _Skip(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@attrs.frozen
class _Pass:
    reason: str
    latency: float | None = None


@attrs.frozen
class CheckInfo:
    """One check of :func:`check_agent`: its name, level, what it checks, and
    the protocol sentence it rests on (whose normative word gives the level)."""

    name: str
    level: Level
    description: str
    rule: Rule

    def __attrs_post_init__(self) -> None:
        if not self.rule.fits(self.level):
            raise ValueError(
                f"check {self.name!r} is {self.level.value}, but rests on a {self.rule.word}"
            )


CheckFunc = Callable[[Any], Awaitable[_Pass]]  # takes the runner
_REGISTRY: list[tuple[CheckInfo, CheckFunc]] = []
# Checks that always run: every other check needs them.
_SETUP: Final = ("initialize", "session-new")


def _check(
    name: str, level: Level, description: str, rule: Rule
) -> Callable[[CheckFunc], CheckFunc]:
    def register(func: CheckFunc) -> CheckFunc:
        _REGISTRY.append((CheckInfo(name, level, description, rule), func))
        return func

    return register


def _brief(value: Any, limit: int = 160) -> str:
    if isinstance(value, bytes | bytearray):
        text = bytes(value).decode("utf-8", "replace")
    elif isinstance(value, RequestError):
        text = f"error {value.code} ({value.message})"
        if value.data is not None:
            text += f" data {value.data!r}"
    else:
        text = repr(value)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _prompt(session_id: str, text: str) -> dict[str, Any]:
    return {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}


def _init_params(version: int, protocol: int = 1) -> dict[str, Any]:
    """The params of ``initialize`` asking ``version``, in the shape of the
    ``protocol`` the checker speaks (v2: ``info`` and ``capabilities``)."""
    from acp_trio._version import __version__

    if protocol == 2:
        return {
            "protocolVersion": version,
            "info": {"name": "acp_trio-check-agent-v2", "version": __version__},
            "capabilities": {},
        }
    return {
        "protocolVersion": version,
        "clientCapabilities": {
            "fs": {"readTextFile": True, "writeTextFile": True},
            "terminal": True,
        },
        "clientInfo": {"name": "acp_trio-check-agent", "version": __version__},
    }


@attrs.frozen
class _Reply:
    """How the agent answered one request."""

    result: Any = None
    error: RequestError | None = None
    latency: float = 0.0

    @property
    def stop_reason(self) -> Any:
        return self.result.get("stopReason") if isinstance(self.result, dict) else None

    def describe(self) -> str:
        if self.error is not None:
            return _brief(self.error)
        if self.stop_reason is not None:
            return f"stopReason {self.stop_reason!r}"
        return f"result {_brief(self.result)}"

    @property
    def cancelled(self) -> bool:
        """``-32800`` or ``stopReason: cancelled``."""
        if self.error is not None:
            return self.error.code == CANCELLED
        return bool(self.stop_reason == "cancelled")


REQUIRED, RECOMMENDED, CANCELLATION = Level.REQUIRED, Level.RECOMMENDED, Level.CANCELLATION

# The sentences the checks rest on, shared by check-agent and check-agent-v2.
ONE_ANSWER: Final = Rule(
    "MUST",
    "JSON-RPC 2.0 §5; cancellation#cancel_request-notification",
    "every request gets exactly one response, a cancelled one too: the receiver of "
    "$/cancel_request MUST still answer the request",
)
NO_REPLY_TO_NOTIFICATIONS: Final = Rule(
    "MUST NOT",
    "JSON-RPC 2.0 §4.1; extensibility#custom-notifications",
    "a notification is never answered, not even with an error; unrecognized notifications "
    "SHOULD be ignored",
)
VALID_OUTPUT: Final = Rule(
    "MUST NOT",
    "transports#stdio",
    "the agent writes nothing to its stdout that is not a valid ACP message",
)
