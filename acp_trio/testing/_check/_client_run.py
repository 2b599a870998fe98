"""The driver of ``check-client``: run a client command that spawns the
checking agent, then read the agent side's verdicts.

The client is told the agent's command by a placeholder in its command
line, ``{agent}`` (one shell-quoted word, for ``--agent "CMD"`` options)
or ``{agent-args}`` (the words, spliced in), and by the environment
variable ``ACP_CHECK_CLIENT_AGENT`` (one shell-quoted string).
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import trio

from acp_trio.testing._check._client_checks import result, results_from_json
from acp_trio.testing._check._report import ClientCheckReport, Verdict

__all__ = [
    "AGENT_ENV",
    "agent_side_command",
    "check_client",
    "client_command",
    "read_report",
]

AGENT_ENV = "ACP_CHECK_CLIENT_AGENT"
_OUTPUT_TAIL = 4000
_NOT_SEEN = {
    "initialize": "no initialize request",
    "session-new": "no session/new",
    "prompt": "no session/prompt",
}


def agent_side_command(report: str, timeout: float, cancel_wait: float | None = None) -> list[str]:
    """The command of the checking agent, writing its verdicts to ``report``."""
    wait = [] if cancel_wait is None else ["--cancel-wait", f"{cancel_wait:g}"]
    return [
        sys.executable,
        "-m",
        "acp_trio",
        "check-client",
        "--agent-side",
        "--report",
        report,
        "--timeout",
        f"{timeout:g}",
        *wait,
    ]


def client_command(command: Sequence[str], agent: Sequence[str]) -> list[str]:
    """``command`` with its placeholders replaced by the agent's command."""
    words: list[str] = []
    joined = shlex.join(agent)
    for word in command:
        if word == "{agent-args}":
            words.extend(agent)
        else:
            words.append(word.replace("{agent}", joined))
    return words


