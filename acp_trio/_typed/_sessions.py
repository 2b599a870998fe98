"""Per-session state for an agent, kept by the SDK.

An agent that sets ``self.sessions = AgentSessions(factory)`` gets one state
object per session, made by ``factory(session_id)``:

- when its ``new_session`` returns (for the id it answered),
- before its ``load_session`` / ``resume_session`` runs (so the replay of a
  loaded session can fill it; dropped again if the handler fails),

and dropped once its ``close_session`` / ``delete_session`` succeeds.
``self.sessions[session_id]`` in any handler is the state; an id the agent
does not have raises a :class:`RequestError` ``-32602`` that names it, which
reaches the client as the answer to its request.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from typing import Any, Generic, TypeVar

from acp_trio._exceptions import RequestError

__all__ = ["AgentSessions", "keep_sessions"]

T = TypeVar("T")


class AgentSessions(Generic[T]):
    """The states of an agent's sessions, by id (see the module)."""

    def __init__(self, factory: Callable[[str], T]) -> None:
        self._factory = factory
        self._states: dict[str, T] = {}

    def __getitem__(self, session_id: str) -> T:
        """The session's state; raises ``RequestError`` ``-32602`` (an
        unknown session, named in the error's data) if there is none."""
        if session_id not in self._states:
            raise RequestError.invalid_params(
                {"sessionId": session_id, "problem": "no such session"}
            )
        return self._states[session_id]

    def get(self, session_id: str) -> T | None:
        """The state of session ``session_id``, or ``None`` if there is none
        (never created, or dropped on close).
        """
        return self._states.get(session_id)

    def __contains__(self, session_id: object) -> bool:
        return session_id in self._states

    def __iter__(self) -> Iterator[str]:
        return iter(self._states)

    def __len__(self) -> int:
        return len(self._states)

    def open(self, session_id: str) -> tuple[T, bool]:
        """The session's state, made now if it has none; and whether it was
        made now. The SDK calls this; call it yourself for sessions made
        another way."""
        if session_id in self._states:
            return self._states[session_id], False
        state = self._states[session_id] = self._factory(session_id)
        return state, True

    def drop(self, session_id: str) -> None:
        """Forget the session's state (idempotent)."""
        self._states.pop(session_id, None)


Handler = Callable[[Any], Awaitable[Any]]


def _after_new(sessions: AgentSessions[Any], func: Handler) -> Handler:
    async def new_session(params: Any) -> Any:
        result = await func(params)
        session_id = getattr(result, "session_id", None)
        if isinstance(session_id, str):
            sessions.open(session_id)
        return result

    return new_session


def _around_named(sessions: AgentSessions[Any], func: Handler) -> Handler:
    async def named_session(params: Any) -> Any:
        _, made = sessions.open(params.session_id)
        try:
            return await func(params)
        except BaseException:
            if made:
                sessions.drop(params.session_id)
            raise

    return named_session


def _after_drop(sessions: AgentSessions[Any], func: Handler) -> Handler:
    async def dropped_session(params: Any) -> Any:
        result = await func(params)
        sessions.drop(params.session_id)
        return result

    return dropped_session


_WRAPPERS: dict[str, Callable[[AgentSessions[Any], Handler], Handler]] = {
    "session/new": _after_new,
    "session/load": _around_named,
    "session/resume": _around_named,
    "session/close": _after_drop,
    "session/delete": _after_drop,
}


def keep_sessions(sessions: AgentSessions[Any], method: str, func: Handler) -> Handler:
    """``func`` (the handler of ``method``) keeping ``sessions`` up to date."""
    wrap = _WRAPPERS.get(method)
    return func if wrap is None else wrap(sessions, func)
