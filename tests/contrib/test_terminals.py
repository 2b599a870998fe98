"""TerminalManager with real processes: approval, output bounds, kill,
release, cancellation, and that nothing outlives the manager.

Real clock; every test runs under ``trio.fail_after`` (``@limited``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from acp_trio import RequestError
from acp_trio.contrib._terminal_output import render_output
from acp_trio.contrib._terminals import TerminalManager, open_terminal_manager
from acp_trio.schema import (
    CreateTerminalRequest,
    EnvVariable,
    KillTerminalRequest,
    ReleaseTerminalRequest,
    TerminalOutputRequest,
    TerminalOutputResponse,
    WaitForTerminalExitRequest,
    WaitForTerminalExitResponse,
)

from .conftest import group_alive, group_vanishes, limited, process_alive

SESSION = "sess-1"
NOT_FOUND = -32002
INVALID = -32602
PY = sys.executable


async def allow(params: CreateTerminalRequest) -> bool:
    return True


@asynccontextmanager
async def manager(**options: Any) -> AsyncIterator[TerminalManager]:
    options.setdefault("approve", allow)
    options.setdefault("terminate_grace", 1.0)
    async with open_terminal_manager(**options) as terminals:
        yield terminals


async def create(
    terminals: TerminalManager,
    command: str,
    *args: str,
    session: str = SESSION,
    **fields: Any,
) -> str:
    params = CreateTerminalRequest(session_id=session, command=command, args=list(args), **fields)
    result = await terminals.create_terminal(params)
    terminal_id: str = result.terminal_id
    return terminal_id


def ids(terminal_id: str, session: str = SESSION) -> dict[str, Any]:
    return {"session_id": session, "terminal_id": terminal_id}


async def output(terminals: TerminalManager, terminal_id: str) -> TerminalOutputResponse:
    return await terminals.terminal_output(TerminalOutputRequest(**ids(terminal_id)))


async def wait(terminals: TerminalManager, terminal_id: str) -> WaitForTerminalExitResponse:
    return await terminals.wait_for_terminal_exit(WaitForTerminalExitRequest(**ids(terminal_id)))


async def kill(terminals: TerminalManager, terminal_id: str) -> None:
    await terminals.kill_terminal(KillTerminalRequest(**ids(terminal_id)))


async def release(terminals: TerminalManager, terminal_id: str) -> None:
    await terminals.release_terminal(ReleaseTerminalRequest(**ids(terminal_id)))


async def first_line(terminals: TerminalManager, terminal_id: str) -> str:
    """Wait until the command printed a first line; return it."""
    while "\n" not in (text := (await output(terminals, terminal_id)).output):  # noqa: ASYNC110
        await trio.sleep(0.01)
    return text.split("\n", 1)[0]


# A shell that prints its pid (its process group) and the pid of a
# background child, then waits forever.
GROUP = ["-c", "sleep 3600 & echo $$ $!; wait"]


async def start_group(terminals: TerminalManager) -> tuple[str, int, int]:
    terminal_id = await create(terminals, "sh", *GROUP)
    pgid, child = map(int, (await first_line(terminals, terminal_id)).split())
    assert group_alive(pgid)
    assert process_alive(child)
    return terminal_id, pgid, child


# ----------------------------------------------------------------------
# Approval


@limited
async def test_refused_command_does_not_run(tmp_path: Path) -> None:
    asked: list[CreateTerminalRequest] = []

    async def deny(params: CreateTerminalRequest) -> bool:
        asked.append(params)
        return False

    marker = tmp_path / "ran"
    async with manager(approve=deny) as terminals:
        with pytest.raises(RequestError) as info:
            await create(terminals, "touch", str(marker), cwd=str(tmp_path))
        assert terminals.terminal_ids() == []
    error = info.value
    assert error.code == INVALID
    assert "refused" in error.message
    assert f"touch {marker}" in error.message
    assert error.data == {"reason": "refused", "command": "touch", "args": [str(marker)]}
    assert [p.command for p in asked] == ["touch"]
    assert asked[0].cwd == str(tmp_path)
    assert not marker.exists()


@limited
async def test_only_true_approves() -> None:
    async def truthy(params: CreateTerminalRequest) -> Any:
        return "yes"

    async with manager(approve=truthy) as terminals:
        with pytest.raises(RequestError, match="refused"):
            await create(terminals, "true")


@limited
async def test_approve_may_answer_with_its_own_error() -> None:
    async def policy(params: CreateTerminalRequest) -> bool:
        raise RequestError(-32001, "network commands are disabled", {"policy": "no-net"})

    async with manager(approve=policy) as terminals:
        with pytest.raises(RequestError) as info:
            await create(terminals, "curl", "example.com")
    assert info.value.code == -32001
    assert info.value.data == {"policy": "no-net"}


@limited
async def test_approved_command_runs_with_stdout_and_stderr_together() -> None:
    async with manager() as terminals:
        terminal_id = await create(terminals, "sh", "-c", "echo out; echo err >&2; exit 3")
        status = await wait(terminals, terminal_id)
        assert (status.exit_code, status.signal) == (3, None)
        result = await output(terminals, terminal_id)
        assert result.output == "out\nerr\n"
        assert result.truncated is False
        assert result.exit_status is not None
        assert result.exit_status.exit_code == 3
        await release(terminals, terminal_id)


@limited
async def test_cancelled_while_approving_starts_nothing() -> None:
    approving = trio.Event()

    async def slow(params: CreateTerminalRequest) -> bool:  # never returns
        approving.set()
        await trio.sleep_forever()

    async with manager(approve=slow) as terminals, trio.open_nursery() as nursery:
        nursery.start_soon(create, terminals, "sleep", "3600")
        await approving.wait()
        nursery.cancel_scope.cancel()
    assert terminals.terminal_ids() == []


@limited
async def test_cancelled_while_starting_kills_the_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    started: list[trio.Process] = []
    real_open_process = trio.lowlevel.open_process

    async def recording_open_process(*args: Any, **kwargs: Any) -> trio.Process:
        process = await real_open_process(*args, **kwargs)
        started.append(process)
        return process

    monkeypatch.setattr(trio.lowlevel, "open_process", recording_open_process)
    scope = trio.CancelScope()

    async def approve_then_cancel(params: CreateTerminalRequest) -> bool:
        scope.cancel()  # the request is cancelled as the process starts
        return True

    async with manager(approve=approve_then_cancel) as terminals:
        with scope:
            await create(terminals, "sleep", "3600")
        assert scope.cancelled_caught
        assert terminals.terminal_ids() == []
        (process,) = started
        assert process.returncode is not None
        assert not group_alive(process.pid)


# ----------------------------------------------------------------------
# Spawning details


@limited
async def test_stdin_is_dev_null() -> None:
    async with manager() as terminals:
        terminal_id = await create(terminals, "cat")
        assert (await wait(terminals, terminal_id)).exit_code == 0
        assert (await output(terminals, terminal_id)).output == ""


@limited
async def test_env_and_cwd(real_tmp: Path) -> None:
    async with manager(env={"PATH": os.environ["PATH"], "BASE": "base"}) as terminals:
        terminal_id = await create(
            terminals,
            "sh",
            "-c",
            'echo "$BASE $EXTRA $(pwd)"',
            env=[EnvVariable(name="EXTRA", value="extra")],
            cwd=str(real_tmp),
        )
        await wait(terminals, terminal_id)
        text = (await output(terminals, terminal_id)).output
        assert text == f"base extra {real_tmp}\n"


@limited
async def test_the_program_is_looked_up_in_our_path_not_the_requests(tmp_path: Path) -> None:
    fake = tmp_path / "true"
    fake.write_text(f"#!/bin/sh\ntouch {tmp_path}/pwned\n")
    fake.chmod(0o755)
    async with manager() as terminals:
        terminal_id = await create(
            terminals, "true", env=[EnvVariable(name="PATH", value=str(tmp_path))]
        )
        assert (await wait(terminals, terminal_id)).exit_code == 0
        # The child still sees the PATH it asked for.
        terminal_id = await create(
            terminals,
            "sh",
            "-c",
            'echo "$PATH"',
            env=[EnvVariable(name="PATH", value=str(tmp_path))],
        )
        await wait(terminals, terminal_id)
        assert (await output(terminals, terminal_id)).output == f"{tmp_path}\n"
    assert not (tmp_path / "pwned").exists()


@limited
async def test_no_shell_by_default_and_shell_when_asked() -> None:
    async with manager() as terminals:
        with pytest.raises(RequestError) as info:
            await create(terminals, "echo a | tr a b")
        assert info.value.code == INVALID
        assert "command not found" in info.value.message
    async with manager(shell="/bin/sh") as terminals:
        terminal_id = await create(terminals, "echo a | tr a b")
        await wait(terminals, terminal_id)
        assert (await output(terminals, terminal_id)).output == "b\n"


@limited
async def test_bad_requests_are_refused(tmp_path: Path) -> None:
    async with manager() as terminals:
        cases: list[tuple[dict[str, Any], str]] = [
            ({"cwd": "relative/dir"}, "absolute"),
            ({"cwd": str(tmp_path / "missing")}, "does not exist"),
            ({"output_byte_limit": -1}, "negative"),
            ({"env": [EnvVariable(name="A=B", value="x")]}, "environment"),
        ]
        for fields, reason in cases:
            with pytest.raises(RequestError) as info:
                await create(terminals, "true", **fields)
            assert info.value.code == INVALID
            assert reason in info.value.message
        with pytest.raises(RequestError, match="empty"):
            await create(terminals, "")
        assert terminals.terminal_ids() == []


@limited
async def test_max_terminals() -> None:
    async with manager(max_terminals=2) as terminals:
        first = await create(terminals, "sleep", "3600")
        await create(terminals, "sleep", "3600")
        with pytest.raises(RequestError, match="too many terminals"):
            await create(terminals, "sleep", "3600")
        await release(terminals, first)
        await create(terminals, "sleep", "3600")


# ----------------------------------------------------------------------
# Output


def test_render_output_cuts_on_character_boundaries() -> None:
    euro = "€".encode()  # 3 bytes
    data = b"a" + euro * 3  # 10 bytes
    assert render_output(data, 100, False, True) == ("a€€€", False)
    assert render_output(data, 9, False, True) == ("€€€", True)
    assert render_output(data, 8, False, True) == ("€€", True)  # 2 of 3 bytes dropped
    assert render_output(data, 7, False, True) == ("€€", True)
    assert render_output(data, 2, False, True) == ("", True)
    assert render_output(data, 0, False, True) == ("", True)
    emoji = "😀".encode()  # 4 bytes
    assert render_output(emoji * 2, 7, False, True) == ("😀", True)
    # The buffer was already cut at a byte limit: its front is cleaned too.
    assert render_output(euro[1:] + b"ok", 100, True, True) == ("ok", True)
    # While the command runs, a character still being written is held back.
    assert render_output(b"ok" + euro[:2], 100, False, False) == ("ok", False)
    assert render_output(b"ok" + euro[:2], 100, False, True) == ("ok\ufffd", False)
    assert render_output(b"ok" + euro, 100, False, False) == ("ok€", False)
    # Invalid bytes become U+FFFD, and the result still fits the limit.
    text, truncated = render_output(b"\xff" * 4, 4, False, True)
    assert len(text.encode()) <= 4
    assert truncated
    assert set(text) == {"\ufffd"}


@limited
async def test_output_truncated_from_the_front_on_a_character_boundary() -> None:
    script = "import sys; sys.stdout.write('a' + '€' * 1000 + 'end'); sys.stdout.flush()"
    async with manager() as terminals:
        terminal_id = await create(terminals, PY, "-c", script, output_byte_limit=11)
        await wait(terminals, terminal_id)
        result = await output(terminals, terminal_id)
        # The last 11 bytes are 2/3 of a euro sign, two euro signs, "end":
        # the partial character is dropped.
        assert result.output == "€€end"
        assert result.truncated is True
        assert len(result.output.encode()) <= 11


@limited
async def test_manager_cap_bounds_output_too() -> None:
    async with manager(max_output_bytes=100) as terminals:
        terminal_id = await create(
            terminals, PY, "-c", "print('x' * 10000, end='')", output_byte_limit=1_000_000
        )
        await wait(terminals, terminal_id)
        result = await output(terminals, terminal_id)
        assert result.output == "x" * 100
        assert result.truncated is True


@limited
async def test_output_returns_at_once_while_running() -> None:
    async with manager() as terminals:
        terminal_id = await create(terminals, "sh", "-c", "echo started; sleep 3600")
        assert await first_line(terminals, terminal_id) == "started"
        # It runs for an hour: an answer at all did not wait for the exit.
        result = await output(terminals, terminal_id)
        assert result.exit_status is None
        assert result.output == "started\n"


@limited
async def test_exit_is_reported_while_a_background_child_holds_the_pipe() -> None:
    async with manager() as terminals:
        terminal_id = await create(terminals, "sh", "-c", "sleep 3600 & echo done")
        status = await wait(terminals, terminal_id)
        assert status.exit_code == 0
        assert (await output(terminals, terminal_id)).output == "done\n"


# ----------------------------------------------------------------------
# kill, release, wait


@limited
async def test_kill_keeps_the_id_valid() -> None:
    async with manager() as terminals:
        terminal_id, pgid, child = await start_group(terminals)
        await kill(terminals, terminal_id)
        assert not group_alive(pgid)
        assert not process_alive(child)
        result = await output(terminals, terminal_id)
        assert result.exit_status is not None
        assert result.exit_status.signal == "SIGTERM"
        assert result.exit_status.exit_code is None
        assert result.output.startswith(f"{pgid} {child}\n")
        assert (await wait(terminals, terminal_id)).signal == "SIGTERM"
        await kill(terminals, terminal_id)  # again: nothing to do
        await release(terminals, terminal_id)


@limited
async def test_kill_escalates_to_sigkill() -> None:
    async with manager(terminate_grace=0.2) as terminals:
        # SIG_IGN is inherited: neither the shell nor sleep die on SIGTERM.
        terminal_id = await create(terminals, "sh", "-c", "trap '' TERM; echo $$; sleep 3600")
        pgid = int(await first_line(terminals, terminal_id))
        await kill(terminals, terminal_id)
        assert (await wait(terminals, terminal_id)).signal == "SIGKILL"
        assert not group_alive(pgid)


@limited
async def test_release_kills_and_invalidates() -> None:
    async with manager() as terminals:
        terminal_id, pgid, child = await start_group(terminals)
        await release(terminals, terminal_id)
        assert not group_alive(pgid)
        assert not process_alive(child)
        assert terminals.terminal_ids() == []
        calls = [
            output(terminals, terminal_id),
            wait(terminals, terminal_id),
            kill(terminals, terminal_id),
            release(terminals, terminal_id),
        ]
        for call in calls:
            with pytest.raises(RequestError) as info:
                await call
            assert info.value.code == NOT_FOUND
            assert info.value.message == f"terminal {terminal_id} was released"
            assert info.value.data == {"terminalId": terminal_id, "reason": "released"}


@limited
async def test_release_after_exit_kills_what_the_command_left_behind() -> None:
    async with manager() as terminals:
        terminal_id = await create(terminals, "sh", "-c", "sleep 3600 & echo $$ $!")
        await wait(terminals, terminal_id)
        pgid, child = map(int, (await output(terminals, terminal_id)).output.split())
        assert process_alive(child)
        await release(terminals, terminal_id)
        assert not group_alive(pgid)


@limited
async def test_unknown_ids_and_other_sessions_are_refused() -> None:
    async with manager() as terminals:
        terminal_id = await create(terminals, "sleep", "3600")
        with pytest.raises(RequestError) as info:
            await output(terminals, "term-nope")
        assert info.value.code == NOT_FOUND
        assert info.value.message == "unknown terminal: term-nope"
        # Another session's terminal reads as unknown, and stays alive.
        other = ReleaseTerminalRequest(**ids(terminal_id, session="sess-2"))
        with pytest.raises(RequestError, match="unknown terminal"):
            await terminals.release_terminal(other)
        assert terminals.terminal_ids(SESSION) == [terminal_id]
        assert terminals.terminal_ids("sess-2") == []


@limited
async def test_cancelling_wait_for_exit_does_not_kill() -> None:
    async with manager() as terminals:
        terminal_id, pgid, _child = await start_group(terminals)
        with trio.move_on_after(0.2) as scope:
            await wait(terminals, terminal_id)
        assert scope.cancelled_caught
        await trio.sleep(0.1)
        assert group_alive(pgid)
        assert (await output(terminals, terminal_id)).exit_status is None
        await release(terminals, terminal_id)
        assert not group_alive(pgid)


@limited
async def test_waiters_wake_up_on_release() -> None:
    async with manager() as terminals, trio.open_nursery() as nursery:
        terminal_id = await create(terminals, "sleep", "3600")
        results: list[WaitForTerminalExitResponse] = []

        async def waiter() -> None:
            results.append(await wait(terminals, terminal_id))

        nursery.start_soon(waiter)
        await trio.sleep(0.1)
        await release(terminals, terminal_id)
    assert [r.signal for r in results] == ["SIGTERM"]


@limited
async def test_release_session() -> None:
    async with manager() as terminals:
        _, pgid, _ = await start_group(terminals)
        theirs = await create(terminals, "sleep", "3600", session="sess-2")
        assert await terminals.release_session(SESSION) == 1
        assert not group_alive(pgid)
        assert terminals.terminal_ids() == [theirs]
        assert terminals.output(theirs).exit_status is None


# ----------------------------------------------------------------------
# The manager's lifetime


@limited
async def test_leaving_the_manager_kills_every_group() -> None:
    groups: list[tuple[int, int]] = []
    async with manager() as terminals:
        for _ in range(3):
            _, pgid, child = await start_group(terminals)
            groups.append((pgid, child))
        # One that finished but left a child behind.
        done = await create(terminals, "sh", "-c", "sleep 3600 & echo $$ $!")
        await wait(terminals, done)
        groups.append(tuple(map(int, (await output(terminals, done)).output.split())))  # type: ignore[arg-type]
    for pgid, child in groups:
        assert not group_alive(pgid)
        assert not process_alive(child)
    assert terminals.closed
    for pgid, _ in groups:
        await group_vanishes(pgid)
        with pytest.raises(ProcessLookupError):
            os.killpg(pgid, 0)


@limited
async def test_cancelling_the_manager_kills_every_group() -> None:
    pgids: list[int] = []
    with trio.CancelScope() as scope:
        async with manager() as terminals:
            _, pgid, _ = await start_group(terminals)
            pgids.append(pgid)
            scope.cancel()
            await trio.sleep_forever()
    assert not group_alive(pgids[0])
    await group_vanishes(pgids[0])


@limited
async def test_an_error_in_the_block_kills_every_group() -> None:
    pgids: list[int] = []

    async def fail_inside() -> None:
        async with manager() as terminals:
            _, pgid, _ = await start_group(terminals)
            pgids.append(pgid)
            raise ZeroDivisionError

    # One plain exception comes out, not an ExceptionGroup.
    with pytest.raises(ZeroDivisionError):
        await fail_inside()
    assert not group_alive(pgids[0])


@limited
async def test_shutdown_is_time_bounded_for_stubborn_groups() -> None:
    async with manager(terminate_grace=0.3) as terminals:
        # The whole group ignores SIGTERM (sleep inherits it) for an hour:
        # leaving the block at all, under the test's watchdog, takes SIGKILL.
        terminal_id = await create(terminals, "sh", "-c", "trap '' TERM; echo $$; sleep 3600")
        pgid = int(await first_line(terminals, terminal_id))
    assert not group_alive(pgid)


@limited
async def test_closed_manager_refuses_new_terminals() -> None:
    async with manager() as terminals:
        pass
    with pytest.raises(RequestError, match="closed"):
        await create(terminals, "true")
