"""The floor agent: the scenario agent's ``stream``, ``read``, ``nested`` and
``echo`` with the standard library only (blocking reads and writes on stdio,
the ``json`` module), no framework. Each message is written and flushed on
its own.

``nested``: sends ``terminal/create`` (if the client advertised terminals),
``session/request_permission`` and a read of ``/hold`` (if advertised), then
reads until all three are answered. On ``session/cancel`` of the session, it
sends ``$/cancel_request`` for each one still unanswered and answers the
prompt ``stopReason: "cancelled"`` at once (late answers are dropped).
"""

from __future__ import annotations

import itertools
import json
import sys
from typing import Any

_out = sys.stdout.buffer
_inp = sys.stdin.buffer
_next_id = itertools.count(1)
_sessions = itertools.count(1)
_client_capabilities: dict[str, Any] = {}


def send(obj: dict[str, Any]) -> None:
    _out.write(json.dumps(obj, separators=(",", ":")).encode() + b"\n")
    _out.flush()


def reply(request_id: Any, result: Any) -> None:
    send({"jsonrpc": "2.0", "id": request_id, "result": result})


def error(request_id: Any, code: int, message: str) -> None:
    send({"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}})


def notify(method: str, params: dict[str, Any]) -> None:
    send({"jsonrpc": "2.0", "method": method, "params": params})


def say(session_id: str, text: str) -> None:
    update = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}
    notify("session/update", {"sessionId": session_id, "update": update})


def read_message() -> dict[str, Any] | None:
    line = _inp.readline()
    if not line:
        return None
    msg: dict[str, Any] = json.loads(line)
    return msg


def start_request(method: str, params: dict[str, Any]) -> int:
    request_id = next(_next_id)
    send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
    return request_id


class Cancelled(Exception):
    pass


def nested_requests(
    session_id: str, capabilities: dict[str, Any]
) -> list[tuple[str, dict[str, Any]]]:
    """What ``nested`` sends the client: a terminal and a read of ``/hold``
    if advertised, and a permission request."""
    requests: list[tuple[str, dict[str, Any]]] = []
    if capabilities.get("terminal"):
        terminal = {"sessionId": session_id, "command": "sleep", "args": ["3600"]}
        requests.append(("terminal/create", terminal))
    permission = {
        "sessionId": session_id,
        "toolCall": {"toolCallId": "call-1", "title": "Run the tests"},
        "options": [
            {"optionId": "allow", "name": "Allow", "kind": "allow_once"},
            {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
        ],
    }
    requests.append(("session/request_permission", permission))
    if (capabilities.get("fs") or {}).get("readTextFile"):
        requests.append(("fs/read_text_file", {"sessionId": session_id, "path": "/hold"}))
    return requests


def initialize_result(name: str) -> dict[str, Any]:
    return {
        "protocolVersion": 1,
        "agentCapabilities": {"loadSession": False},
        "agentInfo": {"name": name, "version": "1"},
    }


def wait_for(ids: set[int], session_id: str) -> dict[int, dict[str, Any]]:
    """Read until every request in ``ids`` is answered; raise
    :class:`Cancelled` (after cancelling the rest on the wire) on
    ``session/cancel`` of ``session_id``."""
    answers: dict[int, dict[str, Any]] = {}
    while len(answers) < len(ids):
        msg = read_message()
        if msg is None:
            raise SystemExit(0)
        method = msg.get("method")
        if method is None:
            if msg.get("id") in ids:
                answers[msg["id"]] = msg
        elif method == "session/cancel" and "id" not in msg:
            if (msg.get("params") or {}).get("sessionId") == session_id:
                for request_id in sorted(ids - answers.keys()):
                    notify("$/cancel_request", {"requestId": request_id})
                raise Cancelled
        elif "id" in msg:
            error(msg["id"], -32601, "Method not found")  # nothing else runs meanwhile
    return answers


def prompt(params: dict[str, Any]) -> str:
    session_id = params["sessionId"]
    text = next((b["text"] for b in params["prompt"] if b.get("type") == "text"), "").strip()
    command, _, rest = text.partition(" ")
    words = rest.split()
    if command == "echo":
        say(session_id, rest)
    elif command == "stream":
        size = int(words[1]) if len(words) > 1 else 16
        for i in range(int(words[0])):
            say(session_id, str(i).ljust(size, "."))
    elif command == "read":
        total = 0
        read = {"sessionId": session_id, "path": words[1]}
        for _ in range(int(words[0])):
            answer = wait_for({start_request("fs/read_text_file", read)}, session_id)
            (msg,) = answer.values()
            total += len(msg["result"]["content"])
        say(session_id, f"read {words[0]} {total}")
    elif command == "nested":
        requests = nested_requests(session_id, _client_capabilities)
        ids = {start_request(method, body) for method, body in requests}
        try:
            answers = wait_for(ids, session_id)
        except Cancelled:
            return "cancelled"
        for request_id in sorted(answers):
            say(session_id, json.dumps(answers[request_id].get("result")))
    else:
        say(session_id, "unknown command")
    return "end_turn"


def main() -> None:
    global _client_capabilities
    while (msg := read_message()) is not None:
        method = msg.get("method")
        if method is None or "id" not in msg:
            continue  # late answers, session/cancel with nothing running, $/cancel_request
        params = msg.get("params") or {}
        if method == "initialize":
            _client_capabilities = params.get("clientCapabilities") or {}
            reply(msg["id"], initialize_result("floor-agent"))
        elif method == "session/new":
            reply(msg["id"], {"sessionId": f"floor-{next(_sessions)}"})
        elif method == "session/prompt":
            reply(msg["id"], {"stopReason": prompt(params)})
        else:
            error(msg["id"], -32601, "Method not found")


if __name__ == "__main__":
    main()
