"""A client spawns an agent over stdio, streams a reply, then cancels a turn.

Run ``make demo`` (or ``python examples/cancel_demo.py``). This one file is
both programs: without arguments it is the client, which starts
``python cancel_demo.py --agent`` and talks ACP to it over the child's stdin
and stdout.

In the cancelled turn the agent waits on three requests to the client at
once: a permission request, a file read and a terminal. The client answers
none of them. When the client cancels the session's turn
(``session/cancel``), the SDK on the agent side cancels the prompt's scope;
each nested request is cancelled on the wire with its own
``$/cancel_request``; the client answers the file read and the terminal
``-32800`` and the permission request ``cancelled``; and the prompt ends
with ``stopReason: "cancelled"``. No cancellation code in either program.
"""

from __future__ import annotations

import json
import os
import sys

import trio

import acp_trio
from acp_trio import schema

# --------------------------------------------------------------------------
# The agent (runs in the child process)


class DemoAgent(acp_trio.Agent):
    async def initialize(self, params: schema.InitializeRequest) -> schema.InitializeResponse:
        return schema.InitializeResponse(
            protocol_version=schema.PROTOCOL_VERSION,
            agent_info=schema.Implementation(name="demo-agent", version="0.1"),
        )

    async def new_session(self, params: schema.NewSessionRequest) -> schema.NewSessionResponse:
        return schema.NewSessionResponse(session_id="sess-1")

    async def prompt(self, params: schema.PromptRequest) -> schema.PromptResponse:
        block = params.prompt[0]
        text = block.text if isinstance(block, schema.TextContent) else ""
        if text.startswith("echo "):
            for word in text[5:].split():
                await self.client.send_text(params.session_id, word + " ")
            return schema.PromptResponse(stop_reason="end_turn")
        # Wait on three requests to the client at once; the SDK cancels them
        # (on the wire) if the turn is cancelled.
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self.client.request_permission, permission(params.session_id))
            nursery.start_soon(self.client.read_text_file, read_hold(params.session_id))
            nursery.start_soon(self.client.create_terminal, long_command(params.session_id))
            nursery.start_soon(self.show_tree)
        return schema.PromptResponse(stop_reason="end_turn")

    async def show_tree(self) -> None:
        await trio.sleep(0.2)
        tree = self.client.connection.dump_request_tree()
        print("agent: my request tree, all three waiting:\n" + indent(tree), file=sys.stderr)


def permission(session_id: str) -> schema.RequestPermissionRequest:
    return schema.RequestPermissionRequest(
        session_id=session_id,
        tool_call=schema.ToolCallUpdate(tool_call_id="call-1", title="Run the tests"),
        options=[
            schema.PermissionOption(option_id="allow", name="Allow", kind="allow_once"),
            schema.PermissionOption(option_id="reject", name="Reject", kind="reject_once"),
        ],
    )


def read_hold(session_id: str) -> schema.ReadTextFileRequest:
    return schema.ReadTextFileRequest(session_id=session_id, path="/hold")


def long_command(session_id: str) -> schema.CreateTerminalRequest:
    return schema.CreateTerminalRequest(session_id=session_id, command="sleep", args=["3600"])


# --------------------------------------------------------------------------
# The client (runs in the parent process)


class DemoClient(acp_trio.Client):
    # session/update is shown by the trace below, in wire order; the default
    # handler does nothing with it.

    # Never answer these on our own: only a cancel ends them.
    async def request_permission(
        self, params: schema.RequestPermissionRequest
    ) -> schema.RequestPermissionResponse:
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    async def read_text_file(
        self, params: schema.ReadTextFileRequest
    ) -> schema.ReadTextFileResponse:
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    async def create_terminal(
        self, params: schema.CreateTerminalRequest
    ) -> schema.CreateTerminalResponse:
        await trio.sleep_forever()
        raise AssertionError("unreachable")


def show(direction: str, frame: bytes) -> None:
    """Print each message on the wire, as the client sees it, in wire order.

    The trace hook runs as each frame is read or written, so these lines are
    in the order of the wire. (A ``session_update`` handler runs in the
    connection's notification task instead: printing from it as well would
    interleave two tasks' output, and a reply's line could come before the
    streamed words that preceded it on the wire. The SDK itself hands the
    caller a reply only after the updates sent before it were handled.)
    """
    msg = json.loads(frame)
    arrow = "client -> agent" if direction == "send" else "agent -> client"
    if msg.get("method") == "session/update":
        update = msg["params"]["update"]
        content = update.get("content")  # a block for chunks, a list for tool calls
        text = content.get("text", "") if isinstance(content, dict) else ""
        print(f"  {arrow}  session/update {update['sessionUpdate']} {text!r}")
        return
    if "method" in msg:
        what = msg["method"]
        if "id" in msg:
            what += f" (request id {msg['id']})"
        if msg["method"] == acp_trio.lowlevel.CANCEL_REQUEST_METHOD:
            what += f" for request id {msg['params']['requestId']}"
    elif "error" in msg:
        what = f"error {msg['error']['code']} {msg['error']['message']!r} for id {msg['id']}"
    else:
        what = f"result for id {msg['id']}: {json.dumps(msg['result'])}"
    print(f"  {arrow}  {what}")


def indent(text: str) -> str:
    return "\n".join("    " + line for line in text.splitlines())


AGENT_COMMAND = [sys.executable, os.path.abspath(__file__), "--agent"]


async def run_client() -> None:
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    capabilities = schema.ClientCapabilities(
        fs=schema.FileSystemCapabilities(read_text_file=True), terminal=True
    )
    config = acp_trio.ConnectionConfig(trace=show)
    client = DemoClient()
    with trio.fail_after(30):
        async with acp_trio.open_spawned_agent(
            client, AGENT_COMMAND, stderr="inherit", config=config
        ) as agent:
            print("1. initialize and open a session")
            await agent.initialize(
                schema.InitializeRequest(protocol_version=1, client_capabilities=capabilities)
            )
            session = await agent.new_session(
                schema.NewSessionRequest(cwd=os.getcwd(), mcp_servers=[])
            )

            print("\n2. a prompt whose reply is streamed")
            result = await agent.prompt_text(session.session_id, "echo hello from trio")
            print(f"   stopReason: {result.stop_reason}")

            print("\n3. a prompt that waits on three nested requests, cancelled after 0.5 s")
            async with trio.open_nursery() as nursery:

                async def cancel_later() -> None:
                    await trio.sleep(0.5)
                    print("   client cancels the turn")
                    await agent.cancel(session.session_id)

                nursery.start_soon(cancel_later)
                result = await agent.prompt_text(session.session_id, "nested")
            print(f"   stopReason: {result.stop_reason}")
            await trio.sleep(0.1)  # let the last answers reach the wire
            stats = agent.connection.statistics()
            print(
                f"\nclient: {stats.incoming_in_flight} incoming and "
                f"{stats.outgoing_pending} outgoing requests left in flight"
            )


async def run_agent() -> None:
    await acp_trio.run_agent(DemoAgent())


if __name__ == "__main__":
    trio.run(run_agent if "--agent" in sys.argv[1:] else run_client)
