"""Spans and ``_meta`` at the JSON level: what is injected and extracted,
what a span says about how its request ended."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from typing import Any

import trio
import trio.testing
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode

from acp_trio import ConnectionConfig, RequestError
from acp_trio.contrib.otel import Tracing
from acp_trio.lowlevel import Connection, Handler, RequestContext, open_connection
from acp_trio.testing import ScenarioClient, ScriptedPeer, open_memory_pair

from .spans import events, only, recording

LIMIT = 30
TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


class Slow(Handler):
    """Answers ``ok`` at once, ``fail`` with -32602, ``wait`` never."""

    async def handle_request(self, ctx: RequestContext, method: str, params: Any) -> Any:
        if method == "fail":
            raise RequestError(-32602, "bad params")
        if method == "wait":
            await trio.sleep_forever()
        return {"ok": True}


@asynccontextmanager
async def traced_connection(
    tracing: Tracing, handler: Handler | None = None, **config: Any
) -> AsyncIterator[tuple[Connection, ScriptedPeer]]:
    ours, theirs = trio.testing.memory_stream_pair()
    async with open_connection(
        ours, handler, config=ConnectionConfig(instrument=tracing, **config)
    ) as conn:
        peer = ScriptedPeer(theirs, timeout=LIMIT)
        yield conn, peer


def finished(exporter: Any) -> list[ReadableSpan]:
    spans: list[ReadableSpan] = list(exporter.get_finished_spans())
    return spans


async def test_meta_gets_the_context_and_keeps_the_users_keys() -> None:
    tracing, exporter = recording()
    params = {"x": 1, "_meta": {"mine": {"a": 2}, "traceparent": "not ours to keep"}}
    before = copy.deepcopy(params)
    with trio.fail_after(LIMIT):
        async with traced_connection(tracing) as (conn, peer), trio.open_nursery() as nursery:
            with tracing.tracer.start_as_current_span("outer") as outer:
                nursery.start_soon(conn.call, "m", params)
                request = await peer.receive_request("m")
                await conn.notify("n", {"y": 2, "_meta": {"mine": 3}})
                note = await peer.receive()
                await conn.notify("plain", [1, 2])
                listed = await peer.receive()
            await peer.respond(request["id"], {})
    assert params == before  # the caller's params are not changed
    trace_id = f"{outer.get_span_context().trace_id:032x}"
    call_span = only(finished(exporter), "m", SpanKind.CLIENT)
    meta = request["params"]["_meta"]
    assert meta["mine"] == {"a": 2}
    assert meta["traceparent"].startswith(f"00-{trace_id}-{call_span.context.span_id:016x}-")
    assert request["params"]["x"] == 1
    assert note["params"]["_meta"]["mine"] == 3
    assert note["params"]["_meta"]["traceparent"].split("-")[1] == trace_id
    assert listed["params"] == [1, 2]  # no _meta to put it in


async def test_notify_nowait_carries_the_context_too() -> None:
    tracing, _exporter = recording()
    with trio.fail_after(LIMIT):
        async with traced_connection(tracing) as (conn, peer):
            with tracing.tracer.start_as_current_span("outer") as outer:
                conn.notify_nowait("n", {"y": 2, "_meta": {"mine": 3}})
            note = await peer.receive()
    trace_id = f"{outer.get_span_context().trace_id:032x}"
    assert note["params"]["_meta"]["mine"] == 3
    assert note["params"]["_meta"]["traceparent"].split("-")[1] == trace_id


async def test_nothing_is_injected_without_propagation() -> None:
    tracing, _ = recording()
    tracing.propagate = False
    with trio.fail_after(LIMIT):
        async with traced_connection(tracing) as (conn, peer), trio.open_nursery() as nursery:
            nursery.start_soon(conn.call, "m", {"x": 1})
            request = await peer.receive_request("m")
            await peer.respond(request["id"], {})
    assert request["params"] == {"x": 1}


async def test_a_request_continues_the_trace_it_carries_and_ignores_a_bad_one() -> None:
    tracing, exporter = recording()
    with trio.fail_after(LIMIT):
        async with traced_connection(tracing, Slow()) as (_, peer):
            good = await peer.request("ok", {"_meta": {"traceparent": TRACEPARENT}})
            await peer.receive_response(good)
            for bad in (42, "00-nonsense", ["a"]):
                sent = await peer.request("ok", {"_meta": {"traceparent": bad}})
                assert "result" in await peer.receive_response(sent)
            sent = await peer.request("ok", {"_meta": "not an object"})
            assert "result" in await peer.receive_response(sent)
    spans = [s for s in finished(exporter) if s.name == "ok"]
    assert len(spans) == 5
    continued = spans[0]
    assert continued.kind == SpanKind.SERVER
    assert continued.parent is not None
    assert f"{continued.context.trace_id:032x}" == TRACEPARENT.split("-")[1]
    assert f"{continued.parent.span_id:016x}" == TRACEPARENT.split("-")[2]
    assert all(span.parent is None for span in spans[1:])


async def test_an_error_is_an_error_and_a_cancel_is_not() -> None:
    tracing, exporter = recording()
    with trio.fail_after(LIMIT):
        async with traced_connection(tracing, Slow()) as (_, peer):
            failed = await peer.request("fail", {})
            await peer.receive_response(failed)
            waiting = await peer.request("wait", {})
            await peer.cancel_request(waiting)
            answer = await peer.receive_response(waiting)
            assert answer["error"]["code"] == -32800
    spans = finished(exporter)
    fail = only(spans, "fail", SpanKind.SERVER)
    assert fail.status.status_code == StatusCode.ERROR
    assert fail.attributes is not None
    assert fail.attributes["rpc.jsonrpc.error_code"] == -32602
    assert fail.attributes["rpc.jsonrpc.request_id"] == failed
    assert "acp.cancelled" not in fail.attributes
    wait = only(spans, "wait", SpanKind.SERVER)
    assert wait.status.status_code != StatusCode.ERROR
    assert wait.attributes is not None
    assert wait.attributes["acp.cancelled"] is True
    assert wait.attributes["acp.cancel.cause"] == "peer"
    assert wait.attributes["rpc.jsonrpc.error_code"] == -32800
    assert events(wait) == ["$/cancel_request received"]


async def test_a_deadline_is_an_event() -> None:
    tracing, exporter = recording()
    with trio.fail_after(LIMIT):
        async with traced_connection(tracing, Slow(), request_timeout=0.05) as (_, peer):
            waiting = await peer.request("wait", {})
            answer = await peer.receive_response(waiting)
            assert answer["error"]["code"] == -32800
    wait = only(finished(exporter), "wait", SpanKind.SERVER)
    assert events(wait) == ["deadline exceeded"]
    assert wait.attributes is not None
    assert wait.attributes["acp.cancelled"] is True


async def test_a_call_answered_with_an_error_or_cut_off() -> None:
    tracing, exporter = recording()
    with trio.fail_after(LIMIT):
        async with traced_connection(tracing) as (conn, peer):
            async with trio.open_nursery() as nursery:

                async def call() -> None:
                    with suppress(RequestError):
                        await conn.call("refused", {})

                nursery.start_soon(call)
                request = await peer.receive_request("refused")
                await peer.respond_error(request["id"], -32601, "no such method")
            with trio.move_on_after(0.05):
                await conn.call("abandoned", {})
            await peer.receive_request("abandoned")
            cancel = await peer.receive()
            assert cancel["method"] == "$/cancel_request"
    spans = finished(exporter)
    refused = only(spans, "refused", SpanKind.CLIENT)
    assert refused.status.status_code == StatusCode.ERROR
    assert refused.attributes is not None
    assert refused.attributes["rpc.jsonrpc.error_code"] == -32601
    abandoned = only(spans, "abandoned", SpanKind.CLIENT)
    assert abandoned.status.status_code != StatusCode.ERROR
    assert abandoned.attributes is not None
    assert abandoned.attributes["acp.cancelled"] is True
    assert events(abandoned) == ["$/cancel_request sent"]


async def test_updates_are_counted_on_the_turn_not_a_span_each() -> None:
    agent_tracing, agent_spans = recording()
    client_tracing, client_spans = recording()
    with trio.fail_after(LIMIT):
        async with open_memory_pair(
            client=ScenarioClient(),
            agent_config=ConnectionConfig(instrument=agent_tracing),
            client_config=ConnectionConfig(instrument=client_tracing),
        ) as pair:
            session = await pair.new_session()
            await pair.to_agent.prompt_text(session, "stream 5")
    for exporter, kind in ((agent_spans, SpanKind.SERVER), (client_spans, SpanKind.CLIENT)):
        spans = finished(exporter)
        prompt = only(spans, "session/prompt", kind)
        assert prompt.attributes is not None
        assert prompt.attributes["acp.session_updates"] == 5
        assert prompt.attributes["acp.stop_reason"] == "end_turn"
        assert "acp.cancelled" not in prompt.attributes
        assert not [s for s in spans if s.name == "session/update"]


async def test_notification_spans_when_asked() -> None:
    agent_tracing, agent_spans = recording()
    client_tracing, client_spans = recording()
    client_tracing.notification_spans = agent_tracing.notification_spans = True
    with trio.fail_after(LIMIT):
        async with open_memory_pair(
            client=ScenarioClient(),
            agent_config=ConnectionConfig(instrument=agent_tracing),
            client_config=ConnectionConfig(instrument=client_tracing),
        ) as pair:
            session = await pair.new_session()
            await pair.to_agent.prompt_text(session, "stream 2")
    sent = [s for s in finished(agent_spans) if s.name == "session/update"]
    handled = [s for s in finished(client_spans) if s.name == "session/update"]
    assert [s.kind for s in sent] == [SpanKind.PRODUCER] * 2
    assert [s.kind for s in handled] == [SpanKind.CONSUMER] * 2
    for producer, consumer in zip(sent, handled, strict=True):
        assert consumer.parent is not None
        assert consumer.parent.span_id == producer.context.span_id


async def test_install_traces_the_connections_without_an_instrument() -> None:
    tracing, exporter = recording()
    tracing.install()
    try:
        with trio.fail_after(LIMIT):
            async with traced_connection_plain() as (conn, peer), trio.open_nursery() as nursery:
                nursery.start_soon(conn.call, "m", {})
                request = await peer.receive_request("m")
                await peer.respond(request["id"], {})
    finally:
        tracing.uninstall()
    assert "traceparent" in request["params"]["_meta"]
    assert only(finished(exporter), "m", SpanKind.CLIENT)


@asynccontextmanager
async def traced_connection_plain() -> AsyncIterator[tuple[Connection, ScriptedPeer]]:
    ours, theirs = trio.testing.memory_stream_pair()
    async with open_connection(ours) as conn:
        yield conn, ScriptedPeer(theirs, timeout=LIMIT)


async def test_a_message_passed_on_carries_our_context_only() -> None:
    # A proxy passes on params that carry the previous hop's keys: all three
    # are replaced by ours (a stale tracestate is not mixed with our parent).
    tracing, _ = recording()
    stale = {"traceparent": TRACEPARENT, "tracestate": "them=1", "baggage": "k=v", "mine": 1}
    with trio.fail_after(LIMIT):
        async with traced_connection(tracing) as (conn, peer), trio.open_nursery() as nursery:
            nursery.start_soon(conn.call, "m", {"_meta": stale})
            request = await peer.receive_request("m")
            await peer.respond(request["id"], {})
    meta = request["params"]["_meta"]
    assert meta["mine"] == 1
    assert meta["traceparent"] != TRACEPARENT
    assert "tracestate" not in meta
    assert "baggage" not in meta


class Broken:
    """A tracer that fails at everything."""

    def start_span(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("broken tracer")

    def start_as_current_span(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("broken tracer")


class Remembers(Slow):
    def __init__(self) -> None:
        self.received: list[str] = []

    def request_received(self, ctx: RequestContext, params: Any) -> None:
        self.received.append(ctx.method)


async def test_a_failing_tracer_fails_nothing_else(caplog: Any) -> None:
    tracing, _ = recording()
    tracing.tracer = Broken()  # type: ignore[assignment]
    handler = Remembers()
    with trio.fail_after(LIMIT):
        async with traced_connection(tracing, handler) as (conn, peer):
            sent = await peer.request("ok", {})
            assert (await peer.receive_response(sent))["result"] == {"ok": True}
            async with trio.open_nursery() as nursery:
                nursery.start_soon(conn.call, "m", {"x": 1})
                request = await peer.receive_request("m")
                await peer.respond(request["id"], {})
            await conn.notify("n", {"y": 1})
            assert (await peer.receive())["params"] == {"y": 1}
    assert handler.received == ["ok"]
    assert request["params"] == {"x": 1}
    assert "tracing failed" in caplog.text


class Forwards(Handler):
    """Calls the peer back with ``inner`` while handling ``outer``."""

    async def handle_request(self, ctx: RequestContext, method: str, params: Any) -> Any:
        return await ctx.connection.call("inner", {})


async def test_without_an_sdk_the_context_received_goes_on() -> None:
    # The API alone (no SDK: non-recording spans) still carries the trace:
    # what a handler sends continues the context its request brought.
    from opentelemetry.trace import NoOpTracerProvider

    tracing = Tracing(NoOpTracerProvider())
    with trio.fail_after(LIMIT):
        async with traced_connection(tracing, Forwards()) as (_, peer):
            outer = await peer.request("outer", {"_meta": {"traceparent": TRACEPARENT}})
            inner = await peer.receive_request("inner")
            await peer.respond(inner["id"], {})
            await peer.receive_response(outer)
    assert inner["params"]["_meta"]["traceparent"] == TRACEPARENT
