"""The client side of a prompt turn, as one small state machine.

A turn is one ``session/prompt`` sent. It ends once, in one of three ways:
the agent answers it, the connection closes first, or (after a cancel the
agent ignores) the client abandons it. A cancel climbs a ladder, each rung
bounded in time::

    SENT ─────────────── answer ──────────────────────────▶ ANSWERED
      │ session/cancel (cancel_turn, cancel, a cancelled prompt())
      ▼
    CANCELLING ───────── answer ──▶ ANSWERED  (outcome "answered")
      │ cancel_grace passes: $/cancel_request for the prompt
      ▼
    ESCALATED ────────── answer ──▶ ANSWERED  (outcome "escalated")
      │ escalation_grace passes
      ▼
    ABANDONED  (outcome "abandoned": the late answer is dropped and the
                session is free; or, by the abandon policy, the connection
                is closed or the agent's process stopped)

    any state before an end ── the connection closes ──▶ CLOSED

:class:`ClientTurn` is one turn and owns its state; the ladder's timer is a
task of the connection's own (so it runs whoever waits, or nobody).
:class:`TurnBook` is a proxy's turns by session: which are in flight, the
prompts waiting behind a cancelled turn, and what a cancel of a session
does to both. Nothing here touches another session.
"""

from __future__ import annotations

import enum
import logging
import math
from collections.abc import Callable
from contextlib import suppress
from typing import Any, Final, Literal

import attrs
import trio

from acp_trio._core._connection import Connection
from acp_trio._core._requests import PendingRequest
from acp_trio._exceptions import (
    ACPError,
    ConnectionClosed,
    PromptNotSent,
    RemoteProtocolError,
    TurnNotAnswered,
)
from acp_trio.schema import PromptResponse, StopReason

__all__ = ["AbandonPolicy", "CancelOutcome", "ClientTurn", "TurnBook"]

_log = logging.getLogger("acp_trio.client")

#: What the client does once it abandons a cancelled turn: keep the
#: connection and free the session for its next prompt (the late answer is
#: dropped), close the connection, or stop the spawned agent's process.
AbandonPolicy = Literal["free_session", "close_connection", "stop_process"]
ABANDON_POLICIES: Final = ("free_session", "close_connection", "stop_process")


@attrs.frozen
class CancelOutcome:
    """How a cancelled turn ended, as :meth:`AgentProxy.cancel_turn` returns it.

    ``how``:

    - ``"idle"``: no turn was running on the session; nothing was sent;
    - ``"answered"``: the agent answered within ``cancel_grace`` of
      ``session/cancel`` (``stop_reason == "cancelled"`` from an agent that
      follows ACP; another stop reason if the turn had ended anyway);
    - ``"escalated"``: it did not, so ``$/cancel_request`` was sent for the
      prompt, and the agent answered that (``error`` is then usually the
      ``-32800`` error) within ``escalation_grace``;
    - ``"abandoned"``: no answer to either: the client stopped waiting, and
      a late answer is dropped (logged). What else happened follows the
      abandon policy (``policy``): the session was freed for its next
      prompt, the connection closed, or the agent's process stopped.

    ``response`` is the agent's answer when it was a result, ``error`` when
    it was an error (a :class:`RequestError`, or a
    :class:`RemoteProtocolError` for an answer that was not a valid
    ``PromptResponse``). ``request_id`` is the turn's ``session/prompt``.
    """

    session_id: str
    how: Literal["idle", "answered", "escalated", "abandoned"]
    response: PromptResponse | None = None
    error: ACPError | None = None
    request_id: int | None = None
    policy: AbandonPolicy | None = None

    @property
    def stop_reason(self) -> StopReason | None:
        """The answer's stop reason, if the agent answered with a result."""
        return None if self.response is None else self.response.stop_reason


