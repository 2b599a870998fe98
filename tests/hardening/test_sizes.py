"""10 MB and 100 MB messages against real processes.

Below the cap a message is accepted, whatever its size; above it, it is
refused without being buffered (the bytes are dropped as they arrive) and the
connection carries on:

- a request over the cap is answered ``-32600`` "Request too large" with its
  id (found in the first bytes) and ``data: {size, limit}``;
- a response over the cap fails the pending call it answers with
  :class:`~acp_trio.MessageTooLarge`, promptly, instead of leaving it
  waiting;
- a notification over the cap is dropped (logged).

The default cap is 64 MiB (``DEFAULT_MAX_MESSAGE_SIZE``); the agent's is set
with its ``--max-message-size`` option or ``ACP_HARDENING_MAX_MESSAGE_SIZE``,
the client's with ``--max-message-size``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio

from acp_trio import ConnectionConfig
from acp_trio.testing import ScriptedPeer

from .conftest import (
    LIMIT,
    assert_echo,
    env_with,
    error_of,
    handshake,
    open_agent,
    open_client,
)

MB = 1_000_000
MiB = 1024 * 1024
DEFAULT_CAP = ConnectionConfig().max_message_size


def big_prompt(request_id: Any, session_id: str, command: str, size: int) -> bytes:
    """A ``session/prompt`` of exactly ``size`` bytes (with its ``\\n``):
    ``command`` then a text block of filler (the shape of a base64 image)."""
    head = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": "session/prompt",
            "params": {"sessionId": session_id, "prompt": [{"type": "text", "text": command}]},
        },
        separators=(",", ":"),
    ).encode()
    head = head[: -len(b"]}}")] + b',{"type":"text","text":"'
    tail = b'"}]}}\n'
    return head + b"A" * (size - len(head) - len(tail)) + tail


def big_line(obj_head: dict[str, Any], size: int) -> bytes:
    """A message of ``size`` bytes: ``obj_head`` plus a ``"pad"`` string."""
    head = json.dumps(obj_head, separators=(",", ":")).encode()[:-1] + b',"pad":"'
    tail = b'"}\n'
    return head + b"A" * (size - len(head) - len(tail)) + tail


async def send_raw(peer: ScriptedPeer, data: bytes) -> None:
    """Write without the transcript (which would decode 100 MB)."""
    await peer.stream.send_all(data)


def peak_rss_mb(pid: int) -> float:
    """The process's peak resident memory (VmHWM), in MiB."""
    with open(f"/proc/{pid}/status") as status:
        for row in status:
            if row.startswith("VmHWM:"):
                return int(row.split()[1]) / 1024
    raise AssertionError("no VmHWM")


@pytest.mark.parametrize(
    ("size", "cap"),
    [(10 * MB, None), (100 * MB, 128 * MiB)],
    ids=["10MB-default-cap", "100MB-cap-128MiB"],
)
async def test_agent_accepts_a_big_prompt_below_the_cap(size: int, cap: int | None) -> None:
    env = env_with(ACP_HARDENING_MAX_MESSAGE_SIZE=str(cap)) if cap else None
    with trio.fail_after(LIMIT):
        async with open_agent(env=env) as peer:
            session = await handshake(peer)
            await send_raw(peer, big_prompt("big", session, "echo got it", size))
            update = await peer.receive_request("session/update")
            assert update["params"]["update"]["content"]["text"] == "got it"
            reply = await peer.receive_response("big")
            assert reply["result"] == {"stopReason": "end_turn"}
            await assert_echo(peer, session)


