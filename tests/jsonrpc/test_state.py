"""RequestTable and cancel_target: ids, cancels, exactly one reply."""

from __future__ import annotations

from collections.abc import Sized
from typing import Any, cast

import pytest
from budget import examples
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    initialize,
    invariant,
    precondition,
    rule,
)

from acp_trio._exceptions import RequestError
from acp_trio._jsonrpc import (
    IncomingRequest,
    OutgoingRequest,
    Phase,
    RequestTable,
    cancel_target,
)

Table = RequestTable[object, object]


def state(entry: IncomingRequest[object] | OutgoingRequest[object]) -> tuple[Phase, object]:
    """(phase, handle), read through a call so that mypy does not narrow them."""
    return entry.phase, entry.handle


# cancel_target


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"requestId": 1}, (True, 1)),
        ({"requestId": "1"}, (True, "1")),
        ({"requestId": 0}, (True, 0)),
        ({"requestId": None}, (True, None)),
        ({"requestId": "x", "other": 1}, (True, "x")),
        ({}, (False, None)),
        ({"id": 1}, (False, None)),
        ({"requestId": True}, (False, None)),
        ({"requestId": 1.5}, (False, None)),
        ({"requestId": 1.0}, (False, None)),
        ({"requestId": {"id": 1}}, (False, None)),
        ({"requestId": [1]}, (False, None)),
        (None, (False, None)),
        ([1], (False, None)),
        ("1", (False, None)),
        (1, (False, None)),
    ],
)
def test_cancel_target(params: Any, expected: tuple[bool, Any]) -> None:
    result = cancel_target(params)
    assert result == expected
    assert type(result[1]) is type(expected[1])


# Incoming


def test_receive_registers_running_entry() -> None:
    table: Table = RequestTable()
    entry = table.receive_request(1, "session/prompt")
    assert isinstance(entry, IncomingRequest)
    assert (entry.id, entry.method, entry.phase) == (1, "session/prompt", Phase.RUNNING)
    assert entry.cancel_requested is False
    assert entry.handle is None
    assert table.incoming == {1: entry}
    assert len(table) == 1


def test_duplicate_in_flight_id_is_refused_and_first_untouched() -> None:
    table: Table = RequestTable()
    first = table.receive_request(7, "a")
    assert isinstance(first, IncomingRequest)
    first.handle = "scope"
    dup = table.receive_request(7, "b")
    assert isinstance(dup, RequestError)
    assert dup.code == -32600
    assert "7" in str(dup.data)
    assert table.incoming == {7: first}
    assert table.incoming[7] is first
    assert (first.method, first.phase, first.cancel_requested, first.handle) == (
        "a",
        Phase.RUNNING,
        False,
        "scope",
    )
    assert len(table) == 1


def test_duplicate_refused_even_after_cancel() -> None:
    table: Table = RequestTable()
    first = table.receive_request("x", "a")
    assert isinstance(first, IncomingRequest)
    assert table.cancel_incoming("x") is first
    assert isinstance(table.receive_request("x", "b"), RequestError)
    assert table.incoming["x"] is first
    assert first.cancel_requested is True


def test_same_id_allowed_again_after_finish() -> None:
    table: Table = RequestTable()
    first = table.receive_request(3, "a")
    assert isinstance(first, IncomingRequest)
    assert table.finish_incoming(first) is True
    assert table.incoming == {}
    second = table.receive_request(3, "b")
    assert isinstance(second, IncomingRequest)
    assert second is not first
    assert table.incoming == {3: second}
    # Finishing the old entry again must not remove the new one.
    assert table.finish_incoming(first) is False
    assert table.incoming == {3: second}


def test_int_and_str_ids_in_flight_together() -> None:
    table: Table = RequestTable()
    a = table.receive_request(1, "a")
    b = table.receive_request("1", "b")
    c = table.receive_request(None, "c")
    assert isinstance(a, IncomingRequest)
    assert isinstance(b, IncomingRequest)
    assert isinstance(c, IncomingRequest)
    assert len(table) == 3
    assert table.cancel_incoming("1") is b
    assert a.cancel_requested is False
    assert table.cancel_incoming(None) is c
    assert table.cancel_incoming(1) is a


