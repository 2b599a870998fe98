"""What ``check_agent`` uses to talk to an agent and watch the wire.

Each agent process the checker starts is an :class:`AgentSession`: the
process (stderr captured), a JSON-level :class:`~acp_trio.lowlevel.Connection` whose
handler plays the matching test client of the scenario vocabulary, and a way
to write raw bytes between the connection's frames (for malformed input).
Every line both ways goes into one :class:`Transcript`, so that checks can
wait for what the agent sends and the final checks can judge all of it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from contextlib import AsyncExitStack
from typing import Any, Final, Literal

import attrs
import trio

from acp_trio._core._connection import Connection, ConnectionConfig, Handler
from acp_trio._core._framed import FramedStream
from acp_trio._core._open import open_connection
from acp_trio._core._requests import RequestContext
from acp_trio._exceptions import RequestError
from acp_trio._transports import AgentProcess, open_agent_process
from acp_trio.testing._peer import NOT_JSON
from acp_trio.testing._scenario import HOLD_PATH

__all__ = [
    "PERMISSION_POLICIES",
    "AgentSession",
    "EditorPolicy",
    "Transcript",
    "WireEntry",
    "start_session",
]

Direction = Literal["sent", "received"]

_CANCELLED_OUTCOME: Final = {"outcome": {"outcome": "cancelled"}}

#: How the checker answers ``session/request_permission`` outside the
#: cancellation scenarios: the first ``allow_*`` option, the first
#: ``reject_*`` option, or the outcome ``cancelled``.
PERMISSION_POLICIES: Final = ("allow", "reject", "cancel")

# The client methods served from the temporary workspace and the terminal
# manager, and the method of the SDK helper serving each.
_FILE_METHODS: Final = {
    "fs/read_text_file": "read_text_file",
    "fs/write_text_file": "write_text_file",
}
_TERMINAL_METHODS: Final = {
    "terminal/create": "create_terminal",
    "terminal/output": "terminal_output",
    "terminal/wait_for_exit": "wait_for_terminal_exit",
    "terminal/kill": "kill_terminal",
    "terminal/release": "release_terminal",
}


@attrs.frozen
class EditorPolicy:
    """How the checker answers an agent's requests, as an editor would."""

    #: One of :data:`PERMISSION_POLICIES`.
    permissions: str = "allow"
    #: Files are read and written there (absolute paths inside it only).
    workspace: str | None = None
    #: Run the agent's terminal commands (in the workspace); else refuse them.
    terminals: bool = False


def choose_permission(policy: str, params: Any) -> dict[str, Any]:
    """The answer to a ``session/request_permission`` under ``policy``."""
    options = params.get("options") if isinstance(params, dict) else None
    options = [o for o in options if isinstance(o, dict)] if isinstance(options, list) else []
    if policy != "cancel":
        prefix = "allow" if policy == "allow" else "reject"
        for option in options:
            kind = option.get("kind")
            if isinstance(kind, str) and kind.startswith(prefix) and "optionId" in option:
                return {"outcome": {"outcome": "selected", "optionId": option["optionId"]}}
    return _CANCELLED_OUTCOME


@attrs.frozen
class WireEntry:
    """One line on the wire between the checker and an agent process."""

    session: int
    direction: Direction
    time: float
    data: bytes
    message: Any  # the decoded JSON value, or NOT_JSON
    raw: bool = False  # written by the checker as raw bytes

    @property
    def is_response(self) -> bool:
        m = self.message
        return isinstance(m, dict) and "method" not in m and ("result" in m or "error" in m)

    @property
    def method(self) -> str | None:
        m = self.message
        method = m.get("method") if isinstance(m, dict) else None
        return method if isinstance(method, str) else None

    @property
    def is_request(self) -> bool:
        return self.method is not None and "id" in self.message

    @property
    def is_notification(self) -> bool:
        return self.method is not None and "id" not in self.message

    @property
    def params(self) -> Any:
        return self.message.get("params") if isinstance(self.message, dict) else None


def _decode(data: bytes) -> Any:
    try:
        return json.loads(data)
    except (ValueError, RecursionError):  # RecursionError: nested too deeply
        return NOT_JSON