class TurnState(enum.Enum):
    """Where a turn is, from the client's side."""

    SENT = "sent"
    CANCELLING = "cancelling"
    ESCALATED = "escalated"
    ANSWERED = "answered"
    ABANDONED = "abandoned"
    CLOSED = "closed"


_IN_FLIGHT: Final = frozenset({TurnState.SENT, TurnState.CANCELLING, TurnState.ESCALATED})
_ON_THE_LADDER: Final = frozenset({TurnState.CANCELLING, TurnState.ESCALATED})


class ClientTurn:
    """One ``session/prompt`` sent, from the client's side, until it ends.

    Its state changes only here: :meth:`cancel` (from the book), the
    answer (a done callback of the request, whatever task waits), and the
    ladder task at each rung's deadline.
    """

    __slots__ = (
        "_book",
        "_cancelled_at",
        "_deadline",
        "_wake",
        "closed_by_policy",
        "ended",
        "outcome",
        "pending",
        "session_id",
        "state",
    )

    def __init__(self, book: TurnBook, session_id: str, pending: PendingRequest) -> None:
        self._book = book
        self.session_id = session_id
        self.pending = pending
        self.state = TurnState.SENT
        #: Set once the turn has ended (answered, abandoned or closed).
        self.ended = trio.Event()
        #: How it ended (once it has, and was cancelled or answered).
        self.outcome: CancelOutcome | None = None
        #: The abandon policy ended the connection or the process.
        self.closed_by_policy = False
        self._cancelled_at = math.inf
        # The time of the next rung: $/cancel_request, then abandonment.
        self._deadline = math.inf
        self._wake = trio.Event()
        pending.add_done_callback(self._answered)

    @property
    def on_the_ladder(self) -> bool:
        """Cancelled, and not ended yet."""
        return self.state in _ON_THE_LADDER

    @property
    def in_flight(self) -> bool:
        return self.state in _IN_FLIGHT

    def cancel(self, grace: float) -> None:
        """``session/cancel`` was sent for its session: the turn has
        ``grace`` seconds to be answered before the next rung. A repeated
        cancel may bring that rung closer, never push it back (a stop
        button pressed again and again cannot hold off the ladder)."""
        now = trio.current_time()
        if self.state is TurnState.SENT:
            self.state = TurnState.CANCELLING
            self._cancelled_at = now
            self._deadline = now + grace
            # (Closing: the request fails with it, and the turn ends.)
            with suppress(ConnectionClosed):
                self._book.connection.start_soon(self._climb, name="acp turn ladder")
        elif self.state is TurnState.CANCELLING and now + grace < self._deadline:
            self._deadline = now + grace
            self._wake.set()

    async def _climb(self) -> None:
        # The ladder's timer: each rung when its deadline passes, until the
        # turn ends (an answer, the connection closing) or is abandoned.
        while self.on_the_ladder:
            self._wake = trio.Event()
            with trio.move_on_at(self._deadline):
                await self._wake.wait()
            if not self.on_the_ladder or trio.current_time() < self._deadline:
                continue
            if self.state is TurnState.CANCELLING:
                self._escalate()
            else:
                self._abandon()

    def _escalate(self) -> None:
        self.state = TurnState.ESCALATED
        self._deadline = trio.current_time() + self._book.escalation_grace
        _log.info(
            "session %r: no answer to session/cancel for session/prompt request %s "
            "within %g s; sending $/cancel_request for it",
            self.session_id,
            self.pending.id,
            trio.current_time() - self._cancelled_at,
        )
        self.pending.cancel()  # past the output limit, at most once

    def _abandon(self) -> None:
        waited = trio.current_time() - self._cancelled_at
        policy = self._book.abandon_policy
        self.state = TurnState.ABANDONED
        self.outcome = CancelOutcome(
            self.session_id, "abandoned", request_id=self.pending.id, policy=policy
        )
        _log.warning(
            "session %r: the agent answered neither session/cancel nor $/cancel_request "
            "for session/prompt request %s within %g s; the turn is abandoned (a late "
            "answer will be dropped) and, by the abandon policy, %s",
            self.session_id,
            self.pending.id,
            waited,
            {
                "free_session": "the session is free for its next prompt",
                "close_connection": "the connection is closed",
                "stop_process": "the agent's process is stopped",
            }[policy],
        )
        self.closed_by_policy = policy != "free_session"
        self._end()
        # Settles the request: a prompt() still waiting raises this, and the
        # late answer, read for a request no longer pending, is dropped.
        self._book.connection.fail_request(
            self.pending.id, TurnNotAnswered(self.session_id, self.pending.id, waited)
        )
        self._book.abandoned(self, policy)

    def _answered(self) -> None:
        # The request's done callback: the answer, or the connection closing.
        if not self.in_flight:
            return  # abandoned: the book failed it itself
        try:
            raw = self.pending.result_nowait()
        except ConnectionClosed:
            self.state = TurnState.CLOSED
            self._end()
            return
        except ACPError as exc:
            self._finish(None, exc)
            return
        try:
            response = self._book.structure(raw)
        except RemoteProtocolError as exc:
            self._finish(None, exc)
            return
        self._finish(response, None)

    def _finish(self, response: PromptResponse | None, error: ACPError | None) -> None:
        how: Literal["answered", "escalated"] = (
            "escalated" if self.state is TurnState.ESCALATED else "answered"
        )
        self.state = TurnState.ANSWERED
        self.outcome = CancelOutcome(
            self.session_id, how, response=response, error=error, request_id=self.pending.id
        )
        self._end()

    def _end(self) -> None:
        self._wake.set()
        self.ended.set()
        self._book.ended(self)

    def __repr__(self) -> str:
        return f"<ClientTurn {self.session_id!r} request {self.pending.id} {self.state.value}>"


