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

Two behaviours that are no faults: ``answer-all`` answers every permission
request at once (nothing is left to cancel), ``no-session-cancel`` ignores
the cue.

Permission requests titled ``check-client: choose an option`` are answered
at once (``allow``); the others are held until cancelled.
"""

from __future__ import annotations

import json
import subprocess
import sys
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
}
CUE = "check-client: cancel now"
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

    def send(self, message: dict[str, Any]) -> None:
        assert self.agent.stdin is not None
        self.agent.stdin.write(json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")
        self.agent.stdin.flush()

    def messages(self) -> Any:
        assert self.agent.stdout is not None
        for line in self.agent.stdout:
            try:
                yield json.loads(line)
            except ValueError:
                continue  # tolerated

    def call(self, id_: int, method: str, params: Any) -> Any:
        self.send({"id": id_, "method": method, "params": params})
        for message in self.messages():
            if message.get("id") == id_ and "method" not in message:
                return message.get("result")
            self.handle(message)
        raise SystemExit("the agent went away")

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
            if cue and self.fault != "no-session-cancel":
                self.send({"method": "session/cancel", "params": {"sessionId": self.session}})
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
        prompt = [{"type": "text", "text": "check me"}]
        self.call(3, "session/prompt", {"sessionId": self.session, "prompt": prompt})
        assert self.agent.stdin is not None
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
