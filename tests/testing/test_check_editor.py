"""The checking client's editor side (``check-agent``): permission requests
answered by policy, files read and written in the workspace only, terminals
refused unless allowed; driven over a connection, as an agent drives it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import attrs
import pytest
import trio
import trio.testing

from acp_trio import RequestError
from acp_trio.contrib._terminals import open_terminal_manager
from acp_trio.lowlevel import Connection, open_connection
from acp_trio.testing import check_agent
from acp_trio.testing._check import promoted_levels
from acp_trio.testing._check._report import Status
from acp_trio.testing._check._wire import CheckerClient, EditorPolicy, choose_permission

from .conftest import CHECK_TIMEOUT, REAL_LIMIT, agent_command


async def test_an_agent_that_asks_permission_on_every_prompt_passes_the_default_run() -> None:
    with trio.fail_after(REAL_LIMIT):
        report = await check_agent(agent_command("ask_permission"), timeout=CHECK_TIMEOUT)
    assert report.status is Status.CONFORMS, report.format_table()
    assert report["prompt"].passed
    assert report["session-cancel"].passed
    assert not report.required_skips()
    # It does not speak the scenario vocabulary: the cancellation checks
    # could not run, which --strict counts.
    assert attrs.evolve(report, promoted=promoted_levels(True)).status is Status.INCOMPLETE


PERMISSION = {
    "sessionId": "s",
    "toolCall": {"toolCallId": "t"},
    "options": [
        {"optionId": "no", "name": "No", "kind": "reject_once"},
        {"optionId": "yes", "name": "Yes", "kind": "allow_once"},
        {"optionId": "always", "name": "Always", "kind": "allow_always"},
    ],
}


def test_permission_requests_are_answered_by_policy() -> None:
    def chosen(policy: str, params: Any = PERMISSION) -> Any:
        return choose_permission(policy, params)["outcome"]

    assert chosen("allow") == {"outcome": "selected", "optionId": "yes"}
    assert chosen("reject") == {"outcome": "selected", "optionId": "no"}
    assert chosen("cancel") == {"outcome": "cancelled"}
    only_reject = dict(PERMISSION, options=PERMISSION["options"][:1])
    assert chosen("allow", only_reject) == {"outcome": "cancelled"}
    assert chosen("allow", {"options": "junk"}) == {"outcome": "cancelled"}


@asynccontextmanager
async def editor(client: CheckerClient) -> AsyncIterator[Connection]:
    """A connection to ``client``, as the agent under check has one."""
    agent_end, client_end = trio.testing.memory_stream_pair()
    async with open_connection(client_end, client), open_connection(agent_end) as to_editor:
        yield to_editor


async def test_files_come_from_the_workspace_and_terminals_are_refused(tmp_path: Any) -> None:
    workspace = str(tmp_path)
    (tmp_path / "a.txt").write_text("one\ntwo\n")
    client = CheckerClient(EditorPolicy(workspace=workspace))
    with trio.fail_after(REAL_LIMIT):
        async with editor(client) as to_editor:
            read = {"sessionId": "s", "path": f"{workspace}/a.txt"}
            assert await to_editor.call("fs/read_text_file", read) == {"content": "one\ntwo\n"}
            write = {"sessionId": "s", "path": f"{workspace}/b.txt", "content": "hi"}
            assert await to_editor.call("fs/write_text_file", write) in ({}, None)
            assert (tmp_path / "b.txt").read_text() == "hi"
            with pytest.raises(RequestError) as outside:
                await to_editor.call("fs/read_text_file", {"sessionId": "s", "path": "/etc/hosts"})
            assert outside.value.code == -32602
            with pytest.raises(RequestError, match="refuses terminals"):
                await to_editor.call("terminal/create", {"sessionId": "s", "command": "true"})
            with pytest.raises(RequestError) as bad:
                await to_editor.call("fs/read_text_file", {"sessionId": "s"})
            assert bad.value.code == -32602


async def test_terminals_run_in_the_workspace_with_terminals(tmp_path: Any) -> None:
    with trio.fail_after(REAL_LIMIT):
        async with open_terminal_manager(lambda _: _true(), cwd=str(tmp_path)) as terminals:
            client = CheckerClient(EditorPolicy(workspace=str(tmp_path), terminals=True), terminals)
            async with editor(client) as to_editor:
                created = await to_editor.call(
                    "terminal/create", {"sessionId": "s", "command": "pwd", "args": []}
                )
                ids = {"sessionId": "s", "terminalId": created["terminalId"]}
                exited = await to_editor.call("terminal/wait_for_exit", ids)
                assert exited["exitCode"] == 0
                output = await to_editor.call("terminal/output", ids)
                assert output["output"].strip() == str(tmp_path)
                await to_editor.call("terminal/release", ids)


async def _true() -> bool:
    return True
