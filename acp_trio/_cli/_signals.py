"""SIGTERM as SIGINT for the long-running tools (``serve``, ``connect``,
``conduct``): what they started is stopped the same way (agents closed,
then signalled, shielded and time-bounded), where the default action of
SIGTERM ends the process at once and leaves its agents running."""

from __future__ import annotations

import signal
from collections.abc import Awaitable, Callable
from typing import Final

import trio

from acp_trio._core._groups import plain_exceptions

__all__ = ["TERMINATED", "run_until_terminated"]

#: The exit status of a tool ended by SIGTERM (128 + 15, as a shell says).
TERMINATED: Final = 128 + signal.SIGTERM


async def run_until_terminated(main: Callable[[], Awaitable[None]]) -> bool:
    """Run ``main()``; on SIGTERM cancel it (its teardown runs as on
    SIGINT). Whether SIGTERM ended it."""
    terminated = False
    with plain_exceptions():
        async with trio.open_nursery() as nursery:

            async def watch(task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
                nonlocal terminated
                with trio.open_signal_receiver(signal.SIGTERM) as signals:
                    task_status.started()
                    async for _ in signals:
                        terminated = True
                        nursery.cancel_scope.cancel()
                        return

            # (SIGTERM handled before main starts anything)
            await nursery.start(watch)
            await main()
            nursery.cancel_scope.cancel()
    return terminated
