"""Figures from the records the benchmark scripts write (``--json``), and
the targets ``bench_report.py`` judges them by."""

from __future__ import annotations

import statistics
from typing import Any

# The targets the report checks, in one place. Every speed target is a
# ratio to the honest floor of the same work, measured in the same run.
READ_SHARE = 0.95  # read: acp_trio's agent at least 95% of the Trio floor agent, pinned
STREAM_SHARE = 0.90  # stream: at least 90% of the Trio floor agent, pinned
CONDUCTOR_X_RELAY = 1.2  # the conductor adds at most 1.2x what the parsing relay adds
PROXY_X_RELAY = 2.5  # each proxy behind it at most 2.5x
CASCADE_X_FLOOR = 1.2  # a cancel cascade of 1,000 at most 1.2x the same in bare Trio
MEMORY_X_FLOOR = 1.05  # memory per request in flight at most 1.05x bare Trio's
HTTP1_X_TS = 1.10  # our HTTP/1.1 client's stream within 10% of the TypeScript client's
H2C_X_HTTP1 = 1.2  # our h2c read within 1.2x of our HTTP/1.1 read
# Other goals (not ratios to a floor).
NOWAIT_STDLIB_SHARE = 0.90  # stream through notify_nowait: at least 90% of the stdlib floor
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


def paired_ratio(ours: list[float], floor: list[float]) -> float:
    """The median of the ratios of runs made one after the other
    (interleaved): what drifts with the machine's load cancels out."""
    return median([a / b for a, b in zip(ours, floor, strict=False)])


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


#: Each floor: its program, what it judges, and why nothing honest beats it
#: (the page's "The floors" section, the Targets table's second column).
FLOORS: dict[str, tuple[str, str, str]] = {
    "trio-floor": (
        "`benchmarks/peers/trio_floor_agent.py`",
        "`stream` and `read` (acp_trio's agent behind the raw client, both processes on one CPU)",
        "per message it does the least the protocol and Trio allow: one orjson encode or decode "
        "of the whole message, a write only where acp_trio writes (at once while nothing waits, "
        "else batched by a writer task), and the one schedule point a Trio send or wait must "
        "have; anything faster skips encoding what it sends, skips the checkpoint an async send "
        "owes its other tasks, or batches beyond acp_trio's own rule.",
    ),
    "parsing relay": (
        "`benchmarks/peers/parsing_relay.py`",
        "the conductor and each proxy (µs a round trip adds over the direct agent, every "
        "process on one CPU)",
        "a hop that keeps ids per hop must read and change every message's id, and the only "
        "sound way to do that to JSON is to decode and encode it (orjson); it keeps one dict "
        "each way, writes at once, reads with the one schedule point a Trio read must have, "
        "and has no task, handler or object per request. A byte-copying relay is cheaper but "
        "cannot keep ids per hop, which a conductor must.",
    ),
    "cascade, one process": (
        "`benchmarks/cascade_floor.py`",
        "the cancel cascade of 1,000 in one process (fan and chain)",
        "one task in its own `CancelScope` per request (the least that lets cancelling a scope "
        "cancel what it called), cancels and replies matched and written as bytes, the cancels "
        "of one cancel and the replies of one cancelled fan each joined into one write: what "
        "is left is Trio's own cost of cancelling and finishing 1,000 tasks.",
    ),
    "cascade, two processes": (
        "`benchmarks/peers/trio_cascade_peer.py`",
        "the cancel cascade of 1,000 between a client and its agent process",
        "the one-process floor's sides, one in each process, over the agent's stdin and stdout, "
        "polled to the end as acp_trio's is: Trio's cost of 1,000 tasks plus the pipe between "
        "the processes, which any program that cascades a cancel across two processes pays.",
    ),
    "memory": (
        "`bench_connection.memory_floor`",
        "memory per request in flight on the serving side",
        "a task, its `CancelScope`, the same handler and an entry in a dict by id: the least a "
        "request in flight can hold and still be cancellable on its own.",
    ),
    "TypeScript client": (
        "the TypeScript SDK's client (`tests/interop/ts_remote_client.mjs`)",
        "our HTTP/1.1 client's `stream` against our server",
        "not a floor but the peer to match: the same server, the same messages, another client.",
    ),
    "HTTP/1.1": (
        "our own client over HTTP/1.1",
        "our client's `read` over h2c",
        "the same client and server over the simpler profile: HTTP/2 adds framing, not round "
        "trips.",
    ),
}


