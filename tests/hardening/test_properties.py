"""Random programs at the typed API level (a Hypothesis property test).

The scenario agent and the scenario client, connected in memory
(``acp_trio.testing.open_memory_pair``), run a random program: prompts of
every scenario command on a few sessions (some under a caller deadline,
which cancels them on the wire), ``session/cancel``, raw
``$/cancel_request`` of live, finished and unknown ids, ``session/close``,
and virtual sleeps. At the end every session is cancelled until every
prompt has returned.

Invariants:

- every prompt returns exactly one allowed outcome, and none hangs;
- on the wire (seen by the client's trace hook), every request either side
  sent got exactly one response, no response answered anything else, and
  no id got two ``$/cancel_request``;
- nothing outlives its request: both connections' statistics are all zero,
  ``request_tree()`` is empty, the typed layers' session registries are
  empty, and the task tree is back to its size before the program;
- memory returns to baseline: the memory traced by ``tracemalloc`` after
  the program is within :data:`MEMORY_TOLERANCE` bytes of its value after a
  warm-up program (caches, converters, dict sizes settle in the warm-up).

The test is sync and calls ``trio.run`` itself (Hypothesis drives it); each
example runs on the autojump clock, so its sleeps are virtual.
"""

from __future__ import annotations

import gc
import json
import tracemalloc
from collections import Counter
from typing import Any

import attrs
import trio
import trio.testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from acp_trio import ConnectionConfig, RequestError
from acp_trio.schema import (
    CloseSessionRequest,
    CloseSessionResponse,
    InitializeRequest,
    InitializeResponse,
    SessionCapabilities,
    SessionCloseCapabilities,
)
from acp_trio.testing import ScenarioAgent, ScenarioClient, open_memory_pair

#: Bytes the traced memory may differ from its warmed-up baseline.
MEMORY_TOLERANCE = 16 * 1024

SESSIONS = 3
#: Command -> what its prompt may end with, besides a caller deadline
#: ("deadline"), a ``session/cancel`` ("cancelled") and ``$/cancel_request``
#: (-32800), which any prompt may meet before it ends.
COMMANDS: dict[str, set[Any]] = {
    "echo hi": {"end_turn"},
    "stream 5": {"end_turn"},
    "sleep 10": {"end_turn"},
    "sleep 500": {"end_turn"},
    "read 2 /f": {"end_turn"},
    "write 2 /f 10": {"end_turn"},
    "fail -32001 boom": {-32001},
    "deadline 50": {-32800},
    # These never end on their own.
    "wait_for_cancel": set(),
    "read 1 /hold": set(),
    "permission": set(),
    "nested": set(),
}
ALWAYS = {"deadline", "cancelled", -32800}

DURATIONS = st.sampled_from([0, 0.001, 0.02, 0.1, 1.0])
op = st.one_of(
    st.tuples(
        st.just("prompt"),
        st.integers(0, SESSIONS - 1),
        st.sampled_from(sorted(COMMANDS)),
        st.one_of(st.none(), DURATIONS),
    ),
    st.tuples(st.just("cancel"), st.integers(0, SESSIONS - 1)),
    st.tuples(st.just("cancel_request"), st.integers(0, 40)),
    st.tuples(st.just("close"), st.integers(0, SESSIONS - 1)),
    st.tuples(st.just("sleep"), DURATIONS),
)
programs = st.lists(op, max_size=40)

WARM_UP: list[tuple[Any, ...]] = [
    *(("prompt", i % SESSIONS, cmd, None) for i, cmd in enumerate(sorted(COMMANDS))),
    ("prompt", 0, "sleep 500", 0.02),
    ("cancel_request", 5),
    ("sleep", 0.1),
    ("cancel", 0),
    ("close", 1),
    ("sleep", 1.0),
]


class ClosingAgent(ScenarioAgent):
    """The scenario agent, advertising and serving ``session/close``."""

    async def initialize(self, params: InitializeRequest) -> InitializeResponse:
        result = await super().initialize(params)
        caps = attrs.evolve(
            result.agent_capabilities,
            session_capabilities=SessionCapabilities(close=SessionCloseCapabilities()),
        )
        return attrs.evolve(result, agent_capabilities=caps)

    async def close_session(self, params: CloseSessionRequest) -> CloseSessionResponse:
        return CloseSessionResponse()


def count_tasks() -> int:
    def walk(task: trio.lowlevel.Task) -> int:
        return 1 + sum(walk(t) for n in task.child_nurseries for t in n.child_tasks)

    root = trio.lowlevel.current_root_task()
    assert root is not None
    return walk(root)


