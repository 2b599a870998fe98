"""What the per-request objects of :mod:`~acp_trio._core._requests` are made
of that needs neither the connection's protocols nor the other object:
:class:`CancelCause` (why a request was cancelled), :class:`_Request` (what
both share: the request's entry in the peer's table) and :class:`_Answer`
(the answer of a request sent, once settled: its state, and reading it
without waiting). The lowest of the per-request modules: it imports no
other module of `_core`."""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Any, Final, Generic, Protocol, TypeVar

import trio

from acp_trio._exceptions import ACPError, RequestError

__all__ = ["WAITING", "CancelCause"]


class CancelCause(enum.Enum):
    """Why a request was cancelled. The wire code is ``-32800`` for all of
    them; this says who asked, for logs and for applications."""

    PEER = "peer"  # the peer sent $/cancel_request
    SESSION = "session"  # session/cancel (or session/close) for its session
    DEADLINE = "deadline"  # the per-request deadline passed
    LOCAL = "local"  # local code called RequestContext.request_cancel()
    SHUTDOWN = "shutdown"  # the connection is closing


IdT_co = TypeVar("IdT_co", covariant=True)


class _Entry(Protocol[IdT_co]):
    """What the per-request objects read of a request's entry in the peer's
    table (an :class:`IncomingRequest` or an :class:`OutgoingRequest`)."""

    @property
    def id(self) -> IdT_co:
        """The request's id."""

    @property
    def method(self) -> str:
        """The request's method name."""


class _Request(Generic[IdT_co]):
    """What the two per-request objects share: the owner they talk to (each
    declares it as the ``RequestOwner`` it is), the request's entry in the
    peer's table, and the barrier of notifications that must be handled
    before the handler (or the caller) goes on. Each sets them in its own
    ``__init__`` (no call more per request)."""

    __slots__ = ("_barrier", "_conn", "_entry")

    _entry: _Entry[IdT_co]
    _barrier: int

    @property
    def id(self) -> IdT_co:
        """The request's JSON-RPC id: as the peer sent it, for a request
        received; the one this side gave it, for a request sent."""
        return self._entry.id

    @property
    def method(self) -> str:
        """The request's method name."""
        return self._entry.method


WAITING: Final = 0
_VALUE: Final = 1
_ERROR: Final = 2


class _Answer(_Request[int]):
    """The answer of a request sent, as :class:`PendingRequest` keeps it:
    waiting, a value or an error, and the callbacks to call once it is in.
    Settling it (which lets the parent go) and waiting for it are
    :class:`PendingRequest`'s; reading it needs nothing of the connection."""

    __slots__ = ("_callbacks", "_error", "_state", "_task", "_value")

    _task: trio.lowlevel.Task | None
    _state: int
    _value: Any
    _error: BaseException | None
    _callbacks: list[Callable[[], None]] | None

    @property
    def done(self) -> bool:
        """Whether the answer (or a failure) has arrived."""
        return self._state != WAITING

    def result_nowait(self) -> Any:
        """The answer, if it is in: return the result, or raise what
        :meth:`result` would raise (a fresh exception each time). Raises
        ``trio.WouldBlock`` while the request is pending. Unlike
        :meth:`result` it does not wait for the notifications read before
        the answer to be handled, and any task may call it, also while
        another waits in :meth:`result`."""
        if self._state == WAITING:
            raise trio.WouldBlock
        return self._outcome()

    def add_done_callback(self, callback: Callable[[], None]) -> None:
        """Call ``callback()`` once the request is settled: answered, failed,
        abandoned or cut by the connection closing (at once, if it is
        already). Read the answer there with :meth:`result_nowait`. It runs
        wherever the answer is read (the reader task, the connection
        closing), outside any task of yours: keep it quick and synchronous,
        and do not raise (start a task with :meth:`Connection.start_soon`
        for more)."""
        if self._state != WAITING:
            callback()
        elif self._callbacks is None:
            self._callbacks = [callback]
        else:
            self._callbacks.append(callback)

    def _abort(self, _: Any) -> trio.lowlevel.Abort:
        self._task = None
        return trio.lowlevel.Abort.SUCCEEDED

    def _outcome(self) -> Any:
        if self._state == _VALUE:
            return self._value
        error = self._error
        assert error is not None
        # A fresh exception each raise (a stored one would collect tracebacks).
        if isinstance(error, RequestError):
            fresh_error = RequestError.from_error_object(error.to_error_object())
            fresh_error.reply_to = self._entry.method
            raise fresh_error
        if isinstance(error, ACPError):
            # Not copy.copy(): __init__(*args) breaks some (MessageTooLarge).
            fresh = type(error).__new__(type(error), *error.args)
            fresh.__dict__.update(error.__dict__)
            raise fresh from error.__cause__
        raise error
