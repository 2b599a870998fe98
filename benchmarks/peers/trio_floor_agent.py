"""The Trio floor agent: ``floor_agent.py``'s lines on Trio's I/O, nothing
else: stdin and stdout as ``trio.lowlevel.FdStream``\\ s, lines split by
hand, the ``json`` module, and one ``await send_all`` per message.

It is the honest limit for an SDK whose every send is a Trio checkpoint:
what the same agent costs once each message goes through the scheduler.
The workloads are the floor agent's (``echo``, ``stream``, ``read``,
``nested`` with cancellation by ``session/cancel``); everything that is not
I/O (the messages, the prompt's words) is shared with it.
"""

from __future__ import annotations

import itertools
import json
import os
import sys
from typing import Any

import trio

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from floor_agent import Cancelled, initialize_result, nested_requests


class TrioFloorAgent:
    def __init__(self) -> None:
        self.out = trio.lowlevel.FdStream(os.dup(1))
        self.inp = trio.lowlevel.FdStream(os.dup(0))
        self.buffer = bytearray()
        self.lines: list[bytes] = []
        self.next_id = itertools.count(1)
        self.sessions = itertools.count(1)
        self.capabilities: dict[str, Any] = {}

    async def send(self, obj: dict[str, Any]) -> None:
        await self.out.send_all(json.dumps(obj, separators=(",", ":")).encode() + b"\n")

    async def reply(self, request_id: Any, result: Any) -> None:
        await self.send({"jsonrpc": "2.0", "id": request_id, "result": result})

    async def error(self, request_id: Any, code: int, message: str) -> None:
        error = {"code": code, "message": message}
        await self.send({"jsonrpc": "2.0", "id": request_id, "error": error})

    async def say(self, session_id: str, text: str) -> None:
        update = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}
        params = {"sessionId": session_id, "update": update}
        await self.send({"jsonrpc": "2.0", "method": "session/update", "params": params})

    async def read_message(self) -> dict[str, Any] | None:
        while not self.lines:
            data = await self.inp.receive_some(65536)
            if not data:
                return None
            self.buffer += data
            *lines, rest = self.buffer.split(b"\n")
            self.buffer = bytearray(rest)
            self.lines = [line for line in reversed(lines) if line.strip()]
        msg: dict[str, Any] = json.loads(self.lines.pop())
        return msg

    async def start_request(self, method: str, params: dict[str, Any]) -> int:
        request_id = next(self.next_id)
        await self.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        return request_id

    async def wait_for(self, ids: set[int], session_id: str) -> dict[int, dict[str, Any]]:
        """As ``floor_agent.wait_for``: read until each of ``ids`` is answered."""
        answers: dict[int, dict[str, Any]] = {}
        while len(answers) < len(ids):
            msg = await self.read_message()
            if msg is None:
                raise SystemExit(0)
            method = msg.get("method")
            if method is None:
                if msg.get("id") in ids:
                    answers[msg["id"]] = msg
            elif method == "session/cancel" and "id" not in msg:
                if (msg.get("params") or {}).get("sessionId") == session_id:
                    for request_id in sorted(ids - answers.keys()):
                        params = {"requestId": request_id}
                        await self.send(
                            {"jsonrpc": "2.0", "method": "$/cancel_request", "params": params}
                        )
                    raise Cancelled
            elif "id" in msg:
                await self.error(msg["id"], -32601, "Method not found")
        return answers

    async def prompt(self, params: dict[str, Any]) -> str:
        session_id = params["sessionId"]
        text = next((b["text"] for b in params["prompt"] if b.get("type") == "text"), "").strip()
        command, _, rest = text.partition(" ")
        words = rest.split()
        if command == "echo":
            await self.say(session_id, rest)
        elif command == "stream":
            size = int(words[1]) if len(words) > 1 else 16
            for i in range(int(words[0])):
                await self.say(session_id, str(i).ljust(size, "."))
        elif command == "read":
            total = 0
            read = {"sessionId": session_id, "path": words[1]}
            for _ in range(int(words[0])):
                request_id = await self.start_request("fs/read_text_file", read)
                answer = await self.wait_for({request_id}, session_id)
                total += len(answer[request_id]["result"]["content"])
            await self.say(session_id, f"read {words[0]} {total}")
        elif command == "nested":
            ids = {
                await self.start_request(method, body)
                for method, body in nested_requests(session_id, self.capabilities)
            }
            try:
                answers = await self.wait_for(ids, session_id)
            except Cancelled:
                return "cancelled"
            for request_id in sorted(answers):
                await self.say(session_id, json.dumps(answers[request_id].get("result")))
        else:
            await self.say(session_id, "unknown command")
        return "end_turn"

    async def run(self) -> None:
        while (msg := await self.read_message()) is not None:
            method = msg.get("method")
            if method is None or "id" not in msg:
                continue
            params = msg.get("params") or {}
            if method == "initialize":
                self.capabilities = params.get("clientCapabilities") or {}
                await self.reply(msg["id"], initialize_result("trio-floor-agent"))
            elif method == "session/new":
                await self.reply(msg["id"], {"sessionId": f"floor-{next(self.sessions)}"})
            elif method == "session/prompt":
                await self.reply(msg["id"], {"stopReason": await self.prompt(params)})
            else:
                await self.error(msg["id"], -32601, "Method not found")


if __name__ == "__main__":
    trio.run(TrioFloorAgent().run)
