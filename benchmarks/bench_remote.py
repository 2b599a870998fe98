"""Remote ACP on loopback: stream and read over WebSocket and Streamable
HTTP, acp_trio's server and client against the TypeScript SDK 2.4.0's
(``make bench-remote``; the TypeScript cells need ``make
tests/interop/node_modules/.installed``).

Workloads (the scenario vocabulary): ``stream N 16`` (N updates, then the
reply) and ``read N /x`` (N sequential agent -> client requests). Each cell
is the median of RUNS prompts on one warm connection, in milliseconds.
Cells: acp_trio server + client per profile (WebSocket, HTTP/2 h2c,
HTTP/1.1); the TypeScript client and server (HTTP/1.1: Node's http server,
and WebSocket: the ``ws`` package) and the two mixed pairs for each; the
official Python SDK 1.0.0rc3's client and server (WebSocket; its venv,
``make tests/interop/.venv-official-rc/.installed``) and the mixed pairs.
acp_trio's server answers WebSocket upgrades with its own WebSocket, which accepts no
extension; the ``ws`` and ``websockets`` clients offer permessage-deflate, so with a
server that accepts it, that pair compresses every message.
"""

from __future__ import annotations

import argparse
import functools
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import trio

from acp_trio import schema
from acp_trio.remote import agent_app, open_remote_agent, serve_remote
from acp_trio.testing import ScenarioAgent, ScenarioClient

INTEROP = Path(__file__).resolve().parent.parent / "tests" / "interop"
NODE = shutil.which("node")
SERVER = Path(__file__).resolve().parent / "remote_server.py"
HAVE_TS = NODE is not None and (INTEROP / "node_modules" / "@agentclientprotocol").is_dir()
OFFICIAL_RC = INTEROP / ".venv-official-rc"
HAVE_OFFICIAL = (OFFICIAL_RC / ".installed").is_file()
TS_CLIENT = [str(NODE), str(INTEROP / "ts_remote_client.mjs")]
TS_SERVER = [str(NODE), str(INTEROP / "ts_remote_server.mjs")]
OFFICIAL_CLIENT = [str(OFFICIAL_RC / "bin" / "python"), str(INTEROP / "official_rc_client.py")]
OFFICIAL_SERVER = [str(OFFICIAL_RC / "bin" / "python"), str(INTEROP / "official_rc_server.py")]


def websocket(url: str) -> str:
    return url.replace("http://", "ws://", 1)


async def trio_client(url: str, profile: str, commands: list[str], runs: int) -> list[float]:
    """Milliseconds per command (median of ``runs``), acp_trio's client."""
    client = ScenarioClient()
    medians = []
    async with open_remote_agent(client, url, profile=profile) as agent:  # type: ignore[arg-type]
        await agent.initialize(client.initialize_request())
        session = await agent.new_session(schema.NewSessionRequest(cwd="/", mcp_servers=[]))
        for command in commands:
            await agent.prompt_text(session.session_id, command)  # warm-up
            times = []
            for _ in range(runs):
                start = time.perf_counter()
                await agent.prompt_text(session.session_id, command)
                times.append((time.perf_counter() - start) * 1000)
            medians.append(statistics.median(times))
    return medians


async def script_client(
    url: str, script: list[str], commands: list[str], runs: int, ws: bool = False
) -> list[float]:
    """Milliseconds per command (median of ``runs``), a client script
    (``ts_remote_client.mjs``, ``official_rc_client.py``); ``ws``: over
    WebSocket."""
    prompts = [c for command in commands for c in [command] * (runs + 1)]
    result = await trio.run_process(
        [*script, "--quiet", websocket(url) if ws else url, *prompts],
        cwd=INTEROP,
        capture_stdout=True,
        check=True,
    )
    events = [json.loads(line) for line in result.stdout.decode().splitlines()]
    ms = [e["ms"] for e in events if e["ev"] == "result"]
    medians = []
    for i in range(len(commands)):
        chunk = ms[i * (runs + 1) : (i + 1) * (runs + 1)][1:]  # without the warm-up
        medians.append(statistics.median(chunk))
    return medians


#: Run acp_trio's server in this process (with the client) rather than in a
#: process of its own, as the TypeScript server runs in Node's.
IN_PROCESS = False


async def with_trio_server(run: Any) -> list[float]:
    if not IN_PROCESS:
        server = [sys.executable, str(SERVER)]
        return await with_server_process(server, run)
    async with trio.open_nursery() as nursery:
        binds = await nursery.start(functools.partial(serve_remote, agent_app(ScenarioAgent), 0))
        try:
            return await run(binds[0] + "/acp")  # type: ignore[no-any-return]
        finally:
            nursery.cancel_scope.cancel()


async def with_server_process(command: list[str], run: Any) -> list[float]:
    """Run ``run(url)`` against the server started by ``command`` (our
    ``remote_server.py``, ``ts_remote_server.mjs``, ``official_rc_server.py``;
    each prints ``{"url": ...}`` once listening)."""
    async with trio.open_nursery() as nursery:
        process = await nursery.start(
            functools.partial(
                trio.run_process,
                command,
                cwd=INTEROP,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                check=False,
            )
        )
        try:
            line = b""
            while not line.endswith(b"\n"):
                line += await process.stdout.receive_some()
            return await run(json.loads(line)["url"])  # type: ignore[no-any-return]
        finally:
            process.terminate()
            nursery.cancel_scope.cancel()


