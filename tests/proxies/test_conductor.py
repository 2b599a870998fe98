"""The conductor: the scenario agent behind 0, 1 and 2 proxies (real
processes), driven by acp_trio's client; cancellation per hop; a proxy that
crashes mid-turn."""

from __future__ import annotations

import io
import json
import os
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

import acp_trio
from acp_trio._proxy._conductor import serve_conductor
from acp_trio.testing import SCENARIO_AGENT_COMMAND, ScenarioClient

ROOT = Path(__file__).resolve().parents[2]
PROXY = [sys.executable, str(ROOT / "examples" / "proxies" / "logging_proxy.py")]
CRASH = [sys.executable, str(Path(__file__).with_name("crash_proxy.py"))]
LIMIT = 60

pytestmark = pytest.mark.timeout(LIMIT + 30)


async def eventually(condition: Callable[[], bool], seconds: float = 10) -> None:
    """Poll ``condition`` (a watchdog, not a timing assertion)."""
    for _ in range(int(seconds / 0.01)):
        if condition():
            return
        await trio.sleep(0.01)
    raise AssertionError("the condition never held")


@asynccontextmanager
async def chain_of(
    components: list[list[str]], client: acp_trio.Client
) -> AsyncIterator[acp_trio.AgentProxy]:
    left, right = trio.testing.memory_stream_pair()
    async with trio.open_nursery() as nursery:
        await nursery.start(
            lambda task_status: serve_conductor(
                right, components, stderr="capture", task_status=task_status
            )
        )
        async with acp_trio.open_agent(client, left) as agent:
            yield agent
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize("proxies", [0, 1, 2])
async def test_the_scenario_passes_through_the_chain(proxies: int) -> None:
    client = ScenarioClient()
    with trio.fail_after(LIMIT):
        async with chain_of([PROXY] * proxies + [list(SCENARIO_AGENT_COMMAND)], client) as agent:
            init = await agent.initialize(client.initialize_request())
            assert init.protocol_version == 1
            session = (await agent.new_session("/")).session_id
            reply = await agent.prompt_text(session, "echo through the chain")
            assert reply.stop_reason == "end_turn"
            assert "through the chain" in "".join(client.texts(session))

            # session/cancel of a turn waiting on three nested requests: each
            # hop cancels the request it forwarded, on its own connection.
            async with trio.open_nursery() as nursery:
                results: list[Any] = []

                async def run() -> None:
                    results.append(await agent.prompt_text(session, "nested"))

                nursery.start_soon(run)
                await client.wait_for_requests("fs/read_text_file")
                await client.wait_for_requests("terminal/create")
                await client.wait_for_requests("session/request_permission")
                await agent.cancel(session)
            assert results[0].stop_reason == "cancelled"
            # Held read and terminal: cancelled by $/cancel_request on the
            # client's hop (the permission is answered `cancelled` by the SDK).
            await eventually(lambda: len(client.cancelled) == 3)
            assert sorted(client.cancelled) == [
                "fs/read_text_file",
                "session/request_permission",
                "terminal/create",
            ]


class RawClient(acp_trio.lowlevel.Handler):
    def __init__(self) -> None:
        self.cancelled: list[str] = []
        self.arrived: list[str] = []

    async def handle_request(
        self, ctx: acp_trio.lowlevel.RequestContext, method: str, params: Any
    ) -> Any:
        self.arrived.append(method)
        try:
            await trio.sleep_forever()
        finally:
            self.cancelled.append(method)


