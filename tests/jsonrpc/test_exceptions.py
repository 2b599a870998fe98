"""acp_trio._exceptions: RequestError and the connection/protocol errors."""

from __future__ import annotations

import copy
import pickle
from typing import Any

import pytest

from acp_trio import (
    ACPError,
    CancelOutcome,
    ConnectionClosed,
    ErrorCode,
    LocalProtocolError,
    MessageTooLarge,
    PromptNotSent,
    ProtocolError,
    RemoteProtocolError,
    RequestError,
    TurnNotAnswered,
    passing_errors_on,
)


def test_error_code_values() -> None:
    assert {code.name: int(code) for code in ErrorCode} == {
        "PARSE_ERROR": -32700,
        "INVALID_REQUEST": -32600,
        "METHOD_NOT_FOUND": -32601,
        "INVALID_PARAMS": -32602,
        "INTERNAL_ERROR": -32603,
        "REQUEST_CANCELLED": -32800,
        "AUTH_REQUIRED": -32000,
        "RESOURCE_NOT_FOUND": -32002,
    }


@pytest.mark.parametrize(
    ("make", "code", "message"),
    [
        (RequestError.parse_error, -32700, "Parse error"),
        (RequestError.invalid_request, -32600, "Invalid request"),
        (RequestError.invalid_params, -32602, "Invalid params"),
        (RequestError.internal_error, -32603, "Internal error"),
        (RequestError.request_cancelled, -32800, "Request cancelled"),
        (RequestError.auth_required, -32000, "Authentication required"),
        (RequestError.resource_not_found, -32002, "Resource not found"),
    ],
)
def test_constructors(make: Any, code: int, message: str) -> None:
    bare = make()
    assert (bare.code, bare.message, bare.has_data, bare.data) == (code, message, False, None)
    assert bare.to_error_object() == {"code": code, "message": message}
    with_data = make({"detail": [1]})
    assert with_data.has_data is True
    assert with_data.data == {"detail": [1]}
    assert with_data.to_error_object() == {
        "code": code,
        "message": message,
        "data": {"detail": [1]},
    }
    null_data = make(None)
    assert null_data.has_data is True
    assert null_data.data is None
    assert null_data.to_error_object() == {"code": code, "message": message, "data": None}
    assert bare.is_cancelled is (code == -32800)


def test_method_not_found_carries_the_method() -> None:
    err = RequestError.method_not_found("session/foo")
    assert err.code == -32601
    assert err.message == "Method not found"
    assert err.to_error_object() == {
        "code": -32601,
        "message": "Method not found",
        "data": {"method": "session/foo"},
    }


def test_default_and_custom_messages() -> None:
    assert RequestError(-32601).message == "Method not found"
    assert RequestError(42).message == "Error"
    assert RequestError(-32601, "custom").message == "custom"
    assert RequestError(-32601, "").message == ""
    assert RequestError(ErrorCode.INVALID_PARAMS).message == "Invalid params"


@pytest.mark.parametrize("bad", [True, False, 1.0, "1", None])
def test_non_int_code_rejected(bad: Any) -> None:
    with pytest.raises(TypeError, match="error code must be an int"):
        RequestError(bad, "m")


@pytest.mark.parametrize(
    "obj",
    [
        {"code": -32000, "message": "auth"},
        {"code": 7, "message": "m", "data": None},
        {"code": 0, "message": "", "data": {"nested": [1, "x", None, True]}},
        {"code": -32602, "message": "bad", "data": "text"},
    ],
)
def test_error_object_round_trip(obj: dict[str, Any]) -> None:
    err = RequestError.from_error_object(obj)
    assert err.code == obj["code"]
    assert err.message == obj["message"]
    assert err.has_data is ("data" in obj)
    assert err.to_error_object() == obj
    assert RequestError.from_error_object(err.to_error_object()).to_error_object() == obj


def test_str_and_repr() -> None:
    assert str(RequestError(5, "boom")) == "boom (5)"
    assert repr(RequestError(5, "boom")) == "RequestError(5, 'boom')"
    assert str(RequestError(5, "boom", None)) == "boom (5): None"
    assert repr(RequestError(5, "boom", None)) == "RequestError(5, 'boom', None)"
    assert str(RequestError(5, "boom", {"a": 1})) == "boom (5): {'a': 1}"
    assert repr(RequestError(5, "boom", [1])) == "RequestError(5, 'boom', [1])"
    assert str(RequestError.invalid_params()) == "Invalid params (-32602)"


def test_request_error_is_an_exception() -> None:
    err = RequestError.internal_error("x")
    assert isinstance(err, ACPError)
    assert isinstance(err, Exception)
    with pytest.raises(RequestError) as info:
        raise err
    assert info.value.code == -32603


def test_protocol_error_hierarchy() -> None:
    assert issubclass(LocalProtocolError, ProtocolError)
    assert issubclass(RemoteProtocolError, ProtocolError)
    assert issubclass(ProtocolError, ACPError)
    assert not issubclass(RequestError, ProtocolError)
    assert issubclass(MessageTooLarge, RemoteProtocolError)
    assert issubclass(ConnectionClosed, ACPError)


