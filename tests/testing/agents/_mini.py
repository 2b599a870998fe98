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
- ``v2-on-65535``: a client asking version 65535 gets version 2, in v2's
  shape (as codex-acp and claude-agent-acp answer): right, not a fault.
- ``prompt-needs-auth``: opens sessions but refuses every prompt with
  ``-32000 Authentication required``, listing no ``authMethods`` (as
  claude-agent-acp does without credentials).
- ``title-after-cancel``: a cancelled turn sends a session title update
  (session state, not the turn's output) after its answer: right.
- ``stream-after-cancel``: ``session/cancel`` of ``wait_for_cancel`` lets
  the turn stream on for 1.5 s before it answers ``cancelled``.
- ``slow-echo``: ``echo`` is answered after 6 s, whatever
  ``$/cancel_request`` says (a slow model turn).
- ``exit-after-scalar``: a JSON scalar line is answered, then the process
  exits (status 3) 2 s later.
- ``v2-only``: speaks protocol version 2 only (every initialize is
  answered with 2, in v2's shape).
- ``sticky-cancel``: a ``session/cancel`` of a session with no turn running
  is kept, and ends that session's next turn at once (``cancelled``).
- ``no-model``: opens sessions but answers every prompt that is not
  cancelled first with ``-32603 Cannot connect to API`` after 0.3 s (as
  opencode does without network access to its model).
- ``cancel-all-sessions``: a ``session/cancel`` cancels the running turn of
  every session, not only the one it names.
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
    "v2-on-65535",
    "prompt-needs-auth",
    "title-after-cancel",
    "stream-after-cancel",
    "slow-echo",
    "exit-after-scalar",
    "v2-only",
    "sticky-cancel",
    "cancel-all-sessions",
    "no-model",
}
#: The answer of an agent speaking version 2 (the shape codex-acp 2.6.0 answers).
V2_INIT = {
    "protocolVersion": 2,
    "info": {"name": "mini-agent", "version": "v2"},
    "capabilities": {"session": {}},
    "authMethods": [{"methodId": "mini-login", "type": "agent", "name": "Log in to mini"}],
}
KNOWN_NOTIFICATIONS = {"session/cancel", "$/cancel_request"}


class FaultyStream(FramedStream):
    """The protocol stream, with a way to write bytes between frames."""

    def __init__(self, stream: Any, fault: str) -> None:
        super().__init__(stream, stream)
        self.fault = fault
        self.lock = trio.StrictFIFOLock()
        self.answered: list[Any] = []  # ids of the requests answered
        self.nursery: trio.Nursery | None = None

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
            if (
                self.fault == "exit-after-scalar"
                and message is not None
                and not isinstance(message, dict | list)
                and self.nursery is not None
            ):
                self.nursery.start_soon(_exit_later, 2.0, 3)
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


async def _exit_later(seconds: float, status: int) -> None:
    await trio.sleep(seconds)
    os.write(2, b"mini agent: a task failed on an earlier line, exiting\n")
    os._exit(status)


class MiniAgent(Handler):
    def __init__(self, conn: Connection, stream: FaultyStream) -> None:
        self.conn = conn
        self.stream = stream
        self.fault = stream.fault
        self.ids = itertools.count(1)
        self.turns: dict[str, trio.CancelScope] = {}
        # sticky-cancel: the sessions cancelled while idle.
        self.sticky: set[str] = set()
        self.capabilities: dict[str, Any] = {}

    async def handle_request(self, ctx: RequestContext, method: str, params: Any) -> Any:
        if method == "initialize":
            os.write(2, b"mini agent: initialize\n")
            asked = params.get("protocolVersion")
            if self.fault == "v2-only" or (self.fault == "v2-on-65535" and asked == 65535):
                return V2_INIT
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
            session_id = params.get("sessionId", "")
            turn = self.turns.get(session_id)
            if self.fault == "cancel-all-sessions":
                for each in self.turns.values():
                    each.cancel()
            elif turn is not None:
                turn.cancel()
            elif self.fault == "sticky-cancel":
                self.sticky.add(session_id)
        return False

    async def handle_notification(self, method: str, params: Any) -> None:
        if method not in KNOWN_NOTIFICATIONS:
            os.write(2, f"mini agent: notification {method}\n".encode())
        if self.fault == "answer-notifications" and method not in KNOWN_NOTIFICATIONS:
            reply = {"jsonrpc": "2.0", "id": None, "error": {"code": -32601, "message": method}}
            await self.stream.send_frames(json.dumps(reply).encode() + b"\n")

    async def prompt(self, ctx: RequestContext, params: dict[str, Any]) -> Any:
        session_id = params["sessionId"]
        text = params["prompt"][0]["text"].strip()
        words = text.split()
        if self.fault == "prompt-needs-auth":
            raise RequestError(-32000, "Authentication required")
        if self.fault == "no-model" and words[:1] != ["wait_for_cancel"]:
            await trio.sleep(0.3)
            raise RequestError(-32603, "Internal error: Cannot connect to API: Unable to connect")
        if session_id in self.sticky:
            self.sticky.discard(session_id)
            return {"stopReason": "cancelled"}
        if self.fault == "ignore-cancel-request" or (
            self.fault == "slow-echo" and words[:1] == ["echo"]
        ):
            ctx.cooperative = True  # and never look at ctx.cancel_requested
        if self.fault == "slow-echo" and words[:1] == ["echo"]:
            await trio.sleep(6)
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
            if self.fault == "stream-after-cancel" and words[:1] == ["wait_for_cancel"]:
                with trio.move_on_after(1.5):
                    while True:  # the cancel is seen, the work goes on
                        await self.say(session_id, "still working ")
                        await trio.sleep(0.1)
            if self.fault == "title-after-cancel" and self.stream.nursery is not None:
                self.stream.nursery.start_soon(self.title, session_id)
            return {"stopReason": stop}
        return {"stopReason": "end_turn"}

    async def title(self, session_id: str) -> None:
        await trio.sleep(0.05)  # after the answer
        update = {"sessionUpdate": "session_info_update", "title": "A cancelled turn"}
        await self.conn.notify("session/update", {"sessionId": session_id, "update": update})

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
            while True:  # a turn's output, until cancelled
                await self.say(session_id, ".")
                await trio.sleep(0.1)
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
    async with acp_trio.lowlevel.open_stdio_stream() as stdio, trio.open_nursery() as nursery:
        stream = FaultyStream(stdio, fault)
        stream.nursery = nursery
        await acp_trio.lowlevel.serve_connection(stream, lambda conn: MiniAgent(conn, stream))
        nursery.cancel_scope.cancel()


def main(fault: str = "") -> None:
    trio.run(serve, fault if fault else (sys.argv[1] if len(sys.argv) > 1 else ""))
