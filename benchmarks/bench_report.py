"""The public ACP benchmark: run the whole matrix once and write
``docs/benchmarks.md`` with its charts.

``make bench-report`` runs, one after the other on this machine:

- ``bench_sdks.py`` (default pairs): every SDK with itself and with
  acp_trio on the other side, every agent behind the raw client beside the
  two floors (the stdlib floor and the Trio floor), ``stream``, ``read`` and
  cancel latency, and acp_trio's connection figures (the cancel cascades of
  1,000 requests, in one process and between two, each interleaved with the
  same tree in bare Trio; memory per request in flight beside bare Trio's;
  churn);
- the judges of ``stream`` and ``read``: ``bench_sdks.py --only
  stream,read,floor:trio-floor,floor:acp_trio --cpus same --repeat 9``
  (acp_trio's agent and the Trio floor agent behind the raw client, both
  processes on CPU 0, interleaved);
- ``bench_chain.py``: the latency a proxy hop adds (the relays, the
  conductor, one and two proxies), and its judged chains again with every
  process on CPU 0 (``--judged --cpus same --repeats 9``);
- ``bench_remote.py``: remote ACP over loopback (WebSocket, h2c, HTTP/1.1),
  acp_trio's server and client beside the TypeScript and official ones,
  and its judged cells again, interleaved (``--judged 5``);
- ``bench_scale.py``: 1,000 clients at once on one server process, each
  profile, then 5,000 over WebSocket (not in ``--quick``, which runs 20);

then writes the report (``docs/benchmarks.md``), its charts
(``docs/benchmarks/*.svg``, made with matplotlib: the ``bench`` extra), the
raw output of each script (``docs/benchmarks/*.txt``) and every figure as
JSON (``docs/benchmarks/results.json``). ``--render-only`` writes the report
again from that JSON without running anything.

The Targets table judges each target against its own floor, measured in
the same run, and is also printed at the end. ``--targets-only`` (``make
bench-targets``) runs only what that table needs (the judges, the cascades
and memory, the judged remote cells: some ten minutes) and prints it,
without touching the page; ``--json FILE`` keeps its figures.

Run: ``make bench-report`` (``.venv-bench/bin/python benchmarks/bench_report.py``;
``--quick`` for a smoke run, ``--out DIR`` to write elsewhere).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PY = sys.executable

sys.path.insert(0, str(HERE))

from report_charts import charts  # noqa: E402
from report_figures import (  # noqa: E402
    FLOORS,
    PROFILE_NAMES,
    SDK_NAMES,
    cancel_latency,
    chain_added_us,
    floor_targets,
    fmt,
    median,
    pair_errors,
    pair_rates,
    span,
    targets,
)

#: The judges of ``stream`` and ``read`` (bench_sdks.py), of the proxy hops
#: (bench_chain.py) and of the HTTP client (bench_remote.py).
JUDGES_SDKS = ["--only", "stream,read,floor:trio-floor,floor:acp_trio", "--cpus", "same"]
JUDGES_CHAIN = ["--judged", "--cpus", "same"]

# ----------------------------------------------------------------------
# Running the matrix


def machine() -> dict[str, Any]:
    """What the figures were measured on, and how fast it was at the time."""
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    started = time.perf_counter()
    sum(range(10**7))
    loop_s = time.perf_counter() - started
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    load = os.getloadavg() if hasattr(os, "getloadavg") else (0.0, 0.0, 0.0)
    return {
        "cpu": model,
        "cores": os.cpu_count(),
        "usable": usable,
        "system": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "loop_s": loop_s,
        "load": list(load),
    }


def run_script(
    name: str,
    args: list[str],
    out: Path,
    timeout: float,
    *,
    label: str | None = None,
    keep_failed: bool = False,
) -> dict[str, Any] | None:
    """Run one benchmark script with ``--json``; keep its output beside the
    report (as ``label``, by default the script's name). ``keep_failed``: a
    script that wrote its figures and exited 1 (``bench_scale.py``, some
    client failed) is kept, to be judged."""
    stem = label or Path(name).stem
    data = out / f"{stem}.json"
    data.unlink(missing_ok=True)
    command = [PY, str(HERE / name), *args, "--json", str(data)]
    print(f"$ {' '.join(command)}", file=sys.stderr, flush=True)
    started = time.perf_counter()
    try:
        done = subprocess.run(
            command, cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=False
        )
        text, code = done.stdout + done.stderr, done.returncode
    except subprocess.TimeoutExpired as exc:
        text, code = f"{exc.stdout or ''}\ntimed out after {timeout:.0f} s", -1
    (out / f"{stem}.txt").write_text(text)
    print(f"  exit {code} in {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    if code not in ((0, 1) if keep_failed else (0,)) or not data.is_file():
        print(text[-2000:], file=sys.stderr)
        return None
    record: dict[str, Any] = json.loads(data.read_text())
    record["seconds"] = time.perf_counter() - started
    # What a reader runs to measure it again.
    record["command"] = " ".join(["python", f"benchmarks/{name}", *args])
    data.unlink()
    return record


def run_judges(quick: bool, out: Path, results: dict[str, Any]) -> None:
    """What only the Targets table reads: the pinned, interleaved judges."""
    repeats = ["--quick"] if quick else ["--repeat", "9"]
    results["judges"] = run_script(
        "bench_sdks.py", [*JUDGES_SDKS, *repeats], out, 3600, label="bench_sdks_pinned"
    )
    chain = ["--quick"] if quick else ["--repeats", "9"]
    results["chain_judges"] = run_script(
        "bench_chain.py", [*JUDGES_CHAIN, *chain], out, 1800, label="bench_chain_pinned"
    )
    remote = ["--stream", "200", "--read", "20", "--runs", "1", "--judged", "1"]
    results["remote_judges"] = run_script(
        "bench_remote.py",
        remote if quick else ["--judged", "5"],
        out,
        1800,
        label="bench_remote_judged",
    )


def run_matrix(quick: bool, out: Path) -> dict[str, Any]:
    results: dict[str, Any] = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "quick": quick,
        "machine_before": machine(),
    }
    sdks = ["--quick"] if quick else []
    results["sdks"] = run_script("bench_sdks.py", sdks, out, 3600)
    results["chain"] = run_script("bench_chain.py", ["--quick"] if quick else [], out, 1800)
    remote = ["--stream", "200", "--read", "20", "--runs", "1"] if quick else []
    results["remote"] = run_script("bench_remote.py", remote, out, 1800)
    run_judges(quick, out, results)
    scale = ["--connections", "20"] if quick else ["--connections", "1000"]
    results["scale"] = run_script("bench_scale.py", scale, out, 1800, keep_failed=True)
    if not quick:
        results["scale_ws"] = run_script(
            "bench_scale.py",
            ["--connections", "5000", "--profile", "websocket"],
            out,
            1800,
            label="bench_scale_5000",
            keep_failed=True,
        )
    results["machine_after"] = machine()
    return results


def run_targets(quick: bool, out: Path) -> dict[str, Any]:
    """``--targets-only``: the judges, the cascades and memory, nothing else."""
    results: dict[str, Any] = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "quick": quick,
        "machine_before": machine(),
    }
    connection = ["--only", "connection", *(["--quick"] if quick else [])]
    results["sdks"] = run_script("bench_sdks.py", connection, out, 3600)
    run_judges(quick, out, results)
    results["machine_after"] = machine()
    return results


# ----------------------------------------------------------------------
# The report


def render(results: dict[str, Any], drawn: list[tuple[str, str]], charts_dir: str) -> str:
    lines: list[str] = []
    add = lines.append
    sdks = results.get("sdks") or {}
    before, after = results["machine_before"], results["machine_after"]
    add("# Benchmarks")
    add("")
    add(
        "The ACP SDKs side by side, measured in one run of `make bench-report` on one machine."
        " This page is written by that command (`benchmarks/bench_report.py`); do not edit it"
        " by hand. The history of earlier runs, how each benchmark works and what was learned"
        " from them is in [benchmark-history.md](benchmark-history.md)."
    )
    add("")
    quick = " **(a `--quick` smoke run: small sizes, one run each; not figures to quote)**"
    add(f"Run of {results['date']}{quick if results.get('quick') else ''}.")
    add("")
    add(
        f"Machine: {before['cpu']}, {before['cores']} cores ({before['usable']} usable), "
        f"{before['system']}, Python {before['python']}. How busy it was: a plain Python loop "
        f"(`sum(range(10**7))`) took {before['loop_s']:.2f} s before the run and "
        f"{after['loop_s']:.2f} s after; load average {before['load'][0]:.1f} before, "
        f"{after['load'][0]:.1f} after."
    )
    if sdks.get("versions"):
        add(f"Versions: {sdks['versions']}.")
    add("")
    add("Reproduce: `make bench-report` (it installs the `bench` extra and the peers in")
    add("`.venv-bench`, runs every benchmark below and rewrites this page and")
    add(f"`{charts_dir}/`). Ratios within one run are what to compare; absolute figures follow")
    add("the machine.")
    add("")
    add("## Standings at a glance")
    add("")
    for name, caption in drawn:
        add(f"![{caption}]({charts_dir}/{name})")
        add("")
    lines += targets_section(results)
    lines += sdk_section(sdks)
    lines += chain_section(results.get("chain"))
    lines += remote_section(results.get("remote"))
    lines += scale_section(results.get("scale"), results.get("scale_ws"))
    add("## Raw output")
    add("")
    add(
        f"Each script's own output of this run: [bench_sdks]({charts_dir}/bench_sdks.txt), "
        f"[bench_chain]({charts_dir}/bench_chain.txt), "
        f"the judges [bench_sdks_pinned]({charts_dir}/bench_sdks_pinned.txt), "
        f"[bench_chain_pinned]({charts_dir}/bench_chain_pinned.txt), "
        f"[bench_remote_judged]({charts_dir}/bench_remote_judged.txt), "
        f"[bench_remote]({charts_dir}/bench_remote.txt), "
        f"[bench_scale]({charts_dir}/bench_scale.txt)"
        + (
            f", [bench_scale 5,000]({charts_dir}/bench_scale_5000.txt)"
            if results.get("scale_ws")
            else ""
        )
        + f"; every figure as JSON: "
        f"[results.json]({charts_dir}/results.json)."
    )
    add("")
    return "\n".join(lines)


def targets_section(results: dict[str, Any]) -> list[str]:
    """The Targets table (each target against its floor, measured in the
    same run), the floors and why each is the limit, and the other goals."""
    lines = ["## Targets", ""]
    add = lines.append
    add(
        "Each target is a ratio to the honest floor of the same work, measured in this run: "
        "the floor's program does the same work as lean as its constraints allow (see "
        "[The floors](#the-floors)). Round trips between processes are judged with every "
        "process of the path on one CPU (CPU per message decides; on two cores unpinned runs "
        "scatter too widely to judge); runs of acp_trio and of its floor alternate, and a "
        "ratio is the median of the runs' ratios where they come in pairs."
    )
    add("")
    add("| target | judged against | acp_trio | floor | ratio | goal | |")
    add("| --- | --- | ---: | ---: | ---: | ---: | --- |")
    for row in floor_targets(results):
        verdict = {True: "met", False: "**missed**", None: "—"}[row["ok"]]
        floor = FLOORS[row["floor"]][0]
        add(
            f"| {row['what']} | {floor} | {row['ours']} | {row['theirs']} | {row['ratio']} "
            f"| {row['goal']} | {verdict} |"
        )
    add("")
    add("### The floors")
    add("")
    for program, judges, why in FLOORS.values():
        add(f"- {program}, for {judges}: {why}")
    add("")
    add("### Other goals")
    add("")
    add("| goal | this run | |")
    add("| --- | ---: | --- |")
    for what, value, ok in targets(results):
        verdict = {True: "met", False: "**missed**", None: "—"}[ok]
        add(f"| {what} | {value} | {verdict} |")
    add("")
    return lines


def targets_text(results: dict[str, Any]) -> str:
    """The Targets table as plain text (printed at the end of a run)."""
    rows = floor_targets(results)
    width = max(len(row["what"]) for row in rows)
    before, after = results["machine_before"], results["machine_after"]
    lines = [
        f"Targets ({results['date']}; load average {before['load'][0]:.1f} before, "
        f"{after['load'][0]:.1f} after; a Python loop took {before['loop_s']:.2f} s before, "
        f"{after['loop_s']:.2f} s after)"
    ]
    for row in rows:
        verdict = {True: "met", False: "MISSED", None: "-"}[row["ok"]]
        lines.append(
            f"  {row['what']:<{width}}  {row['ours']:>12} vs {row['theirs']:>12}"
            f"  {row['ratio']:>6} (goal {row['goal']:>7}, floor: {row['floor']})  {verdict}"
        )
    return "\n".join(lines)


def _missing(what: str) -> list[str]:
    return [f"## {what}", "", "Not measured in this run (the script failed or was skipped).", ""]


def sdk_section(sdks: dict[str, Any]) -> list[str]:
    if not sdks:
        return _missing("SDK pairs")
    lines = ["## SDK pairs over OS pipes", ""]
    add = lines.append
    sizes = sdks["sizes"]
    add(
        f"`benchmarks/bench_sdks.py`: each client spawns its agent and runs the scenario "
        f"vocabulary's `stream {sizes['stream']}` (session/update chunks per second, agent → "
        f"client) and `read {sizes['read']}` (`fs/read_text_file` round trips per second, "
        f"agent → client). Medians of {sdks['repeats']} interleaved runs, fresh processes each "
        "run, with the range; the kernel places the processes (the Targets table judges "
        "`stream` and `read` pinned, in runs of their own). The floors: a blocking "
        "standard-library agent and client with no framework, and the leanest Trio agent "
        "(`benchmarks/peers/trio_floor_agent.py`: orjson, acp_trio's write policy, one "
        "checkpoint per chunk)."
    )
    for sdk, reason in sdks.get("skipped", {}).items():
        add(f"Skipped: {sdk} ({reason}).")
    add("")
    stream, read = pair_rates(sdks, "stream"), pair_rates(sdks, "read")
    latency = cancel_latency(sdks)
    base_s, base_r = stream.get("official x official"), read.get("official x official")
    add(
        "| client x agent | `stream` chunks/s | vs official | `read` round trips/s | vs official"
        " | cancel p50 / p90 ms |"
    )
    add("| --- | ---: | ---: | ---: | ---: | ---: |")
    pairs = list(dict.fromkeys([*stream, *read, *latency]))
    errors = {**pair_errors(sdks, "stream"), **pair_errors(sdks, "read")}
    for pair in pairs:
        cells = [f"`{pair}`"]
        for rates, base in ((stream, base_s), (read, base_r)):
            if pair in rates:
                cells.append(f"{fmt(median(rates[pair]))} ({span(rates[pair])})")
                cells.append(f"{median(rates[pair]) / median(base):.2f}x" if base else "—")
            else:
                cells += ["—", "—"]
        p = latency.get(pair)
        cells.append(f"{p[0]:.2f} / {p[1]:.2f}" if p else "—")
        add("| " + " | ".join(cells) + " |")
    for pair, error in errors.items():
        if pair not in pairs:
            add(f"| `{pair}` | failed: {error} | | | | |")
    add("")
    add(
        "Cancel latency: the client's `session/cancel` to the prompt's answer, on a prompt whose"
        " three nested requests the client holds; acp_trio and the TypeScript SDK cancel them on"
        " the wire, the official SDK 0.12.1 abandons them."
    )
    add("")
    for workload, rates in (("stream", stream), ("read", read)):
        floor, stdlib = rates.get("floor x trio-floor"), rates.get("floor x floor")
        agents = sorted(
            ((p.split(" x ")[1], median(v)) for p, v in rates.items() if p.startswith("floor x ")),
            key=lambda item: -item[1],
        )
        if not floor or not stdlib:
            continue
        add(f"**`{workload}`, every agent behind the raw client**, as a share of the floors:")
        add("")
        add("| agent | per second | of the Trio floor | of the stdlib floor |")
        add("| --- | ---: | ---: | ---: |")
        for agent, value in agents:
            name = SDK_NAMES.get(agent, agent)
            add(
                f"| {name} | {fmt(value)} | {value / median(floor):.0%} | "
                f"{value / median(stdlib):.0%} |"
            )
        add("")
    conn = sdks.get("connection")
    if conn:
        add("## Cancellation and memory (acp_trio)")
        add("")
        add(
            "The cancel cascade: a tree of 1,000 requests in flight between two connections,"
            " cancelled at its root, timed until every request has answered; as a fan-out (one"
            " handler waiting on 1,000 calls) and as a chain (1,000 deep). Over OS pipes in one"
            " process beside the same work in bare Trio (`benchmarks/cascade_floor.py`), and"
            " between a client and the agent process it spawned beside the same in bare Trio"
            " (`benchmarks/peers/trio_cascade_peer.py`); runs interleaved with their floor."
            " Medians (range)."
        )
        add("")
        add(
            "| shape | acp_trio, one process | bare Trio | acp_trio, two processes "
            "| bare Trio, two processes |"
        )
        add("| --- | ---: | ---: | ---: | ---: |")
        for kind, name in (("fan", "fan-out of 1,000"), ("chain", "chain of 1,000")):
            two = (conn.get("procs_floor") or {}).get(kind)
            add(
                f"| {name} | {fmt(median(conn['pipes'][kind]), 1)} ms "
                f"({span(conn['pipes'][kind], 1)}) | {fmt(median(conn['floor'][kind]), 1)} ms "
                f"| {fmt(median(conn['procs'][kind]), 1)} ms ({span(conn['procs'][kind], 1)}) "
                f"| {fmt(median(two), 1) + ' ms' if two else '—'} |"
            )
        add("")
        serving, calling, both = conn["memory"]
        add(
            f"Memory per request in flight ({fmt(conn['n_mem'])} in flight): serving side "
            f"{fmt(serving)} B, calling side {fmt(calling)} B, both sides with a caller task each"
            f" {fmt(both)} B. After {fmt(conn['n_churn'])} requests with random cancellation, "
            f"memory grew {conn['churn_slope']:+.2f} B per request (slope through ten samples)."
        )
        if "memory_floor" in conn:
            add("")
            add(
                f"The same serving side in bare Trio (a task and a `CancelScope` per request, "
                f"the same handler, nothing else): {fmt(conn['memory_floor'])} B per request "
                "(`python benchmarks/bench_connection.py --memory-breakdown` lists what a "
                "request allocates, line by line)."
            )
        add("")
    return lines


def chain_section(chain: dict[str, Any] | None) -> list[str]:
    if not chain:
        return _missing("Proxy hops")
    added = chain_added_us(chain)
    relays = [r for r in ("relay", "parsing relay") if added.get(r, 0) > 0]
    lines = ["## Proxy hops", ""]
    add = lines.append
    add(
        f"`benchmarks/bench_chain.py`: acp_trio's client runs `read {chain['reads']} /x` against"
        " the scenario agent spawned directly, behind the stdlib relay (one process copying lines"
        " both ways: the limit of one more process on the path), behind the same relay on Trio's"
        " I/O, behind the parsing relay (a Trio relay that decodes each message, gives it an id"
        " of the next hop's own and encodes it again: the floor of the conductor and of each"
        " proxy), and through `python -m acp_trio conduct` with 0, 1 and 2 pass-through proxies"
        " and with one logging proxy (a handler per message). Medians of"
        f" {chain['repeats']} interleaved runs; the kernel places the processes (the Targets"
        " table judges the hops with every process on one CPU, in runs of their own)."
    )
    add("")
    add(
        "| path | round trips/s | range | µs added per round trip |"
        + "".join(f" x {r} |" for r in relays)
    )
    add("| --- | ---: | ---: | ---: |" + " ---: |" * len(relays))
    for label, values in chain["runs"].items():
        hop = label != "agent"
        extra = fmt(added[label]) if hop else "—"
        row = f"| {label} | {fmt(median(values))} | {span(values)} | {extra} |"
        for r in relays:
            row += f" {added[label] / added[r]:.1f}x |" if hop else " |"
        add(row)
    add("")
    return lines


def remote_section(remote: dict[str, Any] | None) -> list[str]:
    if not remote:
        return _missing("Remote ACP")
    lines = ["## Remote ACP over loopback", ""]
    add = lines.append
    add(
        f"`benchmarks/bench_remote.py`: `stream {remote['stream']} 16` and `read {remote['read']}"
        f" /x` on one warm connection, median of {remote['runs']} prompts, in milliseconds"
        " (lower is better)."
    )
    add("")
    add(
        f"| server + client, profile | stream {remote['stream']} (ms)"
        f" | read {remote['read']} (ms) |"
    )
    add("| --- | ---: | ---: |")
    for name, cell in remote["cells"].items():
        add(f"| {name} | {cell['stream_ms']:.1f} | {cell['read_ms']:.1f} |")
    add("")
    return lines


def scale_section(scale: dict[str, Any] | None, more: dict[str, Any] | None) -> list[str]:
    if not scale:
        return _missing("Many clients at once")
    lines = ["## Many clients at once", ""]
    add = lines.append
    prompts = " then ".join(f"`{p}`" for p in scale["prompts"])
    add(
        "`benchmarks/bench_scale.py`: acp_trio's server (the scenario agent) in a process of its"
        " own and N acp_trio clients in one other process, each its own connection: all open"
        f" (`initialize`, `session/new`; {scale['concurrency']} at a time), then all prompt at"
        f" once, {prompts}. Total: the first open to the last answer. On a busy machine part"
        " of it is time the two processes were runnable but waiting for a CPU (the column"
        " before memory): compare CPU seconds across runs. Memory: the server's"
        " resident memory with every connection open and idle, less at rest, per connection."
    )
    add("")
    add(
        "| profile | ok of clients | total (s) | all opened (s) | each prompt round (s)"
        " | a client's own time p50 / p95 (ms) | CPU: clients + server (s)"
        " | runnable, waiting for a CPU (s) | server memory growth (MiB)"
        " | per idle connection (KiB) |"
    )
    add("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for record in (scale, more):
        for profile, f in (record or {}).get("profiles", {}).items():
            rounds = " / ".join(f"{r['seconds']:.2f}" for r in f["rounds"]) or "—"
            own = f["client_ms"]
            own_ms = f"{fmt(own['median'])} / {fmt(own['p95'])}" if own else "—"
            cpu = f"{f['clients_cpu_s']:.1f} + {f['server_cpu_s']:.1f}"
            wait = f"{f['cpu_wait_s']['clients']:.1f} + {f['cpu_wait_s']['server']:.1f}"
            add(
                f"| {PROFILE_NAMES.get(profile, profile)} | {fmt(f['ok'])} of {fmt(f['clients'])}"
                f" | {f['total_s']:.2f} | {f['open_s']:.2f} | {rounds} | {own_ms} | {cpu} | {wait}"
                f" | {f['rss_growth_kib'] / 1024:.1f} | {f['idle_kib_per_connection']:.0f} |"
            )
    add("")
    for record in (scale, more):
        for profile, f in (record or {}).get("profiles", {}).items():
            if f["failures"]:
                name = PROFILE_NAMES.get(profile, profile)
                first = "; ".join(f"`{failure}`" for failure in f["failures"])
                add(f"{name}, {fmt(f['clients'])} clients, the first failures: {first}.")
                add("")
    for record in (scale, more):
        if record and record.get("command"):
            add(f"Run: `{record['command']}`.")
            add("")
    return lines


def write_report(results: dict[str, Any], out_md: Path, charts_dir: Path) -> None:
    charts_dir.mkdir(parents=True, exist_ok=True)
    (charts_dir / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    drawn = charts(results, charts_dir)
    relative = os.path.relpath(charts_dir, out_md.parent)
    out_md.write_text(render(results, drawn, relative))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help="a smoke run: small sizes, one run each"
    )
    parser.add_argument("--out", type=Path, default=ROOT / "docs", help="where benchmarks.md goes")
    parser.add_argument(
        "--render-only",
        action="store_true",
        help="rewrite the report from OUT/benchmarks/results.json without running anything",
    )
    parser.add_argument(
        "--targets-only",
        action="store_true",
        help="run only what the Targets table needs and print it (the page is not written)",
    )
    parser.add_argument(
        "--json", type=Path, metavar="FILE", help="with --targets-only: keep the figures in FILE"
    )
    args = parser.parse_args(argv)
    out_md, charts_dir = args.out / "benchmarks.md", args.out / "benchmarks"
    if args.targets_only:
        with tempfile.TemporaryDirectory() as tmp:
            results = run_targets(args.quick, Path(tmp))
        if args.json:
            args.json.write_text(json.dumps(results, indent=1) + "\n")
        print(targets_text(results))
        return 0 if results.get("sdks") and results.get("judges") else 1
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        parser.error(
            "the charts need matplotlib: install the bench extra (pip install -e '.[bench]')"
        )
    if args.render_only:
        results = json.loads((charts_dir / "results.json").read_text())
    else:
        charts_dir.mkdir(parents=True, exist_ok=True)
        results = run_matrix(args.quick, charts_dir)
    write_report(results, out_md, charts_dir)
    print(f"wrote {out_md} and {charts_dir}/", file=sys.stderr)
    print(targets_text(results))
    missing = [key for key in ("sdks", "chain", "remote", "scale") if not results.get(key)]
    if missing:
        print(f"not measured: {', '.join(missing)} (see the raw output)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