@pytest.mark.parametrize("proxies", [0, 2])
async def test_cancel_request_of_a_prompt_is_per_hop(proxies: int) -> None:
    left, right = trio.testing.memory_stream_pair()
    handler = RawClient()
    components = [PROXY] * proxies + [list(SCENARIO_AGENT_COMMAND)]
    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            await nursery.start(
                lambda task_status: serve_conductor(
                    right, components, stderr="capture", task_status=task_status
                )
            )
            async with acp_trio.lowlevel.open_connection(left, handler) as conn:
                caps = {"fs": {"readTextFile": True, "writeTextFile": True}, "terminal": True}
                await conn.call("initialize", {"protocolVersion": 1, "clientCapabilities": caps})
                session = (await conn.call("session/new", {"cwd": "/", "mcpServers": []}))[
                    "sessionId"
                ]
                prompt = {"sessionId": session, "prompt": [{"type": "text", "text": "nested"}]}
                async with conn.open_request("session/prompt", prompt) as pending:
                    # All three reach the client (a cancel that overtakes a
                    # request on its way up stops it at that hop instead).
                    await eventually(lambda: len(handler.arrived) == 3)
                    try:
                        outcome: Any = await pending.cancel_and_wait()
                    except acp_trio.RequestError as exc:
                        outcome = exc.code
                assert outcome == -32800 or outcome.get("stopReason") == "cancelled"
                await eventually(lambda: len(handler.cancelled) == 3)
                assert sorted(handler.cancelled) == [
                    "fs/read_text_file",
                    "session/request_permission",
                    "terminal/create",
                ]
            nursery.cancel_scope.cancel()


def assert_gone(pids: list[int]) -> None:
    """No process of the chain is left: each component was reaped, and
    nothing is left in its process group (each leads its own)."""
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
        with pytest.raises(ProcessLookupError):
            os.killpg(pid, 0)


@pytest.mark.parametrize("traced", [True, False], ids=["traced", "untraced"])
@pytest.mark.parametrize("where", ["first proxy, on the prompt", "second proxy, on nested"])
async def test_a_proxy_that_crashes_mid_turn_gives_a_clear_error(where: str, traced: bool) -> None:
    # Untraced, the conductor forwards frame by frame (its fast path);
    # traced, through a handler per request: the same error either way.
    # On the prompt: the first proxy exits as it arrives. On nested: the
    # second exits when the agent's first nested request reaches it, the
    # turn waiting on it (and maybe on requests already at the client).
    if where.startswith("first"):
        components, gone = [CRASH, PROXY, list(SCENARIO_AGENT_COMMAND)], 1
    else:
        crash = [*CRASH, "--on", "terminal/create"]
        components, gone = [PROXY, crash, list(SCENARIO_AGENT_COMMAND)], 2
    client = ScenarioClient()
    trace = io.StringIO()
    with trio.fail_after(LIMIT):
        left, right = trio.testing.memory_stream_pair()
        async with trio.open_nursery() as nursery:
            await nursery.start(
                lambda task_status: serve_conductor(
                    right,
                    components,
                    stderr="capture",
                    trace=trace if traced else None,
                    task_status=task_status,
                )
            )
            async with acp_trio.open_agent(client, left) as agent:
                await agent.initialize(client.initialize_request())
                session = (await agent.new_session("/")).session_id
                with pytest.raises(acp_trio.RequestError) as caught:
                    await agent.prompt_text(session, "nested")
                # The chain stops: the conductor closes the client's connection.
                with trio.fail_after(LIMIT / 2):
                    await agent.connection.wait_closed()
            # serve_conductor returns on its own once the chain is down.
    assert caught.value.code == -32603
    assert f"chain component {gone} is gone" in str(caught.value)
    assert "exit code 7" in str(caught.value)
    if not traced:
        return
    starts = [json.loads(line) for line in trace.getvalue().splitlines()]
    pids = [r["pid"] for r in starts if r.get("event") == "start"]
    assert len(pids) == 3
    assert_gone(pids)


async def test_the_command_line_serves_the_chain_on_stdio() -> None:
    command = [sys.executable, "-m", "acp_trio", "conduct", "--", *PROXY, "--"]
    command += list(SCENARIO_AGENT_COMMAND)
    client = ScenarioClient()
    with trio.fail_after(LIMIT):
        async with acp_trio.open_spawned_agent(client, command, stderr="capture") as agent:
            await agent.initialize(client.initialize_request())
            session = (await agent.new_session("/")).session_id
            reply = await agent.prompt_text(session, "echo over stdio")
    assert reply.stop_reason == "end_turn"
    assert "over stdio" in "".join(client.texts(session))


async def test_the_command_line_refuses_a_chain_without_commands() -> None:
    result = await trio.run_process(
        [sys.executable, "-m", "acp_trio", "conduct", "--"],
        capture_stdout=True,
        capture_stderr=True,
        check=False,
    )
    assert result.returncode == 2
    assert b"give each component's command" in result.stderr


