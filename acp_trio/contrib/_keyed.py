"""What the v1 and v2 session accumulators share: applying a session's
notifications with change callbacks (:class:`Folding`), and one accumulator
per session id, made on first use (:class:`KeyedStates`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Generic, Protocol, Self, TypeVar

N_contra = TypeVar("N_contra", contravariant=True)
C_contra = TypeVar("C_contra", contravariant=True)


class _Accumulates(Protocol[N_contra, C_contra]):
    def apply(self, notification: N_contra) -> None: ...

    def on_change(self, callback: C_contra) -> Callable[[], None]: ...


class _HasSession(Protocol):
    @property
    def session_id(self) -> str: ...


U = TypeVar("U")


class Folding(Generic[U]):
    """Applies one session's notifications: :meth:`_fold` folds each update."""

    def __init__(self, session_id: str | None = None) -> None:
        #: The session; ``None`` takes it from the first update applied.
        self.session_id = session_id
        #: How many updates were applied.
        self.updates = 0
        # (Any: a Self-typed list cannot hold callbacks for a subclass's Self)
        self._callbacks: list[Callable[[Any, U], None]] = []

    def _fold(self, update: U) -> None:
        raise NotImplementedError

    def on_change(self, callback: Callable[[Self, U], None]) -> Callable[[], None]:
        """Call ``callback(accumulator, update)`` after each update; returns
        a function that unregisters it."""
        self._callbacks.append(callback)
        return lambda: self._callbacks.remove(callback)

    def _apply(self, session_id: str, update: U) -> None:
        if self.session_id is None:
            self.session_id = session_id
        elif session_id != self.session_id:
            raise ValueError(
                f"an update of session {session_id!r} applied to the state "
                f"of session {self.session_id!r}"
            )
        self._fold(update)
        self.updates += 1
        for callback in list(self._callbacks):
            callback(self, update)


A = TypeVar("A", bound=_Accumulates[Any, Any])
N = TypeVar("N", bound=_HasSession)
C = TypeVar("C")


class KeyedStates(Generic[A, N, C]):
    """Accumulators by session id; :meth:`_new` makes one."""

    def __init__(self) -> None:
        self._states: dict[str, A] = {}
        self._callbacks: list[C] = []

    def _new(self, session_id: str) -> A:
        raise NotImplementedError

    def __getitem__(self, session_id: str) -> A:
        state = self._states.get(session_id)
        if state is None:
            state = self._states[session_id] = self._new(session_id)
            for callback in self._callbacks:
                state.on_change(callback)
        return state

    def __contains__(self, session_id: object) -> bool:
        return session_id in self._states

    def __iter__(self) -> Iterator[str]:
        return iter(self._states)

    def __len__(self) -> int:
        return len(self._states)

    def apply(self, notification: N) -> A:
        """Fold the update into its session's state; return that state."""
        state = self[notification.session_id]
        state.apply(notification)
        return state

    def on_change(self, callback: C) -> None:
        """Call ``callback(state, update)`` after each update of any session."""
        self._callbacks.append(callback)
        for state in self._states.values():
            state.on_change(callback)

    def forget(self, session_id: str) -> None:
        """Drop a session's state (closed or deleted)."""
        self._states.pop(session_id, None)
