"""``tools/render_trace.py`` draws a real cancelled turn: every span of the
turn on both sides, in one trace, with the cancel marks."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import trio

from .spans import load_render_trace

ROOT = Path(__file__).resolve().parents[2]


async def test_the_picture_shows_the_whole_cancelled_turn() -> None:
    tool = load_render_trace()
    with trio.fail_after(60):
        spans = await tool.cancelled_turn()
    assert len({span.context.trace_id for _, span in spans}) == 1
    rows = tool.tree_order(spans)
    assert [(depth, side) for depth, side, _ in rows][:2] == [(0, "editor"), (1, "agent")]
    assert sorted(span.name for _, _, span in rows) == sorted(
        ["session/prompt"] * 2 + [m for m in tool.NESTED for _ in range(2)]
    )
    svg = ET.fromstring(tool.render(spans))
    labels = [e.text or "" for e in svg.iter("{http://www.w3.org/2000/svg}text")]
    assert sum(label.endswith(" cancelled") for label in labels) == 8  # every span
    marks = [line for line in svg.iter("{http://www.w3.org/2000/svg}line")]
    assert any("$/cancel_request" in "".join(m.itertext()) for m in marks)


def test_the_committed_picture_is_an_svg_of_the_turn() -> None:
    svg = ET.parse(ROOT / "docs" / "trace-cancelled-turn.svg").getroot()
    assert "session/request_permission" in "".join(svg.itertext())