async def test_two_proxies_and_the_scenario_agent_conform_as_one_agent() -> None:
    # Every check of check-agent --strict through the chain: the scenario
    # vocabulary, errors passed back unchanged (-32601, -32602, -32800 of a
    # deadline), session/cancel and $/cancel_request cancelled hop by hop.
    from acp_trio.testing import Verdict, check_agent
    from acp_trio.testing._check._report import Status

    quiet = [*PROXY, "--quiet"]
    command = [sys.executable, "-m", "acp_trio", "conduct", "--", *quiet, "--", *quiet, "--"]
    command += list(SCENARIO_AGENT_COMMAND)
    with trio.fail_after(LIMIT * 2):
        report = await check_agent(command, strict=True, timeout=5.0)
    failed = {r.name: r.reason for r in report.results if r.verdict is not Verdict.PASS}
    assert report.status is Status.CONFORMS, failed


async def test_an_error_of_the_successor_comes_back_unchanged() -> None:
    client = ScenarioClient()
    with trio.fail_after(LIMIT):
        async with chain_of([PROXY, list(SCENARIO_AGENT_COMMAND)], client) as agent:
            await agent.initialize(client.initialize_request())
            session = (await agent.new_session("/")).session_id
            with pytest.raises(acp_trio.RequestError) as caught:
                await agent.prompt_text(session, "fail -32042 made up")
    assert caught.value.code == -32042
    assert caught.value.message == "made up"


EXAMPLES = ROOT / "examples" / "proxies"
CONTEXT = [sys.executable, str(EXAMPLES / "context_proxy.py"), "--context", "CTX"]
POLICY = [sys.executable, str(EXAMPLES / "policy_proxy.py"), "--reject", "edit"]
ECHO_ALL = [sys.executable, str(Path(__file__).with_name("echo_all_agent.py"))]


async def test_a_typed_proxy_changes_the_prompt_and_passes_the_rest() -> None:
    client = ScenarioClient()
    with trio.fail_after(LIMIT):
        async with chain_of([CONTEXT, PROXY, ECHO_ALL], client) as agent:
            await agent.initialize(client.initialize_request())
            session = (await agent.new_session("/")).session_id
            reply = await agent.prompt_text(session, "hello")
    assert reply.stop_reason == "end_turn"
    assert client.texts(session) == ["hello | CTX"]


@pytest.mark.parametrize("refused", [True, False])
async def test_a_typed_proxy_answers_by_policy_or_asks_the_client(refused: bool) -> None:
    # The scenario's `permission` names no tool kind ("other").
    policy = [*POLICY[:-1], "other" if refused else "delete"]
    client = ScenarioClient()
    with trio.fail_after(LIMIT):
        async with chain_of([policy, list(SCENARIO_AGENT_COMMAND)], client) as agent:
            await agent.initialize(client.initialize_request())
            session = (await agent.new_session("/")).session_id
            if refused:
                reply = await agent.prompt_text(session, "permission")
                assert reply.stop_reason == "end_turn"
                assert client.texts(session) == ["permission: selected reject"]
                assert client.received("session/request_permission") == []
                return
            replies: list[Any] = []

            async def ask() -> None:
                replies.append(await agent.prompt_text(session, "permission"))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(ask)
                # Passed on: the client is asked (and holds it until the cancel).
                await client.wait_for_requests("session/request_permission")
                await agent.cancel(session)
    assert replies[0].stop_reason == "cancelled"


@pytest.mark.parametrize("proxy", ["logging", "typed"])
async def test_a_session_cancel_right_after_its_prompt_never_overtakes_it(proxy: str) -> None:
    # Each hop runs a request in a task of its own and notifications in
    # another: without ForwardOrder a session/cancel sent right after its
    # prompt could be passed on first, find no turn, and leave the prompt
    # waiting for ever.
    first = PROXY if proxy == "logging" else CONTEXT
    components = [first, [*PROXY, "--quiet"], list(SCENARIO_AGENT_COMMAND)]
    left, right = trio.testing.memory_stream_pair()
    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            await nursery.start(
                lambda task_status: serve_conductor(
                    right, components, stderr="capture", task_status=task_status
                )
            )
            async with acp_trio.lowlevel.open_connection(left, RawClient()) as conn:
                await conn.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
                new = await conn.call("session/new", {"cwd": "/", "mcpServers": []})
                prompt = {
                    "sessionId": new["sessionId"],
                    "prompt": [{"type": "text", "text": "wait_for_cancel"}],
                }
                for _ in range(10):
                    async with conn.open_request("session/prompt", prompt) as pending:
                        await conn.notify("session/cancel", {"sessionId": new["sessionId"]})
                        with trio.fail_after(LIMIT / 4):
                            assert await pending.result() == {"stopReason": "cancelled"}
            nursery.cancel_scope.cancel()