@pytest.mark.parametrize(
    ("size", "args"),
    [(10 * MB, ("--max-message-size", str(MiB))), (100 * MB, ())],
    ids=["10MB-cap-1MiB", "100MB-default-cap"],
)
async def test_agent_refuses_a_big_prompt_above_the_cap(size: int, args: tuple[str, ...]) -> None:
    limit = int(args[1]) if args else DEFAULT_CAP
    with trio.fail_after(LIMIT):
        async with open_agent(*args) as peer:
            session = await handshake(peer)
            assert peer.process is not None
            before = peak_rss_mb(peer.process.pid)
            await send_raw(peer, big_prompt("big", session, "echo got it", size))
            reply = await peer.receive_response("big")
            assert error_of(reply) == ("big", -32600)
            assert reply["error"]["message"] == "Request too large"
            assert reply["error"]["data"] == {"size": size - 1, "limit": limit}
            # A notification over the cap (no id): dropped, nothing answered.
            await send_raw(
                peer, big_line({"jsonrpc": "2.0", "method": "session/cancel"}, limit + 10)
            )
            await assert_echo(peer, session)
            assert peer.queued == []
            # Never buffered whole: bytes are held only until the line is
            # known to be over the cap, then dropped as they arrive. So the
            # agent's peak memory grows by about the cap, not the message.
            growth = peak_rss_mb(peer.process.pid) - before
            assert growth < limit / MiB + 16, (growth, limit)


def big_update(size: int) -> tuple[bytes, int]:
    """A ``session/update`` of ``size`` bytes and the length of its text."""
    head = (
        b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s-1",'
        b'"update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"'
    )
    tail = b'"}}}}\n'
    text_length = size - len(head) - len(tail)
    return head + b"A" * text_length + tail, text_length


async def test_client_accepts_a_10mb_update() -> None:
    with trio.fail_after(LIMIT):
        async with open_client("prompts", "--prompts", "2") as client:
            await client.serve_handshake()
            prompt = await client.next_prompt()
            note, length = big_update(10 * MB)
            await send_raw(client.peer, note)
            await client.peer.respond(prompt, {"stopReason": "end_turn"})
            reported = await client.report("prompt")
            assert reported["texts"] == [f"<{length} characters>"], reported
            await client.answer_prompt(await client.next_prompt(), "small again")
            await client.finish()


@pytest.mark.parametrize(
    ("size", "args"),
    [(10 * MB, ("--max-message-size", str(MiB))), (100 * MB, ())],
    ids=["10MB-cap-1MiB", "100MB-default-cap"],
)
async def test_client_fails_the_call_whose_reply_is_over_the_cap(
    size: int, args: tuple[str, ...]
) -> None:
    with trio.fail_after(LIMIT):
        async with open_client("prompts", "--prompts", "2", *args) as client:
            await client.serve_handshake()
            prompt = await client.next_prompt()
            # An update over the cap: dropped. Then the prompt's reply, over
            # the cap: the prompt fails at once instead of waiting forever.
            update = {"jsonrpc": "2.0", "method": "session/update"}
            await send_raw(client.peer, big_line(update, size))
            reply = {"jsonrpc": "2.0", "id": prompt, "result": {"stopReason": "end_turn"}}
            await send_raw(client.peer, big_line(reply, size))
            reported = await client.report("prompt")
            assert reported["error"] == "MessageTooLarge", reported
            assert f"message of {size - 1} bytes" in reported["message"], reported
            await client.answer_prompt(await client.next_prompt(), "small", "still delivered")
            await client.finish()


@pytest.mark.parametrize("write_size", [4096, 65537])
async def test_agent_verdict_at_the_cap_does_not_depend_on_chunking(write_size: int) -> None:
    """A line of exactly the cap is accepted (its ``\\r`` not counted), one
    byte more is refused: written in many writes of ``write_size`` bytes."""

    async def send_in_pieces(peer: ScriptedPeer, data: bytes) -> None:
        for start in range(0, len(data), write_size):
            await peer.stream.send_all(data[start : start + write_size])

    with trio.fail_after(LIMIT):
        async with open_agent("--max-message-size", str(MiB)) as peer:
            session = await handshake(peer)
            exact = big_prompt("exact", session, "echo exact", MiB + 1)[:-1] + b"\r\n"
            await send_in_pieces(peer, exact)
            await peer.receive_request("session/update")
            reply = await peer.receive_response("exact")
            assert reply["result"] == {"stopReason": "end_turn"}
            over = big_prompt("over", session, "echo over", MiB + 2)
            await send_in_pieces(peer, over)
            reply = await peer.receive_response("over")
            assert error_of(reply) == ("over", -32600)
            assert reply["error"]["data"] == {"size": MiB + 1, "limit": MiB}
            await assert_echo(peer, session)
            assert peer.queued == []
