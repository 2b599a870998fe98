"""Interop with the official TypeScript SDK (``@agentclientprotocol/sdk``
2.4.0), both directions, over stdio, cancellation included.

- The acp_trio client (typed API) drives ``ts_agent.mjs``, a scenario agent
  (docs/scenario-agent.md) written with the TS SDK's agent API.
- ``ts_client.mjs``, a scenario client written with the TS SDK's client API,
  drives ``trio_scenario_agent.py``, written with ``acp_trio.run_agent``, and
  prints every event and wire message as one JSON line.

Needs ``node`` and the SDK installed next to this file::

    npm ci --prefix tests/interop
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

import acp_trio
from acp_trio import schema

HERE = Path(__file__).resolve().parent
TS_AGENT = HERE / "ts_agent.mjs"
TS_CLIENT = HERE / "ts_client.mjs"
TRIO_AGENT = HERE / "trio_scenario_agent.py"
SDK_DIR = HERE / "node_modules" / "@agentclientprotocol" / "sdk"
NODE = shutil.which("node")

if NODE is None:
    _skip_reason = "node is not on PATH (the TypeScript interop tests need Node.js >= 20)"
elif not (SDK_DIR / "package.json").is_file():
    _skip_reason = (
        "the TypeScript SDK is not installed in tests/interop/node_modules; "
        "install it with: npm ci --prefix tests/interop"
    )
else:
    _skip_reason = ""

pytestmark = pytest.mark.skipif(bool(_skip_reason), reason=_skip_reason)

CANCEL = acp_trio.lowlevel.CANCEL_REQUEST_METHOD
HELD = {"terminal/create", "session/request_permission", "fs/read_text_file"}


# ---------------------------------------------------------------------------
# Helpers


class Wire:
    """Every frame of one connection, decoded, in order, seen from our side."""

    def __init__(self) -> None:
        self.frames: list[tuple[str, dict[str, Any]]] = []
        self.received = trio.Event()  # replaced after each received frame

    def trace(self, direction: str, frame: bytes) -> None:
        self.frames.append((direction, json.loads(frame)))
        if direction == "recv":
            self.received.set()
            self.received = trio.Event()

    def requests(self, direction: str, method: str | None = None) -> list[dict[str, Any]]:
        return [
            m
            for d, m in self.frames
            if d == direction and "id" in m and "method" in m and method in (None, m["method"])
        ]

    def replies(self, direction: str, request_id: object) -> list[dict[str, Any]]:
        return [
            m
            for d, m in self.frames
            if d == direction and "method" not in m and m.get("id") == request_id
        ]

    def cancels(self, direction: str) -> list[object]:
        return [
            m["params"]["requestId"]
            for d, m in self.frames
            if d == direction and m.get("method") == CANCEL
        ]

    def index(self, direction: str, predicate: Any) -> int:
        for i, (d, m) in enumerate(self.frames):
            if d == direction and predicate(m):
                return i
        raise AssertionError(f"no {direction} frame matches")


def text_of(update: schema.SessionUpdate) -> str | None:
    if isinstance(update, schema.AgentMessageChunk) and isinstance(
        update.content, schema.TextContent
    ):
        return update.content.text
    return None


class ScenarioClient(acp_trio.Client):
    """The matching test client of docs/scenario-agent.md (typed acp_trio API)."""

    def __init__(self) -> None:
        super().__init__()
        self.chunks: list[str] = []
        self.reads = 0
        self.held = 0
        self.held_changed = trio.Event()

    async def session_update(self, params: schema.SessionNotification) -> None:
        text = text_of(params.update)
        if text is not None:
            self.chunks.append(text)

    async def _hold(self) -> Any:
        self.held += 1
        self.held_changed.set()
        self.held_changed = trio.Event()
        await trio.sleep_forever()

    async def wait_held(self, n: int) -> None:
        while self.held < n:
            await self.held_changed.wait()

    async def read_text_file(
        self, params: schema.ReadTextFileRequest
    ) -> schema.ReadTextFileResponse:
        if params.path == "/hold":
            return await self._hold()  # type: ignore[no-any-return]
        self.reads += 1
        return schema.ReadTextFileResponse(content="x" * 64)

    async def write_text_file(
        self, params: schema.WriteTextFileRequest
    ) -> schema.WriteTextFileResponse:
        return schema.WriteTextFileResponse()

    async def create_terminal(
        self, params: schema.CreateTerminalRequest
    ) -> schema.CreateTerminalResponse:
        return await self._hold()  # type: ignore[no-any-return]

    async def request_permission(
        self, params: schema.RequestPermissionRequest
    ) -> schema.RequestPermissionResponse:
        return await self._hold()  # type: ignore[no-any-return]


CAPABILITIES = schema.ClientCapabilities(
    fs=schema.FileSystemCapabilities(read_text_file=True, write_text_file=True), terminal=True
)


class TsAgent:
    def __init__(self, agent: acp_trio.AgentProxy, client: ScenarioClient, wire: Wire) -> None:
        self.agent = agent
        self.client = client
        self.wire = wire
        self.session_id = ""

    async def start(self) -> None:
        init = await self.agent.initialize(
            schema.InitializeRequest(
                protocol_version=1,
                client_capabilities=CAPABILITIES,
                client_info=schema.Implementation(name="acp-trio-interop", version="0"),
            )
        )
        assert init.protocol_version == 1
        assert init.agent_info is not None
        assert init.agent_info.name == "ts-scenario-agent"
        session = await self.agent.new_session(
            schema.NewSessionRequest(cwd=os.getcwd(), mcp_servers=[])
        )
        self.session_id = session.session_id

    async def raw_prompt(self, text: str) -> Any:
        """``session/prompt`` as a plain call: cancelling it sends
        ``$/cancel_request`` (the typed ``prompt()`` sends session/cancel)."""
        params = {"sessionId": self.session_id, "prompt": [{"type": "text", "text": text}]}
        return await self.agent.connection.call("session/prompt", params)

    def last_prompt_id(self) -> object:
        return self.wire.requests("send", "session/prompt")[-1]["id"]

    async def late_reply(self, request_id: object) -> dict[str, Any]:
        """The agent's reply to a request we abandoned (seen by the trace)."""
        while not (replies := self.wire.replies("recv", request_id)):
            await self.wire.received.wait()
        return replies[0]


