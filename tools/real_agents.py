"""Run ``check-agent`` against the real ACP agents pinned in
``tests/real_agents`` and print a Markdown table of the verdicts; exit 1
if a verdict is not the one the agent's wire supports (:data:`EXPECTED`).

    make check-real-agents            # installs them (npm ci), then runs this
    .venv/bin/python tools/real_agents.py [--strict] [--timeout 10]

Each agent is run with ``python -m acp_trio check-agent --json`` (plus the
options given here); the table shows its name and version as it reports
them, the headline verdict and exit status, the run time, and each failed
check with its reason. No model credentials exist here: codex-acp refuses
``session/new``, claude-agent-acp opens sessions and refuses prompts, each
with ``-32000 Authentication required``; what runs before that is real.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BIN = ROOT / "tests" / "real_agents" / "node_modules" / ".bin"

AGENTS = {
    "claude-agent-acp": [str(BIN / "claude-agent-acp")],
    "codex-acp": [str(BIN / "codex-acp")],
}
#: As root, claude-agent-acp refuses session/new unless it is told it runs in a sandbox.
ENV = {"IS_SANDBOX": "1"}

#: What each agent's wire supports: (plain verdict, --strict verdict, failed checks).
#: Both demand authentication (INCOMPLETE); claude lists no authMethods for it.
EXPECTED: dict[str, tuple[str, str, set[str]]] = {
    "claude-agent-acp": ("INCOMPLETE", "DOES NOT CONFORM", {"auth-methods"}),
    "codex-acp": ("INCOMPLETE", "INCOMPLETE", set()),
}


def run(
    command: list[str], options: list[str], tool: str = "check-agent"
) -> tuple[int, dict[str, Any] | None, str]:
    process = subprocess.run(
        [sys.executable, "-m", "acp_trio", tool, "--json", *options, "--", *command],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env={**os.environ, **ENV},
    )
    try:
        report = json.loads(process.stdout)
    except json.JSONDecodeError:
        return process.returncode, None, process.stderr.strip()[-500:]
    return process.returncode, report, ""


def brief(text: str, limit: int = 110) -> str:
    text = " ".join(str(text).split()).replace("|", "\\|")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def row(name: str, code: int, report: dict[str, Any] | None, error: str, seconds: float) -> str:
    if report is None:
        return f"| {name} | - | checker failed (exit {code}): {brief(error)} | |"
    info = report.get("agent_info") or {}
    version = f"{info.get('name', '?')} {info.get('version', '?')}"
    headline = report.get("verdict") or ("CONFORMS" if report.get("ok") else "DOES NOT CONFORM")
    checks = report.get("checks", [])
    failed = [c for c in checks if str(c.get("verdict", "")).lower() == "fail"]
    skipped = [c for c in checks if str(c.get("verdict", "")).lower() == "skip"]
    failures = "; ".join(
        f"`{c['name']}` ({c.get('level', '?')}): {brief(c.get('reason', ''), 90)}" for c in failed
    )
    return (
        f"| {name} | {version} | {headline}, exit {code}; {len(failed)} failed, "
        f"{len(skipped)} skipped; {seconds:.1f} s | {failures or '-'} |"
    )


def unexpected(name: str, report: dict[str, Any] | None, strict: bool) -> str:
    """Why ``report`` is not the verdict :data:`EXPECTED` of ``name``, or ``""``."""
    if name not in EXPECTED:
        return ""
    plain, strict_verdict, failures = EXPECTED[name]
    if report is None:
        return f"{name}: no report"
    want = strict_verdict if strict else plain
    failed = {c["name"] for c in report.get("checks", []) if c.get("verdict") == "fail"}
    if report.get("verdict") != want or failed != failures:
        return (
            f"{name}: {report.get('verdict')} with failures {sorted(failed)}, expected "
            f"{want} with {sorted(failures)}"
        )
    return ""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--strict", action="store_true")
    parser.add_argument("--timeout", default="10")
    parser.add_argument("--tool", default="check-agent", choices=("check-agent", "check-agent-v2"))
    args = parser.parse_args()
    missing = [name for name, command in AGENTS.items() if not Path(command[0]).exists()]
    if missing:
        print(f"not installed: {', '.join(missing)} (run: npm ci --prefix tests/real_agents)")
        return 2
    options = ["--timeout", args.timeout, *(["--strict"] if args.strict else [])]
    print(f"`IS_SANDBOX=1 python -m acp_trio {args.tool} --json {' '.join(options)} -- AGENT`\n")
    print("| agent | version | verdict | failed checks |")
    print("| --- | --- | --- | --- |")
    wrong = []
    for name, command in AGENTS.items():
        start = time.monotonic()
        code, report, error = run(command, options, args.tool)
        print(row(name, code, report, error, time.monotonic() - start), flush=True)
        wrong.append(unexpected(name, report, args.strict))
    wrong = [w for w in wrong if w]
    for line in wrong:
        print(f"\nunexpected verdict: {line}")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