def _read(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


async def check_client(
    command: Sequence[str],
    *,
    timeout: float = 5.0,  # noqa: ASYNC109 - a bound of each wait, not of the call
    limit: float = 120.0,
    env: dict[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    on_cue: Sequence[str] | None = None,
    cancel_wait: float | None = None,
) -> ClientCheckReport:
    """Run the client ``command`` (with ``{agent}`` or ``{agent-args}`` where
    the agent's command goes) and return the verdicts.

    ``timeout`` bounds each wait of the agent side for the client; the
    client gets ``limit`` seconds to finish before it is killed (with its
    process group). The client's stdin is empty; its output is kept (the
    tail is in :attr:`ClientCheckReport.client_output`). It runs in ``cwd``
    (default: ours); the agent side's fs checks put their files in a
    directory ``.acp-check-client-*`` in the session's cwd, removed at the
    end.

    ``on_cue`` is a command (placeholders allowed) run each time the agent
    side has sent its cue, in the client's cwd and environment, for clients
    that cancel from outside (say, ``acpx cancel``); its output goes with
    the client's. ``cancel_wait`` is how long the agent side ignores a
    ``session/cancel`` (``ignored-cancel``) before it calls the client hung
    (default 3 x ``timeout``): more than the client's own grace."""
    start = trio.current_time()
    with tempfile.TemporaryDirectory(prefix="acp-check-client-") as tmp:
        report_path = Path(tmp) / "report.json"
        agent = agent_side_command(str(report_path), timeout, cancel_wait)
        words = client_command(command, agent)
        full_env = {**os.environ, **(env or {}), AGENT_ENV: shlex.join(agent)}
        output_path = Path(tmp) / "client-output.txt"

        exit_code: int | None = None
        with open(output_path, "wb") as output:  # noqa: ASYNC230 - local, at once
            try:
                process = await trio.lowlevel.open_process(
                    words,
                    stdin=subprocess.DEVNULL,
                    stdout=output,
                    stderr=subprocess.STDOUT,
                    env=full_env,
                    cwd=cwd,
                    start_new_session=True,
                )
            except OSError as exc:
                output.write(f"cannot start the client: {exc}\n".encode())
                process = None
            if process is not None:
                try:
                    with trio.move_on_after(limit):
                        async with trio.open_nursery() as nursery:
                            if on_cue is not None:
                                cue = client_command(on_cue, agent)
                                nursery.start_soon(
                                    _run_on_cue, report_path, cue, output, cwd, full_env
                                )
                            exit_code = await process.wait()
                            nursery.cancel_scope.cancel()
                finally:
                    if exit_code is None:
                        _kill_group(process.pid)
                        with trio.CancelScope(shield=True):
                            await process.wait()
        # The agent side writes its last report once its stdin closes.
        with trio.move_on_after(timeout + 2 if process is not None else 0):
            while True:
                data = _read(report_path)
                if data is not None and data.get("final"):
                    break
                await trio.sleep(0.05)
        if process is not None:
            _kill_group(process.pid)  # an agent side the client left running
        data = _read(report_path) or {}
        # The agent side may run in a process group of its own (as agents
        # spawned by an SDK do): stop it by its pid too.
        if isinstance(data.get("pid"), int) and _is_agent_side(data["pid"]):
            with contextlib.suppress(OSError):
                os.kill(data["pid"], signal.SIGKILL)
            if os.getpgid(0) != data["pid"]:
                _kill_group(data["pid"])
        tail = output_path.read_bytes()[-_OUTPUT_TAIL:].decode("utf-8", "replace")
    return _report(
        data,
        command=tuple(command),
        client_exit=exit_code,
        client_output=tail,
        duration=trio.current_time() - start,
    )


def _report(data: dict[str, Any], **fields: Any) -> ClientCheckReport:
    missing = (
        "not reached: the client stopped the checking agent"
        if data
        else "not reached: the client never started the checking agent"
    )
    results = results_from_json(data.get("checks"), missing)
    if data and not data.get("final"):
        # Killed before its end: what the client never sent is a failure.
        results = tuple(
            result(r.name, Verdict.FAIL, f"{_NOT_SEEN[r.name]} before the agent was stopped")
            if r.skipped and r.name in _NOT_SEEN
            else r
            for r in results
        )
    if not data:
        results = (
            result("initialize", Verdict.FAIL, "the checking agent was never started"),
            *results[1:],
        )
    tail = tuple(
        line[:300] for line in str(fields.get("client_output", "")).strip().splitlines()[-12:]
    )
    exit_ = fields.get("client_exit")
    note = (f"client exit status: {exit_}",) if fields.get("command") else ()
    # Every failure carries its evidence: the wire, else what the client said.
    results = tuple(
        attrs.evolve(r, evidence=(*note, *tail)) if r.failed and not r.evidence else r
        for r in results
    )
    return ClientCheckReport(
        results=results,
        client_info=data.get("client_info"),
        protocol_version=data.get("protocol_version"),
        client_capabilities=data.get("client_capabilities"),
        **fields,
    )


def read_report(path: str | os.PathLike[str]) -> ClientCheckReport:
    """The verdicts in a report file of ``check-client --agent-side``."""
    return _report(_read(Path(path)) or {}, command=())


async def _run_on_cue(
    report: Path,
    command: list[str],
    output: Any,
    cwd: str | os.PathLike[str] | None,
    env: dict[str, str],
) -> None:
    seen = 0
    while True:  # the agent side is another process: poll its file
        data = _read(report) or {}
        cues = data.get("cues", 1 if data.get("cue") else 0)
        if not isinstance(cues, int) or cues <= seen:
            await trio.sleep(0.05)
            continue
        seen = cues
        try:
            await trio.run_process(
                command,
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                cwd=cwd,
                env=env,
                check=False,
            )
        except OSError as exc:
            output.write(f"cannot run the on-cue command: {exc}\n".encode())
            return


def _is_agent_side(pid: int) -> bool:
    """Whether ``pid`` is still a checking agent (``--agent-side``), not a
    process that got its pid since (read from ``/proc``; elsewhere, no)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as file:
            return b"--agent-side" in file.read()
    except OSError:
        return False


def _kill_group(pid: int) -> None:
    with contextlib.suppress(OSError):
        os.killpg(pid, signal.SIGKILL)