@asynccontextmanager
async def ts_agent_session() -> AsyncIterator[TsAgent]:
    """The TS agent, initialized, with one session; on exit, checks that every
    request it sent got exactly one reply."""
    wire = Wire()
    client = ScenarioClient()
    config = acp_trio.ConnectionConfig(trace=wire.trace)
    async with acp_trio.open_spawned_agent(
        client, [NODE or "node", str(TS_AGENT)], config=config
    ) as agent:
        ts = TsAgent(agent, client, wire)
        await ts.start()
        yield ts
    check_one_reply_each(wire)


def check_one_reply_each(wire: Wire) -> None:
    """Every request the agent sent us got exactly one reply from us."""
    for req in wire.requests("recv"):
        assert len(wire.replies("send", req["id"])) == 1, req


# ---------------------------------------------------------------------------
# acp_trio client -> TypeScript agent


async def test_ts_agent_echo_stream_read() -> None:
    with trio.fail_after(20):
        async with ts_agent_session() as ts:
            result = await ts.agent.prompt_text(ts.session_id, "echo hello")
            assert result.stop_reason == "end_turn"
            assert ts.client.chunks == ["hello"]

            ts.client.chunks.clear()
            result = await ts.agent.prompt_text(ts.session_id, "stream 100")
            assert result.stop_reason == "end_turn"
            assert ts.client.chunks == [str(i).ljust(16, ".") for i in range(100)]

            ts.client.chunks.clear()
            result = await ts.agent.prompt_text(ts.session_id, "read 3 /tmp/x")
            assert result.stop_reason == "end_turn"
            assert ts.client.reads == 3
            assert ts.client.chunks == ["read 3 192"]
            reads = ts.wire.requests("recv", "fs/read_text_file")
            assert [r["params"]["path"] for r in reads] == ["/tmp/x"] * 3
            assert not ts.wire.cancels("recv")
            assert not ts.wire.cancels("send")


