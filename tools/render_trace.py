#!/usr/bin/env python3
"""Render a real cancelled turn as a trace: ``docs/trace-cancelled-turn.svg``.

A client prompts the scenario agent with ``nested`` (the agent sends a
terminal, a permission request and a file read, and waits), waits 200 ms,
then cancels the turn with ``session/cancel``. Both sides are traced with
:class:`acp_trio.contrib.otel.Tracing` into in-memory exporters; the spans
of the turn are drawn as a waterfall, in tree order: one row a span, its bar
from start to end, its events as marks (cancels in red), the client's spans
in blue and the agent's in green; beside the whole turn, the cancel cascade
zoomed, from the editor's ``session/cancel`` on.

    python tools/render_trace.py [OUT.svg]     # needs opentelemetry-sdk

Run it again after a change to the spans; the picture is a real run's.
"""

from __future__ import annotations

import sys
from html import escape
from pathlib import Path
from typing import Any

import trio
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from acp_trio import ConnectionConfig
from acp_trio.contrib.otel import Tracing
from acp_trio.testing import ScenarioClient, open_memory_pair

OUT = Path(__file__).resolve().parents[1] / "docs" / "trace-cancelled-turn.svg"
NESTED = ("terminal/create", "session/request_permission", "fs/read_text_file")
TURN = {"session/prompt", *NESTED}


def _recording() -> tuple[Tracing, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return Tracing(provider), exporter


async def cancelled_turn(pause: float = 0.2) -> list[tuple[str, ReadableSpan]]:
    """The spans of one ``nested`` turn cancelled ``pause`` seconds after
    its three requests reached the editor, as ``(side, span)``
    (``tests/otel/test_memory_trace.py`` checks the same run)."""
    agent_tracing, agent_spans = _recording()
    client_tracing, client_spans = _recording()
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
                await trio.sleep(pause)
                answer = await pair.to_agent.cancel_turn(session)
    if answer is None or answer.stop_reason != "cancelled":
        raise RuntimeError(f"the turn was not cancelled: {answer}")
    spans = [("agent", s) for s in agent_spans.get_finished_spans()]
    spans += [("editor", s) for s in client_spans.get_finished_spans()]
    return [(side, s) for side, s in spans if s.name in TURN]


def tree_order(spans: list[tuple[str, ReadableSpan]]) -> list[tuple[int, str, ReadableSpan]]:
    """``(depth, side, span)``, each span after its parent, siblings by start."""
    ids = {s.context.span_id for _, s in spans}
    children: dict[int | None, list[tuple[str, ReadableSpan]]] = {}
    for side, span in spans:
        parent = span.parent.span_id if span.parent and span.parent.span_id in ids else None
        children.setdefault(parent, []).append((side, span))
    out: list[tuple[int, str, ReadableSpan]] = []

    def walk(parent: int | None, depth: int) -> None:
        for side, span in sorted(children.get(parent, []), key=lambda p: p[1].start_time or 0):
            out.append((depth, side, span))
            walk(span.context.span_id, depth + 1)

    walk(None, 0)
    return out


COLOURS = {"editor": "#3b6fb6", "agent": "#3a9a5b"}
ROW, LABEL, WHOLE, GAP, ZOOM = 26, 430, 240, 30, 420


def _bars(
    span: ReadableSpan, y: float, x0: float, width: float, start: int, end: int, colour: str
) -> list[str]:
    """One span's bar and event marks in a panel showing ``start..end`` (ns)."""
    scale = width / max(end - start, 1)

    def x(t: int) -> float:
        return x0 + (min(max(t, start), end) - start) * scale

    left, right = x(span.start_time or start), x(span.end_time or end)
    parts = [
        f'<rect x="{left:.1f}" y="{y + 4}" width="{max(right - left, 2):.1f}" height="14" '
        f'rx="2" fill="{colour}" fill-opacity="0.8"/>'
    ]
    for event in span.events:
        if start <= event.timestamp <= end:
            ex = x(event.timestamp)
            mark = "#d62728" if "cancel" in event.name else "#333333"
            parts.append(
                f'<line x1="{ex:.1f}" y1="{y + 1}" x2="{ex:.1f}" y2="{y + 21}" '
                f'stroke="{mark}" stroke-width="2"><title>{escape(event.name)}</title></line>'
            )
    return parts


def render(spans: list[tuple[str, ReadableSpan]]) -> str:
    """The waterfall, as SVG text: the whole turn, and the cancel cascade
    zoomed (from the editor's ``session/cancel`` to the last span's end)."""
    rows = tree_order(spans)
    t0 = min(s.start_time or 0 for _, _, s in rows)
    t1 = max(s.end_time or 0 for _, _, s in rows)
    cancel_at = min(
        (e.timestamp for _, _, s in rows for e in s.events if e.name == "session/cancel sent"),
        default=t0,
    )
    z0 = cancel_at - max((t1 - cancel_at) // 20, 1)
    height = ROW * (len(rows) + 2) + 10
    width = LABEL + WHOLE + GAP + ZOOM + 20
    zoom_x = LABEL + WHOLE + GAP
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'font-family="monospace" font-size="12">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        '<text x="8" y="18" font-weight="bold">A cancelled turn, one trace: editor (blue), '
        "agent (green); red marks: cancels</text>",
        f'<text x="{LABEL}" y="{ROW + 6}">whole turn, {(t1 - t0) / 1e6:.0f} ms</text>',
        f'<text x="{zoom_x}" y="{ROW + 6}">from session/cancel, '
        f"{(t1 - cancel_at) / 1e3:.0f} µs</text>",
    ]
    for index, (depth, side, span) in enumerate(rows):
        y = ROW * (index + 1) + 14
        kind = "CLIENT" if span.kind == SpanKind.CLIENT else "SERVER"
        attributes: dict[str, Any] = dict(span.attributes or {})
        mark = " cancelled" if attributes.get("acp.cancelled") else ""
        label = f"{'  ' * depth}{span.name} {kind} {side}{mark}"
        parts.append(f'<text x="8" y="{y + 15}" xml:space="preserve">{escape(label)}</text>')
        parts += _bars(span, y, LABEL, WHOLE, t0, t1, COLOURS[side])
        parts += _bars(span, y, zoom_x, ZOOM, z0, t1, COLOURS[side])
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def main(argv: list[str]) -> int:
    out = Path(argv[0]) if argv else OUT
    out.write_text(render(trio.run(cancelled_turn)))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