def test_cancel_marks_and_returns_the_entry_once() -> None:
    table: Table = RequestTable()
    entry = table.receive_request(0, "m")
    assert isinstance(entry, IncomingRequest)
    assert table.cancel_incoming(0) is entry
    assert entry.cancel_requested is True
    assert entry.phase is Phase.RUNNING
    assert table.incoming == {0: entry}  # still running until finished
    assert table.cancel_incoming(0) is None  # repeated


@pytest.mark.parametrize("bad", [True, False, 1.0, 0.0, 1.5, {"id": 1}, [1], (1,)])
def test_cancel_with_malformed_id_does_nothing(bad: Any) -> None:
    table: Table = RequestTable()
    one = table.receive_request(1, "m")
    zero = table.receive_request(0, "m")
    assert isinstance(one, IncomingRequest)
    assert isinstance(zero, IncomingRequest)
    assert table.cancel_incoming(bad) is None
    assert one.cancel_requested is False
    assert zero.cancel_requested is False


def test_cancel_unknown_or_finished_does_nothing() -> None:
    table: Table = RequestTable()
    assert table.cancel_incoming(5) is None
    entry = table.receive_request(5, "m")
    assert isinstance(entry, IncomingRequest)
    assert table.cancel_incoming("5") is None
    assert table.finish_incoming(entry) is True
    assert entry.phase is Phase.RESPONDING
    assert table.cancel_incoming(5) is None  # RESPONDING
    table.incoming_done(entry)
    assert state(entry)[0] is Phase.DONE
    assert table.cancel_incoming(5) is None  # DONE
    assert entry.cancel_requested is False


def test_finish_twice_second_is_false() -> None:
    table: Table = RequestTable()
    entry = table.receive_request(1, "m")
    assert isinstance(entry, IncomingRequest)
    entry.handle = "h"
    assert table.finish_incoming(entry) is True
    assert table.finish_incoming(entry) is False
    table.incoming_done(entry)
    assert state(entry) == (Phase.DONE, None)
    assert table.finish_incoming(entry) is False


def test_finish_after_cancel() -> None:
    table: Table = RequestTable()
    entry = table.receive_request(1, "m")
    assert isinstance(entry, IncomingRequest)
    table.cancel_incoming(1)
    assert table.finish_incoming(entry) is True
    assert table.incoming == {}
    assert len(table) == 0


# Outgoing


def test_outgoing_ids_increase() -> None:
    table: Table = RequestTable()
    ids = [table.send_request("m").id for _ in range(5)]
    assert ids == [0, 1, 2, 3, 4]
    other: Table = RequestTable(first_id=100)
    assert [other.send_request("m").id for _ in range(3)] == [100, 101, 102]
    assert len(table) == 5


def test_send_registers_pending_entry() -> None:
    table: Table = RequestTable()
    entry = table.send_request("fs/read_text_file")
    assert isinstance(entry, OutgoingRequest)
    assert (entry.method, entry.phase, entry.cancel_sent, entry.handle) == (
        "fs/read_text_file",
        Phase.RUNNING,
        False,
        None,
    )
    assert table.outgoing == {entry.id: entry}


def test_response_received_pops_the_entry() -> None:
    table: Table = RequestTable()
    a = table.send_request("a")
    b = table.send_request("b")
    assert table.response_received(b.id) is b
    assert b.phase is Phase.DONE
    assert table.outgoing == {a.id: a}
    assert table.response_received(b.id) is None  # second reply
    assert table.is_stale(b.id) is True  # a duplicate reply is dropped quietly
    assert table.is_stale(a.id) is False  # still pending


