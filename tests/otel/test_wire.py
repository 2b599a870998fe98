"""On the wire: the scenario agent started with ``--otel`` continues the trace
of a prompt's ``_meta.traceparent`` in the nested requests it sends, and
leaves the other ``_meta`` keys alone; the spans it exports go to stderr,
never into the protocol on stdout."""

from __future__ import annotations

import json
import os
from typing import Any

import trio

from acp_trio.schema import converter
from acp_trio.testing import (
    SCENARIO_AGENT_COMMAND,
    SCENARIO_CLIENT_CAPABILITIES,
    open_scripted_process,
)

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{PARENT_ID}-01"
NESTED = {"terminal/create", "session/request_permission", "fs/read_text_file"}


def otel_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    return {**env, "OTEL_TRACES_EXPORTER": "console", **extra}


def exported_spans(stderr: bytes) -> list[dict[str, Any]]:
    spans = []
    for line in stderr.decode().splitlines():
        if line.startswith("{"):
            spans.append(json.loads(line))
    return spans


async def test_nested_requests_carry_the_prompts_trace() -> None:
    capabilities = converter.unstructure(SCENARIO_CLIENT_CAPABILITIES)
    with trio.fail_after(60):
        async with open_scripted_process(
            [*SCENARIO_AGENT_COMMAND, "--otel"], env=otel_env(), receive_timeout=30
        ) as peer:
            init = await peer.request(
                "initialize", {"protocolVersion": 1, "clientCapabilities": capabilities}
            )
            await peer.receive_response(init)
            new = await peer.request("session/new", {"cwd": "/", "mcpServers": []})
            session = (await peer.receive_response(new))["result"]["sessionId"]
            meta = {"traceparent": TRACEPARENT, "mine": {"kept": True}}
            prompt = await peer.request(
                "session/prompt",
                {
                    "sessionId": session,
                    "prompt": [{"type": "text", "text": "nested"}],
                    "_meta": meta,
                },
            )
            nested = [await peer.receive_request(method) for method in sorted(NESTED)]
            await peer.notify("session/cancel", {"sessionId": session})
            answer = await peer.receive_response(prompt)
            assert answer["result"]["stopReason"] == "cancelled"
            await peer.close_send()
            await peer.expect_eof()
        # (Out of the block: the agent has exited and its stderr is all read.)
        stderr = peer.process.stderr_tail() or b""

    parents = set()
    for request in nested:
        request_meta = request["params"]["_meta"]
        version, trace_id, parent_id, flags = request_meta["traceparent"].split("-")
        assert (version, trace_id, flags) == ("00", TRACE_ID, "01")
        assert parent_id != PARENT_ID
        parents.add(parent_id)
    assert len(parents) == len(NESTED)  # each request its own span
    spans = exported_spans(stderr)
    by_name = {span["name"]: span for span in spans}
    prompt_span = by_name["session/prompt"]
    assert prompt_span["context"]["trace_id"] == "0x" + TRACE_ID
    assert prompt_span["parent_id"] == "0x" + PARENT_ID
    assert prompt_span["attributes"]["acp.cancelled"] is True
    for method in NESTED:
        span = by_name[method]
        assert span["parent_id"] == prompt_span["context"]["span_id"]
        assert span["context"]["span_id"][2:] in parents
