"""The attack tier (issue 47): each attack of the list against a server
with its default bounds, from its own process and address, while a good
client on another address makes round trips. Measured: the good client's
round trips (p50 < 200 ms and p90 < 1 s) and the server's memory (it may
grow by at most 64 MB beyond its allowance for the connections it
admitted: see docs/serving-on-a-network.md).

Slow (a minute or two per attack, many minutes in all) and measuring time
and memory under load: not part of the default run. ``make test-attacks``
runs it (``ACP_TRIO_ATTACKS=1``) and writes the table to
``attack-report.md`` (or ``ACP_TRIO_ATTACK_REPORT``).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from acp_trio import schema
from acp_trio.remote import open_remote_agent
from acp_trio.testing import ScenarioClient

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        os.environ.get("ACP_TRIO_ATTACKS") != "1",
        reason="the attack tier: make test-attacks (ACP_TRIO_ATTACKS=1)",
    ),
    pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc"),
]

HERE = Path(__file__).resolve().parent
#: Where each attacker's stderr goes (what went wrong, if it did).
LOGS = Path(os.environ.get("ACP_TRIO_ATTACK_LOGS", "/tmp"))
TOKEN = "attack-tier-token"
MB = 1_000_000
#: How long each attack runs while the good client measures.
DURATION = float(os.environ.get("ACP_TRIO_ATTACK_SECONDS", "12"))
WARMUP = 2.0
#: The attacker's time to start (Python's, on a loaded machine) and begin.
HEAD_START = 4.0


def rss(pid: int) -> int:
    """Resident memory of ``pid``, in bytes (0 once gone)."""
    try:
        with open(f"/proc/{pid}/status") as file:
            for line in file:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def sockets(pid: int) -> int:
    """Open sockets of ``pid`` (its TCP connections and listeners)."""
    count = 0
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:"):
                    count += 1
            except OSError:
                pass
    except OSError:
        pass
    return count


def children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as file:
                    fields = file.read().rsplit(b")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid and fields[0] not in (b"Z", b"X"):
                found.append(int(entry))
    return found


#: The server's limit on open files: the usual default, whatever the
#: harness's own (an attack on file descriptors meets it as it would).
OPEN_FILES = 1024


def usual_open_files() -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(OPEN_FILES, hard), hard))


@asynccontextmanager
async def server(kind: str) -> AsyncIterator[tuple[trio.Process, str]]:
    # (Run from elsewhere than the checkout: ``-m acp_trio`` would put the
    # current directory first on the path, ahead of PYTHONPATH.)
    options: dict[str, Any] = {
        "stdin": subprocess.DEVNULL,
        "preexec_fn": usual_open_files,
        "cwd": tempfile.gettempdir(),
    }
    if kind == "serve":
        command = [sys.executable, "-m", "acp_trio", "serve", "--http", "127.0.0.1:0"]
        command += ["--token", TOKEN, "--", sys.executable, "-m", "acp_trio", "scenario-agent"]
        process = await trio.lowlevel.open_process(command, stderr=subprocess.PIPE, **options)
        pattern = rb"Running on (http://[\d.]+:\d+)"
        source = process.stderr
    else:
        command = [sys.executable, str(HERE / "server.py"), TOKEN]
        process = await trio.lowlevel.open_process(
            command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, **options
        )
        pattern = rb'"url": "(http://[\d.]+:\d+)"'
        source = process.stdout
    assert source is not None
    try:
        seen = b""
        while (found := re.search(pattern, seen)) is None:
            chunk = await source.receive_some()
            assert chunk, seen
            seen += chunk
        async with trio.open_nursery() as nursery:

            async def drain() -> None:
                while await source.receive_some():
                    pass

            nursery.start_soon(drain)
            yield process, found.group(1).decode()
            nursery.cancel_scope.cancel()
    finally:
        for pid in children(process.pid):
            with contextlib.suppress(OSError):
                os.kill(pid, 9)
        process.kill()
        with trio.CancelScope(shield=True):
            await process.wait()


#: Attacks that need longer to deliver (400 MB of prompts), in seconds more.
LONGER = {"held": 15.0}

#: Each attack: what it is (the issue's case), the server, the good
#: client's profile, and the ACP connections it may have admitted (the
#: allowance counts them).
ATTACKS: dict[str, tuple[str, str, str, int]] = {
    "slow-body": ("1. bodies that stop coming, no token (1,100)", "inproc", "websocket", 0),
    "agents": ("2. 300 initialize from one address", "serve", "websocket", 8),
    "zero-window": (
        "3. h2c reader, window shut, agent streaming 100 KB updates",
        "inproc",
        "websocket",
        1,
    ),
    "amplify": ("4. 10 MB of [{},{},...] over WebSocket and POST", "inproc", "http", 2),
    "refused-body": ("5. 4 GB bodies without the token (+ Expect)", "inproc", "websocket", 0),
    "held": ("6. 400 waiting prompts of 1 MB", "inproc", "websocket", 1),
    "large-messages": ("7. 16 MiB messages back to back (2 clients)", "inproc", "websocket", 2),
    "malformed-ids": ("10. POSTs with object ids, flooding", "inproc", "http", 4),
    "late-body": ("11. h2c GET bodies after their 404", "inproc", "http", 0),
    "deep": ("12. POSTs nested 100,000 deep", "inproc", "http", 2),
    "one-byte-chunks": ("13. bodies of 1-byte chunks (20 at once)", "inproc", "websocket", 0),
    "slow-head": ("14. heads at a byte a second (200)", "inproc", "websocket", 0),
}

#: The allowance of one admitted ACP connection under the defaults (16 MiB
#: cap): requests held (2 x cap) plus what waits to be read (2 x cap) and
#: to be written (2 x cap), plus the message being read (library limit,
#: 17 MiB). See docs/serving-on-a-network.md.
ALLOWANCE_ACP = (6 * 16 + 17) * 1024 * 1024
#: The allowance of one admitted TCP connection that holds no ACP
#: connection: a head (64 KiB) and hypercorn's buffers.
ALLOWANCE_TCP = 256 * 1024

ROWS: list[dict[str, Any]] = []


async def good_client(base: str, profile: str, until: float) -> list[float]:
    """Round trips (``echo hi``) until ``until`` (``time.monotonic()``), in
    seconds; a round trip that failed (or a connection that could not be
    made) counts as the time it took, plus 10 s, and the client starts
    again."""
    latencies: list[float] = []
    while time.monotonic() < until:
        start = time.monotonic()
        try:
            client = ScenarioClient()
            with trio.fail_after(until - time.monotonic() + 30):
                async with open_remote_agent(
                    client,
                    base + "/acp",
                    profile=profile,  # type: ignore[arg-type]
                    token=TOKEN,
                ) as agent:
                    await agent.initialize(client.initialize_request())
                    new = schema.NewSessionRequest(cwd="/", mcp_servers=[])
                    session = await agent.new_session(new)
                    while time.monotonic() < until:
                        start = time.monotonic()
                        await agent.prompt_text(session.session_id, "echo hi")
                        latencies.append(time.monotonic() - start)
                        await trio.sleep(0.02)
        except Exception:
            latencies.append(time.monotonic() - start + 10)
            await trio.sleep(0.5)
    return latencies


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@pytest.mark.parametrize("case", list(ATTACKS))
async def test_attack(case: str) -> None:
    title, kind, profile, admitted_acp = ATTACKS[case]
    with trio.fail_after(DURATION + LONGER.get(case, 0.0) + 120):
        async with server(kind) as (process, base):
            # Warm up: the good client connected once, the server at rest.
            await good_client(base, profile, time.monotonic() + WARMUP)
            await trio.sleep(0.5)
            baseline = rss(process.pid)
            peak = baseline
            peak_sockets = 0
            peak_agents = 0
            log = open(LOGS / f"{case}.stderr", "wb")  # noqa: ASYNC230, SIM115 - closed below
            attacker = await trio.lowlevel.open_process(
                [sys.executable, str(HERE / "attacker.py"), case, base, TOKEN],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=log,
            )
            said: list[dict[str, Any]] = []
            try:
                async with trio.open_nursery() as nursery:

                    async def sample() -> None:
                        nonlocal peak, peak_sockets, peak_agents
                        while True:
                            total = rss(process.pid)
                            peak = max(peak, total)
                            peak_sockets = max(peak_sockets, sockets(process.pid))
                            if kind == "serve":
                                peak_agents = max(peak_agents, len(children(process.pid)))
                            await trio.sleep(0.05)

                    async def listen() -> None:
                        assert attacker.stdout is not None
                        buffer = b""
                        while chunk := await attacker.stdout.receive_some():
                            buffer += chunk
                            while b"\n" in buffer:
                                line, buffer = buffer.split(b"\n", 1)
                                said.append(json.loads(line))

                    nursery.start_soon(sample)
                    nursery.start_soon(listen)
                    await trio.sleep(HEAD_START)  # (the attack under way)
                    latencies = await good_client(base, profile, time.monotonic() + DURATION)
                    nursery.cancel_scope.cancel()
            finally:
                attacker.kill()
                with trio.CancelScope(shield=True):
                    await attacker.wait()
                log.close()
            agents = peak_agents if kind == "serve" else None
    admitted_tcp = max(0, peak_sockets - 2)  # (less the listener and the good client)
    allowance = admitted_acp * ALLOWANCE_ACP + admitted_tcp * ALLOWANCE_TCP
    growth = peak - baseline
    row = {
        "case": title,
        "server": kind,
        "profile": profile,
        "round trips": len(latencies),
        "p50 ms": round(statistics.median(latencies) * 1000, 1),
        "p90 ms": round(percentile(latencies, 0.9) * 1000, 1),
        "growth MB": round(growth / MB, 1),
        "sockets": peak_sockets,
        "bound MB": round((64 * MB + allowance) / MB, 1),
        "attacker saw": said[-1] if said else "",
        "agents": agents,
    }
    ROWS.append(row)
    write_report()
    assert row["p50 ms"] < 200, row
    assert row["p90 ms"] < 1000, row
    assert growth <= 64 * MB + allowance, row


def write_report() -> None:
    path = Path(os.environ.get("ACP_TRIO_ATTACK_REPORT", "attack-report.md"))
    columns = [
        "case",
        "server",
        "profile",
        "round trips",
        "p50 ms",
        "p90 ms",
        "growth MB",
        "sockets",
        "bound MB",
        "agents",
        "attacker saw",
    ]
    lines = [
        f"Attack tier, {time.strftime('%Y-%m-%d %H:%M')}, load average "
        f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs (a shared machine).",
        "",
        "| " + " | ".join(columns) + " |",
        "|" + "---|" * len(columns),
    ]
    for row in ROWS:
        lines.append("| " + " | ".join(str(row.get(c, "")) for c in columns) + " |")
    path.write_text("\n".join(lines) + "\n")