def same_id(a: Any, b: Any) -> bool:
    """JSON-RPC id equality: ``1`` and ``"1"`` differ, ``True`` is no id."""
    return type(a) is type(b) and a == b


class Transcript:
    """Every line between the checker and the agent processes, in order."""

    def __init__(self) -> None:
        self.entries: list[WireEntry] = []
        self._changed = trio.Event()

    def add(self, entry: WireEntry) -> None:
        self.entries.append(entry)
        self._changed.set()
        self._changed = trio.Event()

    def mark(self) -> int:
        """A position: :meth:`since` and :meth:`wait_for` look after it."""
        return len(self.entries)

    def since(self, mark: int, session: int | None = None) -> list[WireEntry]:
        return [e for e in self.entries[mark:] if session in (None, e.session)]

    def received(self, session: int | None = None, mark: int = 0) -> list[WireEntry]:
        return [e for e in self.since(mark, session) if e.direction == "received"]

    async def wait_for(self, match: Callable[[WireEntry], bool], mark: int = 0) -> WireEntry:
        """The first entry after ``mark`` that matches, waiting for it.
        Bound it with a timeout."""
        index = mark
        while True:
            while index < len(self.entries):
                entry = self.entries[index]
                index += 1
                if match(entry):
                    return entry
            await self._changed.wait()

    def cancels_received(self, session: int, mark: int = 0) -> list[Any]:
        """The ``requestId`` of each ``$/cancel_request`` the agent sent."""
        out: list[Any] = []
        for entry in self.received(session, mark):
            if entry.method == "$/cancel_request" and isinstance(entry.params, dict):
                out.append(entry.params.get("requestId"))
        return out


@attrs.define
class IncomingRequest:
    """A request the agent made to the checker-client."""

    id: Any
    method: str
    params: Any
    time: float
    answered: str = ""  # how the checker answered it, once it did


