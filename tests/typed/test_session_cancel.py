"""``session/cancel`` and ``session/close`` through the typed APIs: the turn
ends ``stopReason: "cancelled"``, its nested requests are cancelled on the
wire, its updates stay ahead of its answer, and every request is answered
exactly once."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from acp_trio import AgentProxy
from acp_trio.schema import (
    AgentCapabilities,
    CloseSessionRequest,
    CloseSessionResponse,
    CreateTerminalRequest,
    PermissionOption,
    PromptRequest,
    PromptResponse,
    ReadTextFileRequest,
    RequestPermissionOutcomeCancelled,
    RequestPermissionRequest,
    RequestPermissionResponse,
    SelectedPermissionOutcome,
    SessionCapabilities,
    SessionCloseCapabilities,
    ToolCall,
    ToolCallUpdate,
)

from .conftest import (
    CANCELLED_OUTCOME,
    LIMIT,
    NEW_SESSION,
    RecordingClient,
    ScriptedAgent,
    assert_one_response_each,
    error_code,
    limit,
    notif,
    ok,
    open_pair,
    raw_client,
    req,
    settle,
    start_session,
)

#: Nested request kind -> (wire method, client-side event name).
NESTED = {
    "permission": ("session/request_permission", "permission"),
    "read": ("fs/read_text_file", "read"),
    "terminal": ("terminal/create", "terminal"),
}


async def nested_call(agent: ScriptedAgent, sid: str, kind: str) -> Any:
    client = agent.client
    if kind == "permission":
        return await client.request_permission(
            RequestPermissionRequest(
                session_id=sid,
                tool_call=ToolCallUpdate(tool_call_id="t1"),
                options=[PermissionOption(option_id="ok", name="OK", kind="allow_once")],
            )
        )
    if kind == "read":
        return await client.read_text_file(ReadTextFileRequest(session_id=sid, path="/hold"))
    return await client.create_terminal(CreateTerminalRequest(session_id=sid, command="hold"))


def waiting_on(kind: str) -> Any:
    """A prompt script: two updates, then one nested request that the client
    holds open; records how the nested call ended."""

    async def script(agent: ScriptedAgent, params: PromptRequest) -> PromptResponse:
        sid = params.session_id
        await agent.client.send_text(sid, "working")
        await agent.client.session_update(sid, ToolCall(tool_call_id="t1", title="Run"))
        try:
            answer = await nested_call(agent, sid, kind)
        except trio.Cancelled:
            agent.log.append(("nested", "cancelled"))
            raise
        agent.log.append(("nested", answer))
        return PromptResponse(stop_reason="end_turn")

    return script


async def prompt_into(to_agent: AgentProxy, sid: str, out: list[Any], client: Any) -> None:
    """Run a prompt; record its result and how many updates the client had
    handled when it returned."""
    result = await to_agent.prompt_text(sid, "go")
    out.append((result, len(client.updates)))


@pytest.mark.parametrize("kind", list(NESTED))
async def test_cancel_while_waiting_on_a_nested_request(
    kind: str, transport: str, clock: Any
) -> None:
    method, event = NESTED[kind]
    agent = ScriptedAgent(waiting_on(kind))
    client = RecordingClient()
    out: list[Any] = []
    with trio.fail_after(limit(transport)):
        async with open_pair(agent, client, transport) as (to_agent, _, awire, cwire):
            sid = await start_session(to_agent)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(prompt_into, to_agent, sid, out, client)
                await client.event(event).wait()
                await to_agent.cancel(sid)
            # Not an error: the answer is the "cancelled" stop reason, and
            # both updates were handled before prompt() returned.
            assert out == [(PromptResponse(stop_reason="cancelled"), 2)]
            nested_id = awire.request_id(method)
            prompt_id = cwire.request_id("session/prompt")
            # Let late frames (the client's answer to a cancelled request)
            # arrive before looking at the whole wire.
            await cwire.wait_for_response(nested_id)
            assert agent.log[-1] == ("nested", "cancelled")
            assert agent.cancels == [sid]
            assert (event, "cancelled") in client.log

            # The turn's updates reached the client before the prompt's answer.
            received = cwire.received()
            answer_at = next(i for i, m in enumerate(received) if m.get("id") == prompt_id)
            updates = [i for i, m in enumerate(received) if m.get("method") == "session/update"]
            assert len(updates) == 2
            assert max(updates) < answer_at
            assert received[answer_at] == ok(prompt_id, {"stopReason": "cancelled"})

            (reply,) = cwire.sent_responses(nested_id)
            if kind == "permission":
                # The client SDK answered it itself; the agent may also have
                # cancelled it on the wire (at most once).
                assert reply["result"] == CANCELLED_OUTCOME
                assert awire.sent_cancels() in ([], [nested_id])
            else:
                # Its own $/cancel_request, answered -32800 by the client.
                assert awire.sent_cancels() == [nested_id]
                assert error_code(reply) == -32800
            assert cwire.sent_notifications("session/cancel") == [
                notif("session/cancel", {"sessionId": sid})
            ]
            assert cwire.sent_cancels() == []
            assert_one_response_each(awire, cwire)


async def test_cancel_cancels_every_nested_request_at_once(autojump_clock: Any) -> None:
    """A turn waiting on three requests at once: each gets its own
    ``$/cancel_request`` (or, for the permission, the SDK's answer)."""

    async def three(agent: ScriptedAgent, params: PromptRequest) -> PromptResponse:
        async with trio.open_nursery() as nursery:
            for kind in NESTED:
                nursery.start_soon(nested_call, agent, params.session_id, kind)
        return PromptResponse(stop_reason="end_turn")  # pragma: no cover

    agent = ScriptedAgent(three)
    client = RecordingClient()
    out: list[Any] = []
    with trio.fail_after(LIMIT):
        async with open_pair(agent, client) as (to_agent, _, awire, cwire):
            sid = await start_session(to_agent)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(prompt_into, to_agent, sid, out, client)
                for _, event in NESTED.values():
                    await client.event(event).wait()
                await to_agent.cancel(sid)
            await settle()
            assert out == [(PromptResponse(stop_reason="cancelled"), 0)]
            ids = {kind: awire.request_id(method) for kind, (method, _) in NESTED.items()}
            cancels = awire.sent_cancels()
            assert sorted(c for c in cancels if c != ids["permission"]) == sorted(
                [ids["read"], ids["terminal"]]
            )
            assert len(cancels) == len(set(cancels))
            assert cwire.sent_responses(ids["permission"])[0]["result"] == CANCELLED_OUTCOME
            assert error_code(cwire.sent_responses(ids["read"])[0]) == -32800
            assert error_code(cwire.sent_responses(ids["terminal"])[0]) == -32800
            assert_one_response_each(awire, cwire)


async def test_cancel_with_no_running_prompt_does_nothing(autojump_clock: Any) -> None:
    agent = ScriptedAgent()
    client = RecordingClient()
    with trio.fail_after(LIMIT):
        async with open_pair(agent, client) as (to_agent, _, awire, cwire):
            sid = await start_session(to_agent)
            sent_before = len(awire.sent())
            await to_agent.cancel(sid)
            await settle()
            # Only the notification itself crossed the wire.
            assert cwire.sent()[-1] == notif("session/cancel", {"sessionId": sid})
            assert awire.received()[-1] == notif("session/cancel", {"sessionId": sid})
            assert len(awire.sent()) == sent_before
            assert agent.cancels == [sid]
            # And it leaves nothing behind: the next turn runs normally.
            assert await to_agent.prompt_text(sid, "hi") == PromptResponse(stop_reason="end_turn")
            assert client.texts() == ["hello"]
            assert_one_response_each(awire, cwire)


async def test_a_new_prompt_waits_for_the_cancelled_one(autojump_clock: Any) -> None:
    """The first turn takes 5 s to wind down after the cancel; the second
    turn (asked for right after the cancel) is sent, and starts, only once
    it has finished (within the client's grace)."""

    async def script(agent: ScriptedAgent, params: PromptRequest) -> PromptResponse:
        text = params.prompt[0].text  # type: ignore[union-attr]
        agent.log.append((text, "start", trio.current_time()))
        if text == "first":
            try:
                await nested_call(agent, params.session_id, "read")
            finally:
                with trio.CancelScope(shield=True):
                    await trio.sleep(5)
                agent.log.append((text, "wound down", trio.current_time()))
        await agent.client.send_text(params.session_id, f"{text} done")
        return PromptResponse(stop_reason="end_turn")

    agent = ScriptedAgent(script)
    client = RecordingClient()
    results: dict[str, PromptResponse] = {}
    with trio.fail_after(LIMIT):
        async with open_pair(agent, client) as (to_agent, _, awire, cwire):
            sid = await start_session(to_agent)
            to_agent.cancel_grace = 10

            async def run(text: str) -> None:
                results[text] = await to_agent.prompt_text(sid, text)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(run, "first")
                await client.event("read").wait()
                cancelled_at = trio.current_time()
                await to_agent.cancel(sid)
                nursery.start_soon(run, "second")
            assert results == {
                "first": PromptResponse(stop_reason="cancelled"),
                "second": PromptResponse(stop_reason="end_turn"),
            }
            assert agent.log[1:] == [
                ("first", "start", cancelled_at),
                ("first", "wound down", cancelled_at + 5),
                ("second", "start", cancelled_at + 5),
            ]
            assert client.texts() == ["second done"]
            # The first answer is on the wire before anything of the second turn.
            first_id, _second_id = [m["id"] for m in cwire.sent_requests("session/prompt")]
            methods = [(m.get("method"), m.get("id")) for m in awire.sent()]
            assert methods.index((None, first_id)) < methods.index(("session/update", None))
            assert_one_response_each(awire, cwire)


async def test_cancel_of_one_session_leaves_the_other_running(autojump_clock: Any) -> None:
    agent = ScriptedAgent(waiting_on("read"))
    client = RecordingClient()
    results: dict[str, PromptResponse] = {}
    with trio.fail_after(LIMIT):
        async with open_pair(agent, client) as (to_agent, _, awire, _cwire):
            first = await start_session(to_agent)
            second = (await to_agent.new_session(NEW_SESSION)).session_id

            async def run(sid: str) -> None:
                results[sid] = await to_agent.prompt_text(sid, "go")

            async with trio.open_nursery() as nursery:
                nursery.start_soon(run, first)
                nursery.start_soon(run, second)
                await settle()
                assert [e[0] for e in client.log] == ["read", "read"]
                await to_agent.cancel(first)
                await trio.sleep(10)
                assert results == {first: PromptResponse(stop_reason="cancelled")}
                # Exactly one nested read was cancelled on the wire: the first's.
                reads = {m["params"]["sessionId"]: m["id"] for m in awire.sent_requests()}
                assert awire.sent_cancels() == [reads[first]]
                assert client.log.count(("read", "cancelled")) == 1
                assert agent.cancels == [first]
                nursery.cancel_scope.cancel()


async def test_close_session_cancels_the_running_prompt(autojump_clock: Any) -> None:
    caps = AgentCapabilities(
        session_capabilities=SessionCapabilities(close=SessionCloseCapabilities())
    )
    agent = ScriptedAgent(waiting_on("read"), capabilities=caps)
    client = RecordingClient()
    out: list[Any] = []
    with trio.fail_after(LIMIT):
        async with open_pair(agent, client) as (to_agent, _, awire, cwire):
            sid = await start_session(to_agent)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(prompt_into, to_agent, sid, out, client)
                await client.event("read").wait()
                closed = await to_agent.close_session(CloseSessionRequest(session_id=sid))
            await settle()
            assert closed == CloseSessionResponse()
            assert out == [(PromptResponse(stop_reason="cancelled"), 2)]
            assert agent.closed == [sid]
            assert agent.log[-1] == ("nested", "cancelled")
            read_id = awire.request_id("fs/read_text_file")
            assert awire.sent_cancels() == [read_id]
            assert error_code(cwire.sent_responses(read_id)[0]) == -32800
            assert ("read", "cancelled") in client.log
            assert_one_response_each(awire, cwire)


async def test_aborted_library_call_still_ends_cancelled(autojump_clock: Any) -> None:
    """Spec: exceptions raised by library calls aborted by the cancel become
    the ``cancelled`` stop reason, even out of a nursery (an exception group)."""

    async def script(agent: ScriptedAgent, params: PromptRequest) -> PromptResponse:
        async def tool() -> None:
            try:
                await nested_call(agent, params.session_id, "read")
            except trio.Cancelled:
                raise RuntimeError("tool aborted") from None

        async with trio.open_nursery() as nursery:
            nursery.start_soon(tool)
            # The body is waiting too when the cancel comes: the group holds
            # the tool's error and a Cancelled.
            await trio.sleep(1000)
        return PromptResponse(stop_reason="end_turn")  # pragma: no cover

    agent = ScriptedAgent(script)
    client = RecordingClient()
    with trio.fail_after(LIMIT):
        async with open_pair(agent, client) as (to_agent, _, awire, cwire):
            sid = await start_session(to_agent)
            out: list[Any] = []
            async with trio.open_nursery() as nursery:
                nursery.start_soon(prompt_into, to_agent, sid, out, client)
                await client.event("read").wait()
                await to_agent.cancel(sid)
            assert out == [(PromptResponse(stop_reason="cancelled"), 0)]
            await settle()
            assert awire.sent_cancels() == [awire.request_id("fs/read_text_file")]
            assert_one_response_each(awire, cwire)


async def test_prompt_and_cancel_read_in_one_chunk(autojump_clock: Any) -> None:
    """The cancel is read right after the prompt, before the prompt's task
    started: it must still cancel that prompt."""
    agent = ScriptedAgent(waiting_on("read"))
    with trio.fail_after(LIMIT):
        async with raw_client(agent) as (peer, _, _wire):
            caps = {"fs": {"readTextFile": True}}
            await peer.send(
                req(0, "initialize", {"protocolVersion": 1, "clientCapabilities": caps})
            )
            assert (await peer.receive())["id"] == 0
            await peer.send(req(1, "session/new", {"cwd": "/w", "mcpServers": []}))
            assert await peer.receive() == ok(1, {"sessionId": "sess-1"})
            prompt = {"sessionId": "sess-1", "prompt": [{"type": "text", "text": "go"}]}
            await peer.send(
                req(2, "session/prompt", prompt), notif("session/cancel", {"sessionId": "sess-1"})
            )
            answer = await peer.receive(within=60)
            # Nothing of the turn may run after the cancel: at most its first
            # steps, and no nested request left unanswered.
            while answer.get("id") != 2:
                if answer.get("method") == "fs/read_text_file":
                    pytest.fail("the turn went on to make a request after the cancel")
                answer = await peer.receive(within=60)
            assert answer == ok(2, {"stopReason": "cancelled"})
            assert agent.cancels == ["sess-1"]
            # The session is usable afterwards, and a later cancel-free prompt
            # is not affected by the earlier cancel.
            agent.script = lambda a, p: _end_turn_now()
            await peer.send(req(3, "session/prompt", prompt))
            assert await peer.receive() == ok(3, {"stopReason": "end_turn"})


async def _end_turn_now() -> PromptResponse:
    return PromptResponse(stop_reason="end_turn")


async def test_typed_client_cancels_right_after_sending(autojump_clock: Any) -> None:
    """A client that cancels at once (the prompt and the cancel leave in one
    write) gets ``cancelled``, not a finished turn."""

    async def slow(agent: ScriptedAgent, params: PromptRequest) -> PromptResponse:
        await trio.sleep(100)
        return PromptResponse(stop_reason="end_turn")

    agent = ScriptedAgent(slow)
    client = RecordingClient()
    out: list[Any] = []
    with trio.fail_after(LIMIT):
        async with open_pair(agent, client) as (to_agent, _, awire, cwire):
            sid = await start_session(to_agent)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(prompt_into, to_agent, sid, out, client)
                # The prompt is queued (not yet written, most likely): cancel.
                while not to_agent.connection.statistics().outgoing_pending:
                    await trio.lowlevel.checkpoint()
                await to_agent.cancel(sid)
            assert out == [(PromptResponse(stop_reason="cancelled"), 0)]
            assert trio.current_time() < 100
            assert_one_response_each(awire, cwire)


async def test_a_queued_prompt_is_cancelled_too(autojump_clock: Any) -> None:
    """A second prompt sent before the cancel, still waiting for the first
    one, is part of what the cancel ends: it never runs."""
    agent = ScriptedAgent(waiting_on("read"))
    client = RecordingClient()
    results: list[PromptResponse] = []
    with trio.fail_after(LIMIT):
        async with open_pair(agent, client) as (to_agent, _, awire, cwire):
            sid = await start_session(to_agent)

            async def run() -> None:
                results.append(await to_agent.prompt_text(sid, "go"))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(run)
                await client.event("read").wait()
                nursery.start_soon(run)
                await trio.sleep(1)
                await to_agent.cancel(sid)
            await settle()
            assert results == [PromptResponse(stop_reason="cancelled")] * 2
            assert len(agent.prompts) == 1
            assert len(awire.sent_requests("fs/read_text_file")) == 1
            assert_one_response_each(awire, cwire)


async def test_permission_of_the_cancelled_turn_ends_cancelled_in_the_agent(
    autojump_clock: Any,
) -> None:
    """The agent's permission call, pending at the cancel, ends for the
    agent's code (Cancelled, or the ``cancelled`` outcome if the client's
    answer came first); the prompt answer is ``cancelled`` either way."""
    seen: list[Any] = []

    async def script(agent: ScriptedAgent, params: PromptRequest) -> PromptResponse:
        with trio.CancelScope(shield=True):
            # Shielded: the SDK's cancelled outcome reaches the agent's code.
            answer = await nested_call(agent, params.session_id, "permission")
        seen.append(answer.outcome)
        await trio.sleep(1000)
        return PromptResponse(stop_reason="end_turn")  # pragma: no cover

    agent = ScriptedAgent(script)
    client = RecordingClient()
    out: list[Any] = []
    with trio.fail_after(LIMIT):
        async with open_pair(agent, client) as (to_agent, _, awire, cwire):
            sid = await start_session(to_agent)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(prompt_into, to_agent, sid, out, client)
                await client.event("permission").wait()
                await to_agent.cancel(sid)
            assert seen == [RequestPermissionOutcomeCancelled()]
            assert out == [(PromptResponse(stop_reason="cancelled"), 0)]
            assert awire.sent_cancels() == []
            assert_one_response_each(awire, cwire)


async def test_queued_prompts_of_a_session_run_in_arrival_order(autojump_clock: Any) -> None:
    """Three prompts sent while the session's turn runs start, stream and
    are answered in the order they arrived, each turn's update ahead of its
    answer (Trio's scheduler used to wake the waiters in any order)."""
    running, release = trio.Event(), trio.Event()
    started: list[str] = []

    async def script(agent: ScriptedAgent, params: PromptRequest) -> PromptResponse:
        text = params.prompt[0].text  # type: ignore[union-attr]
        started.append(text)
        if text == "running":
            running.set()
            await release.wait()
        await agent.client.send_text(params.session_id, text)
        return PromptResponse(stop_reason="end_turn")

    agent = ScriptedAgent(script)
    client = RecordingClient()
    with trio.fail_after(LIMIT):
        async with open_pair(agent, client) as (to_agent, _, awire, _cwire):
            sid = await start_session(to_agent)
            for round_ in range(100):
                running, release = trio.Event(), trio.Event()
                started.clear()
                awire.frames.clear()
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(to_agent.prompt_text, sid, "running")
                    await running.wait()
                    # At once: they arrive together, in an order the wire shows.
                    for text in ("q0", "q1", "q2"):
                        nursery.start_soon(to_agent.prompt_text, sid, text)
                    await awire.wait_until(lambda: len(prompts_read(awire)) == 4)
                    release.set()
                arrived = prompts_read(awire)
                assert started == [text for _, text in arrived], round_
                # Per turn: its update, then its answer; turn after turn.
                expected: list[Any] = []
                for request_id, text in arrived:
                    expected += [("update", text), ("answer", request_id)]
                assert turn_output(awire) == expected, round_


def prompts_read(wire: Any) -> list[tuple[Any, str]]:
    """``(id, text)`` of the prompts the agent read."""
    return [
        (m["id"], m["params"]["prompt"][0]["text"])
        for d, m in wire.frames
        if d == "recv" and m.get("method") == "session/prompt"
    ]


def turn_output(wire: Any) -> list[tuple[str, Any]]:
    """The agent's updates (by text) and answers (by id), in wire order."""
    out: list[tuple[str, Any]] = []
    for d, m in wire.frames:
        if d != "send":
            continue
        if m.get("method") == "session/update":
            out.append(("update", m["params"]["update"]["content"]["text"]))
        elif "result" in m and "stopReason" in m["result"]:
            out.append(("answer", m["id"]))
    return out


async def test_idle_cancel_right_before_a_prompt_on_a_memory_pair(autojump_clock: Any) -> None:
    """Editors send ``session/cancel`` right before the next prompt, with no
    turn running: it does nothing, and the next turn (sent at once, without
    waiting) ends ``end_turn``, also on a session with a finished turn."""
    from acp_trio.testing import open_memory_pair

    with trio.fail_after(LIMIT):
        async with open_memory_pair(ScriptedAgent(), RecordingClient()) as pair:
            sid = await pair.new_session()
            for _ in range(3):
                await pair.to_agent.cancel(sid)
                result = await pair.to_agent.prompt_text(sid, "hi")
                assert result == PromptResponse(stop_reason="end_turn")
            assert pair.agent.cancels == [sid] * 3
            assert pair.client.texts() == ["hello"] * 3
            # Nor is a permission request of the next turn answered
            # "cancelled" on the client side.
            pair.client.permission = RequestPermissionResponse(
                outcome=SelectedPermissionOutcome(option_id="ok")
            )
            pair.agent.script = asks_permission
            await pair.to_agent.cancel(sid)
            result = await pair.to_agent.prompt_text(sid, "hi")
            assert result == PromptResponse(stop_reason="end_turn")
            assert pair.agent.log[-1] == ("permission", SelectedPermissionOutcome(option_id="ok"))


async def asks_permission(agent: ScriptedAgent, params: PromptRequest) -> PromptResponse:
    answer = await nested_call(agent, params.session_id, "permission")
    agent.log.append(("permission", answer.outcome))
    return PromptResponse(stop_reason="end_turn")


async def test_idle_cancel_and_a_prompt_in_one_chunk(autojump_clock: Any) -> None:
    """The idle cancel and the next prompt read together: the prompt is not
    cancelled by the cancel read before it."""
    agent = ScriptedAgent()
    with trio.fail_after(LIMIT):
        async with raw_client(agent) as (peer, _, _wire):
            await peer.send(req(0, "initialize", {"protocolVersion": 1}))
            assert (await peer.receive())["id"] == 0
            await peer.send(req(1, "session/new", {"cwd": "/w", "mcpServers": []}))
            assert await peer.receive() == ok(1, {"sessionId": "sess-1"})
            prompt = {"sessionId": "sess-1", "prompt": [{"type": "text", "text": "go"}]}
            for request_id in (2, 3):
                await peer.send(
                    notif("session/cancel", {"sessionId": "sess-1"}),
                    req(request_id, "session/prompt", prompt),
                )
                answer = await peer.receive()
                while answer.get("id") != request_id:
                    answer = await peer.receive()
                assert answer == ok(request_id, {"stopReason": "end_turn"})
            assert agent.cancels == ["sess-1", "sess-1"]
