"""A pass-through chain proxy that puts ``_meta`` of its own on every
``proxy/successor`` envelope it sends (hop-local: the conductor drops it)."""

from __future__ import annotations

from typing import Any

import trio

import acp_trio

SUCCESSOR = "proxy/successor"
HOP_META = {"example.org/hop": "local to this hop"}


def route(method: str, params: Any) -> tuple[str, Any]:
    if method == SUCCESSOR:
        return params["method"], params.get("params")
    if method == "proxy/initialize":
        method = "initialize"
    return SUCCESSOR, {"method": method, "params": params, "_meta": HOP_META}


class MetaProxy(acp_trio.Handler):
    connection: acp_trio.Connection

    async def handle_request(self, ctx: acp_trio.RequestContext, method: str, params: Any) -> Any:
        try:
            return await ctx.connection.call(*route(method, params))
        except acp_trio.RequestError as exc:
            raise exc.passed_on() from None

    async def handle_notification(self, method: str, params: Any) -> None:
        await self.connection.notify(*route(method, params))


async def main() -> None:
    proxy = MetaProxy()
    async with (
        acp_trio.open_stdio_stream() as stream,
        acp_trio.open_connection(stream, proxy) as connection,
    ):
        proxy.connection = connection
        await connection.wait_closed()


trio.run(main)