def test_message_too_large() -> None:
    err = MessageTooLarge(100, 64)
    assert (err.size, err.limit) == (100, 64)
    assert str(err) == "message of 100 bytes exceeds the limit of 64 bytes"


def test_connection_closed_default() -> None:
    err = ConnectionClosed()
    assert str(err) == "connection closed"
    assert (err.reason, err.exit_code, err.stderr_tail) == ("connection closed", None, None)


def test_connection_closed_with_exit_code_and_stderr_tail() -> None:
    err = ConnectionClosed(
        "agent exited", exit_code=3, stderr_tail=b"Traceback ...\nValueError: boom\n\n"
    )
    assert err.exit_code == 3
    assert err.stderr_tail == b"Traceback ...\nValueError: boom\n\n"
    assert str(err) == "agent exited (exit code 3); stderr tail:\nTraceback ...\nValueError: boom"


def test_connection_closed_variants() -> None:
    assert str(ConnectionClosed("x", exit_code=0)) == "x (exit code 0)"
    assert str(ConnectionClosed("x", exit_code=-9)) == "x (exit code -9)"
    assert str(ConnectionClosed("x", stderr_tail=b"")) == "x"
    assert str(ConnectionClosed("x", stderr_tail=b"bad \xff byte")) == (
        "x; stderr tail:\nbad \ufffd byte"
    )
    cause = OSError("broken pipe")
    with pytest.raises(ConnectionClosed, match=r"^peer hung up$") as info:
        raise ConnectionClosed("peer hung up") from cause
    assert info.value.__cause__ is cause


def _pickled(exc: BaseException) -> Any:
    return pickle.loads(pickle.dumps(exc))


_COPIERS = [copy.copy, copy.deepcopy, _pickled]


@pytest.mark.parametrize("copier", _COPIERS, ids=["copy", "deepcopy", "pickle"])
def test_request_error_survives_copy_and_pickle(copier: Any) -> None:
    bare = copier(RequestError(-32602, "bad"))
    assert type(bare) is RequestError
    assert (bare.code, bare.message, bare.has_data, bare.data) == (-32602, "bad", False, None)
    assert bare.to_error_object() == {"code": -32602, "message": "bad"}
    null = copier(RequestError(1, "m", None))
    assert (null.has_data, null.data) == (True, None)
    rich = copier(RequestError.method_not_found("x"))
    assert rich.to_error_object() == {
        "code": -32601,
        "message": "Method not found",
        "data": {"method": "x"},
    }
    assert str(rich) == "Method not found (-32601): {'method': 'x'}"


@pytest.mark.parametrize("copier", _COPIERS, ids=["copy", "deepcopy", "pickle"])
def test_other_errors_survive_copy_and_pickle(copier: Any) -> None:
    too_large = copier(MessageTooLarge(100, 64))
    assert type(too_large) is MessageTooLarge
    assert (too_large.size, too_large.limit) == (100, 64)
    assert str(too_large) == "message of 100 bytes exceeds the limit of 64 bytes"
    closed = copier(ConnectionClosed("gone", exit_code=2, stderr_tail=b"oops\n"))
    assert (closed.reason, closed.exit_code, closed.stderr_tail) == ("gone", 2, b"oops\n")
    assert str(closed) == "gone (exit code 2); stderr tail:\noops"
    unanswered = copier(TurnNotAnswered("s1", 7, 2.5))
    assert type(unanswered) is TurnNotAnswered
    assert (unanswered.session_id, unanswered.request_id, unanswered.grace) == ("s1", 7, 2.5)
    assert str(unanswered) == str(TurnNotAnswered("s1", 7, 2.5))
    outcome = CancelOutcome("s1", "escalated", error=RequestError(-32800), request_id=7)
    not_sent = copier(PromptNotSent("s1", "cancelled", outcome))
    assert type(not_sent) is PromptNotSent
    assert (not_sent.session_id, not_sent.reason) == ("s1", "cancelled")
    assert not_sent.outcome.how == "escalated"
    assert str(not_sent) == str(PromptNotSent("s1", "cancelled", outcome))


def test_passing_errors_on_answers_with_the_peers_own_error() -> None:
    peer_error = RequestError(-32800, "Request cancelled", {"why": "deadline"})
    peer_error.reply_to = "session/prompt"
    with pytest.raises(RequestError) as info, passing_errors_on():
        raise peer_error
    passed = info.value
    assert passed.reply_to is None  # answered as it is, not as -32603
    assert passed.to_error_object() == peer_error.to_error_object()
    assert passed.__cause__ is peer_error
    # Our own errors, and anything else, go through untouched.
    own = RequestError(-32602)
    with pytest.raises(RequestError) as info, passing_errors_on():
        raise own
    assert info.value is own
    with pytest.raises(KeyError), passing_errors_on():
        raise KeyError("x")
