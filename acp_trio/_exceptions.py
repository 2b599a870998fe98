"""The few exceptions acp_trio raises, named by whose fault they are.

- :class:`RequestError`: a JSON-RPC error *response* (ours to send, or the
  peer's that we received). It carries the wire ``code``, ``message`` and
  optional ``data``.
- :class:`LocalProtocolError`: *our* side was asked to do something the
  protocol forbids (for example sending a message that cannot be encoded).
- :class:`RemoteProtocolError`: the *peer* sent something the protocol
  forbids (for example a response with both ``result`` and ``error``).
- :class:`ConnectionClosed`: the connection ended; pending calls fail with it.

This module is pure Python: the sans-IO core imports it too.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Final

__all__ = [
    "ACPError",
    "CapabilityError",
    "ConnectionClosed",
    "ErrorCode",
    "LocalProtocolError",
    "MessageTooLarge",
    "PromptNotSent",
    "ProtocolError",
    "RemoteProtocolError",
    "RequestError",
    "TurnNotAnswered",
    "UnsupportedProtocolVersion",
    "passing_errors_on",
]


class ErrorCode(enum.IntEnum):
    """JSON-RPC 2.0 and ACP error codes. Any other int32 is a valid code too."""

    PARSE_ERROR = -32700
    INVALID_REQUEST = -32600
    METHOD_NOT_FOUND = -32601
    INVALID_PARAMS = -32602
    INTERNAL_ERROR = -32603
    REQUEST_CANCELLED = -32800
    AUTH_REQUIRED = -32000
    RESOURCE_NOT_FOUND = -32002


_DEFAULT_MESSAGES: Final[dict[int, str]] = {
    ErrorCode.PARSE_ERROR: "Parse error",
    ErrorCode.INVALID_REQUEST: "Invalid request",
    ErrorCode.METHOD_NOT_FOUND: "Method not found",
    ErrorCode.INVALID_PARAMS: "Invalid params",
    ErrorCode.INTERNAL_ERROR: "Internal error",
    ErrorCode.REQUEST_CANCELLED: "Request cancelled",
    ErrorCode.AUTH_REQUIRED: "Authentication required",
    ErrorCode.RESOURCE_NOT_FOUND: "Resource not found",
}

_NO_DATA: Final = object()


class ACPError(Exception):
    """Base class of every exception acp_trio raises on purpose."""


class RequestError(ACPError):
    """A JSON-RPC error response: raise it from a handler to answer with it,
    catch it around an outgoing call to see the peer's error.

    ``data`` is any JSON value; it is omitted from the wire when not given
    (``None`` is sent as an explicit ``null``).

    ``reply_to`` names the method of the outgoing request whose error reply
    this is (``None`` for an error made locally). A handler that lets such an
    error through does not answer with the peer's code, which would describe
    the nested call, not its own request: the SDK answers ``-32603`` whose
    ``data`` names the nested method and its error. To pass the peer's error
    on as it is, raise ``e.passed_on()``, or make the call inside
    ``with acp_trio.passing_errors_on():``.
    """

    code: int
    message: str
    reply_to: str | None = None

    def __init__(self, code: int, message: str | None = None, data: Any = _NO_DATA) -> None:
        if isinstance(code, bool) or not isinstance(code, int):
            raise TypeError(f"error code must be an int, not {type(code).__name__}")
        if message is None:
            message = _DEFAULT_MESSAGES.get(code, "Error")
        self.code = code
        self.message = message
        self._data = data
        super().__init__(code, message)

    def __reduce__(self) -> tuple[Any, ...]:
        # The default would pickle (and deep-copy) the "no data" sentinel as a
        # new object, which then reads as data.
        args: tuple[Any, ...] = (self.code, self.message)
        if self._data is not _NO_DATA:
            args += (self._data,)
        state = {k: v for k, v in self.__dict__.items() if k != "_data"}
        return (type(self), args, state)

    @property
    def has_data(self) -> bool:
        """Whether the error carries a ``data`` member (which may be ``null``)."""
        return self._data is not _NO_DATA

    @property
    def data(self) -> Any:
        """The ``data`` member, or ``None`` when there is none."""
        return None if self._data is _NO_DATA else self._data

    @property
    def is_cancelled(self) -> bool:
        """True for the ``-32800`` "request cancelled" error."""
        return self.code == ErrorCode.REQUEST_CANCELLED

    def to_error_object(self) -> dict[str, Any]:
        """The wire form: ``{"code", "message"[, "data"]}``."""
        obj: dict[str, Any] = {"code": self.code, "message": self.message}
        if self._data is not _NO_DATA:
            obj["data"] = self._data
        return obj

    def passed_on(self) -> RequestError:
        """A copy without :attr:`reply_to`: raised from a handler, it answers
        with this very error (code, message and data)."""
        return RequestError.from_error_object(self.to_error_object())

    @classmethod
    def from_error_object(cls, obj: dict[str, Any]) -> RequestError:
        """Build from a wire error object already checked by the core."""
        if "data" in obj:
            return cls(obj["code"], obj["message"], obj["data"])
        return cls(obj["code"], obj["message"])

    def __str__(self) -> str:
        text = f"{self.message} ({self.code})"
        if self._data is not _NO_DATA:
            text += f": {self._data!r}"
        return text

    def __repr__(self) -> str:
        args = f"{self.code!r}, {self.message!r}"
        if self._data is not _NO_DATA:
            args += f", {self._data!r}"
        return f"{type(self).__name__}({args})"

    # Constructors for the codes with a fixed meaning.

    @classmethod
    def parse_error(cls, data: Any = _NO_DATA) -> RequestError:
        """A ``-32700`` (parse error) error, with ``data`` if given and the
        code's standard message.
        """
        return cls(ErrorCode.PARSE_ERROR, None, data)

    @classmethod
    def invalid_request(cls, data: Any = _NO_DATA) -> RequestError:
        """A ``-32600`` (invalid request) error, with ``data`` if given and the
        code's standard message.
        """
        return cls(ErrorCode.INVALID_REQUEST, None, data)

    @classmethod
    def method_not_found(cls, method: str) -> RequestError:
        """A ``-32601`` (method not found) error whose ``data`` names
        ``method``.
        """
        return cls(ErrorCode.METHOD_NOT_FOUND, None, {"method": method})

    @classmethod
    def invalid_params(cls, data: Any = _NO_DATA) -> RequestError:
        """A ``-32602`` (invalid params) error, with ``data`` if given and the
        code's standard message.
        """
        return cls(ErrorCode.INVALID_PARAMS, None, data)

    @classmethod
    def internal_error(cls, data: Any = _NO_DATA) -> RequestError:
        """A ``-32603`` (internal error) error, with ``data`` if given and the
        code's standard message.
        """
        return cls(ErrorCode.INTERNAL_ERROR, None, data)

    @classmethod
    def request_cancelled(cls, data: Any = _NO_DATA) -> RequestError:
        """A ``-32800`` (request cancelled) error, with ``data`` if given and the
        code's standard message.
        """
        return cls(ErrorCode.REQUEST_CANCELLED, None, data)

    @classmethod
    def auth_required(cls, data: Any = _NO_DATA) -> RequestError:
        """A ``-32000`` (authentication required) error, with ``data`` if given and the
        code's standard message.
        """
        return cls(ErrorCode.AUTH_REQUIRED, None, data)

    @classmethod
    def resource_not_found(cls, data: Any = _NO_DATA) -> RequestError:
        """A ``-32002`` (resource not found) error, with ``data`` if given and the
        code's standard message.
        """
        return cls(ErrorCode.RESOURCE_NOT_FOUND, None, data)


@contextmanager
def passing_errors_on() -> Iterator[None]:
    """Within the block, the peer's error answer to a call (a
    :class:`RequestError` with :attr:`~RequestError.reply_to`) is raised as
    :meth:`~RequestError.passed_on`: a handler that lets it out answers its
    own request with that very error (code, message, data) instead of
    ``-32603``. For a relay that stands for the agent it calls: a
    sub-agent's ``-32800`` (its deadline) stays ``-32800``::

        with acp_trio.passing_errors_on():
            answer = await sub.prompt(params)

    Errors made locally (no ``reply_to``) and other exceptions go through
    unchanged.
    """
    try:
        yield
    except RequestError as exc:
        if exc.reply_to is None:
            raise
        raise exc.passed_on() from exc


class ProtocolError(ACPError):
    """A JSON-RPC protocol violation; see the two subclasses for whose."""

    def _error_data(self) -> dict[str, Any]:
        # The data of the -32603 a handler that let this error through is
        # answered with: what went wrong, for the peer to see.
        return {"error": type(self).__name__, "reason": str(self)}


class LocalProtocolError(ProtocolError):
    """Our side tried to do something the protocol forbids."""


class RemoteProtocolError(ProtocolError):
    """The peer sent something the protocol forbids."""


class CapabilityError(LocalProtocolError):
    """A call the peer did not advertise support for was refused locally
    (nothing was sent).

    :attr:`capability` is the capability that was missing (as on the wire,
    e.g. ``"fs.readTextFile"``), :attr:`method` the method refused (e.g.
    ``"fs/read_text_file"``), :attr:`peer` whose capabilities they are
    (``"client"`` or ``"agent"``); each may be ``None`` when made by hand.
    A handler that lets it through is answered ``-32603`` whose ``data``
    carries the three.
    """

    def __init__(
        self,
        message: str,
        *,
        capability: str | None = None,
        method: str | None = None,
        peer: str | None = None,
    ) -> None:
        self.capability = capability
        self.method = method
        self.peer = peer
        super().__init__(message)

    def __reduce__(self) -> tuple[Any, ...]:
        # The default would call CapabilityError(message) and lose nothing
        # but the keywords: they are in __dict__, restored as state.
        return (type(self), (str(self),), self.__dict__)

    def _error_data(self) -> dict[str, Any]:
        data = super()._error_data()
        for key, value in (
            ("capability", self.capability),
            ("method", self.method),
            ("peer", self.peer),
        ):
            if value is not None:
                data[key] = value
        return data


class UnsupportedProtocolVersion(RemoteProtocolError):
    """The agent answered ``initialize`` with a protocol version we do not
    speak; the connection is closed."""

    def __init__(self, version: int, supported: int) -> None:
        self.version = version
        self.supported = supported
        super().__init__(
            f"the agent speaks ACP protocol version {version}; this SDK speaks {supported}"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.version, self.supported), self.__dict__)


class TurnNotAnswered(RemoteProtocolError):
    """The agent answered neither ``session/cancel`` nor ``$/cancel_request``
    for a cancelled prompt turn within ``grace`` seconds of the first (ACP
    says it must answer ``session/cancel``, with ``stopReason:
    "cancelled"``), so the client abandoned the turn: its late answer, if
    one ever comes, is dropped. Raised by that turn's ``prompt()`` if its
    caller still waits for it. (``AgentProxy.cancel_turn()`` returns the
    abandoned outcome instead.)"""

    def __init__(self, session_id: str, request_id: int, grace: float) -> None:
        self.session_id = session_id
        self.request_id = request_id
        self.grace = grace
        super().__init__(
            f"the agent never answered the cancelled prompt turn of session {session_id!r} "
            f"(session/prompt request {request_id}): no reply within {grace:g} s of "
            f"session/cancel, $/cancel_request included. The turn was abandoned: a late "
            f"reply is dropped"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.session_id, self.request_id, self.grace), self.__dict__)


class PromptNotSent(ACPError):
    """A prompt that waited behind a cancelled turn of its session was not
    sent: the session was cancelled again while it waited (``reason ==
    "cancelled"``: a stop button stops what was queued too), or the turn
    ahead was abandoned and the abandon policy closed the connection or
    stopped the agent (``reason == "abandoned"``). ``outcome`` is how the
    turn ahead ended (an :class:`~acp_trio.CancelOutcome`)."""

    def __init__(self, session_id: str, reason: str, outcome: Any) -> None:
        self.session_id = session_id
        self.reason = reason
        self.outcome = outcome
        why = (
            "the session was cancelled again while it waited"
            if reason == "cancelled"
            else "the cancelled turn ahead of it was abandoned, and with it the agent"
        )
        super().__init__(
            f"the prompt for session {session_id!r} was not sent: {why} "
            f"(the turn ahead ended {getattr(outcome, 'how', outcome)})"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.session_id, self.reason, self.outcome), self.__dict__)


class MessageTooLarge(RemoteProtocolError):
    """A received message was larger than the configured maximum size."""

    def __init__(self, size: int, limit: int) -> None:
        self.size = size
        self.limit = limit
        super().__init__(f"message of {size} bytes exceeds the limit of {limit} bytes")

    def __reduce__(self) -> tuple[Any, ...]:
        # The default would call MessageTooLarge(message): copy.copy() and
        # pickle would fail.
        return (type(self), (self.size, self.limit), self.__dict__)


class ConnectionClosed(ACPError):
    """The connection is closed: the peer hung up or died, or we closed it.

    ``exit_code`` and ``stderr_tail`` are filled in when the peer is a process
    we spawned. The underlying cause, if any, is also chained as
    ``__cause__``.
    """

    def __init__(
        self,
        reason: str = "connection closed",
        *,
        exit_code: int | None = None,
        stderr_tail: bytes | None = None,
    ) -> None:
        self.reason = reason
        self.exit_code = exit_code
        self.stderr_tail = stderr_tail
        super().__init__(reason)

    def __str__(self) -> str:
        text = self.reason
        if self.exit_code is not None:
            text += f" (exit code {self.exit_code})"
        if self.stderr_tail:
            tail = self.stderr_tail.decode("utf-8", "replace").rstrip()
            text += f"; stderr tail:\n{tail}"
        return text
