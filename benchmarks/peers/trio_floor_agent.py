"""The Trio floor agent: the floor agent's workloads (``echo``, ``stream``,
``read``, ``nested`` with cancellation by ``session/cancel``) as lean as a
Trio agent gets, the floor of ``bench_sdks.py``'s ``stream`` and ``read``.

Each message is built as a dict and encoded whole with orjson (the fastest
JSON the repository uses; ``OPT_APPEND_NEWLINE`` writes the line end), and
decoded with orjson. Writes follow acp_trio's policy (``_lean_io``): at once
with a non-blocking ``os.write`` while nothing waits, else batched by a
writer task into one write when the pipe has room. Each ``stream`` chunk is
sent as acp_trio's ``await send_text`` sends it, with one checkpoint; a
``read`` request is written and its answer awaited, the wait being the one
schedule point.

Why nothing honest beats it: per message it does the least the protocol and
Trio allow, one encode or decode of the whole message, a write only where
acp_trio writes, and the one schedule point a Trio send or wait must have;
a faster agent would have to skip encoding what it sends (byte templates,
which an agent whose messages vary cannot use), skip the checkpoint an async
send owes its other tasks, or write in bigger batches than acp_trio's own
rule allows, and so would not be doing the same work.
"""

from __future__ import annotations

import itertools
import os
import sys
from typing import Any

import orjson
import trio

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _lean_io import LeanReader, LeanWriter
from floor_agent import Cancelled, initialize_result, nested_requests

_dumps = orjson.dumps
_loads = orjson.loads
_LINE = orjson.OPT_APPEND_NEWLINE


class TrioFloorAgent:
    def __init__(self) -> None:
        self.out = LeanWriter(os.dup(1))
        self.inp = LeanReader(os.dup(0))
        self.next_id = itertools.count(1)
        self.sessions = itertools.count(1)
        self.capabilities: dict[str, Any] = {}

    async def reply(self, request_id: Any, result: Any) -> None:
        await self.out.send(
            _dumps({"jsonrpc": "2.0", "id": request_id, "result": result}, option=_LINE)
        )

    async def error(self, request_id: Any, code: int, message: str) -> None:
        error = {"code": code, "message": message}
        await self.out.send(
            _dumps({"jsonrpc": "2.0", "id": request_id, "error": error}, option=_LINE)
        )

    async def say(self, session_id: str, text: str) -> None:
        update = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}
        message = {
            "jsonrpc": "2.0",
            "method": "session/update",
            "params": {"sessionId": session_id, "update": update},
        }
        await self.out.send(_dumps(message, option=_LINE))

    async def read_message(self) -> dict[str, Any] | None:
        while True:
            line = await self.inp.line()
            if line is None:
                return None
            if line.strip():
                msg: dict[str, Any] = _loads(line)
                return msg

    def start_request(self, method: str, params: dict[str, Any]) -> int:
        """Written at once (no checkpoint: the caller waits for the answer)."""
        request_id = next(self.next_id)
        message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        self.out.write(_dumps(message, option=_LINE))
        return request_id

    async def wait_for(self, ids: set[int], session_id: str) -> dict[int, dict[str, Any]]:
        """As ``floor_agent.wait_for``: read until each of ``ids`` is answered."""
        answers: dict[int, dict[str, Any]] = {}
        while len(answers) < len(ids):
            msg = await self.read_message()
            if msg is None:
                raise SystemExit(0)
            if "method" not in msg:
                if msg.get("id") in ids:
                    answers[msg["id"]] = msg
            else:
                await self.while_waiting(msg, ids - answers.keys(), session_id)
        return answers

    async def read_one(self, request_id: int, session_id: str) -> dict[str, Any]:
        """The answer to ``request_id``: ``wait_for`` for one (the ``read`` loop)."""
        while True:
            msg = await self.read_message()
            if msg is None:
                raise SystemExit(0)
            if "method" not in msg:
                if msg.get("id") == request_id:
                    return msg
            else:
                await self.while_waiting(msg, {request_id}, session_id)

    async def while_waiting(
        self, msg: dict[str, Any], unanswered: set[int], session_id: str
    ) -> None:
        """A request or notification read while ``unanswered`` wait: on
        ``session/cancel`` of the session, each is cancelled on the wire and
        :class:`Cancelled` raised; a request is refused."""
        if msg["method"] == "session/cancel" and "id" not in msg:
            if (msg.get("params") or {}).get("sessionId") == session_id:
                for request_id in sorted(unanswered):
                    cancel = {"jsonrpc": "2.0", "method": "$/cancel_request"}
                    cancel["params"] = {"requestId": request_id}
                    self.out.write(_dumps(cancel, option=_LINE))
                raise Cancelled
        elif "id" in msg:
            await self.error(msg["id"], -32601, "Method not found")

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
                request_id = self.start_request("fs/read_text_file", read)
                answer = await self.read_one(request_id, session_id)
                total += len(answer["result"]["content"])
            await self.say(session_id, f"read {words[0]} {total}")
        elif command == "nested":
            ids = {
                self.start_request(method, body)
                for method, body in nested_requests(session_id, self.capabilities)
            }
            try:
                answers = await self.wait_for(ids, session_id)
            except Cancelled:
                return "cancelled"
            for request_id in sorted(answers):
                await self.say(session_id, orjson.dumps(answers[request_id].get("result")).decode())
        else:
            await self.say(session_id, "unknown command")
        return "end_turn"

    async def serve(self) -> None:
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

    async def run(self) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self.out.run)
            await self.serve()
            nursery.cancel_scope.cancel()


if __name__ == "__main__":
    trio.run(TrioFloorAgent().run)