@pytest.mark.parametrize("bad", ["0", None, True, False, 0.0, 1.0, 2, 99, -1])
def test_response_for_unknown_or_wrong_type_id(bad: Any) -> None:
    table: Table = RequestTable()
    zero = table.send_request("m")
    one = table.send_request("m")
    assert (zero.id, one.id) == (0, 1)
    assert table.response_received(bad) is None
    assert table.is_stale(bad) is False  # never issued: not a late reply
    assert table.outgoing == {0: zero, 1: one}


def test_cancel_outgoing_true_once() -> None:
    table: Table = RequestTable()
    entry = table.send_request("m")
    assert table.cancel_outgoing(entry) is True
    assert entry.cancel_sent is True
    assert entry.phase is Phase.RUNNING
    assert table.cancel_outgoing(entry) is False
    assert table.outgoing == {entry.id: entry}  # still waiting for the reply
    assert table.response_received(entry.id) is entry
    assert table.cancel_outgoing(entry) is False


def test_cancel_outgoing_false_after_response() -> None:
    table: Table = RequestTable()
    entry = table.send_request("m")
    assert table.response_received(entry.id) is entry
    assert table.cancel_outgoing(entry) is False
    assert entry.cancel_sent is False


def test_abandon_then_late_reply() -> None:
    table: Table = RequestTable()
    entry = table.send_request("m")
    entry.handle = "event"
    assert table.is_stale(entry.id) is False
    table.abandon_outgoing(entry)
    assert state(entry) == (Phase.DONE, None)
    assert table.outgoing == {}
    assert len(table) == 0
    assert table.cancel_outgoing(entry) is False
    assert table.response_received(entry.id) is None
    assert table.is_stale(entry.id) is True
    assert table.response_received(entry.id) is None  # a duplicate late reply
    assert table.is_stale(entry.id) is True


def test_abandon_after_response_is_a_no_op() -> None:
    table: Table = RequestTable()
    entry = table.send_request("m")
    assert table.response_received(entry.id) is entry
    table.abandon_outgoing(entry)
    assert entry.phase is Phase.DONE
    assert table.outgoing == {}


def test_abandon_does_not_touch_a_newer_entry() -> None:
    table: Table = RequestTable()
    entry = table.send_request("m")
    table.abandon_outgoing(entry)
    table.abandon_outgoing(entry)  # twice: no-op
    other = table.send_request("m")
    assert table.outgoing == {other.id: other}
    assert other.phase is Phase.RUNNING


@pytest.mark.parametrize("first_id", [0, 1, 1000])
def test_is_stale_only_for_ids_we_issued(first_id: int) -> None:
    table: Table = RequestTable(first_id=first_id)
    a = table.send_request("m")
    b = table.send_request("m")
    assert (a.id, b.id) == (first_id, first_id + 1)
    table.abandon_outgoing(a)
    assert table.is_stale(first_id) is True
    assert table.is_stale(first_id + 1) is False  # pending
    assert table.is_stale(first_id + 2) is False  # not issued yet
    assert table.is_stale(first_id - 1) is False  # below the first id
    assert table.is_stale(str(first_id)) is False
    assert table.is_stale(cast(Any, float(first_id))) is False
    assert table.is_stale(None) is False
    assert table.is_stale(first_id == 1) is False  # True == 1: bools are not ids


def test_abandoning_many_keeps_no_bookkeeping() -> None:
    table: Table = RequestTable()
    entries = [table.send_request("m") for _ in range(10_000)]
    for entry in entries:
        table.abandon_outgoing(entry)
    assert len(table) == 0
    assert table.incoming == {}
    assert table.outgoing == {}
    # Nothing in the table grows with the number of abandoned requests.
    for name in RequestTable.__slots__:
        value = getattr(table, name)
        if isinstance(value, Sized):
            assert len(value) == 0, name
    # Every late reply is still recognised, and only ids we issued are.
    assert all(table.is_stale(entry.id) for entry in entries)
    assert table.is_stale(10_000) is False
    assert table.send_request("m").id == 10_000


