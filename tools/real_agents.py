"""Run ``check-agent`` against the real ACP agents pinned in
``tests/real_agents`` and print a Markdown table of the verdicts.

    make check-real-agents            # installs them (npm ci), then runs this
    .venv/bin/python tools/real_agents.py [--strict] [--timeout 10]

Each agent is run with ``python -m acp_trio check-agent --json`` (plus the
options given here); the table shows its name and version as it reports
them, the headline verdict and exit status, and each failed check with its
reason. No model credentials exist here, so the agents stop at
``session/new``: what runs before it is real.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BIN = ROOT / "tests" / "real_agents" / "node_modules" / ".bin"

AGENTS = {
    "claude-agent-acp": [str(BIN / "claude-agent-acp")],
    "codex-acp": [str(BIN / "codex-acp")],
    "gemini --acp": [str(BIN / "gemini"), "--acp"],
}


def run(command: list[str], options: list[str]) -> tuple[int, dict[str, Any] | None, str]:
    process = subprocess.run(
        [sys.executable, "-m", "acp_trio", "check-agent", "--json", *options, "--", *command],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    try:
        report = json.loads(process.stdout)
    except json.JSONDecodeError:
        return process.returncode, None, process.stderr.strip()[-500:]
    return process.returncode, report, ""


def brief(text: str, limit: int = 110) -> str:
    text = " ".join(str(text).split()).replace("|", "\\|")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def row(name: str, code: int, report: dict[str, Any] | None, error: str) -> str:
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
        f"{len(skipped)} skipped | {failures or '-'} |"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--strict", action="store_true")
    parser.add_argument("--timeout", default="10")
    args = parser.parse_args()
    missing = [name for name, command in AGENTS.items() if not Path(command[0]).exists()]
    if missing:
        print(f"not installed: {', '.join(missing)} (run: npm ci --prefix tests/real_agents)")
        return 2
    options = ["--timeout", args.timeout, *(["--strict"] if args.strict else [])]
    print(f"`python -m acp_trio check-agent --json {' '.join(options)} -- AGENT`\n")
    print("| agent | version | verdict | failed checks |")
    print("| --- | --- | --- | --- |")
    for name, command in AGENTS.items():
        print(row(name, *run(command, options)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
