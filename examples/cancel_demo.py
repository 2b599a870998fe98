"""A client spawns an agent over stdio, streams a reply, then cancels a turn.

Run ``make demo`` (or ``python examples/cancel_demo.py``). The same file is
both programs: without arguments it is the client, which starts
``python cancel_demo.py --agent`` as a subprocess and talks ACP to it over the
child's stdin and stdout.

The turn that gets cancelled has three requests from the agent to the client
in flight (a permission request, a file read, a terminal). The client never
answers them. When the client sends ``session/cancel``, the agent's prompt
scope is cancelled, each nested request is cancelled on the wire with its own
``$/cancel_request``, the client answers each ``-32800``, and the prompt ends
with ``stopReason: "cancelled"``.

This demo is written on the JSON-level connection layer (``acp_trio.Connection``);
the typed Agent and Client APIs, which do the ``session/cancel`` bookkeeping
below for you, build on it.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import trio

import acp_trio
from acp_trio import CancelCause, RequestContext, RequestError

# --------------------------------------------------------------------------
# The agent (runs in the child process)


class DemoAgent(acp_trio.Handler):
    def __init__(self) -> None:
        self.prompts: dict[str, RequestContext] = {}

    async def handle_request(self, ctx: RequestContext, method: str, params: Any) -> Any:
        if method == "initialize":
            return {
                "protocolVersion": 1,
                "agentCapabilities": {"loadSession": False},
                "agentInfo": {"name": "demo-agent", "version": "0.1"},
            }
        if method == "session/new":
            return {"sessionId": "sess-1"}
        if method == "session/prompt":
            return await self.prompt(ctx, params)
        raise RequestError.method_not_found(method)

    async def prompt(self, ctx: RequestContext, params: dict[str, Any]) -> Any:
        session_id = params["sessionId"]
        text = params["prompt"][0]["text"]
        conn = ctx.connection
        # Answer a session/cancel with a result, not an error: be cooperative.
        ctx.cooperative = True
        self.prompts[session_id] = ctx
        try:
            if text.startswith("echo "):
                for word in text[5:].split():
                    await say(conn, session_id, word + " ")
                return {"stopReason": "end_turn"}
            # "nested": wait on three requests to the client at once.
            async with trio.open_nursery() as nursery:
                nursery.start_soon(cancel_on, nursery.cancel_scope, ctx.cancel_requested)
                async with trio.open_nursery() as calls:
                    for method, call_params in nested_calls(session_id):
                        calls.start_soon(conn.call, method, call_params)
                nursery.cancel_scope.cancel()  # all answered: stop watching
            return {"stopReason": "cancelled" if ctx.cancel_cause else "end_turn"}
        finally:
            del self.prompts[session_id]

    def intercept_notification(self, method: str, params: Any) -> bool:
        if method == "session/cancel":
            ctx = self.prompts.get(params.get("sessionId"))
            if ctx is not None:
                print("agent: session/cancel received; request tree now:", file=sys.stderr)
                print(indent(ctx.connection.dump_request_tree()), file=sys.stderr)
                ctx.request_cancel(CancelCause.SESSION)
            return True
        return False


async def cancel_on(scope: trio.CancelScope, event: trio.Event) -> None:
    await event.wait()
    scope.cancel()


def nested_calls(session_id: str) -> list[tuple[str, dict[str, Any]]]:
    return [
        (
            "session/request_permission",
            {
                "sessionId": session_id,
                "toolCall": {"toolCallId": "call-1", "title": "Run the tests"},
                "options": [
                    {"optionId": "allow", "name": "Allow", "kind": "allow_once"},
                    {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
                ],
            },
        ),
        ("fs/read_text_file", {"sessionId": session_id, "path": "/hold"}),
        ("terminal/create", {"sessionId": session_id, "command": "sleep", "args": ["3600"]}),
    ]


async def say(conn: acp_trio.Connection, session_id: str, text: str) -> None:
    await conn.notify(
        "session/update",
        {
            "sessionId": session_id,
            "update": {
                "sessionUpdate": "agent_message_chunk",
                "content": {"type": "text", "text": text},
            },
        },
    )


async def run_agent() -> None:
    # fd 1 belongs to the protocol: print() goes to stderr while it is open.
    async with (
        acp_trio.open_stdio_stream() as stream,
        acp_trio.open_connection(stream, DemoAgent()) as conn,
    ):
        await conn.wait_closed()


# --------------------------------------------------------------------------
# The client (runs in the parent process)


class DemoClient(acp_trio.Handler):
    async def handle_request(self, ctx: RequestContext, method: str, params: Any) -> Any:
        # Never answer on our own: only a cancel ends these.
        await trio.sleep_forever()

    async def handle_notification(self, method: str, params: Any) -> None:
        if method == "session/update":
            update = params["update"]
            if update.get("sessionUpdate") == "agent_message_chunk":
                print(f"        agent says: {update['content']['text']!r}")


def show(direction: str, frame: bytes) -> None:
    msg = json.loads(frame)
    arrow = "client -> agent" if direction == "send" else "agent -> client"
    if msg.get("method") == "session/update":
        return  # shown by the handler instead
    if "method" in msg:
        what = msg["method"]
        if "id" in msg:
            what += f" (request id {msg['id']})"
        if msg["method"] == acp_trio.CANCEL_REQUEST_METHOD:
            what += f" for request id {msg['params']['requestId']}"
    elif "error" in msg:
        what = f"error {msg['error']['code']} {msg['error']['message']!r} for id {msg['id']}"
    else:
        what = f"result for id {msg['id']}: {json.dumps(msg['result'])}"
    print(f"  {arrow}  {what}")


AGENT_SCRIPT = os.path.abspath(__file__)


def indent(text: str) -> str:
    return "\n".join("    " + line for line in text.splitlines())


async def run_client() -> None:
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    command = [sys.executable, AGENT_SCRIPT, "--agent"]
    with trio.fail_after(30):
        async with acp_trio.open_agent_process(command, stderr="inherit") as agent:
            config = acp_trio.ConnectionConfig(trace=show, exit_details=agent.exit_details)
            async with acp_trio.open_connection(agent.stream, DemoClient(), config=config) as conn:
                print("1. initialize and open a session")
                await conn.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
                session = await conn.call("session/new", {"cwd": os.getcwd(), "mcpServers": []})
                session_id = session["sessionId"]

                print("\n2. a prompt whose reply is streamed")
                text = "echo hello from trio"
                result = await conn.call(
                    "session/prompt",
                    {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]},
                )
                print(f"   stopReason: {result['stopReason']}")

                print("\n3. a prompt that waits on three nested requests, cancelled after 0.5 s")
                async with trio.open_nursery() as nursery:

                    async def cancel_later() -> None:
                        await trio.sleep(0.5)
                        print("   client cancels the turn")
                        await conn.notify("session/cancel", {"sessionId": session_id})

                    nursery.start_soon(cancel_later)
                    result = await conn.call(
                        "session/prompt",
                        {"sessionId": session_id, "prompt": [{"type": "text", "text": "nested"}]},
                    )
                print(f"   stopReason: {result['stopReason']}")
                # Let the client's -32800 answers to the cancelled requests go out.
                await trio.sleep(0.1)
                stats = conn.statistics()
                print(
                    f"\nclient: {stats.incoming_in_flight} incoming and "
                    f"{stats.outgoing_pending} outgoing requests left in flight"
                )
        # Leaving the blocks closed the agent's stdin: it exited on its own.
        print(f"agent exited with code {agent.returncode}")


if __name__ == "__main__":
    trio.run(run_agent if "--agent" in sys.argv[1:] else run_client)
