"""Figures from the records the benchmark scripts write (``--json``), and
the targets ``bench_report.py`` judges them by."""

from __future__ import annotations

import statistics
from typing import Any

# The issue targets the report checks, in one place.
TRIO_FLOOR_SHARE = 0.95  # acp_trio's agent: stream and read at least 95% of the Trio floor
NOWAIT_STDLIB_SHARE = 0.90  # stream through notify_nowait: at least 90% of the stdlib floor
CONDUCTOR_X_RELAY = 1.5  # the conductor adds at most 1.5x what the relay adds
PROXY_X_RELAY = 2.0  # each proxy behind it at most 2x
CASCADE_MS = 50.0  # cancel of a fan and a chain of 1,000 in flight
MEMORY_B = 2048  # memory per request in flight while serving
OFFICIAL_STREAM_X, OFFICIAL_READ_X = 3.0, 1.8  # acp_trio pair vs the official pair
CANCEL_P50_MS = 2.0
SCALE_CLIENTS, SCALE_S = 1000, 5.0  # every profile: 1,000 of 1,000 clients in under 5 s
SCALE_WS_CLIENTS = 5000  # 5,000 WebSocket clients, none failing

OWN_PAIRS = ("acp_trio", "acp_trio-std", "ts", "official", "floor")
SDK_NAMES = {
    "acp_trio": "acp_trio",
    "acp_trio-std": "acp_trio (stdlib json)",
    "ts": "TypeScript SDK",
    "official": "official Python SDK",
    "floor": "stdlib floor",
    "trio-floor": "Trio floor",
    "acp_trio-burst": "acp_trio, notify_nowait bursts",
}


PROFILE_NAMES = {"websocket": "WebSocket", "http1": "HTTP/1.1", "http": "HTTP/2 h2c"}


def median(values: list[float]) -> float:
    return statistics.median(values)


def pair_rates(sdks: dict[str, Any], workload: str) -> dict[str, list[float]]:
    """``"client x agent"`` -> the per-second rates of its successful runs."""
    out: dict[str, list[float]] = {}
    for pair, runs in sdks.get("runs", {}).get(workload, {}).items():
        rates = [r["per_second"] for r in runs if "per_second" in r]
        if rates:
            out[pair] = rates
    return out