# close


def test_close_returns_pending_and_empties_everything() -> None:
    table: Table = RequestTable()
    inc_a = table.receive_request(1, "a")
    inc_b = table.receive_request("b", "b")
    inc_done = table.receive_request(2, "c")
    assert isinstance(inc_a, IncomingRequest)
    assert isinstance(inc_b, IncomingRequest)
    assert isinstance(inc_done, IncomingRequest)
    table.finish_incoming(inc_done)
    out_a = table.send_request("x")
    out_b = table.send_request("y")
    out_replied = table.send_request("z")
    out_abandoned = table.send_request("w")
    table.response_received(out_replied.id)
    table.abandon_outgoing(out_abandoned)

    incoming, outgoing = table.close()
    assert incoming == [inc_a, inc_b]
    assert outgoing == [out_a, out_b]
    assert all(entry.phase is Phase.DONE for entry in outgoing)
    assert table.incoming == {}
    assert table.outgoing == {}
    assert len(table) == 0
    # Replies that arrive after close are for ids we issued: dropped quietly.
    assert table.is_stale(out_abandoned.id) is True
    assert table.is_stale(out_a.id) is True
    # After close, nothing can be cancelled or answered twice.
    assert table.cancel_outgoing(out_a) is False
    assert table.cancel_incoming(1) is None
    assert table.response_received(out_b.id) is None
    # An incoming handler still finishes exactly once.
    assert table.finish_incoming(inc_a) is True
    assert table.finish_incoming(inc_a) is False
    assert table.close() == ([], [])


# Stateful: random sequences of operations against a model

_IN_IDS = st.sampled_from([0, 1, 2, "0", "1", "a", None])
_CANCEL_IDS = st.one_of(_IN_IDS, st.sampled_from([True, False, 1.0, 1.5, "zz", 99]))