@attrs.define(eq=False)
class _Waiting:
    """A prompt waiting to be sent behind a cancelled turn."""

    #: The session was cancelled (again) while it waited.
    cancelled: bool = False


class TurnBook:
    """A proxy's prompt turns, by session: those in flight, the prompts
    waiting behind a cancelled one, and what cancelling a session does.

    ``structure`` makes a ``PromptResponse`` of a raw answer (raising
    :class:`RemoteProtocolError`); ``cancel_permissions`` answers a
    session's pending permission requests ``cancelled``.
    """

    def __init__(
        self,
        connection: Connection,
        structure: Callable[[Any], PromptResponse],
        cancel_permissions: Callable[[str], None],
    ) -> None:
        self.connection = connection
        self.structure = structure
        self._cancel_permissions = cancel_permissions
        self._turns: dict[str, list[ClientTurn]] = {}
        self._waiting: dict[str, list[_Waiting]] = {}
        # Sessions whose last turn was abandoned, no prompt sent since: a
        # permission request for one can only be that turn's.
        self._abandoned: set[str] = set()
        self.cancel_grace = 5.0
        self.escalation_grace = 2.0
        self.abandon_policy: AbandonPolicy = "free_session"
        #: Stops the agent's process (set by open_spawned_agent), for the
        #: "stop_process" policy.
        self.stop_process: Callable[[], None] | None = None

    # -- the turns ------------------------------------------------------

    def sent(self, session_id: str, pending: PendingRequest) -> ClientTurn:
        """A prompt went out: track its turn until it ends."""
        self._abandoned.discard(session_id)
        turn = ClientTurn(self, session_id, pending)
        if turn.in_flight:  # (not answered in the same step)
            self._turns.setdefault(session_id, []).append(turn)
        return turn

    def ended(self, turn: ClientTurn) -> None:
        """``turn`` ended: forget it (a session with none is dropped)."""
        turns = self._turns.get(turn.session_id)
        if turns is not None and turn in turns:
            turns.remove(turn)
            if not turns:
                del self._turns[turn.session_id]

    def abandoned(self, turn: ClientTurn, policy: AbandonPolicy) -> None:
        """The ladder gave up on ``turn``: apply the abandon policy."""
        if policy == "free_session":
            self._abandoned.add(turn.session_id)
        elif policy == "stop_process" and self.stop_process is not None:
            self.stop_process()
        else:
            self.connection.close_soon()

    def in_flight(self, session_id: str) -> list[ClientTurn]:
        return list(self._turns.get(session_id, ()))

    def counts(self) -> dict[str, int]:
        """By session: turns in flight plus prompts waiting (none: left out)."""
        counts = {sid: len(turns) for sid, turns in self._turns.items()}
        for sid, waiting in self._waiting.items():
            counts[sid] = counts.get(sid, 0) + len(waiting)
        return counts

    def permission_is_stale(self, session_id: str) -> bool:
        """Whether a permission request of the session can only come from a
        cancelled turn (one on the ladder, or the abandoned last one): the
        SDK answers it ``cancelled`` itself."""
        if session_id in self._abandoned:
            return True
        return any(turn.on_the_ladder for turn in self._turns.get(session_id, ()))

    # -- cancelling a session -------------------------------------------

    def cancel_session(
        self, session_id: str, params: Any = None, *, grace: float | None = None
    ) -> list[ClientTurn]:
        """The local ``session/cancel``, synchronously: the session's turns
        in flight start (or go on up) the ladder, the prompts waiting behind
        one will not be sent, its pending permission requests are answered
        ``cancelled``, and the notification is queued past the output limit
        (so a task being cancelled sends it). Returns the turns cancelled."""
        for waiting in self._waiting.get(session_id, ()):
            waiting.cancelled = True
        if grace is None:
            grace = self.cancel_grace
        elif not grace >= 0:
            raise ValueError(f"grace must be a number of seconds >= 0, not {grace!r}")
        turns = self.in_flight(session_id)
        for turn in turns:
            turn.cancel(grace)
        self._cancel_permissions(session_id)
        if params is None:
            params = {"sessionId": session_id}
        self.connection.notify_past_limit_nowait("session/cancel", params)
        return turns

    async def before_prompt(self, session_id: str) -> None:
        """Before a prompt is sent: wait until the session's cancelled
        turns have ended (each within its ladder's bound). Raises
        :class:`PromptNotSent` if the prompt must not go (the session was
        cancelled again meanwhile, or the turn ahead was abandoned and the
        connection or process went with it), :class:`ConnectionClosed` if
        the connection closed meanwhile."""
        ahead = [turn for turn in self.in_flight(session_id) if turn.on_the_ladder]
        if not ahead:
            await trio.lowlevel.checkpoint()
            return
        waiting = _Waiting()
        queue = self._waiting.setdefault(session_id, [])
        queue.append(waiting)
        last = ahead[-1]
        try:
            while ahead:
                last = ahead[-1]
                for turn in ahead:
                    await turn.ended.wait()
                ahead = [turn for turn in self.in_flight(session_id) if turn.on_the_ladder]
        finally:
            queue.remove(waiting)
            if not queue:
                del self._waiting[session_id]
        if last.closed_by_policy:
            raise PromptNotSent(session_id, "abandoned", last.outcome)
        if last.state is TurnState.CLOSED or self.connection.closed:
            raise self.connection.closed_error()
        if waiting.cancelled:
            raise PromptNotSent(session_id, "cancelled", last.outcome)

    async def wind_down(self) -> None:
        """Until no cancelled turn is left on its ladder (each ends within
        ``cancel_grace + escalation_grace`` of its cancel): what leaving the
        connection's block waits for, shielded, before closing it."""
        while True:
            climbing = [
                turn for turns in self._turns.values() for turn in turns if turn.on_the_ladder
            ]
            if not climbing:
                return
            await climbing[0].ended.wait()
