"""``python -m acp_trio serve`` and ``connect``: remote ACP from the command
line (needs the ``remote`` extra). Kept apart from ``_cli`` so that the
command line loads without the extra."""

from __future__ import annotations

import argparse
import functools
import os
import sys

import trio

from acp_trio._cli._signals import TERMINATED, run_until_terminated

__all__ = ["add_parsers", "run"]

_TOKEN_ENV = "ACP_TRIO_TOKEN"


def add_parsers(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
) -> dict[str, argparse.ArgumentParser]:
    serve = sub.add_parser(
        "serve",
        help="serve a stdio agent over WebSocket and Streamable HTTP",
        description="Expose a stdio ACP agent (any SDK) at http://HOST:PORT/acp over both "
        "remote profiles (WebSocket, Streamable HTTP over HTTP/1.1 or h2c): one agent process "
        "per ACP connection, stopped when the connection ends. Loopback only unless "
        "--allow-remote; see the README's SECURITY section.",
    )
    serve.add_argument(
        "--http", required=True, metavar="HOST:PORT", help="where to listen (port 0: any free)"
    )
    serve.add_argument(
        "--allow-remote",
        action="store_true",
        help="allow binding an address other than loopback",
    )
    serve.add_argument(
        "--token",
        help=f"require 'Authorization: Bearer TOKEN' (default: ${_TOKEN_ENV} if set)",
    )
    serve.add_argument(
        "--allow-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="a browser origin allowed to connect (repeatable); others get 403",
    )
    serve.add_argument(
        "--idle-timeout",
        type=float,
        default=300.0,
        metavar="S",
        help="end an HTTP connection (and its agent) after S seconds with no request and no "
        "open stream (default 300)",
    )
    limits = serve.add_argument_group(
        "limits", "bounds of a server on a network (docs/serving-on-a-network.md)"
    )
    limits.add_argument(
        "--max-agents",
        type=int,
        default=16,
        metavar="N",
        help="agent processes at once (one per ACP connection; beyond: 503, default 16)",
    )
    limits.add_argument(
        "--max-agents-per-client",
        type=int,
        metavar="N",
        help="agent processes at once for one client address (beyond: 429; default half)",
    )
    limits.add_argument(
        "--max-connections",
        type=int,
        metavar="N",
        help="TCP connections at once (beyond: 503; default: the open-files limit, less "
        "64 and 4 per agent)",
    )
    limits.add_argument(
        "--max-connections-per-client",
        type=int,
        metavar="N",
        help="TCP connections at once from one client address (beyond: 429; default half)",
    )
    limits.add_argument(
        "--max-message-size",
        type=int,
        default=16 * 1024 * 1024,
        metavar="BYTES",
        help="the message cap of every connection (default 16 MiB)",
    )
    limits.add_argument(
        "--head-timeout",
        type=float,
        default=10.0,
        metavar="S",
        help="seconds a request head may take from its first byte (default 10)",
    )
    limits.add_argument(
        "--body-timeout",
        type=float,
        default=10.0,
        metavar="S",
        help="seconds of grace for a request body, before it must keep --min-body-rate "
        "(default 10)",
    )
    limits.add_argument(
        "--min-body-rate",
        type=float,
        default=16 * 1024,
        metavar="BYTES_PER_S",
        help="the slowest a request body may come after its grace (default 16384)",
    )
    serve.add_argument("command", nargs=argparse.REMAINDER, help="-- AGENT_CMD...")
    connect = sub.add_parser(
        "connect",
        help="bridge a remote agent to stdio",
        description="Connect to the remote ACP agent at URL (ws://, wss://, http://, "
        "https://) and bridge it to stdio, so any editor can use it as a local agent.",
    )
    connect.add_argument("url", metavar="URL")
    connect.add_argument(
        "--profile",
        choices=["auto", "websocket", "http", "http1"],
        default="auto",
        help="auto (default): WebSocket, else Streamable HTTP",
    )
    connect.add_argument(
        "--token", help=f"send 'Authorization: Bearer TOKEN' (default: ${_TOKEN_ENV} if set)"
    )
    return {"serve": serve, "connect": connect}


def _split(parser: argparse.ArgumentParser, where: str) -> tuple[str, int]:
    host, sep, port = where.rpartition(":")
    if not sep or not host or not port.isdigit():
        parser.error(f"--http takes HOST:PORT, not {where!r}")
    return host.strip("[]"), int(port)


def _connect_failure(exc: BaseException) -> str | None:
    """One line saying why ``connect`` failed (``None``: a bug, shown whole):
    the server refused (its status and words), or it could not be reached."""
    from acp_trio.remote import HttpStatusError, WebSocketError, WebSocketRejected

    if isinstance(exc, BaseExceptionGroup):
        reasons = [_connect_failure(inner) for inner in exc.exceptions]
        return next((r for r in reasons if r is not None), None) if all(reasons) else None
    if isinstance(exc, WebSocketRejected):
        text = exc.body.decode("utf-8", "replace").strip()
        return f"the server refused the WebSocket: HTTP {exc.status_code}" + (
            f": {text}" if text else ""
        )
    if isinstance(exc, (HttpStatusError, WebSocketError)):
        return str(exc)
    if isinstance(exc, trio.BrokenResourceError) and isinstance(exc.__cause__, Exception):
        return _connect_failure(exc.__cause__) or str(exc)
    if isinstance(exc, OSError):
        return f"cannot connect: {exc.strerror or exc}"
    if isinstance(exc, trio.BrokenResourceError):
        return str(exc)
    name = type(exc).__module__
    if name.startswith(("httpx", "httpcore")):
        return f"cannot connect: {exc}"
    return None


def run(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    try:
        from acp_trio.remote import _bridge
    except ImportError as exc:
        parser.error(str(exc))
    token = args.token or os.environ.get(_TOKEN_ENV) or None
    if args.tool == "connect":
        main = functools.partial(_bridge.connect_stdio, args.url, profile=args.profile, token=token)
        try:
            terminated = trio.run(run_until_terminated, main)
        except KeyboardInterrupt:
            return 130
        except Exception as exc:
            reason = _connect_failure(exc)
            if reason is None:
                raise
            print(f"acp_trio connect: {args.url}: {reason}", file=sys.stderr)
            return 1
        return TERMINATED if terminated else 0
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the agent's command after --")
    host, port = _split(parser, args.http)
    from acp_trio.remote import ServerLimits

    try:
        limits = ServerLimits(
            head_timeout=args.head_timeout,
            body_timeout=args.body_timeout,
            min_body_rate=args.min_body_rate,
            max_agents=args.max_agents,
            max_agents_per_client=args.max_agents_per_client,
            max_connections=args.max_connections,
            max_connections_per_client=args.max_connections_per_client,
        )
    except ValueError as exc:
        parser.error(str(exc))
    if args.max_message_size < 1:
        parser.error(f"--max-message-size must be positive, not {args.max_message_size}")

    async def serve() -> None:
        await _bridge.serve_command(
            command,
            host,
            port,
            allow_remote=args.allow_remote,
            token=token,
            allowed_origins=args.allow_origin,
            idle_timeout=args.idle_timeout,
            max_message_size=args.max_message_size,
            limits=limits,
        )

    try:
        terminated = trio.run(run_until_terminated, serve)
    except ValueError as exc:
        parser.error(str(exc))
    except KeyboardInterrupt:
        return 130
    return TERMINATED if terminated else 0
