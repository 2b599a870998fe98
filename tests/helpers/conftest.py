"""Shared helpers for the tests of the client-side safety helpers
(:class:`WorkspaceFiles`, :class:`TerminalManager`).

These tests use real files and real processes, so they run on the real
clock; :func:`limited` puts each one under ``trio.fail_after``.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import ParamSpec, TypeVar

import pytest
import trio

from acp_trio.contrib._terminals import _group_running_sync

P = ParamSpec("P")
T = TypeVar("T")

#: Real seconds one test may take.
LIMIT = 10.0


@pytest.fixture
def real_tmp(tmp_path: Path) -> Path:
    """``tmp_path`` with symlinks resolved (as a child process sees it)."""
    return tmp_path.resolve()


def limited(fn: Callable[P, Awaitable[T]]) -> Callable[P, Awaitable[T]]:
    """Run the async test under ``trio.fail_after(LIMIT)``."""

    @functools.wraps(fn)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        with trio.fail_after(LIMIT):
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