class CheckerClient(Handler):
    """An editor, at the JSON level, answering by an :class:`EditorPolicy`;
    in the sessions of the cancellation scenarios (:attr:`hold`), the
    matching test client of the scenario vocabulary.

    By policy: permission requests are answered at once (see
    :data:`PERMISSION_POLICIES`); files are read and written in the
    temporary workspace (:class:`acp_trio.contrib.WorkspaceFiles`: other paths are
    refused); terminals are refused unless the policy allows them (then run
    by :class:`acp_trio.contrib.TerminalManager` in the workspace).

    In a held session, reads of ``/hold``, ``terminal/create`` and
    ``session/request_permission`` wait until the agent cancels them (the
    connection answers ``-32800``) or, for a permission request, until the
    checker cancels the session (answered ``cancelled``, as ACP requires).
    """

    def __init__(self, policy: EditorPolicy | None = None, terminals: Any = None) -> None:
        self.policy = policy if policy is not None else EditorPolicy()
        self.incoming: list[IncomingRequest] = []
        #: Sessions whose nested requests are held (the scenario's test client).
        self.hold: set[str] = set()
        #: Sessions where every request of the agent is held (``--hold-prompt``).
        self.hold_all: set[str] = set()
        self._permissions: dict[str, list[trio.Event]] = {}
        self._changed = trio.Event()
        self._files: Any = None
        if self.policy.workspace is not None:
            from acp_trio.contrib._workspace import WorkspaceFiles

            self._files = WorkspaceFiles([self.policy.workspace])
        self._terminals = terminals

    def _record(self, request: IncomingRequest) -> None:
        self.incoming.append(request)
        self._changed.set()
        self._changed = trio.Event()

    async def changed(self) -> None:
        """Wait for the next request of the agent."""
        await self._changed.wait()

    def requests_of(self, session_id: str, method: str | None = None) -> list[IncomingRequest]:
        return [
            r
            for r in self.incoming
            if isinstance(r.params, dict)
            and r.params.get("sessionId") == session_id
            and method in (None, r.method)
        ]

    async def wait_for_requests(
        self, session_id: str, methods: Sequence[str]
    ) -> dict[str, IncomingRequest]:
        """Wait until a request of each of ``methods`` came for the session."""
        while True:
            found = {m: rs[0] for m in methods if (rs := self.requests_of(session_id, m))}
            if len(found) == len(methods):
                return found
            await self._changed.wait()

    def cancel_permissions(self, session_id: str) -> int:
        """Answer the session's pending permission requests ``cancelled``."""
        events = self._permissions.pop(session_id, [])
        for event in events:
            event.set()
        return len(events)

    async def _hold(self, request: IncomingRequest) -> None:
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            request.answered = "-32800"
            raise

    async def handle_request(self, ctx: RequestContext, method: str, params: Any) -> Any:
        request = IncomingRequest(ctx.id, method, params, trio.current_time())
        self._record(request)
        session_id = params.get("sessionId") if isinstance(params, dict) else None
        if session_id in self.hold_all:
            return await self._hold_any(request, method, session_id)
        if session_id in self.hold or self.policy.workspace is None:
            return await self._scenario(request, method, params, session_id)
        try:
            result = await self._editor(request, method, params)
        except RequestError as exc:
            request.answered = str(exc.code)
            raise
        return result

    async def _editor(self, request: IncomingRequest, method: str, params: Any) -> Any:
        if method == "session/request_permission":
            answer = choose_permission(self.policy.permissions, params)
            outcome = answer["outcome"]
            request.answered = outcome.get("optionId", outcome["outcome"])
            return answer
        if method in _FILE_METHODS:
            helper = getattr(self._files, _FILE_METHODS[method])
        elif method in _TERMINAL_METHODS:
            if self._terminals is None:
                raise RequestError(
                    -32603, "this checker refuses terminals (check-agent --terminals runs them)"
                )
            helper = getattr(self._terminals, _TERMINAL_METHODS[method])
        else:
            raise RequestError.method_not_found(method)
        from acp_trio.schema import METHODS, SchemaValidationError, converter

        try:
            typed = converter.structure(params, METHODS[method].params)
        except (SchemaValidationError, ValueError, TypeError) as exc:
            raise RequestError.invalid_params({"reason": str(exc)}) from None
        result = converter.unstructure(await helper(typed))
        request.answered = "result"
        return result

    async def _hold_any(self, request: IncomingRequest, method: str, session_id: str) -> Any:
        """Hold any request until the agent cancels it; a permission request
        is also answered ``cancelled`` when the checker cancels the session."""
        if method != "session/request_permission":
            await self._hold(request)
        event = trio.Event()
        self._permissions.setdefault(session_id, []).append(event)
        try:
            await event.wait()
        except trio.Cancelled:
            request.answered = "-32800"
            raise
        request.answered = "cancelled"
        return _CANCELLED_OUTCOME

    async def _scenario(
        self, request: IncomingRequest, method: str, params: Any, session_id: Any
    ) -> Any:
        if method == "fs/read_text_file":
            if isinstance(params, dict) and params.get("path") == HOLD_PATH:
                await self._hold(request)
            request.answered = "content"
            return {"content": "x" * 64}
        if method == "fs/write_text_file":
            request.answered = "{}"
            return {}
        if method == "terminal/create":
            await self._hold(request)
        if method == "session/request_permission" and isinstance(session_id, str):
            event = trio.Event()
            self._permissions.setdefault(session_id, []).append(event)
            try:
                await event.wait()
            except trio.Cancelled:
                request.answered = "-32800"
                raise
            request.answered = "cancelled"
            return _CANCELLED_OUTCOME
        request.answered = "-32601"
        raise RequestError.method_not_found(method)


class _LockedSend(trio.abc.SendStream):
    """A send stream two writers share whole writes of: the connection's
    writer (whole frames) and the checker's raw bytes."""

    def __init__(self, inner: trio.abc.SendStream) -> None:
        self._inner = inner
        self._lock = trio.StrictFIFOLock()

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        async with self._lock:
            await self._inner.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self._inner.wait_send_all_might_not_block()

    async def aclose(self) -> None:
        await self._inner.aclose()


