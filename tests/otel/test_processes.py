"""Traces across processes: acp_trio's client here (an in-memory exporter),
the scenario agent in a process of its own started with ``--otel`` (spans
to stderr), over pipes; then the same through the conductor and two
proxies, each a process. A ``nested`` turn cancelled with ``session/cancel``
is one trace, hop by hop."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind

import acp_trio
from acp_trio import ConnectionConfig
from acp_trio.testing import SCENARIO_AGENT_COMMAND, ScenarioClient

from .exported import Lines, console_env, hex_id
from .spans import only, recording

ROOT = Path(__file__).resolve().parents[2]
PROXY = [sys.executable, str(ROOT / "examples" / "proxies" / "logging_proxy.py"), "--quiet"]
CONDUCT = [sys.executable, "-m", "acp_trio", "conduct", "--otel"]
AGENT = [*SCENARIO_AGENT_COMMAND, "--otel"]
NESTED = ("terminal/create", "session/request_permission", "fs/read_text_file")
LIMIT = 90

pytestmark = pytest.mark.timeout(LIMIT + 30)


Ready = Callable[[list[ReadableSpan], list[dict[str, Any]]], bool]


@asynccontextmanager
async def traced_turn(
    command: list[str], name: str, ready: Ready
) -> AsyncIterator[tuple[list[ReadableSpan], Lines]]:
    """Run a ``nested`` turn against ``command`` and cancel it with
    ``session/cancel``; once ``ready(our spans, theirs)`` (the cancels go on
    through the hops after the turn's answer), yields (our spans, the
    process's stderr) after it has exited."""
    tracing, exporter = recording()
    lines = Lines(name)
    client = ScenarioClient()
    try:
        with trio.fail_after(LIMIT):
            async with acp_trio.open_spawned_agent(
                client,
                command,
                env=console_env(),
                stderr=lines.logger,
                config=ConnectionConfig(instrument=tracing),
            ) as agent:
                await agent.initialize(client.initialize_request())
                session = (await agent.new_session("/")).session_id
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(agent.prompt_text, session, "nested")
                    for method in NESTED:
                        await client.wait_for_requests(method)
                    answer = await agent.cancel_turn(session)
                assert answer is not None
                assert answer.stop_reason == "cancelled"
                # (Polled: the other processes' spans come as lines of their
                # stderr, with no event to wait for. Under the watchdog.)
                while not ready(list(exporter.get_finished_spans()), lines.spans()):  # noqa: ASYNC110
                    await trio.sleep(0.05)
        yield list(exporter.get_finished_spans()), lines
    finally:
        lines.close()


def by_id(spans: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {span["context"]["span_id"]: span for span in spans}


def ancestry(span: dict[str, Any], spans: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """``span`` and its ancestors among ``spans``, inner first."""
    found = []
    current: dict[str, Any] | None = span
    while current is not None:
        found.append(current)
        parent = current["parent_id"]
        current = None if parent is None else spans.get(parent)
    return found


def chain_of(span: dict[str, Any], spans: dict[str, dict[str, Any]]) -> list[str]:
    """The names and kinds of ``span`` and its ancestors, inner first."""
    return [f"{s['name']} {s['kind'].removeprefix('SpanKind.')}" for s in ancestry(span, spans)]


def service(span: dict[str, Any]) -> str:
    name: str = span["resource"]["attributes"]["service.name"]
    return name


def every_nested_request_handled(ours: list[ReadableSpan], theirs: list[dict[str, Any]]) -> bool:
    """Our handling of each nested request ended, and the span it continues
    (the last hop's) was exported, with its ancestors up to the agent's."""
    spans = by_id(theirs)
    for method in NESTED:
        handled = [s for s in ours if s.name == method and s.kind == SpanKind.SERVER]
        if not handled or handled[0].parent is None:
            return False
        last = spans.get(hex_id(handled[0].parent.span_id, 16))
        if last is None:
            return False
        if not any(service(s) == "acp_trio scenario-agent" for s in ancestry(last, spans)):
            return False
    return True


def trace_complete(ours: list[ReadableSpan], theirs: list[dict[str, Any]]) -> bool:
    """As :func:`every_nested_request_handled`, and the agent's prompt span
    arrived, and so did the parent of every span of the turn's trace (the
    other processes' lines come in their own time, through the conductor's)."""
    if not every_nested_request_handled(ours, theirs):
        return False
    prompts = [s for s in ours if s.name == "session/prompt" and s.kind == SpanKind.CLIENT]
    if not prompts:
        return False
    trace_id = hex_id(prompts[0].context.trace_id, 32)
    turn = [s for s in theirs if s["context"]["trace_id"] == trace_id]
    if not any(
        s["name"] == "session/prompt" and service(s) == "acp_trio scenario-agent" for s in turn
    ):
        return False
    known = {s["context"]["span_id"] for s in turn} | {hex_id(s.context.span_id, 16) for s in ours}
    return all(s["parent_id"] is None or s["parent_id"] in known for s in turn)


async def test_a_cancelled_turn_over_pipes_is_one_trace() -> None:
    async with traced_turn(AGENT, "tests.otel.agent", trace_complete) as (
        ours,
        lines,
    ):
        theirs = lines.spans()
    prompt_sent = only(ours, "session/prompt", SpanKind.CLIENT)
    trace_id = hex_id(prompt_sent.context.trace_id, 32)
    prompt = [s for s in theirs if s["name"] == "session/prompt"]
    assert len(prompt) == 1
    assert prompt[0]["context"]["trace_id"] == trace_id
    assert prompt[0]["parent_id"] == hex_id(prompt_sent.context.span_id, 16)
    assert prompt[0]["attributes"]["acp.cancelled"] is True
    assert "session/cancel received" in [e["name"] for e in prompt[0]["events"]]
    for method in NESTED:
        [sent] = [s for s in theirs if s["name"] == method]
        handled = only(ours, method, SpanKind.SERVER)
        assert sent["kind"] == "SpanKind.CLIENT"
        assert sent["context"]["trace_id"] == trace_id
        assert sent["parent_id"] == prompt[0]["context"]["span_id"]
        assert sent["attributes"]["acp.cancelled"] is True
        assert handled.parent is not None
        assert hex_id(handled.parent.span_id, 16) == sent["context"]["span_id"]
        assert handled.context.trace_id == prompt_sent.context.trace_id
        assert handled.attributes is not None
        assert handled.attributes["acp.cancelled"] is True
        sent_events = [e["name"] for e in sent["events"]]
        if method != "session/request_permission":
            # (The permission request the client answers "cancelled" itself,
            # maybe before the agent's cancel goes out.)
            assert "$/cancel_request sent" in sent_events
            assert "$/cancel_request received" in [e.name for e in handled.events]


async def test_a_cancelled_turn_through_the_conductor_is_one_trace_hop_by_hop() -> None:
    command = [*CONDUCT, "--", *PROXY, "--otel", "--", *PROXY, "--otel", "--", *AGENT]
    async with traced_turn(command, "tests.otel.chain", trace_complete) as (
        ours,
        lines,
    ):
        theirs = lines.spans()
    prompt_sent = only(ours, "session/prompt", SpanKind.CLIENT)
    trace_id = hex_id(prompt_sent.context.trace_id, 32)
    turn = [s for s in theirs if s["context"]["trace_id"] == trace_id]
    spans = by_id(turn)
    services = {service(s) for s in turn}
    assert services == {"acp_trio conduct", "logging-proxy", "acp_trio scenario-agent"}
    # The agent's prompt, then its way back to the client, one span per hop
    # and side: conductor -> proxy 1 -> conductor -> proxy 2 -> conductor -> agent.
    [agent_prompt] = [
        s for s in turn if s["name"] == "session/prompt" and service(s) == "acp_trio scenario-agent"
    ]
    assert chain_of(agent_prompt, spans) == [
        "session/prompt SERVER",  # the agent
        "session/prompt CLIENT",  # the conductor, hop 3
        "proxy/successor SERVER",  # the conductor, from proxy 2
        "proxy/successor CLIENT",  # proxy 2
        "session/prompt SERVER",  # proxy 2
        "session/prompt CLIENT",  # the conductor, hop 2
        "proxy/successor SERVER",  # the conductor, from proxy 1
        "proxy/successor CLIENT",  # proxy 1
        "session/prompt SERVER",  # proxy 1
        "session/prompt CLIENT",  # the conductor, hop 1
        "session/prompt SERVER",  # the conductor, from the client
    ]
    top = ancestry(agent_prompt, spans)[-1]
    assert top["parent_id"] == hex_id(prompt_sent.context.span_id, 16)
    assert agent_prompt["attributes"]["acp.cancelled"] is True
    # Each nested request: from the agent to the client, through every hop,
    # and our handling of it under the last of them.
    for method in NESTED:
        [sent] = [
            s for s in turn if s["name"] == method and service(s) == "acp_trio scenario-agent"
        ]
        assert sent["parent_id"] == agent_prompt["context"]["span_id"]
        handled = only(ours, method, SpanKind.SERVER)
        assert handled.parent is not None
        # From the agent to us: through the conductor, proxy 2, the
        # conductor, proxy 1 and the conductor, each a span per side.
        path = ancestry(spans[hex_id(handled.parent.span_id, 16)], spans)
        assert path[10] is sent
        assert chain_of(path[0], spans)[:11] == [
            f"{method} CLIENT",  # the conductor, hop 0
            f"{method} SERVER",  # the conductor, from proxy 1
            f"{method} CLIENT",  # proxy 1
            "proxy/successor SERVER",  # proxy 1
            "proxy/successor CLIENT",  # the conductor, to proxy 1
            f"{method} SERVER",  # the conductor, from proxy 2
            f"{method} CLIENT",  # proxy 2
            "proxy/successor SERVER",  # proxy 2
            "proxy/successor CLIENT",  # the conductor, to proxy 2
            f"{method} SERVER",  # the conductor, from the agent
            f"{method} CLIENT",  # the agent
        ]
        assert handled.attributes is not None
        assert handled.attributes["acp.cancelled"] is True
