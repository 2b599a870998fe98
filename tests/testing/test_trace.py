"""``python -m acp_trio trace``: real processes, client <-> trace <-> agent."""

from __future__ import annotations

import datetime
import json
import sys
from pathlib import Path
from typing import Any

import trio

from acp_trio import ConnectionConfig, open_agent
from acp_trio.lowlevel import open_agent_process
from acp_trio.schema import NewSessionRequest, PromptResponse
from acp_trio.testing import SCENARIO_AGENT_COMMAND, ScenarioClient, open_scripted_process

from .conftest import REAL_LIMIT, agent_command


def trace_command(log: Path, agent: list[str] | tuple[str, ...], *options: str) -> list[str]:
    return [sys.executable, "-m", "acp_trio", "trace", "--log", str(log), *options, "--", *agent]


def read_log(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def messages(records: list[dict[str, Any]], direction: str) -> list[Any]:
    return [r.get("message", r.get("raw")) for r in records if r.get("direction") == direction]


async def test_a_session_through_the_proxy_is_logged_message_by_message(tmp_path: Path) -> None:
    log = tmp_path / "trace.jsonl"
    wire: list[tuple[str, Any]] = []
    config = ConnectionConfig(trace=lambda d, frame: wire.append((d, json.loads(frame))))
    client = ScenarioClient()
    with trio.fail_after(REAL_LIMIT):
        async with (
            open_agent_process(
                # The proxy stops its agent before it exits: on a busy machine
                # that can take longer than the default grace (not the test).
                trace_command(log, SCENARIO_AGENT_COMMAND),
                shutdown_grace=30,
            ) as proxy,
            open_agent(client, proxy.stream, config=config) as agent,
        ):
            await agent.initialize(client.initialize_request())
            new = await agent.new_session(NewSessionRequest(cwd="/", mcp_servers=[]))
            session_id = new.session_id
            result = await agent.prompt_text(session_id, "echo through the proxy")
            assert client.texts(session_id) == ["through the proxy"]
            results: list[PromptResponse] = []
            async with trio.open_nursery() as nursery:

                async def nested() -> None:
                    results.append(await agent.prompt_text(session_id, "nested"))

                nursery.start_soon(nested)
                for method in ("fs/read_text_file", "terminal/create"):
                    await client.wait_for_requests(method)
                await agent.cancel(session_id)
            assert results[0].stop_reason == "cancelled"
        assert proxy.returncode == 0
    assert result.stop_reason == "end_turn"

    records = read_log(log)
    assert records[0]["event"] == "start"
    assert records[0]["command"] == list(SCENARIO_AGENT_COMMAND)
    assert records[-1] == {**records[-1], "event": "exit", "code": 0}
    body = records[1:-1]
    assert {r["direction"] for r in body} == {"client->agent", "agent->client"}
    for record in body:
        datetime.datetime.fromisoformat(record["time"].replace("Z", "+00:00"))
    elapsed = [r["elapsed"] for r in records]
    assert elapsed == sorted(elapsed)
    sent = [m for d, m in wire if d == "send"]
    received = [m for d, m in wire if d == "recv"]
    assert messages(body, "client->agent") == sent
    logged = messages(body, "agent->client")
    assert logged[: len(received)] == received
    methods = [m.get("method") for m in logged if isinstance(m, dict)]
    assert methods.count("$/cancel_request") >= 2  # the nested read and terminal


async def test_bytes_pass_unchanged_and_non_json_is_logged_raw(tmp_path: Path) -> None:
    log = tmp_path / "trace.jsonl"
    with trio.fail_after(REAL_LIMIT):
        command = trace_command(log, agent_command("echo_input"))
        async with open_scripted_process(command, receive_timeout=20) as peer:
            await peer.send_bytes(b'{"a":  1}\r\nnot json\n')
            assert await peer.receive_line() == b'{"a":  1}\r'
            assert await peer.receive_line() == b"not json"
            await peer.send_bytes(b'{"last": true}')  # no newline: logged at EOF
            await peer.close_send()
            assert await peer.receive_line() == b'{"last": true}'
            await peer.expect_eof()
            assert peer.process is not None
            assert await peer.process.process.wait() == 0
    records = read_log(log)
    expected = [{"a": 1}, "not json", {"last": True}]
    assert messages(records, "client->agent") == expected
    assert messages(records, "agent->client") == expected
    assert next(r for r in records if r.get("raw"))["raw"] == "not json"


async def test_json_nested_too_deep_to_decode_passes_and_is_logged_raw(tmp_path: Path) -> None:
    """Deeper than ``json.loads`` can go (it used to end the proxy with a
    RecursionError)."""
    log = tmp_path / "trace.jsonl"
    nested = b"[" * 200_000 + b"]" * 200_000
    with trio.fail_after(REAL_LIMIT):
        command = trace_command(log, agent_command("echo_input"))
        async with open_scripted_process(command, receive_timeout=20) as peer:
            await peer.send_bytes(nested + b'\n{"after": 1}\n')
            assert await peer.receive_line() == nested
            assert await peer.receive_line() == b'{"after": 1}'
            await peer.close_send()
            await peer.expect_eof()
    records = read_log(log)
    expected = [nested.decode(), {"after": 1}]
    assert messages(records, "client->agent") == expected
    assert messages(records, "agent->client") == expected


async def test_the_agent_exit_code_and_stderr_pass_through(tmp_path: Path) -> None:
    log = tmp_path / "trace.jsonl"
    with trio.fail_after(REAL_LIMIT):
        result = await trio.run_process(
            trace_command(log, agent_command("exit_at_once")),
            stdin=b"",
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    assert result.returncode == 3
    assert "exit_at_once: no API key configured" in result.stderr.decode()
    assert result.stdout == b""
    assert read_log(log)[-1]["code"] == 3


async def test_a_client_that_leaves_ends_a_stuck_agent(tmp_path: Path) -> None:
    log = tmp_path / "trace.jsonl"
    with trio.fail_after(REAL_LIMIT):
        result = await trio.run_process(
            trace_command(log, agent_command("hang"), "--grace", "0.2"),
            stdin=b"",
            capture_stderr=True,
            check=False,
        )
    assert result.returncode == 128 + 15  # SIGTERM, after the grace period
    assert read_log(log)[-1] == {**read_log(log)[-1], "event": "exit", "code": 143}


async def test_an_agent_that_cannot_start(tmp_path: Path) -> None:
    log = tmp_path / "trace.jsonl"
    with trio.fail_after(REAL_LIMIT):
        result = await trio.run_process(
            trace_command(log, ["/nonexistent/agent"]),
            stdin=b"",
            capture_stderr=True,
            check=False,
        )
    assert result.returncode == 127
    assert "cannot start" in result.stderr.decode()
