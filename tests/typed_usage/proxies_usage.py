"""Type-checked by ``make typecheck`` (``mypy --strict``), imported by a
test: the proxies' keyword forms take what users have at hand (a tuple of
blocks, a list of directories), with no cast or ignore, and return the
typed results."""

from __future__ import annotations

from acp_trio import AgentProxy, ClientProxy
from acp_trio.schema import ContentBlock, McpServer, TextContent


async def client_side(agent: AgentProxy, cwd: str, servers: list[McpServer]) -> str:
    await agent.initialize()
    made = await agent.new_session(cwd, mcp_servers=servers, additional_directories=[cwd])
    blocks: tuple[ContentBlock, ...] = (TextContent(text="hello"),)
    reply = await agent.prompt(made.session_id, blocks)
    await agent.set_session_mode(made.session_id, "code")
    await agent.cancel(made.session_id)
    listed = await agent.list_sessions(cwd=cwd)
    return f"{reply.stop_reason} {len(listed.sessions)}"


async def agent_side(client: ClientProxy, session_id: str) -> int | None:
    text = await client.read_text_file(session_id, "/w/a.txt", line=1, limit=10)
    await client.write_text_file(session_id, "/w/a.txt", text.content.upper())
    term = await client.create_terminal(session_id, "make", args=["test"], cwd="/w")
    done = await client.wait_for_terminal_exit(session_id, term.terminal_id)
    await client.release_terminal(session_id, term.terminal_id)
    return done.exit_code
