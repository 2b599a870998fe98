"""A proxy that passes messages on, and exits (code 7) mid-turn on the first
request of the method given after ``--on`` (default ``session/prompt``),
wrapped in ``proxy/successor`` or not."""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples", "proxies"))

from typing import Any

import logging_proxy
import trio

import acp_trio

ON = sys.argv[sys.argv.index("--on") + 1] if "--on" in sys.argv else "session/prompt"


class CrashProxy(logging_proxy.LoggingProxy):
    async def handle_request(
        self, ctx: acp_trio.lowlevel.RequestContext, method: str, params: Any
    ) -> Any:
        inner = params["method"] if method == logging_proxy.SUCCESSOR else method
        if inner == ON:
            os._exit(7)
        return await super().handle_request(ctx, method, params)


trio.run(logging_proxy.main, CrashProxy())
