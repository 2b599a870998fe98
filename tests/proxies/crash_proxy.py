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
    async def handle_request(self, ctx: acp_trio.RequestContext, method: str, params: Any) -> Any:
        if method == "session/prompt":
            os._exit(7)
        return await super().handle_request(ctx, method, params)


trio.run(logging_proxy.main, CrashProxy())