def pair_errors(sdks: dict[str, Any], workload: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for pair, runs in sdks.get("runs", {}).get(workload, {}).items():
        errors = [r["error"] for r in runs if "error" in r]
        if errors and not any("per_second" in r or "latencies_ms" in r for r in runs):
            out[pair] = errors[0]
    return out


def cancel_latency(sdks: dict[str, Any]) -> dict[str, tuple[float, float]]:
    """``"client x agent"`` -> (p50, p90) ms over every cycle of every run."""
    out: dict[str, tuple[float, float]] = {}
    for pair, runs in sdks.get("runs", {}).get("cancel", {}).items():
        values = sorted(x for r in runs for x in r.get("latencies_ms", []))
        if values:
            p90 = values[min(len(values) - 1, round(0.9 * (len(values) - 1)))]
            out[pair] = (median(values), p90)
    return out


def chain_added_us(chain: dict[str, Any]) -> dict[str, float]:
    """Microseconds each chain adds per round trip over the direct agent."""
    runs = chain["runs"]
    base = 1 / median(runs["agent"])
    return {label: (1 / median(values) - base) * 1e6 for label, values in runs.items()}


def fmt(value: float, digits: int = 0) -> str:
    return f"{value:,.{digits}f}"


def span(values: list[float], digits: int = 0) -> str:
    return f"{fmt(min(values), digits)}-{fmt(max(values), digits)}"


# ----------------------------------------------------------------------
# Targets


Target = tuple[str, str, bool | None]


def targets(results: dict[str, Any]) -> list[Target]:
    out: list[Target] = []
    sdks = results.get("sdks") or {}
    for workload in ("stream", "read"):
        rates = pair_rates(sdks, workload)
        ours, floor = rates.get("floor x acp_trio"), rates.get("floor x trio-floor")
        what = f"`{workload}`: acp_trio's agent at least 95% of the Trio floor"
        if ours and floor:
            share = median(ours) / median(floor)
            out.append((what, f"{share:.0%}", share >= TRIO_FLOOR_SHARE))
        else:
            out.append((what, "not measured", None))
    stream = pair_rates(sdks, "stream")
    stdlib = stream.get("floor x floor")
    what = "`stream` through `notify_nowait` bursts at least 90% of the stdlib floor"
    ours = stream.get("floor x acp_trio-burst")
    if ours and stdlib:
        share = median(ours) / median(stdlib)
        out.append((what, f"{share:.0%}", share >= NOWAIT_STDLIB_SHARE))
    else:
        out.append((what, "not measured", None))
    chain = results.get("chain")
    if chain:
        added = chain_added_us(chain)
        relay = added["relay"]
        conductor = added["conductor"]
        proxy = added["1 proxy"] - conductor
        out.append(
            (
                "the conductor adds at most 1.5x what the stdlib relay adds",
                f"{fmt(conductor)} µs = {conductor / relay:.2f}x the relay's {fmt(relay)} µs",
                conductor <= CONDUCTOR_X_RELAY * relay,
            )
        )
        out.append(
            (
                "each proxy behind it at most 2x the relay",
                f"{fmt(proxy)} µs = {proxy / relay:.2f}x",
                proxy <= PROXY_X_RELAY * relay,
            )
        )
    conn = sdks.get("connection")
    if conn:
        for where, key in (("in one process", "pipes"), ("between two processes", "procs")):
            worst = max(median(conn[key][kind]) for kind in ("fan", "chain"))
            out.append(
                (
                    f"cancel a fan and a chain of 1,000 in flight under 50 ms, {where}",
                    f"fan {fmt(median(conn[key]['fan']), 1)} ms, "
                    f"chain {fmt(median(conn[key]['chain']), 1)} ms",
                    worst < CASCADE_MS,
                )
            )
        serving = conn["memory"][0]
        out.append(
            (
                "memory per request in flight while serving under 2 KB",
                f"{fmt(serving)} B",
                serving < MEMORY_B,
            )
        )
    own_stream, own_read = pair_rates(sdks, "stream"), pair_rates(sdks, "read")
    for workload, rates, goal in (
        ("stream", own_stream, OFFICIAL_STREAM_X),
        ("read", own_read, OFFICIAL_READ_X),
    ):
        ours, theirs = rates.get("acp_trio x acp_trio"), rates.get("official x official")
        if ours and theirs:
            ratio = median(ours) / median(theirs)
            out.append(
                (
                    f"`{workload}`: the acp_trio pair at least {goal}x the official pair",
                    f"{ratio:.2f}x",
                    ratio >= goal,
                )
            )
    out += scale_targets(results.get("scale"), results.get("scale_ws"))
    latency = cancel_latency(sdks).get("acp_trio x acp_trio")
    if latency:
        out.append(
            ("cancel latency p50 under 2 ms", f"{latency[0]:.2f} ms", latency[0] < CANCEL_P50_MS)
        )
    return out


def scale_targets(scale: dict[str, Any] | None, more: dict[str, Any] | None) -> list[Target]:
    """1,000 of 1,000 clients in under 5 s on each profile; 5,000 WebSocket
    clients with none failing. A run of another size is shown, not judged."""
    out: list[Target] = []
    for profile, name in PROFILE_NAMES.items():
        what = f"{name}: {SCALE_CLIENTS:,} of {SCALE_CLIENTS:,} clients in under {SCALE_S:.0f} s"
        f = (scale or {}).get("profiles", {}).get(profile)
        if f is None:
            out.append((what, "not measured", None))
            continue
        value = f"{f['ok']:,} of {f['clients']:,} in {f['total_s']:.2f} s"
        if f["clients"] != SCALE_CLIENTS:
            out.append((what, value + " (another size: not judged)", None))
            continue
        margin = SCALE_S - f["total_s"]
        value += f" ({margin:.2f} s to spare)" if margin > 0 else f" ({-margin:.2f} s over)"
        out.append((what, value, f["ok"] == f["clients"] and margin > 0))
    what = f"{SCALE_WS_CLIENTS:,} WebSocket clients at once, none failing"
    f = (more or {}).get("profiles", {}).get("websocket")
    if f is None or f["clients"] != SCALE_WS_CLIENTS:
        out.append((what, "not measured", None))
    else:
        value = f"{f['failed']:,} of {f['clients']:,} failed ({f['total_s']:.2f} s)"
        out.append((what, value, f["failed"] == 0))
    return out
