"""A raw stdio ACP v2 agent that, like claude-agent-acp 0.101.0 without
credentials, opens sessions but ends every turn ``idle`` with ``stopReason:
"error"`` and ``-32000 Authentication required``, listing no
``authMethods``. Everything before a turn it does right (negotiation,
``-32022``, ``-32600`` before ``initialize``, malformed input)."""

from __future__ import annotations

import itertools
import json
import sys
from typing import Any

INFO = {"name": "auth-v2-agent", "version": "1"}


def send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
    sys.stdout.flush()


def error(request_id: Any, code: int, text: str, data: Any = None) -> None:
    body: dict[str, Any] = {"code": code, "message": text}
    if data is not None:
        body["data"] = data
    send({"id": request_id, "error": body})


def update(session_id: str, body: dict[str, Any]) -> None:
    send({"method": "session/update", "params": {"sessionId": session_id, "update": body}})


def main() -> None:
    ids = itertools.count(1)
    version = None
    for line in sys.stdin:
        try:
            message = json.loads(line)
        except ValueError:
            error(None, -32700, "Parse error")
            continue
        if not isinstance(message, dict):
            error(None, -32600, "Invalid request")
            continue
        method, request_id = message.get("method"), message.get("id")
        params = message.get("params") or {}
        if "id" not in message:
            continue  # notifications: none needs an answer
        if method == "initialize":
            asked = params.get("protocolVersion")
            if not isinstance(asked, int) or asked < 1:
                error(
                    request_id,
                    -32022,
                    "Unsupported protocol version",
                    {"requested": asked, "supported": [2]},
                )
                continue
            version = 2
            send(
                {
                    "id": request_id,
                    "result": {"protocolVersion": 2, "info": INFO, "capabilities": {"session": {}}},
                }
            )
        elif version is None:
            error(request_id, -32600, "Invalid request", "first request must be initialize")
        elif method == "session/new":
            if not isinstance(params.get("cwd"), str):
                error(request_id, -32602, "Invalid params")
                continue
            send({"id": request_id, "result": {"sessionId": f"auth-{next(ids)}"}})
        elif method == "session/prompt":
            session_id, message_id = params["sessionId"], f"m-{next(ids)}"
            update(
                session_id,
                {
                    "sessionUpdate": "user_message",
                    "messageId": message_id,
                    "content": params["prompt"],
                },
            )
            send({"id": request_id, "result": {"messageId": message_id}})
            update(session_id, {"sessionUpdate": "state_update", "state": "running"})
            update(
                session_id,
                {
                    "sessionUpdate": "state_update",
                    "state": "idle",
                    "stopReason": "error",
                    "error": {"code": -32000, "message": "Authentication required"},
                },
            )
        else:
            error(request_id, -32601, "Method not found")


if __name__ == "__main__":
    main()
