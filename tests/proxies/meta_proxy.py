"""A pass-through chain proxy that puts ``_meta`` of its own on every
``proxy/successor`` envelope it sends (hop-local: the conductor drops it)."""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples", "proxies"))

from typing import Any

import logging_proxy
import trio

HOP_META = {"example.org/hop": "local to this hop"}


class MetaProxy(logging_proxy.LoggingProxy):
    def route(self, method: str, params: Any) -> tuple[str, Any]:
        out, out_params = super().route(method, params)
        if out == logging_proxy.SUCCESSOR:
            out_params = {**out_params, "_meta": HOP_META}
        return out, out_params


trio.run(logging_proxy.main, MetaProxy())
