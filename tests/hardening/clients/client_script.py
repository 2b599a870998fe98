"""An acp_trio client in a process of its own, for the hardening tests.

It reports what it sees as JSON lines on stderr, each prefixed ``@@``
(stdout is the protocol); everything else on stderr is acp_trio's log.

Programs (the first argument):

- ``prompts [--prompts N] [--max-message-size BYTES]``: speak ACP on its own
  stdin/stdout to whoever plays the agent there (the test, byte by byte):
  ``initialize``, ``session/new``, then ``N`` prompts ``prompt <i>`` one
  after the other, reporting each outcome (its stop reason and the texts of
  the updates received for it, or the error), then the connection's
  statistics, then it closes. A :class:`ScenarioClient` answers the agent's
  requests (reads of ``/hold`` are held until cancelled).
- ``spawn -- AGENT_CMD...``: spawn the agent with ``open_spawned_agent``,
  initialize, open a session, start a ``permission`` prompt, and once the
  agent asks for permission (so the prompt runs) report the agent's
  ``_meta``; then wait forever (the test kills us).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

import trio
import trio.testing

import acp_trio
from acp_trio import ConnectionClosed, RequestError
from acp_trio.schema import NewSessionRequest
from acp_trio.testing import ScenarioClient


def report(event: str, **fields: Any) -> None:
    sys.stderr.write("@@" + json.dumps({"event": event, **fields}) + "\n")
    sys.stderr.flush()


def brief(text: str) -> str:
    """Long texts are reported by length."""
    return text if len(text) <= 200 else f"<{len(text)} characters>"


async def prompts(args: argparse.Namespace) -> None:
    client = ScenarioClient()
    config = acp_trio.ConnectionConfig(
        max_message_size=args.max_message_size or acp_trio.ConnectionConfig().max_message_size
    )
    async with (
        acp_trio.lowlevel.open_stdio_stream() as stream,
        acp_trio.open_agent(client, stream, config=config) as agent,
    ):
        try:
            await agent.initialize(client.initialize_request())
            report("initialized")
            session = await agent.new_session(NewSessionRequest(cwd=os.sep, mcp_servers=[]))
            sid = session.session_id
            # Updates the agent sent before its answer are delivered after
            # new_session() returned, once we let other tasks run.
            held = len(client.updates)
            await trio.testing.wait_all_tasks_blocked()
            report("session", id=sid, updates=len(client.updates), held=held)
            for i in range(args.prompts):
                seen = len(client.updates)
                try:
                    result = await agent.prompt_text(sid, f"prompt {i}")
                except RequestError as exc:
                    report("prompt", i=i, error=exc.code)
                except acp_trio.RemoteProtocolError as exc:
                    report("prompt", i=i, error=type(exc).__name__, message=str(exc))
                else:
                    texts = [brief(n.update.content.text) for n in client.updates[seen:]]  # type: ignore[union-attr]
                    report("prompt", i=i, stop=result.stop_reason, texts=texts)
            stats = agent.connection.statistics()
            report(
                "stats",
                incoming=stats.incoming_in_flight,
                outgoing=stats.outgoing_pending,
                queued=stats.notifications_queued,
                tree=len(agent.connection.request_tree()),
            )
        except ConnectionClosed as exc:
            report("closed", reason=exc.reason, exit_code=exc.exit_code)
    report("exit")


async def spawn(args: argparse.Namespace) -> None:
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    client = ScenarioClient()
    async with acp_trio.open_spawned_agent(client, command, stderr="discard") as agent:
        init = await agent.initialize(client.initialize_request())
        session = await agent.new_session(NewSessionRequest(cwd=os.sep, mcp_servers=[]))
        async with trio.open_nursery() as nursery:
            nursery.start_soon(agent.prompt_text, session.session_id, "permission")
            # The prompt is running on the agent once it asks for permission.
            await client.wait_for_requests("session/request_permission")
            report("prompting", meta=init.meta)
            await trio.sleep_forever()


def main() -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="program", required=True)
    p = sub.add_parser("prompts")
    p.add_argument("--prompts", type=int, default=1)
    p.add_argument("--max-message-size", type=int, default=0)
    s = sub.add_parser("spawn")
    s.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    trio.run(prompts if args.program == "prompts" else spawn, args)


if __name__ == "__main__":
    main()
