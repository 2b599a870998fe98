"""A proxy that passes messages on, and exits mid-turn on its first prompt."""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples", "proxies"))

from typing import Any

import logging_proxy
import trio

import acp_trio


class CrashProxy(logging_proxy.LoggingProxy):
    async def handle_request(
        self, ctx: acp_trio.lowlevel.RequestContext, method: str, params: Any
    ) -> Any:
        if method == "session/prompt":
            os._exit(7)
        return await super().handle_request(ctx, method, params)


async def main() -> None:
    proxy = CrashProxy()
    async with (
        acp_trio.lowlevel.open_stdio_stream() as stream,
        acp_trio.lowlevel.open_connection(stream, proxy) as connection,
    ):
        proxy.connection = connection
        proxy.connected.set()
        await connection.wait_closed()


trio.run(main)