#: The cells the Targets table of ``bench_report.py`` judges: our HTTP
#: client beside the TypeScript client against our server (HTTP/1.1), and
#: our h2c beside our HTTP/1.1.
JUDGED = (
    "acp_trio server + acp_trio client, HTTP/1.1",
    "acp_trio server + TypeScript client, HTTP/1.1",
    "acp_trio server + acp_trio client, HTTP/2 h2c",
)


async def judged(
    n_stream: int, n_read: int, runs: int, rounds: int
) -> dict[str, list[list[float]]]:
    """Only the :data:`JUDGED` cells, ``rounds`` times, interleaved (each
    round in the opposite order of the one before): per cell, each round's
    [stream ms, read ms]."""
    commands = [f"stream {n_stream} 16", f"read {n_read} /x"]
    cells: dict[str, Any] = {
        JUDGED[0]: functools.partial(trio_client, profile="http1", commands=commands, runs=runs),
        JUDGED[2]: functools.partial(trio_client, profile="http", commands=commands, runs=runs),
    }
    if HAVE_TS:
        cells[JUDGED[1]] = functools.partial(
            script_client, script=TS_CLIENT, commands=commands, runs=runs
        )
    out: dict[str, list[list[float]]] = {name: [] for name in cells}
    names = list(cells)
    for r in range(rounds):
        for name in names if r % 2 == 0 else names[::-1]:
            out[name].append(await with_trio_server(cells[name]))
    return out


async def main(n_stream: int, n_read: int, runs: int, json_path: str | None = None) -> None:
    commands = [f"stream {n_stream} 16", f"read {n_read} /x"]
    cells: list[tuple[str, list[float]]] = []
    for profile, name in (
        ("websocket", "WebSocket"),
        ("http", "HTTP/2 h2c"),
        ("http1", "HTTP/1.1"),
    ):
        run = functools.partial(trio_client, profile=profile, commands=commands, runs=runs)
        cells.append((f"acp_trio server + acp_trio client, {name}", await with_trio_server(run)))
    peers = []
    if HAVE_TS:
        peers.append(("TypeScript", TS_CLIENT, TS_SERVER, ("HTTP/1.1", "WebSocket")))
    else:
        print("(TypeScript cells skipped: node or the SDK is missing)", file=sys.stderr)
    if HAVE_OFFICIAL:
        peers.append(("official Python", OFFICIAL_CLIENT, OFFICIAL_SERVER, ("WebSocket",)))
    else:
        print(
            "(official Python SDK cells skipped: no tests/interop/.venv-official-rc)",
            file=sys.stderr,
        )
    for peer, client, server, profiles in peers:
        for name in profiles:
            ws = name == "WebSocket"
            theirs = functools.partial(
                script_client, script=client, commands=commands, runs=runs, ws=ws
            )
            ours = functools.partial(
                trio_client, profile="websocket" if ws else "http1", commands=commands, runs=runs
            )
            for pair, cell in (
                (
                    f"{peer} server + {peer} client",
                    functools.partial(with_server_process, server, theirs),
                ),
                (f"acp_trio server + {peer} client", functools.partial(with_trio_server, theirs)),
                (
                    f"{peer} server + acp_trio client",
                    functools.partial(with_server_process, server, ours),
                ),
            ):
                cells.append((f"{pair}, {name}", await cell()))
    print(f"| pair (loopback) | stream {n_stream} (ms) | read {n_read} (ms) |")
    print("| --- | ---: | ---: |")
    for name, (stream_ms, read_ms) in cells:
        print(f"| {name} | {stream_ms:.1f} | {read_ms:.1f} |")
    if json_path:
        record = {
            "stream": n_stream,
            "read": n_read,
            "runs": runs,
            "cells": {name: {"stream_ms": s, "read_ms": r} for name, (s, r) in cells},
        }
        await trio.Path(json_path).write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--stream", type=int, default=2000)
    parser.add_argument("--read", type=int, default=200)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument(
        "--in-process",
        action="store_true",
        help="run acp_trio's server in the benchmark's process (default: a process of its own)",
    )
    parser.add_argument(
        "--judged",
        type=int,
        metavar="ROUNDS",
        help="only the cells the Targets table judges, ROUNDS times interleaved",
    )
    parser.add_argument(
        "--json", metavar="FILE", help="also write the cells to FILE (bench_report.py)"
    )
    args = parser.parse_args()
    IN_PROCESS = args.in_process
    if args.judged:
        rounds = trio.run(judged, args.stream, args.read, args.runs, args.judged)
        print(f"{args.judged} interleaved rounds; medians of the rounds (ms)")
        for name, values in rounds.items():
            stream_ms = statistics.median(v[0] for v in values)
            read_ms = statistics.median(v[1] for v in values)
            print(f"  {name}: stream {stream_ms:.1f}, read {read_ms:.1f}")
        if args.json:
            record = {
                "stream": args.stream,
                "read": args.read,
                "runs": args.runs,
                "rounds": rounds,
                "cells": {
                    name: {
                        "stream_ms": statistics.median(v[0] for v in values),
                        "read_ms": statistics.median(v[1] for v in values),
                    }
                    for name, values in rounds.items()
                },
            }
            Path(args.json).write_text(json.dumps(record, indent=1) + "\n")
    else:
        trio.run(main, args.stream, args.read, args.runs, args.json)
