"""``check-client``: the checking agent against clients over real pipes.

The clients live in ``clients/``: acp_trio's own typed client, and a raw
JSON client with one planted fault per run (``raw_client.py FAULT``). The
checker runs against each once per test session, a few at a time.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from acp_trio.testing._check._client_checks import CLIENT_CHECKS, results_from_json
from acp_trio.testing._check._client_run import agent_side_command, check_client, client_command
from acp_trio.testing._check._report import ClientCheckReport
from tests.testing.conftest import REAL_LIMIT, REPO

CLIENTS = Path(__file__).resolve().parent / "clients"
NAMES = [info.name for info in CLIENT_CHECKS]
#: Each wait of the agent side: generous (a loaded machine), it only costs
#: time where a client never answers.
CHECK_TIMEOUT = 5.0
#: How long the agent side ignores a session/cancel (ignored-cancel): more
#: than the clients' own graces here (raw client 2 x 0.5 s, acp_trio's 1 s).
CANCEL_WAIT = 3.0

#: Client -> the checks it must fail.
FAULTS: dict[str, set[str]] = {
    "clean": set(),
    "no-cancel-reply": {"cancel-request"},
    "two-replies": {"one-reply"},
    "no-cancelled-outcome": {"cancelled-permission"},
    "ignore-capabilities": {"fs-read", "fs-write", "terminal"},
    "crash-on-unknown-notification": {"unknown-notification"},
    # No faults: the checks that cannot be exercised are skipped.
    "answer-all": set(),
    "no-session-cancel": {"session-cancel"},
    # Issue 45: each passes every check of before and fails one new check.
    "leak-cancel": {"idle-cancel"},
    "wait-forever": {"ignored-cancel"},
    "close-after-ignored-cancel": {"usable-after-ignored-cancel"},
}
#: The checks of check-client before issue 45.
BEFORE_45 = [
    n for n in NAMES if n not in ("idle-cancel", "ignored-cancel", "usable-after-ignored-cancel")
]


def raw_client(fault: str) -> list[str]:
    return [sys.executable, str(CLIENTS / "raw_client.py"), fault, "--", "{agent-args}"]


TRIO_CLIENT = [sys.executable, str(CLIENTS / "trio_client.py"), "--", "{agent-args}"]


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, ClientCheckReport]:
    work = tmp_path_factory.mktemp("check-client")

    async def run_all() -> dict[str, ClientCheckReport]:
        found: dict[str, ClientCheckReport] = {}
        limiter = trio.CapacityLimiter(3)
        commands = {name: raw_client(name) for name in FAULTS}
        commands["acp_trio"] = TRIO_CLIENT

        async def one(name: str) -> None:
            async with limiter:
                found[name] = await check_client(
                    commands[name], timeout=CHECK_TIMEOUT, cwd=work, cancel_wait=CANCEL_WAIT
                )

        with trio.fail_after(REAL_LIMIT * 4):  # a watchdog: 13 clients, 3 at a time
            async with trio.open_nursery() as nursery:
                for name in commands:
                    nursery.start_soon(one, name)
        return found

    return trio.run(run_all)


def failed(report: ClientCheckReport) -> set[str]:
    return {r.name for r in report.failures()}


@pytest.mark.parametrize("name", ["clean", "acp_trio"])
def test_conforming_clients_pass_every_check(
    reports: dict[str, ClientCheckReport], name: str
) -> None:
    report = reports[name]
    assert [r.name for r in report] == NAMES
    assert all(r.passed for r in report), report.format_table()
    assert report.ok
    assert report.exit_code == 0
    assert report.client_exit == 0
    assert report.protocol_version == 1
    # The cancellations were exercised, not answered around.
    assert report["cancel-request"].reason == "-32800"
    assert report["cancelled-permission"].reason == "cancelled"
    assert "came on the same session" in reports["clean"]["usable-after-ignored-cancel"].reason
    assert "$/cancel_request for the prompt" in reports["clean"]["ignored-cancel"].reason


def test_acp_trio_client_keeps_the_session_after_an_ignored_cancel(
    reports: dict[str, ClientCheckReport],
) -> None:
    # The cancel ladder: session/cancel, then $/cancel_request for the prompt,
    # then the session is free for the next prompt (issue 45).
    report = reports["acp_trio"]
    assert report["ignored-cancel"].passed, report.format_table()
    assert report["usable-after-ignored-cancel"].passed, report.format_table()
    assert "$/cancel_request for the prompt" in report["ignored-cancel"].reason
    assert "TurnNotAnswered" not in report.client_output


@pytest.mark.parametrize("fault", ["leak-cancel", "wait-forever", "close-after-ignored-cancel"])
def test_each_new_plant_passes_every_check_of_before_and_fails_its_new_one(
    reports: dict[str, ClientCheckReport], fault: str
) -> None:
    report = reports[fault]
    table = report.format_table()
    assert all(report[name].passed for name in BEFORE_45), table
    assert failed(report) == FAULTS[fault], table
    assert report.ok  # recommended checks: SHOULD and MAY, no MUST


def test_the_new_checks_say_what_the_client_did(reports: dict[str, ClientCheckReport]) -> None:
    assert "leaked into the next one" in reports["leak-cancel"]["idle-cancel"].reason
    hung = reports["wait-forever"]
    assert "the client hangs" in hung["ignored-cancel"].reason
    assert "--cancel-wait" in hung["ignored-cancel"].reason
    assert hung["usable-after-ignored-cancel"].skipped
    closed = reports["close-after-ignored-cancel"]
    assert "-32800" in closed["ignored-cancel"].reason
    assert "closed the connection" in closed["usable-after-ignored-cancel"].reason
    # A client that ignores every cue leaves them unexercised: skipped, not passed.
    quiet = reports["no-session-cancel"]
    for name in ("idle-cancel", "ignored-cancel", "usable-after-ignored-cancel"):
        assert quiet[name].skipped, quiet[name]


@pytest.mark.parametrize("fault", [f for f in FAULTS if f != "clean"])
def test_each_planted_fault_fails_its_checks(
    reports: dict[str, ClientCheckReport], fault: str
) -> None:
    report = reports[fault]
    assert failed(report) == FAULTS[fault], report.format_table()
    required = {r.name for r in report.failures() if r.level.value == "required"}
    skipped = {r.name for r in report if r.skipped and r.level.value == "required"}
    assert report.ok is (not required and not skipped)
    assert report.exit_code == (1 if required else 3 if skipped else 0)
    # Every failure carries its evidence (in --json too).
    for result in report.failures():
        assert result.evidence, result
        assert result.to_json()["evidence"], result


def test_a_crash_skips_what_follows(reports: dict[str, ClientCheckReport]) -> None:
    report = reports["crash-on-unknown-notification"]
    assert "closed the connection" in report["unknown-notification"].reason
    assert report["fs-read"].skipped
    assert "connection closed" in report["fs-read"].reason
    assert report.client_exit not in (0, None)
    assert "unknown notification" in report.client_output
    # The table says why the client failed: its exit status and its output.
    table = report.format_table()
    assert f"client exit status: {report.client_exit}; its output (tail):" in table
    assert "unknown notification" in table.split("client exit status")[1]


def test_reasons_name_the_fault(reports: dict[str, ClientCheckReport]) -> None:
    assert "2 replies" in reports["two-replies"]["one-reply"].reason
    assert "-32601" in reports["ignore-capabilities"]["fs-read"].reason
    assert "$/cancel_request" in reports["no-cancel-reply"]["cancel-request"].reason
    assert "session/cancel" in reports["no-cancelled-outcome"]["cancelled-permission"].reason


def test_what_cannot_be_exercised_is_skipped_not_passed(
    reports: dict[str, ClientCheckReport],
) -> None:
    early = reports["answer-all"]["cancelled-permission"]
    assert early.skipped
    assert "before sending session/cancel" in early.reason
    assert reports["answer-all"]["cancel-request"].passed  # a result is a valid answer
    late = reports["no-session-cancel"]
    assert late["session-cancel"].failed
    assert late["session-cancel"].level.value == "recommended"
    assert late["cancelled-permission"].skipped
    # A required check that could not run: INCOMPLETE (exit 3), as in check-agent.
    assert late.status.value == "INCOMPLETE"
    assert late.exit_code == 3
    assert reports["answer-all"].exit_code == 3


def test_client_command_placeholders() -> None:
    agent = ["python", "-m", "acp_trio", "x y"]
    assert client_command(["c", "--agent", "{agent}"], agent) == [
        "c",
        "--agent",
        "python -m acp_trio 'x y'",
    ]
    assert client_command(["c", "--", "{agent-args}", "z"], agent) == ["c", "--", *agent, "z"]
    assert client_command(["c", "--agent={agent}"], ["a"]) == ["c", "--agent=a"]


def test_results_from_json_fills_in_missing_checks() -> None:
    results = results_from_json(
        [{"name": "initialize", "verdict": "pass", "reason": "ok", "latency_ms": None}, "junk"],
        "gone",
    )
    assert [r.name for r in results] == NAMES
    assert results[0].passed
    assert all(r.skipped and r.reason == "gone" for r in results[1:])


async def test_a_client_that_never_starts_the_agent_fails() -> None:
    with trio.fail_after(REAL_LIMIT):
        report = await check_client([sys.executable, "-c", "pass"], timeout=1)
    assert not report.ok
    assert report["initialize"].failed
    assert "never started" in report["initialize"].reason
    assert report.client_exit == 0


async def test_a_missing_client_command_fails() -> None:
    with trio.fail_after(REAL_LIMIT):
        report = await check_client(["/nonexistent/acp-client"], timeout=1)
    assert not report.ok
    assert "cannot start the client" in report.client_output


async def test_a_client_past_its_limit_is_killed() -> None:
    # The agent command is in the environment; this client runs it and
    # never sends anything, then hangs.
    script = (
        "import os, shlex, subprocess, time\n"
        "p = subprocess.Popen(shlex.split(os.environ['ACP_CHECK_CLIENT_AGENT']),"
        " stdin=subprocess.PIPE)\n"
        "time.sleep(3600)\n"
    )
    with trio.fail_after(REAL_LIMIT):
        report = await check_client([sys.executable, "-c", script], timeout=1, limit=2)
    assert report.client_exit is None
    assert report["initialize"].failed or report["initialize"].skipped
    assert not report.ok


def test_the_agent_side_writes_a_final_report_on_sigterm(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    with subprocess.Popen(
        agent_side_command(str(path), 1), stdin=subprocess.PIPE, stdout=subprocess.PIPE
    ) as proc:
        assert proc.stdin is not None
        assert proc.stdout is not None
        proc.stdin.write(
            b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":'
            b'{"protocolVersion":1,"clientCapabilities":{}}}\n'
        )
        proc.stdin.flush()
        assert json.loads(proc.stdout.readline())["result"]["protocolVersion"] == 1
        proc.send_signal(signal.SIGTERM)  # stdin stays open: only the signal ends it
        assert proc.wait(timeout=REAL_LIMIT) == 0
    data = json.loads(path.read_text())
    assert data["final"] is True
    checks = {c["name"]: c for c in data["checks"]}
    assert checks["initialize"]["verdict"] == "pass"
    assert checks["prompt"]["verdict"] == "fail"


@pytest.mark.parametrize(("fault", "status"), [("clean", 0), ("two-replies", 1)])
def test_command_line(fault: str, status: int, tmp_path: Path) -> None:
    command = [sys.executable, "-m", "acp_trio", "check-client", "--json", "--timeout", "3"]
    command += ["--cwd", str(tmp_path)]
    run = subprocess.run(
        [*command, "--", *raw_client(fault)],
        capture_output=True,
        text=True,
        timeout=REAL_LIMIT,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        check=False,
    )
    assert run.returncode == status, run.stderr
    data = json.loads(run.stdout)
    assert data["ok"] is (status == 0)
    assert [c["name"] for c in data["checks"]] == NAMES
    assert data["client_info"] == {"name": f"raw-client-{fault}", "version": "1"}
    assert list(tmp_path.iterdir()) == []  # the fs checks' files are gone


def test_command_line_usage_errors() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "acp_trio", "check-client", "--agent-side"],
        capture_output=True,
        text=True,
        timeout=REAL_LIMIT,
        check=False,
    )
    assert run.returncode == 2
    assert "--report" in run.stderr


async def test_on_cue_runs_a_command_when_the_cue_is_sent(tmp_path: Path) -> None:
    # The no-session-cancel client ignores the cue; the on-cue command
    # stands for an outside cancel: it only leaves a mark here.
    mark = tmp_path / "cue-seen"
    with trio.fail_after(REAL_LIMIT):
        report = await check_client(
            raw_client("no-session-cancel"),
            timeout=1,
            cwd=tmp_path,
            on_cue=[sys.executable, "-c", f"open({str(mark)!r}, 'w').write('{{agent}}')"],
        )
    assert report["session-cancel"].failed
    assert "--agent-side" in mark.read_text()


def test_show_prints_an_agent_side_report(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    # A client pointed at the agent side by hand, as with `acpx --agent "..."`.
    agent = " ".join(agent_side_command(str(path), 3))
    raw = [sys.executable, str(CLIENTS / "raw_client.py"), "clean", "--", *agent.split()]
    subprocess.run(raw, timeout=REAL_LIMIT, cwd=tmp_path, check=True)
    show = [sys.executable, "-m", "acp_trio", "check-client", "--show", str(path)]
    run = subprocess.run(show, capture_output=True, text=True, timeout=REAL_LIMIT, check=False)
    assert run.returncode == 0, run.stdout
    assert run.stdout.splitlines()[-1].startswith(f"CONFORMS: {len(NAMES)} passed")
    data = json.loads(path.read_text())
    assert data["final"] is True
    assert data["prompted"] is True
    assert data["cue"] is True


def test_an_agent_side_without_a_prompt_keeps_the_real_report(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    agent = agent_side_command(str(path), 3)
    raw = [sys.executable, str(CLIENTS / "raw_client.py"), "clean", "--", *agent]
    subprocess.run(raw, timeout=REAL_LIMIT, cwd=tmp_path, check=True)
    before = path.read_text()
    # A second agent side of the same run that is only initialized.
    subprocess.run(
        agent,
        input=b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}\n',
        capture_output=True,
        timeout=REAL_LIMIT,
        check=True,
    )
    assert path.read_text() == before


def test_command_line_lists_the_checks() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "acp_trio", "check-client", "--list"],
        capture_output=True,
        text=True,
        timeout=REAL_LIMIT,
        check=True,
    )
    lines = run.stdout.splitlines()
    assert [line.split()[0] for line in lines if line[:1] != " "] == NAMES
    rules = [line.strip() for line in lines if line[:1] == " "]
    assert rules[NAMES.index("cancelled-permission")].startswith(
        "rests on: MUST (prompt-turn#cancellation)"
    )
    assert rules[NAMES.index("ignored-cancel")].startswith("rests on: MAY ")


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as file:
            return file.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


async def test_nothing_the_client_started_is_left_running(tmp_path: Path) -> None:
    # The client leaves the checking agent running in a session of its own,
    # its stdin held open: the old driver returned with it still running.
    with trio.fail_after(REAL_LIMIT):
        report = await check_client(raw_client("detach-agent"), timeout=3.0, cwd=tmp_path)
        found = re.search(r"agent pid (\d+)", report.client_output)
        assert found is not None, report.client_output
        pid = int(found.group(1))
        with trio.move_on_after(5):
            while _running(pid):  # noqa: ASYNC110 - another process: poll it
                await trio.sleep(0.1)
    assert not _running(pid), report.format_table()
