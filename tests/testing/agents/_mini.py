"""A small scenario agent on the raw JSON-level ``acp_trio.lowlevel.Connection``,
with one planted fault chosen by name.

It speaks just enough of the scenario vocabulary for ``check-agent``:
``echo``, ``wait_for_cancel``, ``nested``, ``deadline``, ``sleep``. It is an
implementation independent of the typed ``ScenarioAgent``: without a fault
it passes every check. The faults:

- ``ignore-cancel-request``: ``$/cancel_request`` of a prompt does nothing.
- ``end-turn-after-cancel``: a turn ended by ``session/cancel`` answers
  ``end_turn``.
- ``answer-notifications``: unknown notifications get an error reply.
- ``no-nested-cancel``: nested requests are never cancelled on the wire.
- ``die-on-batch``: a batch array kills the process.
- ``print-stdout``: a line of text goes to stdout, inside the protocol.
- ``answer-twice``: unknown methods get two error replies.
- ``silent-on-parse-error``: a line of invalid JSON gets no reply.
- ``deadline-no-cancel``: ``deadline`` waits for its read past the deadline,
  never cancelling it.
- ``die-on-late-cancel``: a ``$/cancel_request`` of a finished request kills
  the process.
- ``idless-replies``: malformed input is answered with an error without
  ``id``.
- ``needs-auth``: advertises an auth method and refuses ``session/new``
  with ``-32000`` (it never authenticates).
- ``ask-permission``: every prompt asks permission
  (``session/request_permission``) and says which option was selected; of
  the vocabulary only ``wait_for_cancel`` (after asking).
"""

from __future__ import annotations

import itertools
import json
import os
import sys
from typing import Any

import trio

import acp_trio
from acp_trio import RequestError
from acp_trio.lowlevel import (
    Connection,
    FramedStream,
    Handler,
    RequestContext,
)

FAULTS = {
    "",
    "ignore-cancel-request",
    "end-turn-after-cancel",
    "answer-notifications",
    "no-nested-cancel",
    "die-on-batch",
    "print-stdout",
    "answer-twice",
    "silent-on-parse-error",
    "deadline-no-cancel",
    "die-on-late-cancel",
    "idless-replies",
    "needs-auth",
    "ask-permission",
}
KNOWN_NOTIFICATIONS = {"session/cancel", "$/cancel_request"}


class FaultyStream(FramedStream):
    """The protocol stream, with a way to write bytes between frames."""

    def __init__(self, stream: Any, fault: str) -> None:
        super().__init__(stream, stream)
        self.fault = fault
        self.lock = trio.StrictFIFOLock()
        self.answered: list[Any] = []  # ids of the requests answered

    async def receive_frame(self) -> Any:
        while True:
            frame = await super().receive_frame()
            if not isinstance(frame, bytes):
                return frame
            if self.fault == "die-on-batch" and frame.startswith(b"["):
                os.write(2, b"mini agent: cannot handle a list, giving up\n")
                os._exit(1)
            try:
                message = json.loads(frame)
            except ValueError:
                message = None
                if self.fault == "silent-on-parse-error":
                    continue
            if self.fault == "idless-replies" and not isinstance(message, dict):
                code = -32700 if message is None else -32600
                reply = {"jsonrpc": "2.0", "error": {"code": code, "message": "bad input"}}
                await self.send_frames(json.dumps(reply).encode() + b"\n")
                continue
            if (
                self.fault == "die-on-late-cancel"
                and isinstance(message, dict)
                and message.get("method") == "$/cancel_request"
                and (message.get("params") or {}).get("requestId") in self.answered
            ):
                os.write(2, b"mini agent: cancel of a finished request, giving up\n")
                os._exit(1)
            return frame

    def direct_writer(self) -> None:
        return None  # every write goes through send_frames (the lock, the ids)

    async def send_frames(self, data: bytes) -> None:
        for line in data.splitlines():
            try:
                message = json.loads(line)
            except ValueError:
                continue  # print-stdout's text
            if isinstance(message, dict) and "method" not in message:
                self.answered.append(message.get("id"))
        async with self.lock:
            await super().send_frames(data)


