"""The reference scenario agent and its test client, in memory: every command
of the vocabulary (docs/scenario-agent.md), on the autojump clock."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from acp_trio import RequestError
from acp_trio.schema import (
    ClientCapabilities,
    CreateTerminalRequest,
    CreateTerminalResponse,
    FileSystemCapabilities,
    InitializeRequest,
    PromptResponse,
    ReadTextFileRequest,
    ReadTextFileResponse,
    ReleaseTerminalRequest,
    ReleaseTerminalResponse,
    RequestPermissionRequest,
    RequestPermissionResponse,
    SelectedPermissionOutcome,
)
from acp_trio.testing import (
    AgentClientPair,
    ScenarioAgent,
    ScenarioClient,
    open_memory_pair,
)

from .conftest import LIMIT

Pair = AgentClientPair[ScenarioAgent, ScenarioClient]


async def prompt(pair: Pair, session_id: str, text: str) -> PromptResponse:
    return await pair.to_agent.prompt_text(session_id, text)


async def test_initialize_answers_version_1_whatever_is_asked(
    autojump_clock: trio.testing.MockClock,
) -> None:
    with trio.fail_after(LIMIT):
        async with open_memory_pair(initialize=False) as pair:
            result = await pair.to_agent.initialize(InitializeRequest(protocol_version=1))
            assert result.protocol_version == 1
            assert result.agent_info is not None
            assert result.agent_info.name == "acp_trio-scenario-agent"
            assert result.agent_capabilities.load_session is False
            assert result.auth_methods == []
            # Raw, so the client SDK does not refuse the answer: 65535 -> 1.
            raw = await pair.to_agent.connection.call("initialize", {"protocolVersion": 65535})
            assert raw["protocolVersion"] == 1


async def test_sessions_are_unique_and_unknown_methods_get_32601(
    autojump_clock: trio.testing.MockClock,
) -> None:
    with trio.fail_after(LIMIT):
        async with open_memory_pair() as pair:
            ids = {await pair.new_session() for _ in range(3)}
            assert len(ids) == 3
            params = {"sessionId": "scenario-1", "cwd": "/", "mcpServers": []}
            with pytest.raises(RequestError) as info:
                await pair.to_agent.connection.call("session/load", params)
            assert info.value.code == -32601


@pytest.mark.parametrize(
    ("command", "texts"),
    [
        ("echo hello  world ", ["hello  world"]),
        ("  echo x", ["x"]),
        ("stream 3 4", ["0...", "1...", "2..."]),
        ("stream 2", ["0" + "." * 15, "1" + "." * 15]),
        ("stream 12 1", [str(i) for i in range(12)]),
        ("dance", ["unknown command"]),
        ("", ["unknown command"]),
        ("sleep 1500", []),
    ],
)
async def test_commands_that_answer_end_turn(
    command: str, texts: list[str], autojump_clock: trio.testing.MockClock
) -> None:
    with trio.fail_after(LIMIT):
        async with open_memory_pair() as pair:
            session_id = await pair.new_session()
            start = trio.current_time()
            result = await prompt(pair, session_id, command)
            assert result.stop_reason == "end_turn"
            assert pair.client.texts(session_id) == texts
            if command.startswith("sleep"):
                assert trio.current_time() - start == pytest.approx(1.5)


async def test_read_and_write_make_sequential_requests(
    autojump_clock: trio.testing.MockClock,
) -> None:
    with trio.fail_after(LIMIT):
        async with open_memory_pair() as pair:
            session_id = await pair.new_session()
            await prompt(pair, session_id, "read 3 /tmp/notes.txt")
            assert pair.client.texts(session_id) == ["read 3 192"]
            reads = pair.client.received("fs/read_text_file")
            assert [r.path for r in reads] == ["/tmp/notes.txt"] * 3
            result = await prompt(pair, session_id, "write 2 /tmp/out.txt 5")
            assert result.stop_reason == "end_turn"
            writes = pair.client.received("fs/write_text_file")
            assert [(w.path, w.content) for w in writes] == [("/tmp/out.txt", "xxxxx")] * 2


async def test_fail_answers_the_error_asked_for(autojump_clock: trio.testing.MockClock) -> None:
    with trio.fail_after(LIMIT):
        async with open_memory_pair() as pair:
            session_id = await pair.new_session()
            with pytest.raises(RequestError) as info:
                await prompt(pair, session_id, "fail -32002 no such   file")
            assert (info.value.code, info.value.message) == (-32002, "no such   file")
            with pytest.raises(RequestError) as info:
                await prompt(pair, session_id, "fail 7")
            assert info.value.code == 7
            with pytest.raises(RequestError) as info:
                await prompt(pair, session_id, "stream many")
            assert info.value.code == -32602


async def test_wait_for_cancel_ends_cancelled_on_session_cancel(
    autojump_clock: trio.testing.MockClock,
) -> None:
    with trio.fail_after(LIMIT):
        async with open_memory_pair() as pair:
            session_id = await pair.new_session()
            async with trio.open_nursery() as nursery:
                nursery.start_soon(pair.to_agent.cancel, session_id)  # too early: no turn
                await trio.testing.wait_all_tasks_blocked()
                results: list[PromptResponse] = []

                async def run() -> None:
                    results.append(await prompt(pair, session_id, "wait_for_cancel"))

                nursery.start_soon(run)
                await trio.sleep(5)
                assert not results
                await pair.to_agent.cancel(session_id)
            assert results[0].stop_reason == "cancelled"


async def test_nested_is_cancelled_on_the_wire_by_session_cancel(
    autojump_clock: trio.testing.MockClock,
) -> None:
    with trio.fail_after(LIMIT):
        async with open_memory_pair() as pair:
            session_id = await pair.new_session()
            results: list[PromptResponse] = []
            async with trio.open_nursery() as nursery:

                async def run() -> None:
                    results.append(await prompt(pair, session_id, "nested"))

                nursery.start_soon(run)
                for method in (
                    "fs/read_text_file",
                    "terminal/create",
                    "session/request_permission",
                ):
                    await pair.client.wait_for_requests(method)
                (terminal,) = pair.client.received("terminal/create")
                assert (terminal.command, terminal.args) == ("sleep", ["3600"])
                (read,) = pair.client.received("fs/read_text_file")
                assert read.path == "/hold"
                await pair.to_agent.cancel(session_id)
            assert results[0].stop_reason == "cancelled"
            await trio.testing.wait_all_tasks_blocked()
            # Each held request ended by cancellation, none was answered.
            assert sorted(pair.client.cancelled) == [
                "fs/read_text_file",
                "session/request_permission",
                "terminal/create",
            ]
            assert pair.client.texts(session_id) == []
            stats = pair.to_agent.connection.statistics()
            assert (stats.incoming_in_flight, stats.outgoing_pending) == (0, 0)


class AnsweringClient(ScenarioClient):
    """Answers what the scenario client holds."""

    async def read_text_file(self, params: ReadTextFileRequest) -> ReadTextFileResponse:
        self._record("fs/read_text_file", params)
        return ReadTextFileResponse(content="abc")

    async def create_terminal(self, params: CreateTerminalRequest) -> CreateTerminalResponse:
        self._record("terminal/create", params)
        return CreateTerminalResponse(terminal_id="term-7")

    async def request_permission(
        self, params: RequestPermissionRequest
    ) -> RequestPermissionResponse:
        self._record("session/request_permission", params)
        option = params.options[0]
        assert (option.option_id, option.kind) == ("allow", "allow_once")
        return RequestPermissionResponse(outcome=SelectedPermissionOutcome(option_id="allow"))


async def test_nested_answered_reports_each_answer(
    autojump_clock: trio.testing.MockClock,
) -> None:
    with trio.fail_after(LIMIT):
        async with open_memory_pair(client=AnsweringClient()) as pair:
            session_id = await pair.new_session()
            result = await prompt(pair, session_id, "nested")
            assert result.stop_reason == "end_turn"
            assert pair.client.texts(session_id) == [
                "terminal: term-7",
                " permission: selected allow",
                " read: 3 characters",
            ]
            result = await prompt(pair, session_id, "permission")
            assert pair.client.texts(session_id)[-1] == "permission: selected allow"
            result = await prompt(pair, session_id, "deadline 100")
            assert result.stop_reason == "end_turn"
            assert pair.client.texts(session_id)[-1] == "read: 3 characters"


async def test_nested_asks_only_what_the_client_advertised(
    autojump_clock: trio.testing.MockClock,
) -> None:
    caps = ClientCapabilities(fs=FileSystemCapabilities(read_text_file=True))
    init = InitializeRequest(protocol_version=1, client_capabilities=caps)
    with trio.fail_after(LIMIT):
        async with open_memory_pair(client=AnsweringClient(), initialize=init) as pair:
            session_id = await pair.new_session()
            await prompt(pair, session_id, "nested")
            assert pair.client.texts(session_id) == [
                "permission: selected allow",
                " read: 3 characters",
            ]
            assert pair.client.received("terminal/create") == []


async def test_deadline_cancels_the_read_and_answers_32800(
    autojump_clock: trio.testing.MockClock,
) -> None:
    with trio.fail_after(LIMIT):
        async with open_memory_pair() as pair:
            session_id = await pair.new_session()
            start = trio.current_time()
            with pytest.raises(RequestError) as info:
                await prompt(pair, session_id, "deadline 250")
            assert info.value.code == -32800
            assert trio.current_time() - start == pytest.approx(0.25)
            await trio.testing.wait_all_tasks_blocked()
            assert pair.client.cancelled == ["fs/read_text_file"]


async def test_permission_is_cancelled_with_the_turn(
    autojump_clock: trio.testing.MockClock,
) -> None:
    with trio.fail_after(LIMIT):
        async with open_memory_pair() as pair:
            session_id = await pair.new_session()
            results: list[PromptResponse] = []
            async with trio.open_nursery() as nursery:

                async def run() -> None:
                    results.append(await prompt(pair, session_id, "permission"))

                nursery.start_soon(run)
                await pair.client.wait_for_requests("session/request_permission")
                await pair.to_agent.cancel(session_id)
            assert results[0].stop_reason == "cancelled"


class TerminalClient(ScenarioClient):
    """Creates terminals (``term-1``, ``term-2``, ...) and records their
    releases; holds the read and the permission as the scenario client does,
    or answers them (``answer=True``). ``release_answers=False``: it never
    answers ``terminal/release`` either."""

    def __init__(self, *, answer: bool = False, release_answers: bool = True) -> None:
        super().__init__()
        self.answer = answer
        self.release_answers = release_answers
        self.created: list[str] = []
        self.released: list[str] = []

    async def create_terminal(self, params: CreateTerminalRequest) -> CreateTerminalResponse:
        self._record("terminal/create", params)
        self.created.append(f"term-{len(self.created) + 1}")
        return CreateTerminalResponse(terminal_id=self.created[-1])

    async def release_terminal(self, params: ReleaseTerminalRequest) -> ReleaseTerminalResponse:
        self._record("terminal/release", params)
        self.released.append(params.terminal_id)
        if not self.release_answers:
            await self.hold("terminal/release", params)
        return ReleaseTerminalResponse()

    async def read_text_file(self, params: ReadTextFileRequest) -> ReadTextFileResponse:
        if not self.answer:
            return await super().read_text_file(params)
        self._record("fs/read_text_file", params)
        return ReadTextFileResponse(content="abc")

    async def request_permission(
        self, params: RequestPermissionRequest
    ) -> RequestPermissionResponse:
        if not self.answer:
            return await super().request_permission(params)
        self._record("session/request_permission", params)
        return RequestPermissionResponse(outcome=SelectedPermissionOutcome(option_id="allow"))


async def test_nested_releases_its_terminal_when_the_turn_completes(
    autojump_clock: trio.testing.MockClock,
) -> None:
    with trio.fail_after(LIMIT):
        async with open_memory_pair(client=TerminalClient(answer=True)) as pair:
            session_id = await pair.new_session()
            for _ in range(2):
                result = await prompt(pair, session_id, "nested")
                assert result.stop_reason == "end_turn"
            assert pair.client.created == ["term-1", "term-2"]
            assert pair.client.released == pair.client.created
            (first, _) = pair.client.received("terminal/release")
            assert first.session_id == session_id


@pytest.mark.parametrize("how", ["session/cancel", "$/cancel_request"])
async def test_nested_releases_its_terminal_when_the_turn_is_cancelled(
    how: str, autojump_clock: trio.testing.MockClock
) -> None:
    with trio.fail_after(LIMIT):
        async with open_memory_pair(client=TerminalClient()) as pair:
            session_id = await pair.new_session()
            results: list[PromptResponse] = []
            async with trio.open_nursery() as nursery:
                caller = trio.CancelScope()

                async def run() -> None:
                    with caller:
                        results.append(await prompt(pair, session_id, "nested"))

                nursery.start_soon(run)
                for method in ("fs/read_text_file", "session/request_permission"):
                    await pair.client.wait_for_requests(method)
                await trio.testing.wait_all_tasks_blocked()
                assert pair.client.created == ["term-1"]
                assert pair.client.released == []
                if how == "session/cancel":
                    await pair.to_agent.cancel(session_id)
                else:
                    caller.cancel()  # the client SDK sends $/cancel_request
            if how == "session/cancel":
                assert results[0].stop_reason == "cancelled"
                # Released before the turn ended.
                assert pair.client.released == ["term-1"]
            else:
                assert caller.cancelled_caught
            await trio.testing.wait_all_tasks_blocked()
            assert pair.client.released == ["term-1"]
            stats = pair.to_agent.connection.statistics()
            assert (stats.incoming_in_flight, stats.outgoing_pending) == (0, 0)


async def test_a_release_that_is_never_answered_does_not_hold_the_turn(
    autojump_clock: trio.testing.MockClock,
) -> None:
    with trio.fail_after(LIMIT):
        client = TerminalClient(release_answers=False)
        async with open_memory_pair(client=client) as pair:
            session_id = await pair.new_session()
            results: list[PromptResponse] = []
            async with trio.open_nursery() as nursery:

                async def run() -> None:
                    results.append(await prompt(pair, session_id, "nested"))

                nursery.start_soon(run)
                await pair.client.wait_for_requests("session/request_permission")
                await pair.client.wait_for_requests("fs/read_text_file")
                await trio.testing.wait_all_tasks_blocked()
                start = trio.current_time()
                await pair.to_agent.cancel(session_id)
            assert results[0].stop_reason == "cancelled"
            assert pair.client.released == ["term-1"]
            # Given up after the agent's bound, and cancelled on the wire.
            assert trio.current_time() - start == pytest.approx(ScenarioAgent.release_timeout)
            await trio.testing.wait_all_tasks_blocked()
            assert "terminal/release" in pair.client.cancelled


async def test_nested_chunks_read_as_words(autojump_clock: trio.testing.MockClock) -> None:
    """A client shows the chunks of one message joined: they must not glue
    one answer's last word to the next one's first."""
    with trio.fail_after(LIMIT):
        async with open_memory_pair(client=AnsweringClient()) as pair:
            session_id = await pair.new_session()
            await prompt(pair, session_id, "nested")
            assert "".join(pair.client.texts(session_id)) == (
                "terminal: term-7 permission: selected allow read: 3 characters"
            )


class AllowingClient(ScenarioClient):
    """Overrides without calling any private method."""

    def __init__(self) -> None:
        super().__init__()
        self.own_updates = 0

    async def request_permission(
        self, params: RequestPermissionRequest
    ) -> RequestPermissionResponse:
        return RequestPermissionResponse(outcome=SelectedPermissionOutcome(option_id="allow"))

    async def read_text_file(self, params: ReadTextFileRequest) -> ReadTextFileResponse:
        if params.path == "/own":
            return ReadTextFileResponse(content="mine")
        return await super().read_text_file(params)  # recorded once all the same

    async def session_update(self, params: Any) -> None:
        self.own_updates += 1


async def test_a_subclass_override_is_recorded_without_private_calls(
    autojump_clock: trio.testing.MockClock,
) -> None:
    client = AllowingClient()
    with trio.fail_after(LIMIT):
        async with open_memory_pair(client=client) as pair:
            session_id = await pair.new_session()
            async with trio.open_nursery() as nursery:
                results: list[str] = []

                async def run() -> None:
                    results.append((await prompt(pair, session_id, "permission")).stop_reason)

                nursery.start_soon(run)
                (asked,) = await client.wait_for_requests("session/request_permission")
                assert asked.session_id == session_id
            assert results == ["end_turn"]
            assert client.texts(session_id)[-1] == "permission: selected allow"
            await prompt(pair, session_id, "read 2 /own")
            await prompt(pair, session_id, "read 1 /other")
            paths = [p.path for p in client.received("fs/read_text_file")]
            assert paths == ["/own", "/own", "/other"]
    # Its own session_update ran, and the updates were kept as well.
    assert client.own_updates == len(client.updates) > 0
