"""``acp_trio.contrib.PermissionBroker``: each approver, ``session/cancel``
answering every pending request of the session ``cancelled``,
``$/cancel_request`` cancelling the approver (``-32800``), an approver that
raises or picks an option not offered. In memory, autojump clock."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
import trio.testing

import acp_trio
from acp_trio import build, schema
from acp_trio.contrib import (
    Approver,
    PendingPermission,
    PermissionBroker,
    PermissionBrokerMixin,
    SessionStates,
    auto_allow,
    auto_reject,
    policy,
    yes_no,
)
from acp_trio.schema._generated_types import ToolKind
from acp_trio.testing import ScriptedPeer, open_memory_pair, open_scripted_agent

from .conftest import LIMIT

OPTIONS = [
    {"optionId": "always", "name": "Always", "kind": "allow_always"},
    {"optionId": "once", "name": "Once", "kind": "allow_once"},
    {"optionId": "never", "name": "Never", "kind": "reject_always"},
    {"optionId": "no", "name": "No", "kind": "reject_once"},
]


def pending(
    options: list[dict[str, Any]] = OPTIONS, *, kind: str | None = None, title: str = "t"
) -> PendingPermission:
    params = schema.converter.structure(
        {
            "sessionId": "s",
            "toolCall": {"toolCallId": "c", "title": title, **({"kind": kind} if kind else {})},
            "options": options,
        },
        schema.RequestPermissionRequest,
    )
    return PermissionBroker(auto_allow).describe(params)


async def chosen(approver: Approver, request: PendingPermission) -> str:
    choice = await approver(request)
    return choice if isinstance(choice, str) else choice.option_id


class Editor(PermissionBrokerMixin, acp_trio.Client):
    def __init__(self, approver: Approver) -> None:
        self.states = SessionStates()
        self.permissions = PermissionBroker(approver, states=self.states)

    async def session_update(self, params: schema.SessionNotification) -> None:
        self.states.apply(params)


KINDS: dict[str, ToolKind] = {"read": "read", "delete": "delete"}


class AskingAgent(acp_trio.Agent):
    """``ask KIND [by-id]``: announces a tool call of that kind, asks
    permission for its handle (or by its id only), says the option chosen
    (or ``cancelled``)."""

    async def new_session(self, params: schema.NewSessionRequest) -> schema.NewSessionResponse:
        return schema.NewSessionResponse(session_id="s1")

    async def prompt(self, params: schema.PromptRequest) -> schema.PromptResponse:
        sid = params.session_id
        block = params.prompt[0]
        assert isinstance(block, schema.TextContent)
        words = block.text.split()
        kind = KINDS[words[1]]
        async with self.client.tool_call(sid, f"Do {kind}", kind=kind) as call:
            choice = await self.client.ask_permission(sid, call.id if "by-id" in words else call)
        await self.client.send_text(sid, choice.option_id if choice else "cancelled")
        return schema.PromptResponse(stop_reason="end_turn")


async def test_auto_allow_prefers_once_then_always_then_rejects() -> None:
    assert await chosen(auto_allow, pending()) == "once"
    assert await chosen(auto_allow, pending(OPTIONS[:1] + OPTIONS[2:])) == "always"
    assert await chosen(auto_allow, pending(OPTIONS[2:])) == "no"
    assert await chosen(auto_allow, pending(OPTIONS[2:3])) == "never"


async def test_auto_reject_prefers_once_then_always() -> None:
    assert await chosen(auto_reject, pending()) == "no"
    assert await chosen(auto_reject, pending(OPTIONS[:3])) == "never"
    assert await chosen(auto_reject, pending(OPTIONS[:2])) == "always"  # nothing to refuse with


async def test_policy_rejects_first_then_allows_then_asks() -> None:
    asked: list[str] = []

    async def ask(request: PendingPermission) -> str:
        asked.append(request.title)
        return "always"

    approver = policy(
        allow_kinds={"read"},
        allow=lambda r: r.title.startswith("safe"),
        reject=lambda r: "rm" in r.title,
        otherwise=ask,
    )
    assert await chosen(approver, pending(kind="read")) == "once"
    assert await chosen(approver, pending(title="safe thing")) == "once"
    assert await chosen(approver, pending(kind="read", title="rm -rf")) == "no"
    assert await chosen(approver, pending(kind="edit", title="edit")) == "always"
    assert asked == ["edit"]
    assert await chosen(policy(), pending(kind="read")) == "no"


async def test_yes_no_maps_the_answer_to_the_options() -> None:
    async def yes(request: PendingPermission) -> bool:
        return True

    async def no(request: PendingPermission) -> bool:
        return False

    assert await chosen(yes_no(yes), pending()) == "once"
    assert await chosen(yes_no(no), pending()) == "no"


@pytest.mark.parametrize("by", ["handle", "by-id"])
@pytest.mark.parametrize(("kind", "answer"), [("read", "allow"), ("delete", "reject")])
async def test_over_a_connection_the_kind_comes_from_the_request_or_the_session_state(
    autojump_clock: trio.testing.MockClock, kind: str, answer: str, by: str
) -> None:
    seen: list[PendingPermission] = []

    async def ask(request: PendingPermission) -> schema.PermissionOption:
        seen.append(request)
        return await auto_reject(request)

    client = Editor(policy(allow_kinds={"read"}, otherwise=ask))
    with trio.fail_after(LIMIT):
        async with open_memory_pair(AskingAgent, client) as pair:
            sid = await pair.new_session()
            done = await pair.to_agent.prompt_text(sid, f"ask {kind} {by}")
    assert done.stop_reason == "end_turn"
    assert client.states[sid].messages[-1].text == answer
    if kind == "delete":
        assert [(r.title, r.kind) for r in seen] == [("Do delete", "delete")]
        # A handle sends its title and kind; by id only, the broker filled them in.
        sent = (seen[0].params.tool_call.title, seen[0].params.tool_call.kind)
        assert sent == (("Do delete", "delete") if by == "handle" else (None, None))
    assert client.permissions.pending == []


# -- cancellation and errors, against a scripted agent (exact wire answers)


class Waiting:
    """An interactive approver that never answers on its own."""

    def __init__(self) -> None:
        self.asked: list[PendingPermission] = []
        self.cancelled: list[str] = []
        self.changed = trio.Event()

    async def __call__(self, request: PendingPermission) -> str:
        self.asked.append(request)
        self.changed.set()
        self.changed = trio.Event()
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            self.cancelled.append(request.tool_call_id)
            raise

    async def wait_for(self, count: int) -> None:
        while len(self.asked) < count:
            await self.changed.wait()


def ask(peer_id: int, session_id: str, call: str) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": peer_id,
        "method": "session/request_permission",
        "params": {"sessionId": session_id, "toolCall": {"toolCallId": call}, "options": OPTIONS},
    }


@asynccontextmanager
async def scripted(client: acp_trio.Client) -> AsyncIterator[tuple[ScriptedPeer, trio.Nursery]]:
    """``client`` initialized against a scripted agent with sessions s1, s2."""
    async with open_scripted_agent(client) as peer, trio.open_nursery() as nursery:
        nursery.start_soon(client.agent.initialize)
        init = await peer.receive_request("initialize")
        await peer.respond(init["id"], {"protocolVersion": 1, "agentCapabilities": {}})
        await peer.expect_silence(0.1)
        yield peer, nursery
        nursery.cancel_scope.cancel()


def outcome(reply: dict[str, Any]) -> Any:
    return reply["result"]["outcome"] if "result" in reply else reply["error"]


async def test_session_cancel_answers_every_pending_request_of_the_session_cancelled(
    autojump_clock: trio.testing.MockClock,
) -> None:
    waiting = Waiting()
    client = Editor(waiting)
    with trio.fail_after(LIMIT):
        async with scripted(client) as (peer, _):
            await peer.send(ask(101, "s1", "a"), ask(102, "s1", "b"), ask(103, "s2", "c"))
            await waiting.wait_for(3)
            assert sorted(p.tool_call_id for p in client.permissions.pending_for("s1")) == [
                "a",
                "b",
            ]
            await client.agent.cancel("s1")
            assert await peer.receive_request("session/cancel")
            for request_id in (101, 102):
                reply = await peer.receive_response(request_id)
                assert outcome(reply) == {"outcome": "cancelled"}
            assert sorted(waiting.cancelled) == ["a", "b"]
            assert [p.tool_call_id for p in client.permissions.pending] == ["c"]
            await peer.expect_silence(1)  # s2's request is still waiting
            await client.agent.cancel("s2")
            assert outcome(await peer.receive_response(103)) == {"outcome": "cancelled"}
            assert client.permissions.pending == []


async def test_a_cancelled_prompt_cancels_its_pending_requests(
    autojump_clock: trio.testing.MockClock,
) -> None:
    waiting = Waiting()
    client = Editor(waiting)
    with trio.fail_after(LIMIT):
        async with scripted(client) as (peer, nursery):
            turn = trio.CancelScope()

            async def run_turn() -> None:
                with turn:
                    await client.agent.prompt_text("s1", "go")

            nursery.start_soon(run_turn)
            prompt = await peer.receive_request("session/prompt")
            await peer.send(ask(101, "s1", "a"))
            await waiting.wait_for(1)
            turn.cancel()  # a deadline, a scope: session/cancel for the turn
            await peer.receive_request("session/cancel")
            assert outcome(await peer.receive_response(101)) == {"outcome": "cancelled"}
            # Asked while the cancelled turn is unanswered: cancelled at once.
            await peer.send(ask(102, "s1", "b"))
            assert outcome(await peer.receive_response(102)) == {"outcome": "cancelled"}
            assert [p.tool_call_id for p in waiting.asked] == ["a"]
            await peer.respond(prompt["id"], {"stopReason": "cancelled"})
            assert waiting.cancelled == ["a"]


async def test_cancel_request_cancels_the_approver_and_answers_32800(
    autojump_clock: trio.testing.MockClock,
) -> None:
    waiting = Waiting()
    client = Editor(waiting)
    with trio.fail_after(LIMIT):
        async with scripted(client) as (peer, _):
            await peer.send(ask(101, "s1", "a"), ask(102, "s1", "b"))
            await waiting.wait_for(2)
            await peer.cancel_request(101)
            assert outcome(await peer.receive_response(101))["code"] == -32800
            assert waiting.cancelled == ["a"]
            assert [p.tool_call_id for p in client.permissions.pending] == ["b"]
            await peer.expect_silence(1)


async def test_an_approver_that_raises_fails_the_request_not_the_connection(
    autojump_clock: trio.testing.MockClock,
) -> None:
    calls: list[str] = []

    async def broken(request: PendingPermission) -> str:
        calls.append(request.tool_call_id)
        if request.tool_call_id == "a":
            raise ValueError("the dialog crashed")
        if request.tool_call_id == "b":
            raise acp_trio.RequestError(-32001, "not now", {"why": "busy"})
        return "once"

    client = Editor(broken)
    with trio.fail_after(LIMIT):
        async with scripted(client) as (peer, _):
            await peer.send(ask(101, "s1", "a"))
            error = outcome(await peer.receive_response(101))
            assert error["code"] == -32603
            assert error["data"]["reason"] == (
                "the permission approver failed: ValueError: the dialog crashed"
            )
            await peer.send(ask(102, "s1", "b"))
            error = outcome(await peer.receive_response(102))
            assert (error["code"], error["message"], error["data"]) == (
                -32001,
                "not now",
                {"why": "busy"},
            )
            await peer.send(ask(103, "s1", "c"))  # the connection goes on
            assert outcome(await peer.receive_response(103)) == {
                "outcome": "selected",
                "optionId": "once",
            }
    assert calls == ["a", "b", "c"]
    assert client.permissions.pending == []


@pytest.mark.parametrize("bad", ["maybe", build.permission_option("x", "X", "allow_once")])
async def test_an_option_not_offered_is_reported_as_a_bug(
    autojump_clock: trio.testing.MockClock, bad: str | schema.PermissionOption
) -> None:
    async def wrong(request: PendingPermission) -> str | schema.PermissionOption:
        return bad

    client = Editor(wrong)
    with trio.fail_after(LIMIT):
        async with scripted(client) as (peer, _):
            await peer.send(ask(101, "s1", "a"))
            error = outcome(await peer.receive_response(101))
    name = bad if isinstance(bad, str) else bad.option_id
    assert error["code"] == -32603
    assert error["data"]["reason"] == (
        f"the permission approver chose option {name!r}, which was not offered "
        "(offered: ['always', 'once', 'never', 'no'])"
    )