async def test_ts_agent_session_cancel_cancels_nested_on_the_wire() -> None:
    with trio.fail_after(20):
        async with ts_agent_session() as ts:
            async with trio.open_nursery() as nursery:

                async def cancel_when_all_held() -> None:
                    await ts.client.wait_held(3)
                    await ts.agent.cancel(ts.session_id)

                nursery.start_soon(cancel_when_all_held)
                result = await ts.agent.prompt_text(ts.session_id, "nested")
            assert result.stop_reason == "cancelled"

            nested = ts.wire.requests("recv")
            assert {r["method"] for r in nested} == HELD
            assert len(nested) == 3
            cancelled = set(ts.wire.cancels("recv"))
            sent_cancel = ts.wire.index("send", lambda m: m.get("method") == "session/cancel")
            for req in nested:
                (reply,) = ts.wire.replies("send", req["id"])
                if req["method"] == "session/request_permission":
                    # acp_trio answers a cancelled turn's permission request
                    # itself when it sends session/cancel; a $/cancel_request
                    # from the TS agent may or may not follow (it is ignored).
                    assert reply["result"] == {"outcome": {"outcome": "cancelled"}}
                else:
                    # Held by the client: only the agent's cancel ends them.
                    assert req["id"] in cancelled, req
                    assert reply["error"]["code"] == -32800
            # The TS agent's cancels follow our session/cancel, and come
            # before the prompt's answer (it waits for the nested answers).
            prompt_id = ts.last_prompt_id()
            answered = ts.wire.index("recv", lambda m: m.get("id") == prompt_id and "result" in m)
            for rid in cancelled:
                i = ts.wire.index(
                    "recv",
                    lambda m, rid=rid: (
                        m.get("method") == CANCEL and m["params"]["requestId"] == rid
                    ),
                )
                assert sent_cancel < i < answered
            assert not ts.wire.cancels("send")

            # The session still works.
            ts.client.chunks.clear()
            result = await ts.agent.prompt_text(ts.session_id, "echo again")
            assert (result.stop_reason, ts.client.chunks) == ("end_turn", ["again"])


async def test_ts_agent_cancel_request_on_wait_for_cancel() -> None:
    with trio.fail_after(20):
        async with ts_agent_session() as ts:
            with trio.move_on_after(0.3) as scope:
                await ts.raw_prompt("wait_for_cancel")
            assert scope.cancelled_caught
            prompt_id = ts.last_prompt_id()
            # The raw call sent $/cancel_request and did not wait for the answer;
            # the TS agent answers anyway: the SDK aborted ctx.signal and
            # turned the handler's AbortError into -32800.
            reply = await ts.late_reply(prompt_id)
            assert reply["error"]["code"] == -32800, reply
            assert ts.wire.cancels("send") == [prompt_id]

            ts.client.chunks.clear()
            result = await ts.agent.prompt_text(ts.session_id, "echo still here")
            assert (result.stop_reason, ts.client.chunks) == ("end_turn", ["still here"])


async def test_ts_agent_prompt_deadline_sends_session_cancel() -> None:
    """``trio.move_on_after`` around the typed ``prompt()`` of a turn that
    streams until cancelled: ``session/cancel`` goes out from the cancelled
    call (no ``$/cancel_request``), the agent stops streaming and answers
    ``cancelled``, acp_trio consumes that late reply, and the next prompt
    on the session works."""
    with trio.fail_after(20):
        async with ts_agent_session() as ts:
            with trio.move_on_after(0.3) as scope:
                await ts.agent.prompt_text(ts.session_id, "stream 100000000 8")
            assert scope.cancelled_caught
            sent = [m for d, m in ts.wire.frames if d == "send"]
            assert sent[-1] == {
                "jsonrpc": "2.0",
                "method": "session/cancel",
                "params": {"sessionId": ts.session_id},
            }
            prompt_id = ts.last_prompt_id()
            ts.client.chunks.clear()
            result = await ts.agent.prompt_text(ts.session_id, "echo after")
            assert (result.stop_reason, ts.client.chunks[-1:]) == ("end_turn", ["after"])
            (reply,) = ts.wire.replies("recv", prompt_id)
            assert reply["result"] == {"stopReason": "cancelled"}, reply
            assert not ts.wire.cancels("send")
            # The stream stopped: no chunk of it came after the turn's answer.
            answered = ts.wire.index("recv", lambda m: m.get("id") == prompt_id)
            late = [
                m
                for d, m in ts.wire.frames[answered:]
                if d == "recv" and m.get("method") == "session/update"
            ]
            assert [m["params"]["update"]["content"]["text"] for m in late] == ["after"]
            assert ts.agent.prompts_in_flight() == {}


