"""Tracing over in-memory connections: a ``nested`` prompt cancelled with
``session/cancel`` is one trace, the agent's nested requests under the prompt,
the client's handling of each under those, each marked cancelled."""

from __future__ import annotations

import trio
from opentelemetry.trace import SpanKind, StatusCode

from .spans import events, load_render_trace, only, parent_of, trace_ids

NESTED = ("terminal/create", "session/request_permission", "fs/read_text_file")


async def test_nested_prompt_cancelled_by_session_cancel_is_one_trace() -> None:
    # The run tools/render_trace.py draws (the turn's spans only; it checks
    # that the turn answered ``cancelled``), without its pause.
    with trio.fail_after(30):
        spans = await load_render_trace().cancelled_turn(pause=0)
    agent = [span for side, span in spans if side == "agent"]
    client_side = [span for side, span in spans if side == "editor"]
    prompt_sent = only(client_side, "session/prompt", SpanKind.CLIENT)
    prompt = only(agent, "session/prompt", SpanKind.SERVER)
    # One trace over both sides' spans for the turn.
    assert len(spans) == 2 + 2 * len(NESTED)
    assert trace_ids(agent, client_side) == {prompt_sent.context.trace_id}
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
