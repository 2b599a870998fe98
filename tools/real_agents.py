"""Run ``check-agent`` and ``check-agent-v2`` against every real ACP agent
pinned in ``tests/real_agents`` and write the matrix of their verdicts to
``docs/real-agents.md``; exit 1 if an agent's failures are not the ones
recorded in :data:`KNOWN` (a new failure, or one that went away), 2 if the
agents are not installed.

    make check-real-agents            # installs them (npm install, with the lock), then runs this
    .venv/bin/python tools/real_agents.py [--jobs 4] [--timeout 10] [--only NAME ...]
                                        [--output docs/real-agents.md]

Each agent runs once per protocol version, ``python -m acp_trio check-agent
--json`` (v1) and ``check-agent-v2 --json`` (v2), a few runs at a time, each
under a hard time limit. An agent that serves only v1 answers the v2
checker's ``initialize`` with 1: the matrix says "not served". Both
verdicts come from one run: the plain one, and ``--strict``'s (every level
counted), computed from the same checks.

No model credentials exist here: most agents refuse ``session/new`` or the
prompt for want of authentication, and the checks that need a session are
INCOMPLETE (skipped, with the reason), not FAIL; what each agent does before
that is real and judged. Every run gets a fresh ``HOME`` (so no credentials
or settings of the machine leak in, and nothing is left in the real one).

Nothing is left running: each checker runs in a process group of its own,
stopped after it; every process of a run carries a marker in its
environment, and after each run (and at exit) any process still carrying it
is killed: one an agent left behind is named in the matrix as a finding.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import json
import os
import platform
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

ROOT = Path(__file__).resolve().parent.parent
MODULES = ROOT / "tests" / "real_agents" / "node_modules"
PACKAGE = ROOT / "tests" / "real_agents" / "package.json"
OUTPUT = ROOT / "docs" / "real-agents.md"
#: The environment variable that marks every process of a run.
MARK = "ACP_TRIO_REAL_AGENTS_RUN"


def _opencode() -> list[str]:
    """opencode's npm package picks its platform's binary in a postinstall
    script (``npm ci --ignore-scripts`` skips it): run that binary."""
    arch = {"x86_64": "x64", "aarch64": "arm64", "arm64": "arm64"}.get(platform.machine(), "x64")
    system = sys.platform if sys.platform != "win32" else "windows"
    for suffix in ("", "-baseline"):
        binary = MODULES / f"opencode-{system}-{arch}{suffix}" / "bin" / "opencode"
        if binary.exists():
            return [str(binary), "acp"]
    return [str(MODULES / ".bin" / "opencode"), "acp"]


@attrs.frozen
class Agent:
    """A real agent: its name here, its npm package, how to start it in ACP
    mode over stdio, and the environment it needs."""

    name: str
    package: str
    command: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()
    #: Checker options of its own (they come after the common ones).
    options: tuple[str, ...] = ()


def _bin(name: str, *args: str) -> tuple[str, ...]:
    return (str(MODULES / ".bin" / name), *args)


AGENTS: tuple[Agent, ...] = (
    # As root, claude refuses session/new unless told it runs in a sandbox.
    Agent(
        "claude-agent-acp",
        "@agentclientprotocol/claude-agent-acp",
        _bin("claude-agent-acp"),
        (("IS_SANDBOX", "1"),),
    ),
    Agent("codex-acp", "@agentclientprotocol/codex-acp", _bin("codex-acp")),
    Agent("gemini", "@google/gemini-cli", _bin("gemini", "--acp")),
    Agent("qwen", "@qwen-code/qwen-code", _bin("qwen", "--acp")),
    # Without network access, opencode takes some 10 s to answer session/new
    # (it looks for its models) and a minute to refuse a prompt ("Cannot
    # connect to API"): its waits get 30 s.
    Agent("opencode", "opencode-ai", tuple(_opencode()), options=("--timeout", "30")),
    Agent("copilot", "@github/copilot", _bin("copilot", "--acp")),
    Agent("auggie", "@augmentcode/auggie", _bin("auggie", "--acp")),
    Agent("cline", "cline", _bin("cline", "--acp")),
)
TOOLS = {1: "check-agent", 2: "check-agent-v2"}

#: The failures each agent's wire shows today, per protocol version: a run
#: whose failures differ (new, or gone) fails ``make check-real-agents``.
#: Each is a real conformance problem the matrix page explains.
_SILENT_ON_BAD_INPUT = frozenset({"parse-error", "batch-array", "scalar-message"})
KNOWN: dict[tuple[str, int], frozenset[str]] = {
    # Refuses the prompt for want of authentication, lists no authMethods.
    ("claude-agent-acp", 1): frozenset({"auth-methods"}),
    ("claude-agent-acp", 2): frozenset({"auth-methods"}),
    # No reply to invalid JSON, a batch or a scalar; -32603 for ill-typed params.
    ("gemini", 1): _SILENT_ON_BAD_INPUT | {"invalid-params"},
    ("qwen", 1): _SILENT_ON_BAD_INPUT | {"invalid-params"},
    ("copilot", 1): _SILENT_ON_BAD_INPUT,
    ("opencode", 1): _SILENT_ON_BAD_INPUT,
    # Exits on a JSON scalar (required: malformed-input); authMethods empty.
    ("auggie", 1): _SILENT_ON_BAD_INPUT | {"invalid-params", "malformed-input", "auth-methods"},
    ("cline", 1): _SILENT_ON_BAD_INPUT | {"malformed-input"},
}
#: Failures seen in some runs and not in others (a race in the agent): they
#: may come or go without failing the run; the page shows each run's.
SOMETIMES: dict[tuple[str, int], frozenset[str]] = {
    # A session/cancel 0.2 s into a turn (no model reachable) is sometimes
    # answered end_turn instead of cancelled, and its answer takes about a
    # second (over --cancel-within's 1 s on a loaded machine, under it else).
    ("opencode", 1): frozenset({"session-cancel", "cancel-promptly"}),
}


@attrs.frozen
class Run:
    """One checker run against one agent."""

    agent: Agent
    protocol: int
    seconds: float
    exit_code: int | None
    report: dict[str, Any] | None
    #: Why there is no report (the checker failed or timed out).
    error: str = ""
    #: Processes of the run still alive after the checker ended (killed).
    leftovers: tuple[str, ...] = ()

    @property
    def checks(self) -> list[dict[str, Any]]:
        return list((self.report or {}).get("checks", []))

    def names(self, verdict: str) -> list[str]:
        return [c["name"] for c in self.checks if c.get("verdict") == verdict]

    @property
    def served(self) -> bool:
        """Whether the agent speaks this protocol version."""
        return self.report is not None and self.report.get("only_version") in (None, self.protocol)

    @property
    def strict_verdict(self) -> str:
        if self.names("fail"):
            return "DOES NOT CONFORM"
        return "INCOMPLETE" if self.names("skip") else "CONFORMS"


def _processes_marked(token: str) -> list[tuple[int, str]]:
    """The live processes whose environment carries ``MARK=token`` (Linux's
    /proc; elsewhere, none)."""
    found = []
    needle = f"{MARK}={token}".encode()
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            environ = (entry / "environ").read_bytes()
            if needle not in environ.split(b"\0"):
                continue
            stat = (entry / "stat").read_text()
            if stat.rsplit(")", 1)[-1].split()[0] == "Z":
                continue
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        found.append((int(entry.name), cmdline.strip()))
    return found


def _kill_marked(token: str) -> list[str]:
    """Kill every process marked with ``token``; their command lines."""
    left = _processes_marked(token)
    for pid, _ in left:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    return [command[:160] for _, command in left]


def _kill_group(pid: int) -> None:
    with contextlib.suppress(OSError):
        os.killpg(pid, signal.SIGKILL)


def run(agent: Agent, protocol: int, options: Sequence[str], limit: float, session: str) -> Run:
    """One checker run (its own process group, its own HOME), then the sweep."""
    token = f"{session}-{agent.name}-v{protocol}"
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix=f"acp-real-{agent.name}-") as home:
        env = {
            **os.environ,
            **dict(agent.env),
            MARK: token,
            "HOME": home,
            "XDG_CONFIG_HOME": os.path.join(home, ".config"),
            "XDG_DATA_HOME": os.path.join(home, ".local", "share"),
            "XDG_CACHE_HOME": os.path.join(home, ".cache"),
            "XDG_STATE_HOME": os.path.join(home, ".local", "state"),
            "NO_COLOR": "1",
        }
        command = [sys.executable, "-m", "acp_trio", TOOLS[protocol], "--json", *options]
        command += agent.options
        command += ["--", *agent.command]
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=home,
            env=env,
            start_new_session=True,
        )
        error = ""
        try:
            out, err = process.communicate(timeout=limit)
        except subprocess.TimeoutExpired:
            _kill_group(process.pid)
            out, err = process.communicate()
            error = f"the checker did not finish within {limit:g} s"
        finally:
            _kill_group(process.pid)
        # What the checker's own stop left: processes an agent moved out of
        # its process group.
        time.sleep(0.2)
        leftovers = tuple(_kill_marked(token))
    seconds = time.monotonic() - start
    try:
        report = json.loads(out) if not error else None
    except json.JSONDecodeError:
        report = None
        error = "no report: " + " ".join(err.decode(errors="replace").split())[-300:]
    return Run(agent, protocol, seconds, process.returncode, report, error, leftovers)


def installed_version(agent: Agent) -> str | None:
    try:
        data = json.loads((MODULES / agent.package / "package.json").read_text())
    except (OSError, ValueError):
        return None
    version = data.get("version")
    return version if isinstance(version, str) else None


def pinned_version(agent: Agent) -> str | None:
    try:
        deps = json.loads(PACKAGE.read_text()).get("dependencies", {})
    except (OSError, ValueError):
        return None
    version = deps.get(agent.package)
    return version if isinstance(version, str) else None


# -- the page


def brief(text: Any, limit: int = 180) -> str:
    text = " ".join(str(text).split()).replace("|", "\\|")
    return text if len(text) <= limit else text[: limit - 3] + "..."


_REFUSAL = re.compile(
    r"\(((?:session|auth|initialize)[^;]*? was answered with .*?); this checker does not "
    r"authenticate\)"
)


def _auth_point(run: Run) -> str:
    """Where the agent first demanded authentication, from the skip reasons."""
    for check in run.checks:
        reason = str(check.get("reason", ""))
        found = _REFUSAL.search(reason)
        if check.get("verdict") == "skip" and found:
            return brief(found.group(1), 140)
        if check.get("verdict") == "skip" and reason.startswith("no model reachable: "):
            return brief(reason, 140)
    return ""


def verdict_cell(run: Run) -> str:
    if run.report is None:
        return f"checker failed: {brief(run.error, 120)}"
    if not run.served:
        return f"not served (it answers protocol version {run.report.get('only_version')})"
    plain = run.report.get("verdict", "?")
    return plain if plain == run.strict_verdict else f"{plain} (--strict: {run.strict_verdict})"


def failures_cell(run: Run) -> str:
    if run.report is None or not run.served:
        return "-"
    lines = [
        f"`{c['name']}` ({c.get('level')}): {brief(c.get('reason', ''), 200)}"
        for c in run.checks
        if c.get("verdict") == "fail"
    ]
    if run.leftovers:
        lines.append(
            f"left {len(run.leftovers)} process(es) running after it was stopped: "
            f"{brief(run.leftovers[0], 100)}"
        )
    return "<br>".join(lines) or "-"


def before_cell(run: Run) -> str:
    """What it does before authentication stops it."""
    if run.report is None or not run.served:
        return "-"
    passed, skipped = run.names("pass"), run.names("skip")
    where = _auth_point(run)
    text = f"{len(passed)} passed, {len(skipped)} INCOMPLETE"
    if where:
        text += f"; stops at: {where}"
    return text


def page(runs: Sequence[Run], options: Sequence[str], wall: float) -> str:
    node = shutil.which("node")
    node_version = (
        subprocess.run([node, "--version"], capture_output=True, text=True, check=False).stdout
        if node
        else "none"
    ).strip()
    lines = [
        "# Real agents: the conformance matrix",
        "",
        "<!-- Written by `make check-real-agents` (tools/real_agents.py): do not edit. -->",
        "",
        f"Every ACP agent from npm that installs here and speaks ACP over stdio, pinned in "
        f"`tests/real_agents` (package.json and its lock), checked with `python -m acp_trio "
        f"check-agent --json {' '.join(options)}` (protocol version 1) and `check-agent-v2` "
        f"(version 2), each in a fresh `HOME`. Run on {time.strftime('%Y-%m-%d')} with node "
        f"{node_version}, in {wall:.0f} s (the runs in parallel).",
        "",
        "No model credentials exist here: an agent that refuses `session/new` or the prompt for "
        "want of authentication gets every check that needs a session INCOMPLETE (skipped, "
        "with the reason), not FAIL; what it does before that is real and judged. The verdict "
        "counts the required checks (a MUST of the protocol); `--strict` counts every level. A "
        "failing check shows one line of evidence, the checker's reason; `python -m acp_trio "
        "check-agent -- AGENT` shows the wire lines.",
        "",
        "| agent | version | protocol | verdict | failing checks (one line of evidence each) "
        "| before authentication | time |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in runs:
        info = (r.report or {}).get("agent_info") or {}
        version = info.get("version") if isinstance(info, dict) else None
        version = version or installed_version(r.agent) or "?"
        lines.append(
            f"| `{r.agent.package}` | {brief(version, 40)} | v{r.protocol} | {verdict_cell(r)} "
            f"| {failures_cell(r)} | {before_cell(r)} | {r.seconds:.0f} s |"
        )
    for protocol in (1, 2):
        served = [r for r in runs if r.protocol == protocol and r.report is not None and r.served]
        if not served:
            continue
        names = [c["name"] for c in served[0].checks]
        lines += [
            "",
            f"## Check by check, protocol version {protocol} (`{TOOLS[protocol]}`)",
            "",
            "PASS, FAIL, or INC (INCOMPLETE: it could not run, most often for want of "
            "authentication); the level is the check's (required: a MUST).",
            "",
            "| check | level | " + " | ".join(r.agent.name for r in served) + " |",
            "| --- | --- | " + " | ".join("---" for _ in served) + " |",
        ]
        cells = {"pass": "PASS", "fail": "**FAIL**", "skip": "INC"}
        for name in names:
            row = []
            level = "?"
            for r in served:
                check = next((c for c in r.checks if c["name"] == name), None)
                level = check.get("level", level) if check else level
                row.append(cells.get(check.get("verdict", ""), "-") if check else "-")
            lines.append(f"| `{name}` | {level} | " + " | ".join(row) + " |")
    failing: dict[tuple[int, str], list[str]] = {}
    levels: dict[str, str] = {}
    for r in runs:
        for c in r.checks if r.served else []:
            if c.get("verdict") == "fail":
                failing.setdefault((r.protocol, c["name"]), []).append(r.agent.name)
                levels[c["name"]] = str(c.get("level", "?"))
    lines += ["", "## Findings, check by check", ""]
    if not failing:
        lines.append("No agent fails a check.")
    for (protocol, name), agents in sorted(failing.items()):
        sometimes = [a for a in agents if name in SOMETIMES.get((a, protocol), frozenset())]
        note = f" (in some runs: {', '.join(sometimes)})" if sometimes else ""
        lines.append(f"- `{name}` ({levels[name]}, v{protocol}): {', '.join(agents)}{note}")
    lines += [
        "",
        "A FAIL here is the agent's: the checker does not paper over it (its rows give the "
        "evidence). Silence on invalid JSON, a batch or a JSON scalar fails the recommended "
        "checks (no MUST covers input ACP forbids a client to send); dying on it fails "
        "`malformed-input` (required: the valid requests after it go unanswered). "
        "`auth-methods` (recommended) fails when an agent refuses a request for want of "
        "authentication but lists no `authMethods`, so a client cannot know how to log in. "
        "An agent that leaves processes running after it was stopped (stdin closed, then "
        "SIGTERM and SIGKILL to its process group) is named in its row.",
        "",
    ]
    return "\n".join(lines)


def unexpected(runs: Sequence[Run]) -> list[str]:
    """Why a run differs from :data:`KNOWN`: a new failure, one gone, no report."""
    out = []
    for r in runs:
        if r.report is None:
            out.append(f"{r.agent.name} v{r.protocol}: {r.error}")
            continue
        if not r.served:
            continue
        failed = frozenset(r.names("fail"))
        known = KNOWN.get((r.agent.name, r.protocol), frozenset())
        failed -= SOMETIMES.get((r.agent.name, r.protocol), frozenset())
        if failed != known:
            out.append(
                f"{r.agent.name} v{r.protocol}: fails {sorted(failed)}, recorded {sorted(known)}"
            )
        if r.leftovers:
            out.append(f"{r.agent.name} v{r.protocol}: left {len(r.leftovers)} process(es)")
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--timeout", default="10", help="check-agent --timeout (default 10)")
    parser.add_argument(
        "--prompt-timeout", default="120", help="check-agent --prompt-timeout (default 120)"
    )
    parser.add_argument("--jobs", type=int, default=4, help="runs at a time (default 4)")
    parser.add_argument("--limit", type=float, default=300.0, help="seconds per run (300)")
    parser.add_argument("--only", nargs="*", help="the agents to run (default: all)")
    parser.add_argument("--output", default=str(OUTPUT), help="the page (docs/real-agents.md)")
    args = parser.parse_args(argv)
    agents = [a for a in AGENTS if not args.only or a.name in args.only]
    if args.only and len(agents) != len(set(args.only)):
        parser.error(f"unknown agents; known: {', '.join(a.name for a in AGENTS)}")
    missing = [a.name for a in agents if not Path(a.command[0]).exists()]
    if missing:
        print(
            f"not installed: {', '.join(missing)} (run: npm install --prefix tests/real_agents "
            "--ignore-scripts --engine-strict=false)"
        )
        return 2
    wrong = [
        f"{a.package} {installed_version(a)} (pinned {pinned_version(a)})"
        for a in agents
        if installed_version(a) != pinned_version(a)
    ]
    if wrong:
        print(f"installed versions differ from tests/real_agents/package.json: {wrong}")
        return 2
    # An agent without its model may take a minute to say so (opencode).
    options = ["--timeout", args.timeout, "--prompt-timeout", args.prompt_timeout]
    session = secrets.token_hex(4)
    start = time.monotonic()
    jobs = [(a, p) for a in agents for p in (1, 2)]
    results: dict[tuple[str, int], Run] = {}
    lock = threading.Lock()
    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            futures = {
                pool.submit(run, agent, protocol, options, args.limit, session): (agent, protocol)
                for agent, protocol in jobs
            }
            for future in concurrent.futures.as_completed(futures):
                result = future.result()
                with lock:
                    results[(result.agent.name, result.protocol)] = result
                print(
                    f"{result.agent.name} v{result.protocol}: {verdict_cell(result)} "
                    f"in {result.seconds:.0f} s",
                    flush=True,
                )
    finally:
        # Whatever happens (an interrupt too), nothing of these runs stays.
        for agent, protocol in jobs:
            _kill_marked(f"{session}-{agent.name}-v{protocol}")
    runs = [results[(a.name, p)] for a, p in jobs if (a.name, p) in results]
    Path(args.output).write_text(page(runs, options, time.monotonic() - start), encoding="utf-8")
    print(f"wrote {args.output}")
    problems = unexpected(runs)
    for line in problems:
        print(f"unexpected: {line}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
