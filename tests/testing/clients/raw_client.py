"""A small ACP client on raw JSON lines that follows check-client's driving
protocol, with one planted fault chosen by name (the first argument):

    python raw_client.py FAULT -- AGENT_CMD...

``clean`` has no fault: it must pass every check. The faults:

- ``no-cancel-reply``: a request the agent cancels with ``$/cancel_request``
  is never answered.
- ``two-replies``: the permission request it answers gets two replies.
- ``no-cancelled-outcome``: after its ``session/cancel`` the pending
  permission request is never answered.
- ``ignore-capabilities``: advertises fs and terminals, answers them -32601.
- ``crash-on-unknown-notification``: exits on a notification it does not know.
- ``detach-agent``: starts the agent in a session of its own, leaves its
  stdin open in a detached ``sleep`` (so the agent never sees the end of
  its input) and exits right after the prompt, saying the agent's pid.

- ``leak-cancel``: a ``session/cancel`` it sent for a turn that then ended
  on its own is kept pending, and sent again right after the next prompt
  (the cancel leaks into the next turn).
- ``wait-forever``: after its ``session/cancel`` it waits for the turn's
  answer for ever (no ``$/cancel_request``, no giving up).
- ``close-after-ignored-cancel``: escalates as the clean client does, but
  takes the ``-32800`` that ends the turn as fatal and exits.

Two behaviours that are no faults: ``answer-all`` answers every permission
request at once (nothing is left to cancel), ``no-session-cancel`` ignores
the cue.

Permission requests titled ``check-client: choose an option`` are answered
at once (``allow``); the others are held until cancelled. When a turn says
``check-client: prompt again`` it prompts again once the turn is over. A turn
whose ``session/cancel`` goes unanswered for :data:`GRACE` seconds gets a
``$/cancel_request``; if that goes unanswered too, the turn is given up (its
late answer is dropped) and the next prompt goes out.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

FAULTS = {
    "clean",
    "no-cancel-reply",
    "two-replies",
    "no-cancelled-outcome",
    "ignore-capabilities",
    "crash-on-unknown-notification",
    "answer-all",
    "no-session-cancel",
    "detach-agent",
    "leak-cancel",
    "wait-forever",
    "close-after-ignored-cancel",
}
CUE = "check-client: cancel now"
PROMPT_AGAIN = "check-client: prompt again"
#: Seconds a cancelled turn may stay unanswered before the next rung.
GRACE = 0.5
MAX_PROMPTS = 10
KNOWN = {"session/update", "$/cancel_request"}
TERMINAL_METHODS = {
    "terminal/create",
    "terminal/output",
    "terminal/wait_for_exit",
    "terminal/release",
    "terminal/kill",
}


class RawClient:
    def __init__(self, fault: str, command: list[str]) -> None:
        self.fault = fault
        self.agent = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            start_new_session=fault == "detach-agent",
        )
        self.held: dict[Any, str] = {}  # request id -> session
        self.session = ""
        self.terminals: dict[str, tuple[str, int]] = {}
        self.buffer = b""
        assert self.agent.stdout is not None
        self.fd = self.agent.stdout.fileno()
        #: When our session/cancel of the running turn went out.
        self.cancelled_at: float | None = None
        self.prompt_again = False

    def send(self, message: dict[str, Any]) -> None:
        assert self.agent.stdin is not None
        self.agent.stdin.write(json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")
        self.agent.stdin.flush()

    def next_message(self, deadline: float | None) -> Any:
        """The next message, or None at ``deadline``; exits at the end of input."""
        while True:
            line, sep, rest = self.buffer.partition(b"\n")
            if sep:
                self.buffer = rest
                try:
                    return json.loads(line)
                except ValueError:
                    continue  # tolerated
            wait = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            if not select.select([self.fd], [], [], wait)[0]:
                return None
            data = os.read(self.fd, 65536)
            if not data:
                raise SystemExit("the agent went away")
            self.buffer += data

    def call(self, id_: int, method: str, params: Any) -> Any:
        self.send({"id": id_, "method": method, "params": params})
        while True:
            message = self.next_message(None)
            if message.get("id") == id_ and "method" not in message:
                return message.get("result")
            self.handle(message)

    def prompt(self, id_: int, stale_cancel: bool = False) -> Any:
        """One turn: its answer, or None if it was given up."""
        self.cancelled_at = None
        self.prompt_again = False
        prompt = [{"type": "text", "text": "check me"}]
        params = {"sessionId": self.session, "prompt": prompt}
        self.send({"id": id_, "method": "session/prompt", "params": params})
        if stale_cancel:  # the leak-cancel fault
            self.send({"method": "session/cancel", "params": {"sessionId": self.session}})
        escalated_at: float | None = None
        while True:
            deadline = None
            if self.cancelled_at is not None and self.fault != "wait-forever":
                deadline = (escalated_at or self.cancelled_at) + GRACE
            message = self.next_message(deadline)
            if message is None:
                if escalated_at is None:
                    self.send({"method": "$/cancel_request", "params": {"requestId": id_}})
                    escalated_at = time.monotonic()
                    continue
                return None  # given up: its late answer is dropped
            if message.get("id") == id_ and "method" not in message:
                if "error" in message and self.fault == "close-after-ignored-cancel":
                    raise SystemExit(f"raw client: the turn failed: {message['error']}")
                return message.get("result") or message.get("error")
            if "method" in message:
                self.handle(message)
            # else: the late answer of a turn given up before: dropped

    def error(self, id_: Any, code: int, text: str) -> None:
        self.send({"id": id_, "error": {"code": code, "message": text}})

    def handle(self, message: dict[str, Any]) -> None:
        method, params = message.get("method"), message.get("params") or {}
        if method is None:
            return
        if "id" not in message:
            self.notification(method, params)
            return
        id_ = message["id"]
        if method in ("fs/read_text_file", "fs/write_text_file"):
            if self.fault == "ignore-capabilities":
                self.error(id_, -32601, f"Method not found: {method}")
            elif method == "fs/read_text_file":
                content = Path(params["path"]).read_text(encoding="utf-8")
                self.send({"id": id_, "result": {"content": content}})
            else:
                Path(params["path"]).write_text(params["content"], encoding="utf-8")
                self.send({"id": id_, "result": {}})
        elif method.startswith("terminal/"):
            self.terminal(id_, method, params)
        elif method == "session/request_permission":
            title = params["toolCall"]["title"]
            if title == "check-client: choose an option" or self.fault == "answer-all":
                answer = {"outcome": {"outcome": "selected", "optionId": "allow"}}
                self.send({"id": id_, "result": answer})
                if self.fault == "two-replies":
                    self.send({"id": id_, "result": answer})
            else:
                self.held[id_] = params["sessionId"]
        else:
            self.error(id_, -32601, f"Method not found: {method}")

    def terminal(self, id_: Any, method: str, params: dict[str, Any]) -> None:
        """Terminals that run their command to the end at once."""
        if self.fault == "ignore-capabilities" or method not in TERMINAL_METHODS:
            self.error(id_, -32601, f"Method not found: {method}")
            return
        result: dict[str, Any] = {}
        if method == "terminal/create":
            run = subprocess.run(
                [params["command"], *params.get("args", [])],
                capture_output=True,
                text=True,
                check=False,
            )
            terminal_id = f"t-{len(self.terminals)}"
            self.terminals[terminal_id] = (run.stdout + run.stderr, run.returncode)
            result = {"terminalId": terminal_id}
        elif method == "terminal/output":
            output, status = self.terminals[params["terminalId"]]
            result = {"output": output, "truncated": False, "exitStatus": {"exitCode": status}}
        elif method == "terminal/wait_for_exit":
            result = {"exitCode": self.terminals[params["terminalId"]][1]}
        else:  # release, kill
            self.terminals.pop(params["terminalId"], None)
        self.send({"id": id_, "result": result})

    def notification(self, method: str, params: dict[str, Any]) -> None:
        if method not in KNOWN and self.fault == "crash-on-unknown-notification":
            sys.exit(f"raw client: unknown notification {method}")
        if method == "$/cancel_request":
            id_ = params.get("requestId")
            if id_ in self.held and self.fault != "no-cancel-reply":
                del self.held[id_]
                self.error(id_, -32800, "Request cancelled")
        elif method == "session/update":
            update = params.get("update") or {}
            content = update.get("content") or {}
            cue = update.get("sessionUpdate") == "agent_message_chunk" and CUE in str(
                content.get("text")
            )
            if update.get("sessionUpdate") == "agent_message_chunk" and PROMPT_AGAIN in str(
                content.get("text")
            ):
                self.prompt_again = True
            if cue and self.fault != "no-session-cancel":
                self.send({"method": "session/cancel", "params": {"sessionId": self.session}})
                self.cancelled_at = time.monotonic()
                if self.fault != "no-cancelled-outcome":
                    for id_, session in list(self.held.items()):
                        if session == self.session:
                            del self.held[id_]
                            answer = {"outcome": {"outcome": "cancelled"}}
                            self.send({"id": id_, "result": answer})

    def run(self) -> None:
        caps = {"fs": {"readTextFile": True, "writeTextFile": True}, "terminal": True}
        info = {"name": f"raw-client-{self.fault}", "version": "1"}
        self.call(
            1, "initialize", {"protocolVersion": 1, "clientCapabilities": caps, "clientInfo": info}
        )
        self.session = self.call(2, "session/new", {"cwd": str(Path.cwd()), "mcpServers": []})[
            "sessionId"
        ]
        assert self.agent.stdin is not None
        stale = False
        for number in range(MAX_PROMPTS):
            answer = self.prompt(3 + number, stale)
            if self.fault == "detach-agent" or not self.prompt_again:
                break
            # The leak-cancel fault keeps a cancel whose turn then ended on its own.
            ended = isinstance(answer, dict) and answer.get("stopReason") == "end_turn"
            stale = self.fault == "leak-cancel" and self.cancelled_at is not None and ended
        if self.fault == "detach-agent":
            fd = self.agent.stdin.fileno()
            subprocess.Popen(["sleep", "60"], pass_fds=[fd], start_new_session=True)
            print(f"raw client: agent pid {self.agent.pid}, left running", flush=True)
            sys.exit(0)
        self.agent.stdin.close()
        self.agent.wait(timeout=30)


def main() -> None:
    fault, sep, *command = sys.argv[1:]
    assert fault in FAULTS, fault
    assert sep == "--", sys.argv
    RawClient(fault, command).run()


if __name__ == "__main__":
    main()