class Wire:
    """Frames the client's connection sent and received (its trace hook)."""

    def __init__(self) -> None:
        self.frames: list[tuple[str, bytes]] = []

    def __call__(self, direction: str, frame: bytes) -> None:
        self.frames.append((direction, frame))

    def check_and_clear(self) -> None:
        """Every request got exactly one response; at most one cancel per id."""
        requests: dict[str, set[Any]] = {"send": set(), "recv": set()}
        responses: dict[str, Counter[Any]] = {"send": Counter(), "recv": Counter()}
        cancels: dict[str, Counter[Any]] = {"send": Counter(), "recv": Counter()}
        for direction, frame in self.frames:
            msg = json.loads(frame)
            if "method" in msg and "id" in msg:
                assert msg["id"] not in requests[direction], msg
                requests[direction].add(msg["id"])
            elif "method" in msg:
                if msg["method"] == "$/cancel_request":
                    cancels[direction][msg["params"]["requestId"]] += 1
            else:
                responses[direction][msg["id"]] += 1
        for asker, answerer in (("send", "recv"), ("recv", "send")):
            assert set(responses[answerer]) == requests[asker]
            assert all(n == 1 for n in responses[answerer].values()), responses[answerer]
            # The client's raw $/cancel_request ops may repeat an id; the
            # SDK's own cancels (the agent's, here) are sent once per id.
        assert all(n == 1 for n in cancels["recv"].values()), cancels["recv"]
        self.frames.clear()


async def run(program: list[tuple[Any, ...]]) -> None:
    wire = Wire()
    agent = ClosingAgent()
    client = ScenarioClient()
    async with open_memory_pair(
        agent,
        client,
        agent_config=ConnectionConfig(),
        client_config=ConnectionConfig(trace=wire),
    ) as pair:
        sessions = [await pair.new_session() for _ in range(SESSIONS)]
        to_agent = pair.to_agent
        agent_conn = pair.to_client.connection
        client_conn = to_agent.connection
        tasks_idle = count_tasks()

        async def play(steps: list[tuple[Any, ...]]) -> None:
            outcomes: list[tuple[str, Any]] = []
            async with trio.open_nursery() as nursery:

                async def prompt(session: str, command: str, deadline: float | None) -> None:
                    outcome: Any = "deadline"
                    with trio.move_on_after(1e9 if deadline is None else deadline):
                        try:
                            result = await to_agent.prompt_text(session, command)
                            outcome = result.stop_reason
                        except RequestError as exc:
                            outcome = exc.code
                    outcomes.append((command, outcome))

                async def close(session: str) -> None:
                    try:
                        await to_agent.close_session(CloseSessionRequest(session_id=session))
                        outcomes.append(("close", "ok"))
                    except RequestError as exc:
                        outcomes.append(("close", exc.code))

                started = 0
                for step in steps:
                    kind = step[0]
                    if kind == "prompt":
                        started += 1
                        nursery.start_soon(prompt, sessions[step[1]], step[2], step[3])
                    elif kind == "cancel":
                        await to_agent.cancel(sessions[step[1]])
                    elif kind == "cancel_request":
                        await client_conn.notify("$/cancel_request", {"requestId": step[1]})
                    elif kind == "close":
                        started += 1
                        nursery.start_soon(close, sessions[step[1]])
                    else:
                        await trio.sleep(step[1])
                # Cancel what never ends on its own, until everything ended
                # (a prompt task may not have sent its request yet).
                with trio.fail_after(600):
                    while len(outcomes) < started:
                        for session in sessions:
                            await to_agent.cancel(session)
                        await trio.sleep(1)
            for command, outcome in outcomes:
                if command == "close":
                    assert outcome in ("ok", -32800), outcome
                else:
                    assert outcome in COMMANDS[command] | ALWAYS, (command, outcome)
            await trio.testing.wait_all_tasks_blocked()

        def assert_nothing_left() -> None:
            for conn in (agent_conn, client_conn):
                stats = conn.statistics()
                assert stats.incoming_in_flight == 0, stats
                assert stats.outgoing_pending == 0, stats
                assert stats.outbox_frames == 0, stats
                assert stats.notifications_queued == 0, stats
                assert stats.read_buffer_bytes == 0, stats
                assert conn.request_tree() == []
            agent_handler: Any = agent_conn.handler
            assert agent_handler._turn_of == {}
            assert agent_handler.turns._scopes == {}
            assert agent_handler._queues == {}
            client_handler: Any = client_conn.handler
            assert client_handler.permissions._scopes == {}
            assert client_handler._permission_requests == {}
            assert client_handler.turns.counts() == {}
            assert to_agent.prompts_in_flight() == {}
            assert count_tasks() == tasks_idle
            wire.check_and_clear()
            client.updates.clear()
            client.requests.clear()
            client.cancelled.clear()

        def traced() -> int:
            gc.collect()
            return tracemalloc.get_traced_memory()[0]

        await play(WARM_UP)
        assert_nothing_left()
        await play(WARM_UP)
        assert_nothing_left()
        baseline = traced()
        await play(program)
        assert_nothing_left()
        growth = traced() - baseline
        assert growth < MEMORY_TOLERANCE, f"memory grew by {growth} bytes"


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(programs)
def test_random_programs_at_the_typed_level(program: list[tuple[Any, ...]]) -> None:
    tracemalloc.start()
    try:
        trio.run(run, program, clock=trio.testing.MockClock(autojump_threshold=0))
    finally:
        tracemalloc.stop()
