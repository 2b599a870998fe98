"""What every part of a connection reads of its life."""

from __future__ import annotations

from typing import final

import trio

__all__ = ["Status"]


@final
class Status:
    """The connection's life, shared by its parts: whether closing has
    begun, and the nursery its tasks run in (``None`` until it runs). Only
    the connection itself writes it."""

    __slots__ = ("closed", "nursery")

    def __init__(self) -> None:
        self.closed = False
        self.nursery: trio.Nursery | None = None