async def test_ts_agent_cancel_request_on_nested_cascades() -> None:
    with trio.fail_after(20):
        async with ts_agent_session() as ts:
            async with trio.open_nursery() as nursery:

                async def prompt() -> None:
                    await ts.raw_prompt("nested")
                    raise AssertionError("the prompt should have been cancelled")

                nursery.start_soon(prompt)
                await ts.client.wait_held(3)
                nursery.cancel_scope.cancel()
            prompt_id = ts.last_prompt_id()
            reply = await ts.late_reply(prompt_id)
            assert reply["error"]["code"] == -32800, reply
            assert ts.wire.cancels("send") == [prompt_id]

            # The TS agent passed ctx.signal on as cancellationSignal: every
            # nested request was cancelled on the wire, and acp_trio answered
            # each -32800 (before the agent answered the prompt).
            nested = ts.wire.requests("recv")
            assert {r["method"] for r in nested} == HELD
            assert set(ts.wire.cancels("recv")) == {r["id"] for r in nested}
            answered = ts.wire.index(
                "recv", lambda m: m.get("id") == prompt_id and "method" not in m
            )
            for req in nested:
                (reply,) = ts.wire.replies("send", req["id"])
                assert reply["error"]["code"] == -32800
                assert ts.wire.index("send", lambda m, r=reply: m is r) < answered


# ---------------------------------------------------------------------------
# TypeScript client -> acp_trio agent


async def run_ts_client(*args: str) -> list[dict[str, Any]]:
    command = [NODE or "node", str(TS_CLIENT), *args, "--", sys.executable, str(TRIO_AGENT)]
    done = await trio.run_process(command, capture_stdout=True, capture_stderr=True, check=False)
    stderr = done.stderr.decode(errors="replace")
    assert done.returncode == 0, stderr
    events = [json.loads(line) for line in done.stdout.decode().splitlines()]
    assert events[-1]["ev"] == "done", stderr
    return events


class Events:
    def __init__(self, events: list[dict[str, Any]]) -> None:
        self.events = events

    def of(self, ev: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["ev"] == ev]

    def wire(self) -> Iterator[tuple[int, str, dict[str, Any]]]:
        for i, e in enumerate(self.events):
            if e["ev"] == "wire":
                yield i, e["dir"], e["msg"]

    def step(self, n: int) -> dict[str, Any]:
        (end,) = [e for e in self.events if e["ev"] in ("result", "error") and e["step"] == n]
        return end

    def first(self, predicate: Any) -> int:
        return next(i for i, d, m in self.wire() if predicate(d, m))