class _DyingProcess:
    """A component's process that exits (code 7) a moment after its pipe broke."""

    def __init__(self) -> None:
        self.returncode: int | None = None
        self.process = self

    async def wait(self) -> int:
        await trio.sleep(0.5)
        self.returncode = 7
        return 7


async def test_a_component_gone_before_it_is_reaped_is_named_with_its_exit_code(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # The write to a dead proxy can fail (broken pipe) before its process is
    # reaped: the error still names its exit code, once the process reports it.
    from acp_trio._proxy._conductor import _Chain

    chain = _Chain(2)
    chain.processes[1] = _DyingProcess()  # type: ignore[assignment]
    closed = acp_trio.ConnectionClosed("connection lost while writing: BrokenResourceError()")
    error = await chain._gone(1, closed)
    assert error.code == -32603
    assert str(error.message) == (
        "chain component 1 is gone: connection lost while writing: BrokenResourceError() "
        "(exit code 7)"
    )


RAW = [sys.executable, str(Path(__file__).with_name("raw_component.py"))]


class Recorder(acp_trio.lowlevel.Handler):
    def __init__(self) -> None:
        self.notes: list[tuple[str, Any]] = []
        self.asked: list[Any] = []

    async def handle_request(
        self, ctx: acp_trio.lowlevel.RequestContext, method: str, params: Any
    ) -> Any:
        self.asked.append((method, params))
        return {"answer": 42}

    async def handle_notification(self, method: str, params: Any) -> None:
        self.notes.append((method, params))


@pytest.mark.parametrize("traced", [False, True], ids=["untraced", "traced"])
async def test_each_hop_has_its_own_ids_and_cancels_with_them(
    traced: bool, caplog: pytest.LogCaptureFixture
) -> None:
    # A cancelled request is cancelled on the agent's hop with the agent's
    # id, answered -32800 at once, and the agent's late answer is dropped
    # quietly; a request of the agent reaches the client and its answer
    # goes back with the agent's own id. Untraced, the conductor forwards
    # frame by frame (its fast path); traced, a handler per request.
    left, right = trio.testing.memory_stream_pair()
    recorder = Recorder()
    log = io.StringIO() if traced else None
    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            await nursery.start(
                lambda task_status: serve_conductor(
                    right, [RAW], stderr="capture", trace=log, task_status=task_status
                )
            )
            async with acp_trio.lowlevel.open_connection(left, recorder) as conn:
                first = await conn.call("first", {})
                second = await conn.call("second", {})
                assert second["sawId"] != first["sawId"]
                async with conn.open_request("hold", {}) as held:
                    await eventually(lambda: len(recorder.notes) == 1)
                    with pytest.raises(acp_trio.RequestError) as cancelled:
                        await held.cancel_and_wait()
                assert cancelled.value.code == -32800
                await eventually(lambda: len(recorder.notes) == 2)
                (holding, seen), (name, note) = recorder.notes
                assert (holding, name) == ("holding", "cancelled")
                assert note == {"requestId": seen["id"]}
                # The late answer comes before this one, on the same pipe.
                released = await conn.call("release", {})
                assert released["sawId"] != seen["id"]
                await conn.call("shout", {})
                await eventually(lambda: len(recorder.notes) == 3)
                assert recorder.asked == [("ask", {"q": 1})]
                assert recorder.notes[2] == (
                    "heard",
                    {"jsonrpc": "2.0", "id": "up-1", "result": {"answer": 42}},
                )
                assert conn.statistics().incoming_in_flight == 0
            nursery.cancel_scope.cancel()
    dropped = [r for r in caplog.records if "unknown request" in r.getMessage()]
    assert not dropped
