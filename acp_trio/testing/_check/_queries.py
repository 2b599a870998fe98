"""The runner's queries of the transcript: a session's updates and texts,
replies, stray replies, cancels received."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import trio

from acp_trio.testing._check._base import GRACE
from acp_trio.testing._check._wire import (
    AgentSession,
    IncomingRequest,
    Transcript,
    WireEntry,
    same_id,
)


class _WireQueries:
    transcript: Transcript
    timeout: float

    def texts(self, session: AgentSession, session_id: str, mark: int) -> list[str]:
        out: list[str] = []
        for entry in self.updates(session, session_id, mark):
            update = entry.params.get("update")
            if not isinstance(update, dict) or update.get("sessionUpdate") != (
                "agent_message_chunk"
            ):
                continue
            content = update.get("content")
            if isinstance(content, dict) and content.get("type") == "text":
                text = content.get("text")
                if isinstance(text, str):
                    out.append(text)
        return out

    def updates(self, session: AgentSession, session_id: str | None, mark: int) -> list[WireEntry]:
        return [
            e
            for e in self.transcript.received(session.index, mark)
            if e.is_notification
            and e.method == "session/update"
            and isinstance(e.params, dict)
            and (session_id is None or e.params.get("sessionId") == session_id)
        ]

    def reply_entry(self, session: AgentSession, request_id: Any) -> WireEntry | None:
        for entry in self.transcript.received(session.index):
            if entry.is_response and same_id(entry.message.get("id"), request_id):
                return entry
        return None

    def stray_replies(self, session: AgentSession, mark: int) -> list[WireEntry]:
        """Replies since ``mark`` that answer no request of ours: to a
        notification (``id`` null or missing), or to an id never sent."""
        sent_ids = [
            e.message["id"]
            for e in self.transcript.since(0, session.index)
            if e.direction == "sent" and e.is_request and not e.raw
        ]
        out = []
        for entry in self.transcript.received(session.index, mark):
            message = entry.message
            if isinstance(message, dict) and "method" not in message:
                reply_id = message.get("id")
                if reply_id is None or not any(same_id(reply_id, i) for i in sent_ids):
                    out.append(entry)
        return out

    async def wait_cancelled(
        self, session: AgentSession, requests: Iterable[IncomingRequest], mark: int
    ) -> list[IncomingRequest]:
        """Wait (briefly) until each request got a ``$/cancel_request``;
        return those that did not."""
        pending = list(requests)
        with trio.move_on_after(min(GRACE, self.timeout)):
            while True:
                seen = self.transcript.cancels_received(session.index, mark)
                pending = [r for r in pending if not any(same_id(r.id, c) for c in seen)]
                if not pending:
                    break
                await self.transcript.wait_for(lambda e: True, self.transcript.mark())
        return pending
