"""A chain component speaking JSON lines by hand, for the conductor's
forwarding: it answers each request with the id it saw (``{"sawId": id}``),
except ``hold``, which it answers only when ``release`` comes (it reports
a ``holding`` notification instead); it reports
each ``$/cancel_request`` it receives as a ``cancelled`` notification, and
a ``shout`` request makes it send a request of its own up the chain (its
answer reported as a ``heard`` notification)."""

from __future__ import annotations

import json
import sys


def send(message: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def main() -> None:
    held: list[object] = []
    for line in sys.stdin:
        message = json.loads(line)
        method = message.get("method")
        if method == "$/cancel_request":
            send({"jsonrpc": "2.0", "method": "cancelled", "params": message["params"]})
        elif method == "hold":
            held.append(message["id"])
            send({"jsonrpc": "2.0", "method": "holding", "params": {"id": message["id"]}})
        elif method == "release":
            for request_id in held:  # late answers, to requests cancelled since
                send({"jsonrpc": "2.0", "id": request_id, "result": {"late": True}})
            held.clear()
            send({"jsonrpc": "2.0", "id": message["id"], "result": {"sawId": message["id"]}})
        elif method == "shout":
            send({"jsonrpc": "2.0", "id": "up-1", "method": "ask", "params": {"q": 1}})
            send({"jsonrpc": "2.0", "id": message["id"], "result": {"sawId": message["id"]}})
        elif method is not None and "id" in message:
            send({"jsonrpc": "2.0", "id": message["id"], "result": {"sawId": message["id"]}})
        elif method is None and message.get("id") == "up-1":
            send({"jsonrpc": "2.0", "method": "heard", "params": message})


main()
