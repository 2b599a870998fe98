"""Draw ``docs/how-a-turn-ends.svg``: the cancel ladder's three endings on
one time axis, and what leaving a connection's block does, in order.

``python tools/draw_turn_ends.py`` rewrites the picture; a test checks that
the committed file is what this script draws (edit the numbers here, not the
SVG). Plain SVG, no dependencies.
"""

from __future__ import annotations

import sys
from html import escape
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "docs" / "how-a-turn-ends.svg"

WIDTH = 960
# The defaults drawn (AgentProxy.cancel_grace, .escalation_grace; the
# connection's close_timeout; open_spawned_agent's shutdown_grace and
# terminate_grace).
CANCEL_GRACE = 5.0
ESCALATION_GRACE = 2.0

GREEN, AMBER, RED, GREY, INK = "#2e7d32", "#ef8f00", "#c62828", "#9e9e9e", "#212121"


def text(x: float, y: float, s: str, *, size: int = 13, anchor: str = "start", **kw: str) -> str:
    attrs = "".join(f' {k.replace("_", "-")}="{v}"' for k, v in kw.items())
    return (
        f'<text x="{x:g}" y="{y:g}" font-size="{size}" text-anchor="{anchor}"'
        f"{attrs}>{escape(s)}</text>"
    )


def line(x1: float, y1: float, x2: float, y2: float, color: str = INK, **kw: str) -> str:
    attrs = "".join(f' {k.replace("_", "-")}="{v}"' for k, v in kw.items())
    return f'<line x1="{x1:g}" y1="{y1:g}" x2="{x2:g}" y2="{y2:g}" stroke="{color}"{attrs}/>'


def rect(x: float, y: float, w: float, h: float, fill: str, **kw: str) -> str:
    attrs = "".join(f' {k.replace("_", "-")}="{v}"' for k, v in kw.items())
    return f'<rect x="{x:g}" y="{y:g}" width="{w:g}" height="{h:g}" fill="{fill}"{attrs}/>'


def dot(x: float, y: float, color: str) -> str:
    return f'<circle cx="{x:g}" cy="{y:g}" r="6" fill="{color}"/>'


def ladder(top: float) -> list[str]:
    """The three endings of a cancelled turn, on the time since session/cancel."""
    left, right = 150.0, 580.0
    end = CANCEL_GRACE + ESCALATION_GRACE
    scale = (right - left) / (end + 0.6)

    def at(t: float) -> float:
        return left + t * scale

    out = [
        text(
            20,
            top,
            "The cancel ladder: AgentProxy.cancel_turn(), cancel(), a cancelled prompt()",
            size=16,
            font_weight="bold",
        ),
    ]
    axis = top + 205
    out.append(line(left, axis, right, axis))
    marks = [
        (0.0, "session/cancel", "0"),
        (CANCEL_GRACE, "$/cancel_request", f"cancel_grace ({CANCEL_GRACE:g} s)"),
        (end, "abandoned", f"+ escalation_grace ({ESCALATION_GRACE:g} s)"),
    ]
    for i, (t, what, when) in enumerate(marks):
        x = at(t)
        out.append(line(x, top + 30, x, axis + 6, GREY, stroke_dasharray="4 3"))
        out.append(text(x, axis + 22 + 16 * (i == 2), when, size=12, anchor="middle"))
        out.append(text(x, top + 24, what, size=12, anchor="middle", font_style="italic"))
    rows = [
        (
            "answered",
            GREEN,
            1.2,
            [],
            ["the agent answers session/cancel", "(stopReason cancelled)"],
        ),
        (
            "escalated",
            AMBER,
            CANCEL_GRACE + 0.8,
            [CANCEL_GRACE],
            ["it answers $/cancel_request", "(-32800, or its stop reason)"],
        ),
        (
            "abandoned",
            RED,
            end,
            [CANCEL_GRACE],
            [
                "no answer: the late one is dropped;",
                "then the abandon_policy: free_session",
                "(the next prompt is sent), close_connection",
                "or stop_process",
            ],
        ),
    ]
    for i, (name, color, stop, steps, notes) in enumerate(rows):
        y = top + 60 + i * 45
        out.append(text(left - 12, y + 5, name, anchor="end", fill=color, font_weight="bold"))
        out.append(rect(at(0), y - 7, at(stop) - at(0), 14, color, opacity="0.25"))
        out.append(dot(at(0), y, INK))
        for step in steps:
            out.append(dot(at(step), y, AMBER))
        out.append(dot(at(stop), y, color))
        for j, note in enumerate(notes):
            out.append(text(at(stop) + 12, y - 2 + j * 15, note, size=12))
    return out


def leaving(top: float) -> list[str]:
    """Leaving open_spawned_agent's block, for any reason, in order."""
    out = [
        text(
            20,
            top,
            "Leaving open_spawned_agent() (normally, by an error, by a cancel), in order",
            size=16,
            font_weight="bold",
        ),
    ]
    steps = [
        ("session/cancel", "sent at once by", "the cancelled prompt()", GREEN, 135),
        ("wind down", "each cancelled turn ends:", "≤ cancel_grace + escalation_grace", AMBER, 205),
        ("close", "the connection:", "≤ close_timeout (5 s)", GREY, 135),
        (
            "stop",
            "stdin closed, shutdown_grace (2 s),",
            "SIGTERM, terminate_grace (2 s), SIGKILL",
            RED,
            250,
        ),
        ("stderr", "read to its end,", "every line forwarded", GREY, 125),
    ]
    x = 20.0
    y = top + 20
    for i, (title, first, second, color, width) in enumerate(steps):
        out.append(rect(x, y, width, 74, color, opacity="0.18", rx="6", stroke=color))
        out.append(text(x + width / 2, y + 22, title, anchor="middle", font_weight="bold"))
        out.append(text(x + width / 2, y + 42, first, size=11, anchor="middle"))
        out.append(text(x + width / 2, y + 58, second, size=11, anchor="middle"))
        x += width
        if i < len(steps) - 1:
            out.append(line(x + 2, y + 37, x + 14, y + 37, INK, marker_end="url(#arrow)"))
            x += 18
    out.append(
        text(
            20,
            y + 100,
            "The connection and the stderr forwarding live until the block is left, not until "
            "the scope around it is cancelled:",
            size=12,
        )
    )
    out.append(
        text(
            20,
            y + 116,
            "so a relay's sub-agent reads session/cancel first and has its grace to answer "
            "before end of input and signals.",
            size=12,
        )
    )
    return out


def draw() -> str:
    body = ladder(30) + leaving(310)
    defs = (
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
        'markerHeight="7" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#212121"/>'
        "</marker></defs>"
    )
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="470" '
        f'viewBox="0 0 {WIDTH} 470" font-family="sans-serif" fill="{INK}">\n'
        f"{rect(0, 0, WIDTH, 470, '#ffffff')}\n{defs}\n" + "\n".join(body) + "\n</svg>\n"
    )


def main() -> int:
    OUT.write_text(draw())
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
