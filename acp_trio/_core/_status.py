"""What every part of a connection reads of its life."""

from __future__ import annotations

from typing import final

import trio

__all__ = ["Status"]


@final
class Status:
    """The connection's life, shared by its parts: whether closing has
    begun, and the nursery its tasks run in (``None`` until it runs). The
    parts read it; only the connection changes it (:meth:`running_in`,
    :meth:`close`)."""

    __slots__ = ("closed", "nursery")

    def __init__(self) -> None:
        self.closed = False
        self.nursery: trio.Nursery | None = None

    def running_in(self, nursery: trio.Nursery) -> None:
        """The connection runs: its tasks start in ``nursery``."""
        self.nursery = nursery

    def close(self) -> None:
        """Closing has begun (once and for all)."""
        self.closed = True
