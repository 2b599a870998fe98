"""``tools/real_agents.py`` (``make check-real-agents``): the matrix of the
real ACP agents pinned in ``tests/real_agents``. The page logic is tested
here on made-up reports; the run against the agents themselves is skipped
unless they are installed (``make check-real-agents``)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from .conftest import REPO

MODULES = REPO / "tests" / "real_agents" / "node_modules"


def _tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("real_agents", REPO / "tools" / "real_agents.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["real_agents"] = module
    spec.loader.exec_module(module)
    return module


tool = _tool()


def check(name: str, verdict: str, reason: str = "", level: str = "required") -> dict[str, Any]:
    return {"name": name, "verdict": verdict, "reason": reason, "level": level}


def made_up(agent: str, protocol: int, checks: list[dict[str, Any]], **report: Any) -> Any:
    entry = next(a for a in tool.AGENTS if a.name == agent)
    data = {"verdict": "INCOMPLETE", "only_version": None, "checks": checks, **report}
    return tool.Run(entry, protocol, 12.0, 3, data)


AUTH = (
    "authentication required: login (session/new was answered with error -32000 "
    "(Authentication required); this checker does not authenticate)"
)


def test_the_page_shows_verdicts_evidence_and_what_comes_before_authentication() -> None:
    runs = [
        made_up(
            "cline",
            1,
            [
                check("initialize", "pass"),
                check("malformed-input", "fail", "the agent exited 1.2 s after the bad lines"),
                check("parse-error", "fail", "no error reply to invalid JSON", "recommended"),
                check("prompt", "skip", AUTH),
            ],
            verdict="DOES NOT CONFORM",
        ),
        made_up("cline", 2, [check("initialize", "fail")], only_version=1),
    ]
    page = tool.page(runs, ["--timeout", "10"], 60.0)
    row = next(line for line in page.splitlines() if "| v1 |" in line)
    assert "| DOES NOT CONFORM |" in row
    assert "`malformed-input` (required): the agent exited 1.2 s after" in row
    assert "<br>`parse-error` (recommended): no error reply" in row
    assert "1 passed, 1 INCOMPLETE; stops at: session/new was answered with error -32000" in row
    v2 = next(line for line in page.splitlines() if "| v2 |" in line)
    assert "not served (it answers protocol version 1)" in v2
    # The per-check grid: INC, not FAIL, for what authentication stopped.
    assert "| `prompt` | required | INC |" in page
    assert "| `malformed-input` | required | **FAIL** |" in page


def test_where_authentication_stopped_it_is_read_from_the_skip_reasons() -> None:
    reason = (
        "authentication required: (no authMethods listed) (session/prompt (its turn) was "
        "answered with error -32000 (Authentication required); this checker does not "
        "authenticate)"
    )
    run = made_up("claude-agent-acp", 2, [check("lifecycle", "skip", reason)])
    assert tool._auth_point(run) == (
        "session/prompt (its turn) was answered with error -32000 (Authentication required)"
    )


def test_a_failure_that_is_not_recorded_and_leftovers_are_unexpected() -> None:
    known = made_up("claude-agent-acp", 1, [check("auth-methods", "fail", level="recommended")])
    assert tool.unexpected([known]) == []
    new = made_up("codex-acp", 1, [check("schema", "fail")])
    assert tool.unexpected([new]) == ["codex-acp v1: fails ['schema'], recorded []"]
    left = tool.Run(new.agent, 1, 1.0, 0, {"checks": []}, leftovers=("node stray.js",))
    assert tool.unexpected([left]) == ["codex-acp v1: left 1 process(es)"]
    broken = tool.Run(new.agent, 2, 1.0, None, None, "the checker did not finish within 5 s")
    assert tool.unexpected([broken]) == ["codex-acp v2: the checker did not finish within 5 s"]
    assert tool.failures_cell(left).startswith("left 1 process(es) running")


def test_processes_marked_for_a_run_are_found_and_killed(tmp_path: Path) -> None:
    token = "test-" + os.urandom(4).hex()
    env = {**os.environ, tool.MARK: token}
    # A process that left its parent's group, as an agent's helper may.
    stray = subprocess.Popen(["sleep", "60"], env=env, start_new_session=True)
    try:
        assert [pid for pid, _ in tool._processes_marked(token)] == [stray.pid]
        assert tool._kill_marked(token) == ["sleep 60"]
        assert stray.wait(timeout=10) != 0
        assert tool._processes_marked(token) == []
    finally:
        stray.kill()
        stray.wait()


def test_every_agent_is_pinned_in_the_package_file() -> None:
    for agent in tool.AGENTS:
        assert tool.pinned_version(agent), agent.package
    assert tool.pinned_version(tool.AGENTS[0]) == "0.101.0"  # node 20 picks 0.49.0 unpinned


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
@pytest.mark.skipif(
    not (MODULES / ".bin" / "codex-acp").exists()
    or not (MODULES / ".bin" / "claude-agent-acp").exists(),
    reason="the real agents are not installed (make check-real-agents, or npm install --prefix "
    "tests/real_agents --ignore-scripts --engine-strict=false: about 2 GB)",
)
@pytest.mark.timeout(600)
@pytest.mark.slow
def test_two_real_agents_get_the_verdicts_their_wire_supports(tmp_path: Path) -> None:
    page = tmp_path / "real-agents.md"
    process = subprocess.run(
        [
            sys.executable,
            str(REPO / "tools" / "real_agents.py"),
            "--only",
            "codex-acp",
            "claude-agent-acp",
            "--output",
            str(page),
        ],
        capture_output=True,
        text=True,
        timeout=580,
        check=False,
    )
    assert process.returncode == 0, process.stdout + process.stderr
    text = page.read_text()
    rows = [line for line in text.splitlines() if line.startswith("| `@agentclientprotocol/")]
    assert len(rows) == 4, text
    codex = [row for row in rows if "codex-acp` | 2.6.0 |" in row]
    assert all("| INCOMPLETE | - |" in row for row in codex), codex
    claude = [row for row in rows if "claude-agent-acp` | 0.101.0 |" in row]
    assert all("`auth-methods` (recommended)" in row for row in claude), claude