def floor_targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    """The Targets table: each target of the issue against its own floor,
    measured in the same run. Each row: what, floor (a key of
    :data:`FLOORS`), ours, theirs (formatted), ratio (formatted), goal and
    ok (``None``: not measured)."""
    rows: list[dict[str, Any]] = []

    def row(what: str, floor: str, goal: str, **cells: Any) -> None:
        """A row; without ``cells`` (ours, theirs, ratio, ok): not measured."""
        if not cells:
            cells = {"ours": "not measured", "theirs": "", "ratio": "", "ok": None}
        rows.append({"what": what, "floor": floor, "goal": goal, **cells})

    sdks = results.get("sdks") or {}
    conn = sdks.get("connection") or {}
    serving, floor_b = (conn.get("memory") or [None])[0], conn.get("memory_floor")
    if serving and floor_b:
        ratio = serving / floor_b
        row(
            "memory per request in flight, serving",
            "memory",
            f"≤ {MEMORY_X_FLOOR}x",
            ours=f"{fmt(serving)} B",
            theirs=f"{fmt(floor_b)} B",
            ratio=f"{ratio:.2f}x",
            ok=ratio <= MEMORY_X_FLOOR,
        )
    else:
        row("memory per request in flight, serving", "memory", f"≤ {MEMORY_X_FLOOR}x")
    for where, ours_key, floor_key, floor_name in (
        ("one process", "pipes", "floor", "cascade, one process"),
        ("two processes", "procs", "procs_floor", "cascade, two processes"),
    ):
        for kind, shape in (("fan", "fan-out"), ("chain", "chain")):
            what = f"cancel cascade of 1,000, {where}: {shape}"
            ours = (conn.get(ours_key) or {}).get(kind)
            theirs = (conn.get(floor_key) or {}).get(kind)
            if not ours or not theirs:
                row(what, floor_name, f"≤ {CASCADE_X_FLOOR}x")
                continue
            ratio = paired_ratio(ours, theirs)
            row(
                what,
                floor_name,
                f"≤ {CASCADE_X_FLOOR}x",
                ours=f"{fmt(median(ours), 1)} ms",
                theirs=f"{fmt(median(theirs), 1)} ms",
                ratio=f"{ratio:.2f}x",
                ok=ratio <= CASCADE_X_FLOOR,
            )
    chain = results.get("chain_judges")
    added = chain_added_us(chain) if chain and "parsing relay" in chain.get("runs", {}) else None
    relay = added["parsing relay"] if added else 0.0
    if added and relay > 0 and "conductor" in added:
        conductor = added["conductor"]
        row(
            "the conductor: µs a round trip adds",
            "parsing relay",
            f"≤ {CONDUCTOR_X_RELAY}x",
            ours=f"{fmt(conductor)} µs",
            theirs=f"{fmt(relay)} µs",
            ratio=f"{conductor / relay:.2f}x",
            ok=conductor <= CONDUCTOR_X_RELAY * relay,
        )
        if "1 proxy" in added:
            proxy = added["1 proxy"] - conductor
            row(
                "each proxy behind it: µs a round trip adds",
                "parsing relay",
                f"≤ {PROXY_X_RELAY}x",
                ours=f"{fmt(proxy)} µs",
                theirs=f"{fmt(relay)} µs",
                ratio=f"{proxy / relay:.2f}x",
                ok=proxy <= PROXY_X_RELAY * relay,
            )
    else:
        row("the conductor: µs a round trip adds", "parsing relay", f"≤ {CONDUCTOR_X_RELAY}x")
        row("each proxy behind it: µs a round trip adds", "parsing relay", f"≤ {PROXY_X_RELAY}x")
    judges = results.get("judges") or {}
    for workload, share, unit in (
        ("read", READ_SHARE, "round trips/s"),
        ("stream", STREAM_SHARE, "chunks/s"),
    ):
        what = f"`{workload}`: acp_trio's agent, {unit}, both processes on CPU 0"
        rates = pair_rates(judges, workload)
        ours, theirs = rates.get("floor x acp_trio"), rates.get("floor x trio-floor")
        if not ours or not theirs:
            row(what, "trio-floor", f"≥ {share:.0%}")
            continue
        ratio = paired_ratio(ours, theirs)
        row(
            what,
            "trio-floor",
            f"≥ {share:.0%}",
            ours=fmt(median(ours)),
            theirs=fmt(median(theirs)),
            ratio=f"{ratio:.0%}",
            ok=ratio >= share,
        )
    cells = ((results.get("remote_judges") or results.get("remote") or {}).get("cells")) or {}
    ours_h1 = cells.get("acp_trio server + acp_trio client, HTTP/1.1")
    ts_h1 = cells.get("acp_trio server + TypeScript client, HTTP/1.1")
    h2c = cells.get("acp_trio server + acp_trio client, HTTP/2 h2c")
    what = "our HTTP/1.1 client: `stream` ms against our server"
    if ours_h1 and ts_h1:
        ratio = ours_h1["stream_ms"] / ts_h1["stream_ms"]
        row(
            what,
            "TypeScript client",
            f"≤ {HTTP1_X_TS:.2f}x",
            ours=f"{ours_h1['stream_ms']:.1f} ms",
            theirs=f"{ts_h1['stream_ms']:.1f} ms",
            ratio=f"{ratio:.2f}x",
            ok=ratio <= HTTP1_X_TS,
        )
    else:
        row(what, "TypeScript client", f"≤ {HTTP1_X_TS:.2f}x")
    what = "our client over h2c: `read` ms"
    if ours_h1 and h2c:
        ratio = h2c["read_ms"] / ours_h1["read_ms"]
        row(
            what,
            "HTTP/1.1",
            f"≤ {H2C_X_HTTP1}x",
            ours=f"{h2c['read_ms']:.1f} ms",
            theirs=f"{ours_h1['read_ms']:.1f} ms",
            ratio=f"{ratio:.2f}x",
            ok=ratio <= H2C_X_HTTP1,
        )
    else:
        row(what, "HTTP/1.1", f"≤ {H2C_X_HTTP1}x")
    return rows


def targets(results: dict[str, Any]) -> list[Target]:
    """The other goals: not ratios to a floor (the acp_trio pair beside the
    official pair, ``notify_nowait`` bursts beside the stdlib floor, the
    scale runs, cancel latency)."""
    out: list[Target] = []
    sdks = results.get("sdks") or {}
    stream = pair_rates(sdks, "stream")
    stdlib = stream.get("floor x floor")
    what = "`stream` through `notify_nowait` bursts at least 90% of the stdlib floor"
    ours = stream.get("floor x acp_trio-burst")
    if ours and stdlib:
        share = median(ours) / median(stdlib)
        out.append((what, f"{share:.0%}", share >= NOWAIT_STDLIB_SHARE))
    else:
        out.append((what, "not measured", None))
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
