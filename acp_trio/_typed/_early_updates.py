"""``session/update`` for a session the client does not know yet.

An agent may stream updates for a new session before it answers
``session/new`` (commands, modes, a greeting): ACP allows it, and the client
application only learns the session id from that answer. Handing such an
update to :meth:`Client.session_update` at once makes the application meet a
session it has never heard of (a ``KeyError`` in its table, an update lost).

:class:`EarlyUpdates` holds them back instead, while one of the client's own
``session/new`` calls is waiting for its answer, and delivers them, in wire
order, once that call has returned: in the notification consumer, as soon
as the caller lets other tasks run, so code that records the session just
after ``await agent.new_session(...)`` (before its next ``await``) sees it
first; and before the result of any call whose answer is read after that
one is handed over, as for notifications read before a reply. Updates of
the session read after the answer but before that delivery wait behind
them (its order never changes). Nothing is dropped while the connection
lives (if it ends between the answer and the delivery, the updates of a
session on a dead connection go with it):

- an update for an id that no pending ``session/new`` turns out to have
  created is delivered once no ``session/new`` is pending any more;
- past :attr:`EarlyUpdates.limit` updates held in all, the session's held
  updates are delivered at once (with a warning), as they are, then the new
  one: memory stays bounded and the order of the session holds.

Sessions the client names itself (``session/load``, ``session/resume``) are
known from the request: their replayed history is delivered as it comes.
Without a pending ``session/new``, every update is delivered at once.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from acp_trio.schema import SessionNotification

__all__ = ["EarlyUpdates"]

_log = logging.getLogger("acp_trio")

#: How many updates may be held back in all (see :class:`EarlyUpdates`).
DEFAULT_LIMIT = 4096


class EarlyUpdates:
    """The client's knowledge of its sessions, and the updates it holds back
    for sessions it is about to learn of. Runs in the notification consumer,
    except the ``creating`` / ``created`` / ``creation_failed`` calls, made by
    the task calling ``session/new``."""

    def __init__(
        self,
        deliver: Callable[[SessionNotification], Awaitable[None]],
        schedule: Callable[[Callable[[], Awaitable[None]]], bool],
        *,
        limit: int = DEFAULT_LIMIT,
    ) -> None:
        """``deliver`` hands an update to the application; ``schedule(fn)``
        has the notification consumer run ``fn`` after what it has queued."""
        self._deliver = deliver
        self._schedule = schedule
        #: Most updates held back at once, over all sessions.
        self.limit = limit
        #: The ids of the sessions the client knows (made, loaded, resumed
        #: through the proxy, and not closed or deleted since).
        self.known: set[str] = set()
        self._creating = 0
        self._held: dict[str, list[SessionNotification]] = {}
        self._count = 0
        #: Updates delivered early because the limit was reached.
        self.overflowed = 0

    @property
    def held(self) -> int:
        """How many updates are held back now."""
        return self._count

    async def receive(self, params: SessionNotification) -> None:
        """An update read from the agent: deliver it now or hold it back."""
        session_id = params.session_id
        held = self._held.get(session_id)
        if held is None and (session_id in self.known or not self._creating):
            await self._deliver(params)
            return
        if self._count >= self.limit:
            await self._overflow(session_id, params)
            return
        if held is None:
            held = self._held[session_id] = []
        held.append(params)
        self._count += 1

    async def _overflow(self, session_id: str, params: SessionNotification) -> None:
        held = self._held.pop(session_id, [])
        self._count -= len(held)
        if not self.overflowed and self.limit:
            _log.warning(
                "session/update for session %r, which the client does not know yet: "
                "more than %d updates held back in all, delivering its %d now (and "
                "others past the limit from now on, without a warning)",
                session_id,
                self.limit,
                len(held) + 1,
            )
        self.overflowed += len(held) + 1
        held.append(params)
        await self._deliver_all(held)

    def creating(self) -> None:
        """A ``session/new`` is about to be sent."""
        self._creating += 1

    def created(self, session_id: str) -> None:
        """A ``session/new`` was answered with ``session_id``."""
        self._creating -= 1
        self.known.add(session_id)
        self._flush_soon()

    def creation_failed(self) -> None:
        """A ``session/new`` ended without a session (an error, a
        cancellation, the connection closing)."""
        self._creating -= 1
        self._flush_soon()

    def naming(self, session_id: str) -> bool:
        """The client names a session it means to load or resume: known from
        now. Returns whether it was new (to undo with :meth:`forget` if the
        request fails)."""
        if session_id in self.known:
            return False
        self.known.add(session_id)
        return True

    def forget(self, session_id: str) -> None:
        """The session was closed or deleted."""
        self.known.discard(session_id)

    def _flush_soon(self) -> None:
        if self._held and not self._schedule(self._flush):
            self._held.clear()  # the connection is closing: nobody to tell
            self._count = 0

    async def _flush(self) -> None:
        """In the consumer: deliver what is held for the sessions now known,
        and everything once no ``session/new`` is pending."""
        for session_id in list(self._held):
            if session_id in self.known or not self._creating:
                held = self._held.pop(session_id, None)
                if held is None:
                    continue  # delivered meanwhile (the limit) or dropped (closing)
                self._count -= len(held)
                await self._deliver_all(held)

    async def _deliver_all(self, updates: list[SessionNotification]) -> None:
        for params in updates:
            try:
                await self._deliver(params)
            except Exception:
                _log.exception("error handling notification session/update")
