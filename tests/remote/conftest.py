"""Shared helpers for the remote-transport tests: a real hypercorn server
on a loopback port (real clock, generous watchdogs)."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import pytest

pytest.importorskip("hypercorn")
pytest.importorskip("trio_websocket")

import trio

from acp_trio.remote import RemoteApp, serve_remote

#: The watchdog of each I/O test (seconds); generous for a loaded machine.
LIMIT = int(__import__("os").environ.get("REMOTE_TEST_LIMIT", "60"))


@asynccontextmanager
async def running(app: RemoteApp, host: str = "127.0.0.1") -> AsyncIterator[str]:
    """Serve ``app`` on a free loopback port for the block; yields its base
    URL (``http://127.0.0.1:PORT``)."""
    async with trio.open_nursery() as nursery:
        binds = await nursery.start(functools.partial(serve_remote, app, 0, host=host))
        try:
            yield binds[0]
        finally:
            nursery.cancel_scope.cancel()


def ws_url(base: str, path: str = "/acp") -> str:
    return base.replace("http://", "ws://", 1) + path


async def until(predicate: Callable[[], bool]) -> None:
    """Wait until ``predicate()`` holds (the test's watchdog bounds it)."""
    while True:
        if predicate():
            return
        await trio.sleep(0.005)
