"""Shared helpers of the ``acp_trio.contrib`` tests.

The in-memory tests run on the autojump clock (:data:`LIMIT` virtual
seconds each). Those of :class:`WorkspaceFiles` and :class:`TerminalManager`
use real files and real processes, so they run on the real clock;
:func:`limited` puts each one under ``trio.fail_after(REAL_LIMIT)``.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import ParamSpec, TypeVar

import pytest
import trio
import trio.testing

from acp_trio.contrib._terminals import _group_running_sync

P = ParamSpec("P")
T = TypeVar("T")

#: Virtual seconds an in-memory test may take.
LIMIT = 600

#: Real seconds a test with real files or processes may take.
REAL_LIMIT = 10.0


@pytest.fixture
def autojump_clock() -> trio.testing.MockClock:
    return trio.testing.MockClock(autojump_threshold=0)


@pytest.fixture
def real_tmp(tmp_path: Path) -> Path:
    """``tmp_path`` with symlinks resolved (as a child process sees it)."""
    return tmp_path.resolve()


def limited(fn: Callable[P, Awaitable[T]]) -> Callable[P, Awaitable[T]]:
    """Run the async test under ``trio.fail_after(REAL_LIMIT)``."""

    @functools.wraps(fn)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        with trio.fail_after(REAL_LIMIT):
            return await fn(*args, **kwargs)

    return wrapper


def group_alive(pgid: int) -> bool:
    """Whether a process of the group ``pgid`` still runs. Zombies do not
    count: orphans that died wait for init to reap them, and some inits do
    that only every second or so."""
    return _group_running_sync(pgid)


def process_alive(pid: int) -> bool:
    """Whether ``pid`` still runs (a zombie does not)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            data = file.read()
    except FileNotFoundError:
        return False
    except OSError:  # no /proc: kill(0) is the best we have
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    return data[data.rfind(b")") + 1 :].split()[0] not in (b"Z", b"X")


async def group_vanishes(pgid: int, within: float = 5.0) -> None:
    """Wait until ``os.killpg(pgid, 0)`` raises ProcessLookupError: every
    process of the group is gone, zombies reaped too."""
    with trio.fail_after(within):
        while True:
            try:
                os.killpg(pgid, 0)
            except ProcessLookupError:
                return
            await trio.sleep(0.05)
