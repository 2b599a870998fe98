"""Tracing over in-memory connections: a ``nested`` prompt cancelled with
``session/cancel`` is one trace, the agent's nested requests under the prompt,
the client's handling of each under those, each marked cancelled."""

from __future__ import annotations

import trio
from opentelemetry.trace import SpanKind, StatusCode

from acp_trio import ConnectionConfig
from acp_trio.testing import ScenarioClient, open_memory_pair

from .spans import events, only, parent_of, recording, trace_ids

NESTED = ("terminal/create", "session/request_permission", "fs/read_text_file")


async def test_nested_prompt_cancelled_by_session_cancel_is_one_trace() -> None:
    agent_tracing, agent_spans = recording()
    client_tracing, client_spans = recording()
    client = ScenarioClient()
    with trio.fail_after(30):
        async with open_memory_pair(
            client=client,
            agent_config=ConnectionConfig(instrument=agent_tracing),
            client_config=ConnectionConfig(instrument=client_tracing),
        ) as pair:
            session = await pair.new_session()
            async with trio.open_nursery() as nursery:
                nursery.start_soon(pair.to_agent.prompt_text, session, "nested")
                for method in NESTED:
                    await client.wait_for_requests(method)
                answer = await pair.to_agent.cancel_turn(session)
            assert answer is not None
            assert answer.stop_reason == "cancelled"

    agent = agent_spans.get_finished_spans()
    client_side = client_spans.get_finished_spans()
    prompt_sent = only(client_side, "session/prompt", SpanKind.CLIENT)
    prompt = only(agent, "session/prompt", SpanKind.SERVER)
    # One trace over both processes' spans for the turn.
    turn_spans = [s for s in (*agent, *client_side) if s.name in {"session/prompt", *NESTED}]
    assert len(turn_spans) == 2 + 2 * len(NESTED)
    assert trace_ids(turn_spans) == {prompt_sent.context.trace_id}
    assert parent_of(prompt) == prompt_sent.context.span_id
    for span in (prompt_sent, prompt):
        assert span.attributes is not None
        assert span.attributes["acp.cancelled"] is True
        assert span.attributes["acp.stop_reason"] == "cancelled"
        assert span.status.status_code is not StatusCode.ERROR
    assert "session/cancel sent" in events(prompt_sent)
    assert "session/cancel received" in events(prompt)
    for method in NESTED:
        sent = only(agent, method, SpanKind.CLIENT)
        handled = only(client_side, method, SpanKind.SERVER)
        assert parent_of(sent) == prompt.context.span_id
        assert parent_of(handled) == sent.context.span_id
        for span in (sent, handled):
            assert span.attributes is not None
            assert span.attributes["acp.cancelled"] is True, span
            assert span.attributes["rpc.system"] == "jsonrpc"
            assert span.attributes["rpc.method"] == method
            assert span.status.status_code is not StatusCode.ERROR
        assert sent.attributes is not None
        assert isinstance(sent.attributes["rpc.jsonrpc.request_id"], int)
        if method == "session/request_permission":
            # The client answered it "cancelled" itself, on its session/cancel.
            assert "session/cancel sent" in events(handled)
        else:
            assert "$/cancel_request sent" in events(sent)
            assert "$/cancel_request received" in events(handled)
