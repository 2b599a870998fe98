"""The charts of ``docs/benchmarks.md`` (matplotlib, SVG): each figure
beside its floor or its target."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from report_figures import (
    CONDUCTOR_X_RELAY,
    OWN_PAIRS,
    READ_SHARE,
    SDK_NAMES,
    chain_added_us,
    median,
    pair_rates,
)

OURS, FLOOR, OTHER, TARGET = "#1f6feb", "#8c959f", "#d4a72c", "#cf222e"


def _color(name: str) -> str:
    if name.startswith("acp_trio") or name in ("conductor", "1 proxy", "2 proxies", "1 logging"):
        return OURS
    if "floor" in name or "relay" in name or "bare" in name:
        return FLOOR
    return OTHER


def charts(results: dict[str, Any], out: Path) -> list[tuple[str, str]]:
    """Draw the charts; returns (file name, caption) of each one drawn."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update(
        {
            "svg.hashsalt": "acp_trio",  # the same figures give the same file
            "svg.fonttype": "none",
            "font.size": 9,
            "axes.spines.top": False,
            "axes.spines.right": False,
        }
    )
    drawn: list[tuple[str, str]] = []

    def save(fig: Any, name: str, caption: str) -> None:
        fig.tight_layout()
        fig.savefig(out / name, format="svg", metadata={"Date": None})
        plt.close(fig)
        drawn.append((name, caption))

    def bars(ax: Any, labels: list[str], values: list[float], unit: str) -> None:
        ax.barh(labels, values, color=[_color(label) for label in labels])
        ax.invert_yaxis()
        top = max(values) if values else 1.0
        for i, value in enumerate(values):
            ax.text(value + top * 0.01, i, f"{value:,.0f}", va="center", fontsize=8)
        ax.set_xlim(0, top * 1.18)
        ax.set_xlabel(unit)

    sdks = results.get("sdks") or {}
    stream, read = pair_rates(sdks, "stream"), pair_rates(sdks, "read")
    own = [sdk for sdk in OWN_PAIRS if f"{sdk} x {sdk}" in stream]
    if own:
        fig, axes = plt.subplots(1, 2, figsize=(9, 2.6))
        for ax, (title, rates, unit) in zip(
            axes,
            (
                ("stream: chunks/s", stream, "chunks per second (higher is better)"),
                ("read: round trips/s", read, "round trips per second (higher is better)"),
            ),
            strict=True,
        ):
            names = [sdk for sdk in own if f"{sdk} x {sdk}" in rates]
            bars(
                ax,
                [SDK_NAMES[sdk] for sdk in names],
                [median(rates[f"{sdk} x {sdk}"]) for sdk in names],
                unit,
            )
            ax.set_title(title, loc="left")
        save(fig, "sdk-pairs.svg", "Each SDK's client with its own agent, over OS pipes")

    agents = [
        agent
        for agent in (
            "acp_trio",
            "acp_trio-burst",
            "acp_trio-std",
            "ts",
            "official",
            "trio-floor",
            "floor",
        )
        if f"floor x {agent}" in stream
    ]
    trio_floor = stream.get("floor x trio-floor")
    if agents and trio_floor:
        fig, axes = plt.subplots(1, 2, figsize=(9, 2.6))
        for ax, (title, rates) in zip(axes, (("stream", stream), ("read", read)), strict=True):
            names = [a for a in agents if f"floor x {a}" in rates and "floor x trio-floor" in rates]
            floor = median(rates["floor x trio-floor"])
            shares = [100 * median(rates[f"floor x {a}"]) / floor for a in names]
            labels = [SDK_NAMES[a] for a in names]
            ax.barh(labels, shares, color=[_color(label) for label in labels])
            ax.invert_yaxis()
            for i, value in enumerate(shares):
                ax.text(value + 2, i, f"{value:.0f}%", va="center", fontsize=8)
            ax.axvline(100 * READ_SHARE, color=TARGET, linestyle="--", linewidth=1)
            ax.set_xlim(0, max(shares) * 1.2)
            ax.set_xlabel("% of the Trio floor agent, unpinned (dashed: 95%)")
            ax.set_title(f"{title}: agents behind the raw client", loc="left")
        save(fig, "floors.svg", "Agents behind the same raw client, as a share of the Trio floor")

    chain = results.get("chain")
    if chain:
        added = chain_added_us(chain)
        labels = [label for label in added if label != "agent"]
        fig, ax = plt.subplots(figsize=(9, 2.4))
        unit = "µs added per round trip over the direct agent (lower is better)"
        bars(ax, labels, [added[label] for label in labels], unit)
        relay = added.get("parsing relay", 0.0)
        if relay > 0:
            ax.axvline(CONDUCTOR_X_RELAY * relay, color=TARGET, linestyle="--", linewidth=1)
        ax.set_title(
            f"read through proxy hops (dashed: {CONDUCTOR_X_RELAY}x the parsing relay, the"
            " conductor's target)",
            loc="left",
        )
        save(fig, "proxy-hops.svg", "What each hop adds to an agent → client round trip")

    conn = sdks.get("connection")
    if conn:
        fig, ax = plt.subplots(figsize=(9, 2.6))
        rows = [
            ("acp_trio, one process", conn["pipes"]),
            ("bare Trio, one process", conn["floor"]),
            ("acp_trio, two processes", conn["procs"]),
        ]
        if conn.get("procs_floor"):
            rows.append(("bare Trio, two processes", conn["procs_floor"]))
        labels = [f"{name}: {kind}" for name, _ in rows for kind in ("fan", "chain")]
        values = [median(data[kind]) for _, data in rows for kind in ("fan", "chain")]
        ax.barh(labels, values, color=[FLOOR if "bare" in lab else OURS for lab in labels])
        ax.invert_yaxis()
        for i, value in enumerate(values):
            ax.text(value + 1, i, f"{value:.0f} ms", va="center", fontsize=8)
        ax.set_xlabel("ms from the cancel to the last reply, 1,000 requests (lower is better)")
        ax.set_title("the cancel cascade", loc="left")
        save(fig, "cascade.svg", "Cancelling 1,000 requests in flight, beside bare Trio")

    remote = results.get("remote")
    if remote and remote.get("cells"):
        cells = remote["cells"]
        fig, axes = plt.subplots(1, 2, figsize=(9, 0.6 + 0.28 * len(cells)))
        for ax, key, title in (
            (axes[0], "stream_ms", f"stream {remote['stream']}"),
            (axes[1], "read_ms", f"read {remote['read']}"),
        ):
            names = list(cells)
            values = [cells[name][key] for name in names]
            colors = [
                OURS if "acp_trio server + acp_trio client" in name else OTHER for name in names
            ]
            ax.barh(names, values, color=colors)
            ax.invert_yaxis()
            for i, value in enumerate(values):
                ax.text(value, i, f" {value:.1f}", va="center", fontsize=7)
            ax.set_xlabel("ms (lower is better)")
            ax.set_title(title, loc="left")
            if ax is axes[1]:
                ax.set_yticklabels([])
        save(fig, "remote.svg", "Remote ACP over loopback: WebSocket, h2c and HTTP/1.1")
    return drawn