class RequestTableMachine(RuleBasedStateMachine):
    incoming_entries = Bundle("incoming_entries")
    outgoing_entries = Bundle("outgoing_entries")

    @initialize()
    def setup(self) -> None:
        self.table: Table = RequestTable()
        # Model of the incoming registry: id -> entry, and per-entry counts.
        self.in_flight: dict[Any, IncomingRequest[object]] = {}
        self.replies: dict[int, int] = {}  # id(entry) -> number of replies produced
        self.cancelled: set[int] = set()  # id(entry) of cancel-marked entries
        # Model of the outgoing side.
        self.pending: dict[int, OutgoingRequest[object]] = {}
        self.cancels_sent: dict[int, int] = {}  # request id -> $/cancel_request count
        self.max_sent = -1
        self.keep: list[object] = []  # keep entries alive so id(entry) stays unique

    # incoming

    @rule(target=incoming_entries, request_id=_IN_IDS, method=st.sampled_from(["a", "b"]))
    def receive_request(self, request_id: Any, method: str) -> Any:
        before = self.in_flight.get(request_id)
        result = self.table.receive_request(request_id, method)
        if before is not None:
            assert isinstance(result, RequestError)
            assert result.code == -32600
            assert self.table.incoming[request_id] is before
            assert before.phase is Phase.RUNNING
            return before
        assert isinstance(result, IncomingRequest)
        assert (result.id, result.method, result.phase) == (request_id, method, Phase.RUNNING)
        self.in_flight[request_id] = result
        self.replies[id(result)] = 0
        self.keep.append(result)
        return result

    @rule(request_id=_CANCEL_IDS)
    def cancel_incoming(self, request_id: Any) -> None:
        valid = request_id is None or type(request_id) in (int, str)
        entry = self.in_flight.get(request_id) if valid else None
        expected = entry if entry is not None and id(entry) not in self.cancelled else None
        got = self.table.cancel_incoming(request_id)
        assert got is expected
        if expected is not None:
            self.cancelled.add(id(expected))
            assert expected.cancel_requested is True

    @rule(entry=incoming_entries)
    def finish_incoming(self, entry: IncomingRequest[object]) -> None:
        already = self.replies[id(entry)] > 0
        ok = self.table.finish_incoming(entry)
        assert ok is (not already)
        if ok:
            self.replies[id(entry)] += 1
            if self.in_flight.get(entry.id) is entry:
                del self.in_flight[entry.id]
            assert entry.phase is Phase.RESPONDING

    @rule(entry=incoming_entries)
    def incoming_done(self, entry: IncomingRequest[object]) -> None:
        if self.replies[id(entry)] == 0:
            return  # only legal once the reply was decided
        self.table.incoming_done(entry)
        assert entry.phase is Phase.DONE

    # outgoing

    @rule(target=outgoing_entries, method=st.sampled_from(["x", "y"]))
    def send_request(self, method: str) -> OutgoingRequest[object]:
        entry = self.table.send_request(method)
        assert entry.id > self.max_sent
        self.max_sent = entry.id
        assert entry.phase is Phase.RUNNING
        self.pending[entry.id] = entry
        self.cancels_sent[entry.id] = 0
        return entry

    @rule(entry=outgoing_entries)
    def cancel_outgoing(self, entry: OutgoingRequest[object]) -> None:
        expected = entry.id in self.pending and self.cancels_sent[entry.id] == 0
        assert self.table.cancel_outgoing(entry) is expected
        if expected:
            self.cancels_sent[entry.id] += 1

    @rule(entry=outgoing_entries)
    def reply_to_known(self, entry: OutgoingRequest[object]) -> None:
        self._reply(entry.id)

    @rule(request_id=st.one_of(st.integers(-2, 60), st.sampled_from(["0", "1", None, True])))
    def reply_to_any(self, request_id: Any) -> None:
        self._reply(request_id)

    def _reply(self, request_id: Any) -> None:
        is_int = type(request_id) is int
        expected = self.pending.pop(request_id, None) if is_int else None
        got = self.table.response_received(request_id)
        assert got is expected
        if got is not None:
            assert got.phase is Phase.DONE
            return
        issued = is_int and 0 <= request_id <= self.max_sent
        assert self.table.is_stale(request_id) is (issued and request_id not in self.pending)

    @rule(entry=consumes(outgoing_entries))
    def abandon_outgoing(self, entry: OutgoingRequest[object]) -> None:
        self.table.abandon_outgoing(entry)
        self.pending.pop(entry.id, None)
        assert entry.phase is Phase.DONE
        assert self.table.is_stale(entry.id) is True

    # both

    @precondition(lambda self: len(self.table) > 0)
    @rule()
    def close(self) -> None:
        incoming, outgoing = self.table.close()
        assert {id(e) for e in incoming} == {id(e) for e in self.in_flight.values()}
        assert len(incoming) == len(self.in_flight)
        assert {e.id: e for e in outgoing} == self.pending
        assert all(e.phase is Phase.DONE for e in outgoing)
        self.in_flight.clear()
        self.pending.clear()

    # invariants

    @invariant()
    def registries_hold_only_running_entries(self) -> None:
        for key, entry in self.table.incoming.items():
            assert entry.phase is Phase.RUNNING
            assert entry.id == key
            assert type(entry.id) is type(key)
        for key, out in self.table.outgoing.items():
            assert out.phase is Phase.RUNNING
            assert out.id == key

    @invariant()
    def registries_match_the_model(self) -> None:
        assert self.table.incoming == self.in_flight
        assert self.table.outgoing == self.pending
        assert len(self.table) == len(self.in_flight) + len(self.pending)

    @invariant()
    def exactly_one_reply_and_one_cancel(self) -> None:
        assert all(n <= 1 for n in self.replies.values())
        assert all(n <= 1 for n in self.cancels_sent.values())


RequestTableMachine.TestCase.settings = settings(
    max_examples=examples(150), stateful_step_count=40, deadline=None
)
TestRequestTable = RequestTableMachine.TestCase