class AgentSession:
    """One agent process, its connection, and the checker-client it talks to.

    It lives in a task of its own (see :func:`start_session`), so that its
    process and connection outlive the cancel scopes of the checks using it.
    """

    def __init__(
        self,
        index: int,
        transcript: Transcript,
        process: AgentProcess,
        client: CheckerClient | None = None,
    ) -> None:
        self.index = index
        self.transcript = transcript
        self.process = process
        self.client = client if client is not None else CheckerClient()
        self._send = _LockedSend(process.stream.send_stream)
        self.framed = FramedStream(self._send, process.stream.receive_stream)
        self.conn: Connection | None = None
        self.initialize_result: Any = None
        self.session_id: str | None = None
        self._close = trio.Event()
        self._closed = trio.Event()

    @property
    def connection(self) -> Connection:
        assert self.conn is not None
        return self.conn

    @property
    def alive(self) -> bool:
        return self.conn is not None and not self.conn.closed

    def trace(self, direction: Literal["send", "recv"], frame: bytes) -> None:
        entry = WireEntry(
            self.index,
            "sent" if direction == "send" else "received",
            trio.current_time(),
            bytes(frame),
            _decode(frame),
        )
        self.transcript.add(entry)

    async def send_raw(self, data: bytes) -> None:
        """Write ``data`` exactly, between the connection's frames."""
        now = trio.current_time()
        for line in data.splitlines():
            self.transcript.add(WireEntry(self.index, "sent", now, line, _decode(line), True))
        await self._send.send_all(data)

    def exit_summary(self) -> str:
        """The exit code and stderr tail, if the agent exited."""
        code = self.process.returncode
        if code is None:
            return ""
        text = f"the agent exited with code {code}"
        tail = (self.process.stderr_tail() or b"").decode("utf-8", "replace").strip()
        if tail:
            lines = tail.splitlines()[-3:]
            text += "; stderr: " + " | ".join(line.strip() for line in lines)[-300:]
        return text

    async def aclose(self) -> None:
        """Close the connection and stop the agent; waits until it is done."""
        self._close.set()
        with trio.CancelScope(shield=True):
            await self._closed.wait()


async def _host(
    index: int,
    transcript: Transcript,
    command: Sequence[str],
    cwd: str | os.PathLike[str] | None,
    env: Mapping[str, str] | None,
    policy: EditorPolicy,
    *,
    task_status: trio.TaskStatus[AgentSession],
) -> None:
    session: AgentSession | None = None
    try:
        async with AsyncExitStack() as stack:
            terminals = None
            if policy.terminals:
                from acp_trio.contrib._terminals import open_terminal_manager

                async def approve(params: Any) -> bool:
                    return True  # the user asked for --terminals

                terminals = await stack.enter_async_context(
                    open_terminal_manager(approve, cwd=policy.workspace, terminate_grace=1.0)
                )
            process = await stack.enter_async_context(
                open_agent_process(
                    command,
                    cwd=cwd,
                    env=env,
                    stderr="capture",
                    shutdown_grace=1.0,
                    terminate_grace=1.0,
                )
            )
            client = CheckerClient(policy, terminals)
            session = AgentSession(index, transcript, process, client)
            config = ConnectionConfig(
                trace=session.trace, exit_details=process.exit_details, close_timeout=1.0
            )
            conn = await stack.enter_async_context(
                open_connection(session.framed, session.client, config=config)
            )
            session.conn = conn
            task_status.started(session)
            await session._close.wait()
    finally:
        if session is not None:
            session._closed.set()


async def start_session(
    nursery: trio.Nursery,
    index: int,
    transcript: Transcript,
    command: Sequence[str],
    *,
    cwd: str | os.PathLike[str] | None,
    env: Mapping[str, str] | None,
    policy: EditorPolicy | None = None,
) -> AgentSession:
    """Spawn the agent and connect to it, in a task of ``nursery``. Raises
    ``OSError`` if it cannot be started. Close it with
    :meth:`AgentSession.aclose`."""
    session: AgentSession = await nursery.start(
        _host, index, transcript, command, cwd, env, policy or EditorPolicy()
    )
    return session
