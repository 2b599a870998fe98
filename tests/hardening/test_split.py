"""Messages split at every byte boundary: each byte its own write, with a
pause so the other side reads it alone. Nothing is lost, nothing is
reordered, the answers are the same as for whole lines."""

from __future__ import annotations

from typing import Any

import trio
from frames import line, req

from acp_trio.testing import ScriptedPeer

from .conftest import CLIENT_CAPS, LIMIT, assert_echo, open_agent, open_client, text_update

PAUSE = 0.0005


async def dribble(peer: ScriptedPeer, *messages: Any, crlf: bool = False) -> None:
    """Write the messages one byte per write."""
    data = b"".join(line(m, ensure_ascii=False) for m in messages)
    if crlf:
        data = data.replace(b"\n", b"\r\n")
    for i in range(len(data)):
        await peer.stream.send_all(data[i : i + 1])
        await trio.sleep(PAUSE)


async def test_agent_reads_byte_by_byte() -> None:
    with trio.fail_after(LIMIT):
        async with open_agent() as peer:
            await dribble(
                peer,
                req(1, "initialize", {"protocolVersion": 1, "clientCapabilities": CLIENT_CAPS}),
                req(2, "session/new", {"cwd": "/", "mcpServers": []}),
            )
            assert (await peer.receive_response(1))["result"]["protocolVersion"] == 1
            session = (await peer.receive_response(2))["result"]["sessionId"]
            prompt = {"sessionId": session, "prompt": [{"type": "text", "text": "echo é→😀"}]}
            wait = {"sessionId": session, "prompt": [{"type": "text", "text": "wait_for_cancel"}]}
            # Multi-byte UTF-8 split inside characters; a cancel right behind
            # its request; CRLF line ends.
            await dribble(
                peer,
                req(3, "session/prompt", prompt),
                req(4, "session/prompt", wait),
                {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": 4}},
                crlf=True,
            )
            update = await peer.receive_request("session/update")
            assert update["params"]["update"]["content"]["text"] == "é→😀"
            assert (await peer.receive_response(3))["result"] == {"stopReason": "end_turn"}
            cancelled = await peer.receive_response(4)
            assert cancelled["error"]["code"] == -32800
            await assert_echo(peer, session)
            assert peer.queued == []


async def test_client_reads_byte_by_byte() -> None:
    with trio.fail_after(LIMIT):
        async with open_client("prompts", "--prompts", "2") as client:
            peer = client.peer
            init = await peer.receive_request("initialize")
            await dribble(
                peer, {"jsonrpc": "2.0", "id": init["id"], "result": {"protocolVersion": 1}}
            )
            await client.report("initialized")
            new = await peer.receive_request("session/new")
            await dribble(peer, {"jsonrpc": "2.0", "id": new["id"], "result": {"sessionId": "s-1"}})
            await client.report("session")
            prompt = await client.next_prompt()
            await dribble(
                peer,
                {"jsonrpc": "2.0", "method": "session/update", "params": text_update("s-1", "é→")},
                {"jsonrpc": "2.0", "method": "session/update", "params": text_update("s-1", "😀")},
                req("r", "fs/read_text_file", {"sessionId": "s-1", "path": "/f"}),
                {"jsonrpc": "2.0", "id": prompt, "result": {"stopReason": "end_turn"}},
                crlf=True,
            )
            reported = await client.report("prompt")
            assert reported["texts"] == ["é→", "😀"], reported
            assert (await peer.receive_response("r"))["result"] == {"content": "x" * 64}
            await client.answer_prompt(await client.next_prompt(), "whole lines again")
            await client.finish()
