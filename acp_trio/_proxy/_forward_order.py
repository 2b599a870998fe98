"""Wire order for components that pass messages on (the conductor's hops,
chain proxies).

A connection runs each incoming request in a task of its own and the
notifications in one consumer, so a notification read *after* a request can
be passed on *before* it: a client's ``session/cancel`` sent right after its
``session/prompt`` would reach the agent first, find no turn, and be lost.
:class:`ForwardOrder` keeps a forwarded notification behind the requests
read before it, until each has been passed on (or answered).
"""

from __future__ import annotations

from collections import deque

import trio

from acp_trio._core._requests import RequestContext, current_request

__all__ = ["ForwardOrder"]


class ForwardOrder:
    """The order of one connection's incoming messages, for passing them on.

    Wire it to the connection's :class:`~acp_trio.lowlevel.Handler` hooks:
    :meth:`received` from ``request_received``, :meth:`finished` from
    ``request_finished``, :meth:`notification_read` from
    ``intercept_notification`` (for every notification, returning
    ``False``); then call :meth:`sending` just before a request's handler
    sends its first message on (no checkpoint in between), and ``await``
    :meth:`before_notification` at the start of ``handle_notification``.
    """

    def __init__(self) -> None:
        self._read = 0  # requests read so far
        self._unsent: dict[object, int] = {}  # id -> read number, not yet passed on
        self._limits: deque[int] = deque()  # per notification: requests read before it
        self._changed = trio.Event()

    def received(self, ctx: RequestContext) -> None:
        """A request was read (call it from ``request_received``)."""
        self._read += 1
        self._unsent[ctx.id] = self._read

    def finished(self, ctx: RequestContext) -> None:
        """A request's reply was decided (call it from ``request_finished``)."""
        self._release(ctx.id)

    def sending(self, ctx: RequestContext | None = None) -> None:
        """The handler of ``ctx`` (default: the current request) is passing
        its message on now: notifications read after it may follow."""
        ctx = ctx if ctx is not None else current_request()
        if ctx is not None:
            self._release(ctx.id)

    @property
    def all_passed_on(self) -> bool:
        """Whether every request read so far was passed on or answered (a
        message read now may go on at once without overtaking one)."""
        return not self._unsent

    def notification_read(self) -> None:
        """A notification was read (call it from ``intercept_notification``,
        for every notification)."""
        self._limits.append(self._read)

    async def before_notification(self) -> None:
        """Wait until the requests read before this notification were passed
        on or answered (notifications are handled in wire order). Cancelled,
        it stops waiting (the notification's place is given up)."""
        limit = self._limits.popleft() if self._limits else 0
        while self._unsent and min(self._unsent.values()) <= limit:
            await self._changed.wait()

    def _release(self, request_id: object) -> None:
        if self._unsent.pop(request_id, None) is not None:
            self._changed.set()
            self._changed = trio.Event()
