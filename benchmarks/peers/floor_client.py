"""The floor client: the scenario client's lines with the standard library
only (blocking reads and writes, the ``json`` module), no framework.

Spawns the agent (``subprocess``), ``initialize``, ``session/new``, then the
workload (see ``_common.py``). Each message is written and flushed on its own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any

from _common import (
    CLIENT_CAPABILITIES,
    CONTENT,
    HOLD_PATH,
    TreeCpu,
    check_answer,
    emit,
    parse_args,
)
from _common import prompt_text as make_prompt

HELD_METHODS = ("session/request_permission", "terminal/create")


class FloorClient:
    def __init__(self, command: list[str]) -> None:
        self.proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert self.proc.stdin is not None
        assert self.proc.stdout is not None
        self.out = self.proc.stdin
        self.inp = self.proc.stdout
        self.next_id = 0
        self.chunks = 0
        self.last_text: str | None = None
        self.held: dict[Any, str] = {}  # request id -> method
        self.arrived = 0  # held requests that arrived during the current prompt
        self.wire_cancels = 0

    def send(self, obj: dict[str, Any]) -> None:
        self.out.write(json.dumps(obj, separators=(",", ":")).encode() + b"\n")
        self.out.flush()

    def reply(self, request_id: Any, result: Any) -> None:
        self.send({"jsonrpc": "2.0", "id": request_id, "result": result})

    def request(self, method: str, params: dict[str, Any]) -> int:
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        return self.next_id

    def on_message(self, msg: dict[str, Any]) -> None:
        method = msg.get("method")
        params = msg.get("params") or {}
        if "id" not in msg:
            if method == "session/update":
                update = params["update"]
                if update.get("sessionUpdate") == "agent_message_chunk":
                    self.chunks += 1
                    self.last_text = update["content"].get("text")
            elif method == "$/cancel_request":
                target = params.get("requestId")
                if self.held.pop(target, None) is not None:
                    self.wire_cancels += 1
                    error = {"code": -32800, "message": "Request cancelled"}
                    self.send({"jsonrpc": "2.0", "id": target, "error": error})
            return
        if method == "fs/read_text_file" and params.get("path") != HOLD_PATH:
            self.reply(msg["id"], {"content": CONTENT})
        elif method == "fs/read_text_file" or method in HELD_METHODS:
            self.held[msg["id"]] = method
            self.arrived += 1
        elif method == "fs/write_text_file":
            self.reply(msg["id"], {})
        else:
            error = {"code": -32601, "message": "Method not found"}
            self.send({"jsonrpc": "2.0", "id": msg["id"], "error": error})

    def call(self, method: str, params: dict[str, Any], on_held: Any = None) -> dict[str, Any]:
        """Send a request; serve the agent until its answer. ``on_held`` runs
        once when three requests are held."""
        request_id = self.request(method, params)
        readline = self.inp.readline
        while True:
            line = readline()
            if not line:
                raise SystemExit("the agent closed its stdout")
            msg = json.loads(line)
            if "method" in msg:
                self.on_message(msg)
                if on_held is not None and self.arrived == 3:
                    on_held()
                    on_held = None
            elif msg.get("id") == request_id:
                if "error" in msg:
                    raise SystemExit(f"{method} failed: {msg['error']}")
                result: dict[str, Any] = msg["result"]
                return result

    def prompt(self, session_id: str, text: str, on_held: Any = None) -> str:
        self.chunks, self.last_text, self.arrived = 0, None, 0
        params = {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}
        stop_reason: str = self.call("session/prompt", params, on_held)["stopReason"]
        return stop_reason


def main() -> None:
    args = parse_args()
    client = FloorClient(args.command)
    client.call(
        "initialize",
        {
            "protocolVersion": 1,
            "clientCapabilities": CLIENT_CAPABILITIES,
            "clientInfo": {"name": "floor-client", "version": "1"},
        },
    )
    session_id = client.call("session/new", {"cwd": os.getcwd(), "mcpServers": []})["sessionId"]
    if args.workload == "cancel":
        latencies: list[float] = []
        for cycle in range(args.warmup + args.n):
            sent: list[float] = []

            def cancel(sent: list[float] = sent) -> None:
                sent.append(time.perf_counter())
                client.send(
                    {
                        "jsonrpc": "2.0",
                        "method": "session/cancel",
                        "params": {"sessionId": session_id},
                    }
                )
                # As the protocol asks: pending permission requests of the
                # session get the `cancelled` outcome.
                for request_id, method in list(client.held.items()):
                    if method == "session/request_permission":
                        del client.held[request_id]
                        client.reply(request_id, {"outcome": {"outcome": "cancelled"}})

            stop = client.prompt(session_id, "nested", cancel)
            done = time.perf_counter()
            check_answer("cancel", 1, client.chunks, client.last_text, stop)
            if cycle >= args.warmup:
                latencies.append((done - sent[0]) * 1000)
        emit("floor", "cancel", args.n, latencies_ms=latencies, wire_cancels=client.wire_cancels)
    else:
        if args.warmup:
            client.prompt(session_id, make_prompt(args.workload, args.warmup))
        text = make_prompt(args.workload, args.n)
        tree = TreeCpu()
        tree.start()
        cpu = time.process_time()
        start = time.perf_counter()
        stop = client.prompt(session_id, text)
        seconds = time.perf_counter() - start
        cpu = time.process_time() - cpu
        tree_cpu = tree.seconds()
        check_answer(args.workload, args.n, client.chunks, client.last_text, stop)
        emit(
            "floor",
            args.workload,
            args.n,
            seconds=seconds,
            cpu_seconds=cpu,
            tree_cpu_seconds=tree_cpu,
        )
    client.out.close()
    try:
        client.proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        client.proc.kill()
        client.proc.wait()


if __name__ == "__main__":
    sys.exit(main())