class MiniAgent(Handler):
    def __init__(self, conn: Connection, stream: FaultyStream) -> None:
        self.conn = conn
        self.stream = stream
        self.fault = stream.fault
        self.ids = itertools.count(1)
        self.turns: dict[str, trio.CancelScope] = {}
        self.capabilities: dict[str, Any] = {}

    async def handle_request(self, ctx: RequestContext, method: str, params: Any) -> Any:
        if method == "initialize":
            self.capabilities = params.get("clientCapabilities") or {}
            if self.fault == "print-stdout":
                await self.stream.send_frames(b"mini agent: initialized\n")
            result: dict[str, Any] = {
                "protocolVersion": 1,
                "agentCapabilities": {},
                "agentInfo": {"name": "mini-agent", "version": self.fault or "clean"},
            }
            if self.fault == "needs-auth":
                result["authMethods"] = [{"id": "mini-login", "name": "Log in to mini"}]
            return result
        if method == "session/new" and self.fault == "needs-auth":
            raise RequestError(-32000, "Authentication required")
        if method == "session/new":
            if not isinstance(params, dict) or not isinstance(params.get("cwd"), str):
                raise RequestError.invalid_params({"cwd": "must be a string"})
            if not isinstance(params.get("mcpServers"), list):
                raise RequestError.invalid_params({"mcpServers": "must be an array"})
            return {"sessionId": f"mini-{next(self.ids)}"}
        if method == "session/prompt":
            return await self.prompt(ctx, params)
        if self.fault == "answer-twice":
            reply = {"jsonrpc": "2.0", "id": ctx.id, "error": {"code": -32601, "message": method}}
            await self.stream.send_frames(json.dumps(reply).encode() + b"\n")
        raise RequestError.method_not_found(method)

    def intercept_notification(self, method: str, params: Any) -> bool:
        if method == "session/cancel" and isinstance(params, dict):
            turn = self.turns.get(params.get("sessionId", ""))
            if turn is not None:
                turn.cancel()
        return False

    async def handle_notification(self, method: str, params: Any) -> None:
        if self.fault == "answer-notifications" and method not in KNOWN_NOTIFICATIONS:
            reply = {"jsonrpc": "2.0", "id": None, "error": {"code": -32601, "message": method}}
            await self.stream.send_frames(json.dumps(reply).encode() + b"\n")

    async def prompt(self, ctx: RequestContext, params: dict[str, Any]) -> Any:
        session_id = params["sessionId"]
        text = params["prompt"][0]["text"].strip()
        words = text.split()
        if self.fault == "ignore-cancel-request":
            ctx.cooperative = True  # and never look at ctx.cancel_requested
        with trio.CancelScope() as turn:
            self.turns[session_id] = turn
            try:
                if self.fault == "ask-permission":
                    await self.ask_permission(session_id, words)
                else:
                    await self.command(session_id, text, words)
            finally:
                del self.turns[session_id]
        if turn.cancelled_caught:
            stop = "end_turn" if self.fault == "end-turn-after-cancel" else "cancelled"
            return {"stopReason": stop}
        return {"stopReason": "end_turn"}

    async def say(self, session_id: str, text: str) -> None:
        update = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}
        await self.conn.notify("session/update", {"sessionId": session_id, "update": update})

    async def call(self, method: str, params: Any) -> Any:
        if self.fault != "no-nested-cancel":
            return await self.conn.call(method, params)
        async with self.conn.open_request(method, params) as pending:
            pending.detach()  # never cancelled on the wire
            return await pending.result()

    async def ask_permission(self, session_id: str, words: list[str]) -> None:
        """Ask, say what was chosen; ``wait_for_cancel`` then waits (no other
        command of the vocabulary: the cancellation checks do not apply)."""
        params = {
            "sessionId": session_id,
            "toolCall": {"toolCallId": "mini-ask"},
            "options": [
                {"optionId": "no", "name": "Reject", "kind": "reject_once"},
                {"optionId": "yes", "name": "Allow", "kind": "allow_once"},
            ],
        }
        answer = await self.conn.call("session/request_permission", params)
        outcome = answer["outcome"]
        chosen = outcome.get("optionId", outcome["outcome"])
        await self.say(session_id, f"permission: {chosen}")
        if words[:1] == ["wait_for_cancel"]:
            await trio.sleep_forever()

    async def command(self, session_id: str, text: str, words: list[str]) -> None:
        command, args = (words[0], words[1:]) if words else ("", [])
        if command == "echo":
            await self.say(session_id, text[5:])
        elif command == "wait_for_cancel":
            await trio.sleep_forever()
        elif command == "sleep":
            await trio.sleep(int(args[0]) / 1000)
        elif command == "nested":
            hold = {"sessionId": session_id, "path": "/hold"}
            permission = {
                "sessionId": session_id,
                "toolCall": {"toolCallId": "mini-call"},
                "options": [
                    {"optionId": "allow", "name": "Allow", "kind": "allow_once"},
                    {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
                ],
            }
            terminal = {"sessionId": session_id, "command": "sleep", "args": ["3600"]}
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self.call, "fs/read_text_file", hold)
                nursery.start_soon(self.call, "session/request_permission", permission)
                nursery.start_soon(self.call, "terminal/create", terminal)
        elif command == "deadline" and self.fault == "deadline-no-cancel":
            await self.call("fs/read_text_file", {"sessionId": session_id, "path": "/hold"})
        elif command == "deadline":
            with trio.move_on_after(int(args[0]) / 1000):
                await self.call("fs/read_text_file", {"sessionId": session_id, "path": "/hold"})
                return
            raise RequestError.request_cancelled()
        else:
            await self.say(session_id, "unknown command")


async def serve(fault: str) -> None:
    assert fault in FAULTS, fault
    async with acp_trio.lowlevel.open_stdio_stream() as stdio:
        stream = FaultyStream(stdio, fault)
        await acp_trio.lowlevel.serve_connection(stream, lambda conn: MiniAgent(conn, stream))


def main(fault: str = "") -> None:
    trio.run(serve, fault if fault else (sys.argv[1] if len(sys.argv) > 1 else ""))
