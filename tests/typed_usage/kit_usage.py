"""Type-checked by ``make typecheck`` (``mypy --strict``), imported by a
test: a permission broker in a client, approvers of the user's own, a fake
editor and a fake agent scripted as a user writes them, with no cast or
ignore."""

from __future__ import annotations

import acp_trio
from acp_trio import build, schema
from acp_trio.contrib import (
    Approver,
    PendingPermission,
    PermissionBroker,
    PermissionBrokerMixin,
    SessionStates,
    auto_allow,
    policy,
    yes_no,
)
from acp_trio.testing import (
    AskPermission,
    EndTurn,
    FakeAgent,
    FakeCommand,
    FakeEditor,
    FakeTurn,
    SendText,
    StartToolCall,
    Step,
)


async def ask_the_user(request: PendingPermission) -> bool:
    return request.kind == "read"


async def pick(request: PendingPermission) -> schema.PermissionOption | str:
    return request.allow or "reject"


class Editor(PermissionBrokerMixin, acp_trio.Client):
    def __init__(self, yes: bool) -> None:
        self.states = SessionStates()
        approver: Approver = auto_allow if yes else policy(otherwise=yes_no(ask_the_user))
        self.permissions = PermissionBroker(approver, states=self.states)

    async def session_update(self, params: schema.SessionNotification) -> None:
        self.states.apply(params)


class Delegating(acp_trio.Client):
    """Without the mixin: the broker called from the method."""

    def __init__(self) -> None:
        self.broker = PermissionBroker(pick)

    async def request_permission(
        self, params: schema.RequestPermissionRequest
    ) -> schema.RequestPermissionResponse:
        return await self.broker.handle(params)


class Counting:
    """A step of the user's own."""

    async def run(self, turn: FakeTurn) -> int:
        return len(turn.agent.turns)


def fakes() -> tuple[FakeEditor, FakeAgent]:
    editor = FakeEditor(
        {"main.py": "x"},
        permission=pick,
        commands=lambda params: FakeCommand("ok", exit_code=0),
    )
    steps: list[Step] = [
        StartToolCall("c", "Edit", kind="edit", content=[build.diff("/w/a", "b")]),
        AskPermission("c", options=[build.ALLOW_ONCE]),
        Counting(),
        SendText("done"),
        EndTurn("end_turn"),
    ]
    return editor, FakeAgent(steps, capabilities=schema.AgentCapabilities(load_session=True))