def check_nested_cancelled(
    log: Events, step: int, cancel: str, *, answered_permission: bool = False
) -> None:
    """During the prompt of ``step`` (a ``nested``) the agent's three requests
    reached the TS client; after the cancel (``session/cancel`` or
    ``$/cancel_request``) each one got a ``$/cancel_request`` from the agent
    before the prompt's answer, and exactly one answer from the TS client.

    With ``answered_permission`` the TS client answered the permission request
    ``cancelled`` right after its ``session/cancel``: that answer may reach
    the agent before it cancels the request, and then no cancel is needed."""
    prompts = [
        m["id"] for _, d, m in log.wire() if d == "send" and m.get("method") == "session/prompt"
    ]
    pid = prompts[step]
    start = log.first(lambda d, m: d == "send" and m.get("id") == pid and "method" in m)
    if cancel == "session":
        cancel_at = next(
            i
            for i, d, m in log.wire()
            if i > start and d == "send" and m.get("method") == "session/cancel"
        )
    else:
        cancel_at = log.first(
            lambda d, m: (
                d == "send" and m.get("method") == CANCEL and m["params"]["requestId"] == pid
            )
        )
    end = log.first(lambda d, m: d == "recv" and m.get("id") == pid and "method" not in m)
    nested = [
        m
        for i, d, m in log.wire()
        if start < i < cancel_at and d == "recv" and "method" in m and "id" in m
    ]
    assert sorted(m["method"] for m in nested) == sorted(HELD)
    (hold,) = [m for m in nested if m["method"] == "fs/read_text_file"]
    assert hold["params"]["path"] == "/hold"
    cancels = {
        m["params"]["requestId"]: i
        for i, d, m in log.wire()
        if i > cancel_at and d == "recv" and m.get("method") == CANCEL
    }
    for m in nested:
        replies = [
            r
            for _, d, r in log.wire()
            if d == "send" and r.get("id") == m["id"] and "method" not in r
        ]
        assert len(replies) == 1, m
        if answered_permission and m["method"] == "session/request_permission":
            assert replies[0]["result"] == {"outcome": {"outcome": "cancelled"}}
            if m["id"] not in cancels:
                continue
        assert m["id"] in cancels, m
        assert cancel_at < cancels[m["id"]] < end, m


async def test_ts_client_session_cancel_against_trio_agent() -> None:
    with trio.fail_after(30):
        events = await run_ts_client(
            "--prompt", "echo hello",
            "--prompt", "nested", "--wait-requests", "3", "--cancel-after", "100",
            "--prompt", "nested", "--wait-requests", "3", "--cancel-after", "100",
            "--answer-permissions",
            "--prompt", "echo after",
        )  # fmt: skip
    log = Events(events)
    (init,) = log.of("initialized")
    assert init["result"]["protocolVersion"] == 1
    updates = [e["update"]["content"]["text"] for e in log.of("update")]
    assert updates == ["hello", "after"]
    assert log.step(0)["result"] == {"stopReason": "end_turn"}
    assert log.step(1)["result"] == {"stopReason": "cancelled"}
    assert log.step(2)["result"] == {"stopReason": "cancelled"}
    assert log.step(3)["result"] == {"stopReason": "end_turn"}
    check_nested_cancelled(log, 1, "session")
    check_nested_cancelled(log, 2, "session", answered_permission=True)


async def test_ts_client_cancel_request_against_trio_agent() -> None:
    with trio.fail_after(30):
        events = await run_ts_client(
            "--prompt", "nested", "--wait-requests", "3", "--abort-after", "100",
            "--prompt", "echo after",
        )  # fmt: skip
    log = Events(events)
    # The TS SDK sent $/cancel_request for the prompt (cancellationSignal);
    # acp_trio cancelled the handler, cancelled every nested request on the
    # wire and answered -32800.
    err = log.step(0)
    assert err["ev"] == "error", err
    assert err["code"] == -32800, err
    assert log.step(1)["result"] == {"stopReason": "end_turn"}
    check_nested_cancelled(log, 0, "request")


async def test_check_agent_judges_the_ts_scenario_agent() -> None:
    from acp_trio.testing import Verdict, check_agent

    with trio.fail_after(60):
        report = await check_agent([NODE or "node", str(TS_AGENT)], strict=True)
    verdicts = {result.name: result.verdict for result in report.results}
    # --strict: the recommended and cancellation checks count as required.
    assert report.ok, report.format_table()
    # The TS agent speaks the scenario vocabulary, so the cancellation checks
    # ran (and passed) rather than being skipped.
    for name in ("cancel-request-prompt", "nested-session-cancel", "nested-cancel-request"):
        assert verdicts[name] is Verdict.PASS, report.format_table()
    assert Verdict.SKIP not in verdicts.values(), report.format_table()
