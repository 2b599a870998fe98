"""A proxy for a chain (``python -m acp_trio conduct``): passes every message
on, both ways, and logs each one to stderr with the hop's own id.

It talks only to the conductor, on its stdio: messages from the client side
arrive as they are and go on to the successor wrapped in ``proxy/successor``;
the successor's messages arrive wrapped and go on to the client side as they
are. Forwarding is a nested call in the incoming request's scope, so a
cancelled request cancels its forwarded one, on the wire, with its own id.
A ``ForwardOrder`` keeps each notification behind the requests read before
it, so that a ``session/cancel`` never overtakes its prompt.
"""

from __future__ import annotations

import sys
from typing import Any

import trio

import acp_trio
from acp_trio.proxy import ForwardOrder

SUCCESSOR = "proxy/successor"


QUIET = "--quiet" in sys.argv[1:]  # pass messages on without logging (benchmarks)
OTEL = "--otel" in sys.argv[1:]  # trace with OpenTelemetry (the otel extra and its SDK)


def log(line: str) -> None:
    if not QUIET:
        print(f"logging-proxy: {line}", file=sys.stderr, flush=True)


class LoggingProxy(acp_trio.lowlevel.Handler):
    def __init__(self) -> None:
        self.connection: acp_trio.lowlevel.Connection | None = None
        self.connected = trio.Event()
        self.order = ForwardOrder()

    def request_received(self, ctx: acp_trio.lowlevel.RequestContext, params: Any) -> None:
        self.order.received(ctx)

    def request_finished(self, ctx: acp_trio.lowlevel.RequestContext) -> None:
        self.order.finished(ctx)

    def intercept_notification(self, method: str, params: Any) -> bool:
        self.order.notification_read()
        return False

    def route(self, method: str, params: Any) -> tuple[str, Any]:
        """Where a message goes: unwrap the successor's, wrap the client's."""
        if method == SUCCESSOR:
            return params["method"], params.get("params")
        if method == "proxy/initialize":
            method = "initialize"  # forwarded as initialize, as the RFD asks
        return SUCCESSOR, {"method": method, "params": params}

    async def handle_request(
        self, ctx: acp_trio.lowlevel.RequestContext, method: str, params: Any
    ) -> Any:
        out, out_params = self.route(method, params)
        log(f"request {ctx.id!r} {method} -> {out}")
        self.order.sending(ctx)  # sent now: the notifications after it may follow
        try:
            return await ctx.connection.call(out, out_params)
        except acp_trio.RequestError as exc:
            raise exc.passed_on() from None  # the error comes back unchanged
        finally:
            log(f"request {ctx.id!r} done")

    async def handle_notification(self, method: str, params: Any) -> None:
        await self.order.before_notification()
        out, out_params = self.route(method, params)
        log(f"notification {method} -> {out}")
        if not self.connected.is_set():
            await self.connected.wait()
        assert self.connection is not None
        await self.connection.notify(out, out_params)


async def main(proxy: LoggingProxy) -> None:
    """Serve ``proxy`` on stdio until the conductor closes it."""
    async with (
        acp_trio.lowlevel.open_stdio_stream() as stream,
        acp_trio.lowlevel.open_connection(stream, proxy) as connection,
    ):
        proxy.connection = connection
        proxy.connected.set()
        await connection.wait_closed()


if __name__ == "__main__":
    if not OTEL:
        trio.run(main, LoggingProxy())
    else:
        # Spans exported as OTEL_* say (OTEL_TRACES_EXPORTER=console: stderr);
        # every connection of the process traced, each hop continuing the trace.
        from acp_trio.contrib.otel import Tracing, configure_sdk

        shutdown = configure_sdk("logging-proxy")
        Tracing().install()
        try:
            trio.run(main, LoggingProxy())
        finally:
            shutdown()
