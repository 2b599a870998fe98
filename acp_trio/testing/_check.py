"""``check_agent``: conformance checks for any stdio ACP agent, any SDK.

The checker spawns the agent with :func:`acp_trio.open_agent_process`
(stderr captured) and talks to it mostly through a JSON-level
:class:`acp_trio.Connection` whose handler plays the matching test client of
the scenario vocabulary; malformed input is written as raw bytes between the
connection's frames. Every line both ways is kept in one transcript: checks
wait on it, and the last checks (stdout hygiene, schema, one reply per
request) judge all of it.

Theory of operation
===================

- One *main* agent process serves most checks; a check that kills it (a
  crash on a batch array, say) fails, and the next check that needs the
  agent starts a new one (initialize, ``session/new``). ``initialize`` and
  ``session-new`` always run first: every other check needs them, and when
  they fail the others are skipped, saying why.
- ``version-negotiation`` uses a process of its own (one connection speaks
  one version).
- Every wait is bounded by ``timeout`` and a dead agent ends a wait at once,
  so a hanging, crashing or echoing agent fails within seconds.
- A check never passes without having seen what it checks: when it cannot
  run it is skipped with the reason.
- Scenario checks run when the agent answers ``echo <random token>`` with
  that token (or when forced); they exercise cancellation in depth.
"""

from __future__ import annotations

import os
import secrets
import shlex
import tempfile
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from contextlib import asynccontextmanager, contextmanager, suppress
from typing import Any, Final

import attrs
import trio

from acp_trio._exceptions import ConnectionClosed, ProtocolError, RequestError
from acp_trio._groups import plain_exceptions
from acp_trio._jsonrpc import InvalidMessage, classify
from acp_trio._requests import PendingRequest
from acp_trio.testing._check_report import CheckReport, CheckResult, Level, Verdict
from acp_trio.testing._check_wire import (
    PERMISSION_POLICIES,
    AgentSession,
    EditorPolicy,
    IncomingRequest,
    Transcript,
    WireEntry,
    same_id,
    start_session,
)
from acp_trio.testing._peer import NOT_JSON
from acp_trio.testing._scenario import HOLD_PATH
from acp_trio.testing._schema_check import MessageValidator, TypedValidator, load_validator

__all__ = ["CHECKS", "GROUPS", "CheckInfo", "check_agent", "promoted_levels"]

STOP_REASONS: Final = frozenset(
    {"end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled"}
)
CANCELLED: Final = -32800
NESTED: Final = ("fs/read_text_file", "terminal/create", "session/request_permission")
# How long to wait for cancels of nested requests after the prompt's answer,
# and for unwanted replies to notifications.
GRACE: Final = 1.0
QUIET: Final = 0.3
# The wire lines (and stderr lines) a failure shows, and their width.
EVIDENCE_LINES: Final = 12
EVIDENCE_WIDTH: Final = 300


def _wire_line(entry: WireEntry) -> str:
    arrow = ">" if entry.direction == "sent" else "<"
    text = entry.data.decode("utf-8", "replace")
    if len(text) > EVIDENCE_WIDTH:
        text = text[: EVIDENCE_WIDTH - 3] + "..."
    return f"{arrow} [{entry.session}] {text}"


class _Fail(Exception):
    def __init__(self, reason: str, evidence: Sequence[WireEntry] = ()) -> None:
        super().__init__(reason)
        self.reason = reason
        #: The lines that prove it (default: the check's last lines).
        self.evidence = tuple(evidence)


class _Skip(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@attrs.frozen
class _Pass:
    reason: str
    latency: float | None = None


@attrs.frozen
class CheckInfo:
    """One check of :func:`check_agent`: its name, level and what it checks."""

    name: str
    level: Level
    description: str


CheckFunc = Callable[["_Runner"], Awaitable[_Pass]]
_REGISTRY: list[tuple[CheckInfo, CheckFunc]] = []
# Checks that always run: every other check needs them.
_SETUP: Final = ("initialize", "session-new")


def _check(name: str, level: Level, description: str) -> Callable[[CheckFunc], CheckFunc]:
    def register(func: CheckFunc) -> CheckFunc:
        _REGISTRY.append((CheckInfo(name, level, description), func))
        return func

    return register


def _brief(value: Any, limit: int = 160) -> str:
    if isinstance(value, bytes | bytearray):
        text = bytes(value).decode("utf-8", "replace")
    elif isinstance(value, RequestError):
        text = f"error {value.code} ({value.message})"
        if value.data is not None:
            text += f" data {value.data!r}"
    else:
        text = repr(value)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _prompt(session_id: str, text: str) -> dict[str, Any]:
    return {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}


def _init_params(version: int) -> dict[str, Any]:
    from acp_trio import __version__

    return {
        "protocolVersion": version,
        "clientCapabilities": {
            "fs": {"readTextFile": True, "writeTextFile": True},
            "terminal": True,
        },
        "clientInfo": {"name": "acp_trio-check-agent", "version": __version__},
    }


@attrs.frozen
class _Reply:
    """How the agent answered one request."""

    result: Any = None
    error: RequestError | None = None
    latency: float = 0.0

    @property
    def stop_reason(self) -> Any:
        return self.result.get("stopReason") if isinstance(self.result, dict) else None

    def describe(self) -> str:
        if self.error is not None:
            return _brief(self.error)
        if self.stop_reason is not None:
            return f"stopReason {self.stop_reason!r}"
        return f"result {_brief(self.result)}"

    @property
    def cancelled(self) -> bool:
        """``-32800`` or ``stopReason: cancelled``."""
        if self.error is not None:
            return self.error.code == CANCELLED
        return bool(self.stop_reason == "cancelled")


class _Runner:
    def __init__(
        self,
        nursery: trio.Nursery,
        command: Sequence[str],
        *,
        timeout: float,
        scenario: bool | None,
        schema: str | os.PathLike[str] | None,
        cwd: str | os.PathLike[str] | None,
        env: Mapping[str, str] | None,
        cancel_prompt: str = "wait_for_cancel",
        promoted: frozenset[Level] = frozenset(),
        policy: EditorPolicy | None = None,
        validator: MessageValidator | TypedValidator | None = None,
        init_timeout: float | None = None,
        hold_prompt: str | None = None,
    ) -> None:
        self.nursery = nursery
        self.cancel_prompt = cancel_prompt
        self.hold_prompt = hold_prompt
        self.command = tuple(command)
        self.timeout = timeout
        self.force_scenario = scenario
        self.schema = schema
        self.cwd = cwd
        self.policy = policy if policy is not None else EditorPolicy()
        self.session_cwd = os.path.abspath(
            self.policy.workspace
            if self.policy.workspace is not None
            else cwd
            if cwd is not None
            else os.getcwd()
        )
        self.env = env
        self.transcript = Transcript()
        self.sessions: list[AgentSession] = []
        self.main: AgentSession | None = None
        self.setup_error: str | None = None
        self.session_error: str | None = None
        self.init_result: Any = None
        self.scenario: bool | None = scenario
        self.scenario_reason = {
            None: "not checked",
            True: "forced on",
            False: "turned off",
        }[scenario]
        self.token = "acp-check-" + secrets.token_hex(4)
        self.promoted = promoted
        self.init_timeout = max(3 * timeout, 15.0) if init_timeout is None else init_timeout
        self.validator: MessageValidator | TypedValidator = (
            validator if validator is not None else load_validator(schema)
        )
        self.auth_required: str | None = None
        # (session, id) of our requests the agent died before answering.
        self.abandoned: set[tuple[int, Any]] = set()

    # -- processes and sessions

    async def spawn(self) -> AgentSession:
        try:
            session = await start_session(
                self.nursery,
                len(self.sessions) + 1,
                self.transcript,
                self.command,
                cwd=self.cwd,
                env=self.env,
                policy=self.policy,
            )
        except OSError as exc:
            raise _Fail(f"cannot start the agent ({shlex.join(self.command)}): {exc}") from None
        self.sessions.append(session)
        return session

    async def close_all(self) -> None:
        async with trio.open_nursery() as nursery:
            for session in self.sessions:
                nursery.start_soon(session.aclose)

    def diagnose(self, session: AgentSession | None) -> str:
        """Why an agent may not have answered: exit, echo, garbage."""
        if session is None:
            return ""
        notes: list[str] = []
        summary = session.exit_summary()
        if summary:
            notes.append(summary)
        entries = self.transcript.since(0, session.index)
        sent = {e.data for e in entries if e.direction == "sent" and e.is_request}
        received = [e for e in entries if e.direction == "received"]
        if any(e.data in sent for e in received if e.is_request):
            notes.append("the agent echoes what it reads back to its stdout")
        junk = [e for e in received if e.message is NOT_JSON]
        if junk:
            notes.append(f"its stdout has non-JSON lines (first: {_brief(junk[0].data, 60)!r})")
        return "".join(f"; {note}" for note in notes)

    @contextmanager
    def waiting(
        self,
        what: str,
        session: AgentSession | None,
        timeout: float | None = None,
        name: str | None = None,
    ) -> Iterator[None]:
        """Bound a wait; turn a timeout or a closed connection into a failure.
        ``name``: the option that set ``timeout``, for the message."""
        limit = self.timeout if timeout is None else timeout
        if name is None:
            name = "--timeout" if limit == self.timeout else "derived from --timeout"
        try:
            with trio.fail_after(limit):
                yield
        except trio.TooSlowError:
            raise _Fail(f"no {what} within {limit:g} s ({name}){self.diagnose(session)}") from None
        except ConnectionClosed as exc:
            raise _Fail(
                f"the connection closed while waiting for {what}: {exc.reason}"
                f"{self.diagnose(session)}"
            ) from None
        except ProtocolError as exc:
            raise _Fail(f"invalid {what}: {exc}{self.diagnose(session)}") from None

    async def request(
        self,
        session: AgentSession,
        method: str,
        params: Any,
        what: str | None = None,
        limit: float | None = None,
    ) -> _Reply:
        start = trio.current_time()
        request_id: Any = None
        try:
            name = "--init-timeout" if method == "initialize" else None
            with self.waiting(what or f"answer to {method}", session, limit, name):
                async with session.connection.open_request(method, params) as pending:
                    request_id = pending.id
                    try:
                        result = await pending.result()
                    except RequestError as exc:
                        return _Reply(error=exc, latency=trio.current_time() - start)
        except _Fail:
            if request_id is not None and not session.alive:
                # Lost with the agent: the check that waited says so.
                self.abandoned.add((session.index, request_id))
            raise
        return _Reply(result=result, latency=trio.current_time() - start)

    async def call(
        self,
        session: AgentSession,
        method: str,
        params: Any,
        what: str | None = None,
        limit: float | None = None,
    ) -> _Reply:
        """A request that must succeed with an object result."""
        reply = await self.request(session, method, params, what, limit)
        if reply.error is not None:
            raise _Fail(f"{method} was answered with {_brief(reply.error)}{self.diagnose(session)}")
        if not isinstance(reply.result, dict):
            raise _Fail(f"{method} was answered with {_brief(reply.result)}, not an object")
        return reply

    async def initialize(self, session: AgentSession, version: int) -> _Reply:
        # A process's first answer: real agents take seconds to start.
        reply = await self.call(
            session, "initialize", _init_params(version), limit=self.init_timeout
        )
        session.initialize_result = reply.result
        return reply

    async def new_session(self, session: AgentSession) -> tuple[str, float]:
        params = {"cwd": self.session_cwd, "mcpServers": []}
        reply = await self.request(session, "session/new", params)
        methods = self.auth_methods()
        if reply.error is not None and (reply.error.code == -32000 or methods):
            self.auth_required = methods or "(no authMethods listed)"
            raise _Skip(
                f"authentication required: {self.auth_required} (session/new was answered "
                f"with {_brief(reply.error)}; this checker does not authenticate)"
            )
        if reply.error is not None:
            raise _Fail(f"session/new was answered with {_brief(reply.error)}")
        result = reply.result
        session_id = result.get("sessionId") if isinstance(result, dict) else None
        if not isinstance(session_id, str):
            raise _Fail(f"session/new answered {_brief(result)}: no string sessionId")
        return session_id, reply.latency

    def auth_methods(self) -> str:
        """The ``authMethods`` of the initialize result, named, or ``""``."""
        init = self.init_result if isinstance(self.init_result, dict) else {}
        methods = init.get("authMethods")
        if not isinstance(methods, list) or not methods:
            return ""
        names = [
            str(m.get("id") or m.get("name") or "?") if isinstance(m, dict) else _brief(m, 40)
            for m in methods
        ]
        return ", ".join(names)

    async def ensure_main(self, *, need_session: bool = True) -> AgentSession:
        """The main agent, restarted if it died. Skips the check when setup
        failed (the setup check says why)."""
        if self.setup_error is not None:
            raise _Skip(f"needs a working initialize ({self.setup_error})")
        if need_session and self.auth_required is not None:
            raise _Skip(f"authentication required: {self.auth_required}")
        if need_session and self.session_error is not None:
            raise _Skip(f"needs a session ({self.session_error})")
        if self.main is not None and self.main.alive:
            return self.main
        try:
            session = await self.spawn()
            await self.initialize(session, 1)
            if self.session_error is None and self.auth_required is None:
                session.session_id, _ = await self.new_session(session)
        except (_Fail, _Skip) as exc:
            raise _Fail(f"the agent could not be restarted: {exc.reason}") from None
        self.main = session
        return session

    async def fresh_session(
        self, *, hold: bool = False, hold_all: bool = False
    ) -> tuple[AgentSession, str]:
        """A new session on the main agent; ``hold``: the checker plays the
        scenario's test client in it (nested requests wait to be cancelled);
        ``hold_all``: every request of the agent in it waits to be cancelled."""
        agent = await self.ensure_main()
        session_id, _ = await self.new_session(agent)
        if hold:
            agent.client.hold.add(session_id)
        if hold_all:
            agent.client.hold_all.add(session_id)
        return agent, session_id

    def held_mode(self) -> bool:
        """Whether the cancellation checks run on :attr:`hold_prompt` (every
        request of the agent held) rather than the scenario vocabulary."""
        return self.hold_prompt is not None and self.force_scenario is not True

    async def held_requests(
        self, session: AgentSession, session_id: str, pending: PendingRequest
    ) -> list[IncomingRequest]:
        """The requests the agent sends the client on :attr:`hold_prompt`
        (held): waits for the first, then a moment for any sent with it.
        Skips if the prompt ends, or sends nothing, first."""
        client = session.client
        with trio.move_on_after(self.timeout), self.waiting("a request", session):
            while not client.requests_of(session_id) and not pending.done:
                with trio.move_on_after(0.05):  # or the prompt's answer
                    await client.changed()
        held = client.requests_of(session_id)
        if not held:
            if not session.alive:
                raise _Fail("the agent exited during the hold prompt" + self.diagnose(session))
            ended = ""
            if pending.done:
                reply = await self.outcome(session, pending.result, "answer", 0.1)
                ended = f" (it answered {reply.describe() if reply else '?'})"
            raise _Skip(
                f"the hold prompt {self.hold_prompt!r} did not make the agent send the client "
                f"a request within {self.timeout:g} s{ended}; choose another with --hold-prompt"
            )
        await trio.sleep(0.2)
        return client.requests_of(session_id)

    async def probe(self, session: AgentSession, after: str) -> None:
        """The agent must still answer: ``echo`` when it speaks the scenario
        vocabulary and has a session, else a ``session/new`` answered with
        anything (an error too: an agent that needs authentication answers)."""
        try:
            if self.scenario and session.session_id is not None:
                token = self.token + "-probe"
                reply = await self.request(
                    session, "session/prompt", _prompt(session.session_id, f"echo {token}")
                )
                if reply.stop_reason != "end_turn":
                    raise _Fail(f"echo was answered with {reply.describe()}")
            else:
                params = {"cwd": self.session_cwd, "mcpServers": []}
                await self.request(session, "session/new", params)
        except _Fail as exc:
            raise _Fail(f"the agent stopped answering after {after}: {exc.reason}") from None

    async def try_probe(self, session: AgentSession, after: str) -> _Fail | None:
        try:
            await self.probe(session, after)
        except _Fail as exc:
            return exc
        return None

    # -- the wire

    def texts(self, session: AgentSession, session_id: str, mark: int) -> list[str]:
        out: list[str] = []
        for entry in self.updates(session, session_id, mark):
            update = entry.params.get("update")
            if not isinstance(update, dict) or update.get("sessionUpdate") != (
                "agent_message_chunk"
            ):
                continue
            content = update.get("content")
            if isinstance(content, dict) and content.get("type") == "text":
                text = content.get("text")
                if isinstance(text, str):
                    out.append(text)
        return out

    def updates(self, session: AgentSession, session_id: str | None, mark: int) -> list[WireEntry]:
        return [
            e
            for e in self.transcript.received(session.index, mark)
            if e.is_notification
            and e.method == "session/update"
            and isinstance(e.params, dict)
            and (session_id is None or e.params.get("sessionId") == session_id)
        ]

    def reply_entry(self, session: AgentSession, request_id: Any) -> WireEntry | None:
        for entry in self.transcript.received(session.index):
            if entry.is_response and same_id(entry.message.get("id"), request_id):
                return entry
        return None

    def stray_replies(self, session: AgentSession, mark: int) -> list[WireEntry]:
        """Replies since ``mark`` that answer no request of ours: to a
        notification (``id`` null or missing), or to an id never sent."""
        sent_ids = [
            e.message["id"]
            for e in self.transcript.since(0, session.index)
            if e.direction == "sent" and e.is_request and not e.raw
        ]
        out = []
        for entry in self.transcript.received(session.index, mark):
            message = entry.message
            if isinstance(message, dict) and "method" not in message:
                reply_id = message.get("id")
                if reply_id is None or not any(same_id(reply_id, i) for i in sent_ids):
                    out.append(entry)
        return out

    async def wait_entry(
        self, session: AgentSession, match: Callable[[WireEntry], bool], mark: int, what: str
    ) -> WireEntry:
        """The first received line that matches; fails at once if the
        agent's connection closes first."""
        found: list[WireEntry] = []

        def ours(entry: WireEntry) -> bool:
            return (
                entry.session == session.index and entry.direction == "received" and (match(entry))
            )

        with self.waiting(what, session):
            async with trio.open_nursery() as nursery:

                async def watch() -> None:
                    found.append(await self.transcript.wait_for(ours, mark))
                    nursery.cancel_scope.cancel()

                async def closed() -> None:
                    await session.connection.wait_closed()
                    nursery.cancel_scope.cancel()

                nursery.start_soon(watch)
                nursery.start_soon(closed)
        if found:
            return found[0]
        raise _Fail(
            f"the agent closed the connection while we waited for {what}{self.diagnose(session)}"
        )

    async def wait_cancelled(
        self, session: AgentSession, requests: Iterable[IncomingRequest], mark: int
    ) -> list[IncomingRequest]:
        """Wait (briefly) until each request got a ``$/cancel_request``;
        return those that did not."""
        pending = list(requests)
        with trio.move_on_after(min(GRACE, self.timeout)):
            while True:
                seen = self.transcript.cancels_received(session.index, mark)
                pending = [r for r in pending if not any(same_id(r.id, c) for c in seen)]
                if not pending:
                    break
                await self.transcript.wait_for(lambda e: True, self.transcript.mark())
        return pending

    @asynccontextmanager
    async def open_prompt(
        self, session: AgentSession, session_id: str, text: str
    ) -> AsyncIterator[PendingRequest]:
        """A running prompt; leaving the block unanswered cancels it."""
        params = _prompt(session_id, text)
        async with session.connection.open_request("session/prompt", params) as pending:
            yield pending

    async def outcome(
        self,
        session: AgentSession,
        get: Callable[[], Awaitable[Any]],
        what: str,
        limit: float | None = None,
    ) -> _Reply | None:
        """The answer ``get()`` waits for; ``None`` if none came in time."""
        start = trio.current_time()
        limit = self.timeout if limit is None else limit
        with trio.move_on_after(limit), self.waiting(what, session, limit + 1):
            try:
                return _Reply(result=await get(), latency=trio.current_time() - start)
            except RequestError as exc:
                return _Reply(error=exc, latency=trio.current_time() - start)
        return None

    async def end_turn_anyway(
        self, session: AgentSession, session_id: str, pending: PendingRequest
    ) -> str:
        """Clean-up after an ignored cancel: ``session/cancel`` the turn so
        later checks start clean; says how that went."""
        await session.connection.notify("session/cancel", {"sessionId": session_id})
        session.client.cancel_permissions(session_id)
        reply = await self.outcome(session, pending.result, "answer", min(2.0, self.timeout))
        if reply is None:
            return "session/cancel did not end it either"
        return f"session/cancel then ended it with {reply.describe()}"

    async def nested_requests(
        self, session: AgentSession, session_id: str, pending: PendingRequest
    ) -> dict[str, IncomingRequest]:
        client = session.client
        try:
            with self.waiting("nested requests", session):
                return await client.wait_for_requests(session_id, NESTED)
        except _Fail:
            if not session.alive:
                raise
            got = sorted({r.method for r in client.requests_of(session_id)})
            missing = [m for m in NESTED if m not in got]
            early = ""
            if pending.done:
                reply = await self.outcome(session, pending.result, "answer", 0.1)
                early = f"; the prompt already ended with {reply.describe() if reply else '?'}"
            raise _Fail(
                f"the nested prompt sent {', '.join(got) or 'nothing'} but not "
                f"{', '.join(missing)} within {self.timeout:g} s{early}"
            ) from None

    # -- scenario

    def note_echo(self, texts: list[str], reply: _Reply, token: str) -> None:
        if self.scenario is not None:
            return
        if token in texts and reply.stop_reason == "end_turn":
            self.scenario = True
            self.scenario_reason = "detected (the agent answers `echo <token>`)"
        else:
            self.scenario = False
            answer = _brief(texts, 60) if texts else "no text"
            self.scenario_reason = (
                f"not detected (`echo {token}` was answered with {answer} and "
                f"{reply.describe()}); force them with --scenario"
            )

    async def echo(self, session: AgentSession, session_id: str) -> tuple[_Reply, list[str]]:
        token = self.token
        mark = self.transcript.mark()
        reply = await self.request(
            session, "session/prompt", _prompt(session_id, f"echo {token}"), "answer to a prompt"
        )
        texts = self.texts(session, session_id, mark)
        self.note_echo(texts, reply, token)
        return reply, texts

    async def require_scenario(self) -> None:
        if self.scenario is None:
            session = await self.ensure_main()
            assert session.session_id is not None
            await self.echo(session, session.session_id)
        if not self.scenario:
            raise _Skip(f"scenario vocabulary {self.scenario_reason}")

    # -- running

    def stderr_tail(self) -> str:
        """The last lines of the stderr of the agent processes of the check."""
        session = self.main if self.main is not None else None
        if session is None and self.sessions:
            session = self.sessions[-1]
        if session is None:
            return ""
        tail = (session.process.stderr_tail() or b"").decode("utf-8", "replace")
        lines = [line.rstrip() for line in tail.strip().splitlines()][-EVIDENCE_LINES:]
        return "\n".join(line[:EVIDENCE_WIDTH] for line in lines)

    def failure(self, info: CheckInfo, reason: str, evidence: Sequence[WireEntry]) -> CheckResult:
        return CheckResult(
            info.name,
            info.level,
            Verdict.FAIL,
            reason,
            None,
            info.description,
            evidence=tuple(_wire_line(e) for e in evidence[-EVIDENCE_LINES:]),
            stderr=self.stderr_tail(),
        )

    async def run(self, info: CheckInfo, func: CheckFunc) -> CheckResult:
        limit = 3 * self.timeout + 5 + self.init_timeout
        mark = self.transcript.mark()
        try:
            with trio.fail_after(limit):
                outcome = await func(self)
        except _Fail as exc:
            evidence = exc.evidence or self.transcript.since(mark)
            return self.failure(info, exc.reason, evidence)
        except _Skip as exc:
            return CheckResult(
                info.name, info.level, Verdict.SKIP, exc.reason, None, info.description
            )
        except trio.TooSlowError:
            reason = (
                f"the check did not finish within {limit:g} s (3 x --timeout + 5 + "
                "--init-timeout)"
                f"{self.diagnose(self.main)}"
            )
            return self.failure(info, reason, self.transcript.since(mark))
        except (ConnectionClosed, ProtocolError, RequestError) as exc:
            reason = f"{type(exc).__name__}: {exc}{self.diagnose(self.main)}"
            return self.failure(info, reason, self.transcript.since(mark))
        except Exception as exc:  # a bug of the checker: one verdict, not a crash
            reason = f"internal error of the checker: {exc!r}"
            return self.failure(info, reason, self.transcript.since(mark))
        lines = self.transcript.since(mark)[-EVIDENCE_LINES:]
        return CheckResult(
            info.name,
            info.level,
            Verdict.PASS,
            outcome.reason,
            outcome.latency,
            info.description,
            evidence=tuple(_wire_line(e) for e in lines),
        )


# ---------------------------------------------------------------------------
# The checks, in the order they run.

REQUIRED, RECOMMENDED, CANCELLATION = Level.REQUIRED, Level.RECOMMENDED, Level.CANCELLATION


@_check("initialize", REQUIRED, "initialize asking protocol version 1 is answered with 1")
async def _initialize(r: _Runner) -> _Pass:
    try:
        session = r.main = await r.spawn()
        reply = await r.initialize(session, 1)
        version = reply.result.get("protocolVersion")
        if type(version) is not int:
            raise _Fail(f"protocolVersion is {_brief(version)}, not an integer")
        if version != 1:
            raise _Fail(
                f"a client asking protocol version 1 got {version}: an agent that speaks "
                "version 1 must answer 1 (this checker speaks only 1)"
            )
    except _Fail as exc:
        r.setup_error = "initialize failed"
        raise _Fail(exc.reason) from None
    r.init_result = reply.result
    auth = reply.result.get("authMethods")
    note = f"; authMethods: {_brief(auth, 60)}" if auth else ""
    return _Pass(f"protocolVersion 1{note}", reply.latency)


@_check(
    "version-negotiation",
    REQUIRED,
    "initialize asking version 65535 is answered with the agent's own latest, not an echo",
)
async def _version_negotiation(r: _Runner) -> _Pass:
    if r.setup_error is not None:
        raise _Skip(f"needs a working initialize ({r.setup_error})")
    session = await r.spawn()
    try:
        reply = await r.initialize(session, 65535)
    finally:
        await session.aclose()
    version = reply.result.get("protocolVersion")
    if type(version) is not int:
        raise _Fail(f"protocolVersion is {_brief(version)}, not an integer")
    if version == 65535:
        raise _Fail(
            "echoed protocolVersion 65535: an agent that does not support the version "
            "asked for must answer its own latest version"
        )
    if not 1 <= version < 65535:
        raise _Fail(f"answered protocolVersion {version}, not a version it can speak")
    return _Pass(f"asked 65535, answered {version}", reply.latency)


@_check("agent-info", RECOMMENDED, "initialize result names the agent (agentInfo)")
async def _agent_info(r: _Runner) -> _Pass:
    if r.init_result is None:
        raise _Skip(f"needs a working initialize ({r.setup_error})")
    info = r.init_result.get("agentInfo")
    if not isinstance(info, dict):
        raise _Fail("no agentInfo in the initialize result (name and version should be sent)")
    name, version = info.get("name"), info.get("version")
    if not isinstance(name, str) or not isinstance(version, str):
        raise _Fail(f"agentInfo {_brief(info)} lacks a string name or version")
    return _Pass(f"{name} {version}")


@_check("session-new", REQUIRED, "session/new returns a sessionId, a new one each time")
async def _session_new(r: _Runner) -> _Pass:
    session = await r.ensure_main(need_session=False)
    try:
        first, latency = await r.new_session(session)
        second, _ = await r.new_session(session)
    except (_Fail, _Skip) as exc:
        r.session_error = "session/new failed" if isinstance(exc, _Fail) else exc.reason
        raise
    if first == second:
        r.session_error = "session/new failed"
        raise _Fail(f"two session/new calls returned the same sessionId {first!r}")
    session.session_id = first
    return _Pass(f"sessionId {first!r}, then {second!r}", latency)


@_check(
    "prompt", REQUIRED, "a prompt is answered with a valid stopReason; updates name its session"
)
async def _prompt_check(r: _Runner) -> _Pass:
    session = await r.ensure_main()
    assert session.session_id is not None
    mark = r.transcript.mark()
    reply, _ = await r.echo(session, session.session_id)
    if reply.error is not None:
        raise _Fail(f"the prompt `echo ...` was answered with {_brief(reply.error)}")
    if reply.stop_reason not in STOP_REASONS:
        raise _Fail(
            f"the prompt was answered with {_brief(reply.result)}: stopReason must be one "
            f"of {', '.join(sorted(STOP_REASONS))}"
        )
    updates = r.updates(session, None, mark)
    foreign = [u for u in updates if u.params.get("sessionId") != session.session_id]
    if foreign:
        raise _Fail(
            f"a session/update of the turn names another session: {_brief(foreign[0].data)}"
        )
    return _Pass(
        f"stopReason {reply.stop_reason!r} after {len(updates)} session/update", reply.latency
    )


@_check("session-cancel", REQUIRED, "session/cancel of a running turn answers stopReason cancelled")
async def _session_cancel(r: _Runner) -> _Pass:
    held = r.held_mode()
    session, session_id = await r.fresh_session(hold_all=held)
    conn = session.connection
    text = r.hold_prompt if r.hold_prompt is not None and held else r.cancel_prompt
    async with r.open_prompt(session, session_id, text) as pending:
        if held:
            await r.held_requests(session, session_id, pending)
        else:
            await trio.sleep(0.2)
        if pending.done:
            early = await r.outcome(session, pending.result, "answer")
            raise _Skip(
                f"the turn ended ({early.describe() if early else '?'}) before it could be "
                f"cancelled; the prompt {r.cancel_prompt!r} has to keep the agent busy "
                "(choose another with cancel_prompt / --cancel-prompt)"
            )
        mark = r.transcript.mark()
        await conn.notify("session/cancel", {"sessionId": session_id})
        session.client.cancel_permissions(session_id)
        reply = await r.outcome(session, pending.result, "answer after session/cancel")
        if reply is None:
            raise _Fail(f"no answer within {r.timeout:g} s (--timeout) after session/cancel")
    if reply.error is not None:
        raise _Fail(
            f"the cancelled turn was answered with {_brief(reply.error)}: ACP requires the "
            'result stopReason "cancelled", not an error'
        )
    if reply.stop_reason != "cancelled":
        raise _Fail(
            f'answered {reply.describe()} after session/cancel: ACP requires stopReason "cancelled"'
        )
    await trio.sleep(0.1)
    answer = r.reply_entry(session, pending.id)
    if answer is not None:
        late = [u for u in r.updates(session, session_id, mark) if u.time > answer.time]
        if late:
            raise _Fail(
                f"{len(late)} session/update arrived after the turn's answer; all updates "
                "of a turn come before it"
            )
    stray = r.stray_replies(session, mark)
    if stray:
        raise _Fail(f"the session/cancel notification was answered: {_brief(stray[0].data)}")
    return _Pass(
        f"stopReason 'cancelled' {reply.latency * 1000:.0f} ms after session/cancel", reply.latency
    )


@_check(
    "unknown-method", REQUIRED, "an unknown request method (plain and `_` extension) gets -32601"
)
async def _unknown_method(r: _Runner) -> _Pass:
    session = await r.ensure_main(need_session=False)
    latency = None
    for method in ("acp_trio_check/no_such_method", "_acp_trio_check/no_such_method"):
        reply = await r.request(session, method, {"acp_trio_check": True})
        latency = reply.latency if latency is None else latency
        if reply.error is None:
            raise _Fail(
                f"{method} was answered with a result {_brief(reply.result)}: expected -32601"
            )
        if reply.error.code != -32601:
            raise _Fail(f"{method} was answered with {_brief(reply.error)}: expected -32601")
    return _Pass("-32601 for both", latency)


@_check("invalid-params", RECOMMENDED, "session/new with ill-typed params gets -32602")
async def _invalid_params(r: _Runner) -> _Pass:
    session = await r.ensure_main(need_session=False)
    reply = await r.request(session, "session/new", {"cwd": 42, "mcpServers": "none"})
    if reply.error is None:
        raise _Fail(
            f'session/new with cwd 42 and mcpServers "none" was answered with '
            f"{_brief(reply.result)}: expected -32602"
        )
    if reply.error.code == -32000 and r.auth_required is not None:
        raise _Skip(
            f"authentication required: {r.auth_required} (session/new is refused before its "
            "params are looked at)"
        )
    if reply.error.code != -32602:
        raise _Fail(f"session/new with ill-typed params got {_brief(reply.error)}: expected -32602")
    return _Pass("-32602", reply.latency)


@_check("unknown-notification", REQUIRED, "unknown notifications get no reply; the agent goes on")
async def _unknown_notification(r: _Runner) -> _Pass:
    session = await r.ensure_main(need_session=False)
    mark = r.transcript.mark()
    methods = (
        "acp_trio_check/unknown_notification",
        "_acp_trio_check/unknown_notification",
        "$/acp_trio_check/unknown",
    )
    for method in methods:
        await session.connection.notify(method, {"acp_trio_check": True})
    await trio.sleep(QUIET)
    # The probe's round trip also gives a slow reply time to show up.
    probe = await r.try_probe(session, "unknown notifications")
    stray = r.stray_replies(session, mark)
    if stray:
        raise _Fail(
            f"answered a notification (notifications never get a reply): {_brief(stray[0].data)}",
            stray[:3],
        )
    if probe is not None:
        raise probe
    return _Pass(f"{len(methods)} unknown notifications ignored; the agent still answers")


@_check(
    "stray-cancels",
    REQUIRED,
    "$/cancel_request for a finished, unknown, repeated or malformed id: no reply, no effect",
)
async def _stray_cancels(r: _Runner) -> _Pass:
    session = await r.ensure_main(need_session=False)
    conn = session.connection
    params = {"cwd": r.session_cwd, "mcpServers": []}
    with r.waiting("answer to session/new", session):
        async with conn.open_request("session/new", params) as done:
            with suppress(RequestError):  # refused (authentication, say): finished too
                await done.result()
    mark = r.transcript.mark()
    for cancel in (
        {"requestId": done.id},  # finished
        {"requestId": done.id},  # repeated
        {"requestId": 987654321},  # unknown
        {"requestId": "acp-check-unknown"},  # unknown
        {"requestId": {"not": "an id"}},  # malformed
        {},  # malformed
    ):
        try:
            await conn.notify("$/cancel_request", cancel)
        except ConnectionClosed as exc:
            # The agent died on an earlier one: the write met the closed pipe
            # before the probe could (the scheduler decides which comes first).
            raise _Fail(
                f"the agent stopped answering after stray $/cancel_request: {exc.reason}"
                f"{r.diagnose(session)}"
            ) from None
    await trio.sleep(QUIET)
    probe = await r.try_probe(session, "stray $/cancel_request")
    stray = r.stray_replies(session, mark)
    if stray:
        raise _Fail(f"a $/cancel_request was answered: {_brief(stray[0].data)}", stray[:3])
    again = [
        e
        for e in r.transcript.received(session.index, mark)
        if e.is_response and same_id(e.message.get("id"), done.id)
    ]
    if again:
        raise _Fail(
            f"a late $/cancel_request made the agent answer again: {_brief(again[0].data)}",
            again[:3],
        )
    if probe is not None:
        raise probe
    return _Pass("6 stray $/cancel_request ignored; the agent still answers")


@_check(
    "cancel-request-prompt",
    CANCELLATION,
    "$/cancel_request of a running `wait_for_cancel` prompt: -32800 or stopReason cancelled",
)
async def _cancel_request_prompt(r: _Runner) -> _Pass:
    held = r.held_mode()
    if not held:
        await r.require_scenario()
    session, session_id = await r.fresh_session(hold_all=held)
    text = r.hold_prompt if r.hold_prompt is not None and held else "wait_for_cancel"
    async with r.open_prompt(session, session_id, text) as pending:
        if held:
            await r.held_requests(session, session_id, pending)
        else:
            await trio.sleep(0.1)
        if pending.done:
            early = await r.outcome(session, pending.result, "answer")
            raise _Fail(f"`{text}` ended without a cancel: {early.describe() if early else '?'}")
        reply = await r.outcome(session, pending.cancel_and_wait, "answer after $/cancel_request")
        if reply is None:
            after = await r.end_turn_anyway(session, session_id, pending)
            raise _Fail(
                f"no answer within {r.timeout:g} s (--timeout) after $/cancel_request of the "
                f"prompt (the agent ignores $/cancel_request?); {after}"
            )
    if not reply.cancelled:
        raise _Fail(
            f"answered {reply.describe()} after $/cancel_request: expected -32800 or "
            'stopReason "cancelled"'
        )
    return _Pass(
        f"{reply.describe()} {reply.latency * 1000:.0f} ms after $/cancel_request", reply.latency
    )


def _cancel_report(requests: Iterable[IncomingRequest]) -> str:
    return ", ".join(f"{r.method} (id {r.id!r})" for r in requests)


async def _held_cancel(r: _Runner, how: str) -> _Pass:
    """The nested checks on ``--hold-prompt``: the agent's requests to the
    client are held; ``how`` cancels the turn; each held request must then
    be cancelled on the wire (a permission request answered ``cancelled``
    by the checker counts as ended)."""
    session, session_id = await r.fresh_session(hold_all=True)
    start = r.transcript.mark()
    assert r.hold_prompt is not None
    async with r.open_prompt(session, session_id, r.hold_prompt) as pending:
        held = await r.held_requests(session, session_id, pending)
        if how == "session/cancel":
            await session.connection.notify("session/cancel", {"sessionId": session_id})
            session.client.cancel_permissions(session_id)
            reply = await r.outcome(session, pending.result, "answer after session/cancel")
        else:
            reply = await r.outcome(session, pending.cancel_and_wait, f"answer after {how}")
        if reply is None:
            after = await r.end_turn_anyway(session, session_id, pending)
            raise _Fail(f"no answer within {r.timeout:g} s (--timeout) after {how}; {after}")
    if how == "session/cancel" and (reply.error is not None or reply.stop_reason != "cancelled"):
        raise _Fail(
            f'answered {reply.describe()} after session/cancel: expected stopReason "cancelled"'
        )
    if how != "session/cancel" and not reply.cancelled:
        raise _Fail(f"answered {reply.describe()} after {how}: expected -32800 or cancelled")
    must = [request for request in held if request.answered != "cancelled"]
    missing = await r.wait_cancelled(session, must, start)
    if missing:
        raise _Fail(
            f"the turn ended ({reply.describe()}), but these held requests were never "
            f"cancelled on the wire ($/cancel_request): {_cancel_report(missing)}"
        )
    methods = ", ".join(sorted({request.method for request in held}))
    return _Pass(
        f"{reply.describe()} after {how}; {len(held)} held request(s) ended ({methods})",
        reply.latency,
    )


@_check(
    "nested-session-cancel",
    CANCELLATION,
    "`nested` then session/cancel: every nested request cancelled on the wire, turn cancelled",
)
async def _nested_session_cancel(r: _Runner) -> _Pass:
    if r.held_mode():
        return await _held_cancel(r, "session/cancel")
    await r.require_scenario()
    session, session_id = await r.fresh_session(hold=True)
    start = r.transcript.mark()
    async with r.open_prompt(session, session_id, "nested") as pending:
        nested = await r.nested_requests(session, session_id, pending)
        await session.connection.notify("session/cancel", {"sessionId": session_id})
        session.client.cancel_permissions(session_id)
        reply = await r.outcome(session, pending.result, "answer after session/cancel")
        if reply is None:
            raise _Fail(f"no answer within {r.timeout:g} s (--timeout) after session/cancel")
    if reply.error is not None or reply.stop_reason != "cancelled":
        raise _Fail(
            f'answered {reply.describe()} after session/cancel: expected stopReason "cancelled"'
        )
    permission = nested["session/request_permission"]
    must = [nested["fs/read_text_file"], nested["terminal/create"]]
    if permission.answered != "cancelled":  # else answered by the client: allowed
        must.append(permission)
    missing = await r.wait_cancelled(session, must, start)
    if missing:
        raise _Fail(
            f"the turn ended cancelled, but these nested requests were never cancelled on the "
            f"wire ($/cancel_request): {_cancel_report(missing)}"
        )
    how = "answered cancelled" if permission.answered == "cancelled" else "cancelled on the wire"
    return _Pass(
        f"stopReason 'cancelled'; read and terminal cancelled on the wire, permission {how}",
        reply.latency,
    )


@_check(
    "nested-cancel-request",
    CANCELLATION,
    "`nested` then $/cancel_request of the prompt: nested requests cancelled on the wire",
)
async def _nested_cancel_request(r: _Runner) -> _Pass:
    if r.held_mode():
        return await _held_cancel(r, "$/cancel_request")
    await r.require_scenario()
    session, session_id = await r.fresh_session(hold=True)
    start = r.transcript.mark()
    async with r.open_prompt(session, session_id, "nested") as pending:
        nested = await r.nested_requests(session, session_id, pending)
        reply = await r.outcome(session, pending.cancel_and_wait, "answer after $/cancel_request")
        if reply is None:
            after = await r.end_turn_anyway(session, session_id, pending)
            raise _Fail(
                f"no answer within {r.timeout:g} s (--timeout) after $/cancel_request of the "
                f"prompt; {after}"
            )
    if not reply.cancelled:
        raise _Fail(
            f"answered {reply.describe()} after $/cancel_request: expected -32800 or cancelled"
        )
    missing = await r.wait_cancelled(session, nested.values(), start)
    if missing:
        raise _Fail(
            f"the prompt ended ({reply.describe()}), but these nested requests were never "
            f"cancelled on the wire ($/cancel_request): {_cancel_report(missing)}"
        )
    return _Pass(f"{reply.describe()}; all 3 nested requests cancelled on the wire", reply.latency)


@_check(
    "deadline",
    CANCELLATION,
    "`deadline 200`: the nested read is cancelled on the wire and the prompt answers -32800",
)
async def _deadline(r: _Runner) -> _Pass:
    await r.require_scenario()
    session, session_id = await r.fresh_session(hold=True)
    start = r.transcript.mark()

    def held_reads() -> list[IncomingRequest]:
        return [
            q
            for q in session.client.requests_of(session_id, "fs/read_text_file")
            if isinstance(q.params, dict) and q.params.get("path") == HOLD_PATH
        ]

    async with r.open_prompt(session, session_id, "deadline 200") as pending:
        reply = await r.outcome(session, pending.result, "answer to `deadline 200`")
        if reply is None:
            reads = held_reads()
            seen = r.transcript.cancels_received(session.index, start)
            kept = [q for q in reads if not any(same_id(q.id, c) for c in seen)]
            what = (
                f"the nested read was never cancelled on the wire: {_cancel_report(kept)}"
                if kept
                else "no nested read was sent"
                if not reads
                else "the read was cancelled, but the prompt was not answered"
            )
            raise _Fail(
                f"the prompt's 200 ms deadline passed and no answer came within "
                f"{r.timeout:g} s (--timeout); {what}"
            )
    reads = held_reads()
    if not reads:
        raise _Fail(
            f"no fs/read_text_file of {HOLD_PATH} was sent; the prompt got {reply.describe()}"
        )
    if reply.error is None or reply.error.code != CANCELLED:
        raise _Fail(
            f"answered {reply.describe()}: at its own deadline the prompt must answer -32800"
        )
    missing = await r.wait_cancelled(session, reads, start)
    if missing:
        raise _Fail(
            "answered -32800, but the read was never cancelled on the wire: "
            + _cancel_report(missing),
            r.transcript.since(start, session.index),
        )
    if reply.latency < 0.18:
        raise _Fail(
            f"answered -32800 after {reply.latency * 1000:.0f} ms, before its 200 ms deadline"
        )
    return _Pass(
        f"-32800 after {reply.latency * 1000:.0f} ms; the read was cancelled on the wire",
        reply.latency,
    )


async def _bad_input(r: _Runner, data: bytes, code: int, what: str) -> _Pass:
    session = await r.ensure_main(need_session=False)
    mark = r.transcript.mark()
    start = trio.current_time()
    await session.send_raw(data)

    def is_answer(entry: WireEntry) -> bool:
        message = entry.message
        return isinstance(message, list) or (entry.is_response and message.get("id") is None)

    entry = await r.wait_entry(session, is_answer, mark, f"error reply to {what}")
    latency = entry.time - start
    message = entry.message
    if isinstance(message, list):
        raise _Fail(
            f"answered {what} with a batch reply {_brief(entry.data)}: ACP v1 has no batches; "
            f"expected one {code} error with id null",
            [entry],
        )
    if "id" not in message:
        raise _Fail(
            f"answered {what} with a reply without an id {_brief(entry.data)}: a JSON-RPC "
            f'response always carries "id" (null when the request\'s id could not be read); '
            f"expected error {code} with id null",
            [entry],
        )
    error = message.get("error")
    got = error.get("code") if isinstance(error, dict) else None
    if got != code:
        raise _Fail(
            f"answered {what} with {_brief(entry.data)}: expected error {code} with id null",
            [entry],
        )
    await r.probe(session, what)
    return _Pass(f"{code} with id null; the agent still answers", latency)


INVALID_JSON: Final = b'{"jsonrpc": "2.0", "id": "acp-check", "method": \n'
BATCH: Final = (
    b'[{"jsonrpc":"2.0","id":"acp-check-batch","method":"session/new",'
    b'"params":{"cwd":"/","mcpServers":[]}}]\n'
)
MALFORMED: Final = (
    (INVALID_JSON, "a line of invalid JSON"),
    (BATCH, "a batch array"),
    (b"42\n", "a JSON scalar"),
)


@_check(
    "parse-error", RECOMMENDED, "a line of invalid JSON gets -32700 with id null; the agent goes on"
)
async def _parse_error(r: _Runner) -> _Pass:
    return await _bad_input(r, INVALID_JSON, -32700, "invalid JSON")


@_check("batch-array", RECOMMENDED, "a batch array gets -32600 with id null; the agent goes on")
async def _batch_array(r: _Runner) -> _Pass:
    return await _bad_input(r, BATCH, -32600, "a batch array")


@_check("scalar-message", RECOMMENDED, "a JSON scalar gets -32600 with id null; the agent goes on")
async def _scalar_message(r: _Runner) -> _Pass:
    return await _bad_input(r, b"42\n", -32600, "a JSON scalar")


@_check(
    "malformed-input",
    REQUIRED,
    "after a line of invalid JSON, a batch array or a JSON scalar the agent still answers",
)
async def _malformed_input(r: _Runner) -> _Pass:
    # Whatever the agent replies to it (the checks above judge that), one bad
    # line must not end the connection: an editor's bug would kill the agent.
    for data, what in MALFORMED:
        session = await r.ensure_main(need_session=False)
        await session.send_raw(data)
        await r.probe(session, what)
    return _Pass(f"still answers after each of {len(MALFORMED)} malformed lines")


@_check("stdout-json-only", REQUIRED, "every line the agent writes to stdout is a JSON-RPC message")
async def _stdout_json_only(r: _Runner) -> _Pass:
    lines = r.transcript.received()
    if not lines:
        raise _Skip("nothing was read from the agent's stdout")
    bad: list[tuple[WireEntry, str]] = []
    for entry in lines:
        message = entry.message
        if message is NOT_JSON:
            bad.append((entry, "not JSON"))
            continue
        items = message if isinstance(message, list) and message else [message]
        for item in items:
            parsed = classify(item)
            if isinstance(parsed, InvalidMessage):
                bad.append((entry, str(parsed.error.data)))
                break
    if bad:
        entry, why = bad[0]
        raise _Fail(
            f"{len(bad)} of {len(lines)} lines on stdout are not JSON-RPC messages; first: "
            f"{_brief(entry.data, 80)!r} ({why})"
        )
    return _Pass(f"{len(lines)} lines, all JSON-RPC messages")


def _sent_methods(r: _Runner, session: int) -> list[tuple[Any, str]]:
    return [
        (e.message["id"], e.method or "")
        for e in r.transcript.since(0, session)
        if e.direction == "sent" and e.is_request and not e.raw
    ]


@_check(
    "schema",
    REQUIRED,
    "every message the agent sends is valid ACP v1 (its JSON Schema, or the generated types)",
)
async def _schema(r: _Runner) -> _Pass:
    validator = r.validator
    problems: list[str] = []
    evidence: list[WireEntry] = []
    count = 0
    batches = 0
    for session in r.sessions:
        methods = _sent_methods(r, session.index)
        for entry in r.transcript.received(session.index):
            if isinstance(entry.message, list):
                batches += 1
                continue
            if entry.message is NOT_JSON:
                continue
            count += 1
            answered = None
            if entry.is_response:
                reply_id = entry.message.get("id")
                answered = next((m for i, m in methods if same_id(i, reply_id)), None)
            problem = validator.check(entry.message, answered)
            if problem is not None:
                problems.append(problem)
                evidence.append(entry)
            await trio.lowlevel.checkpoint()
    if not count:
        raise _Skip("no message was read from the agent")
    if problems:
        raise _Fail(
            f"{len(problems)} of {count} messages are not valid ({validator.description}); "
            f"first: {problems[0]}",
            evidence[:3],
        )
    note = f" ({batches} batch replies not validated)" if batches else ""
    return _Pass(f"{count} messages valid ({validator.description}){note}")


@_check("one-reply-per-request", REQUIRED, "every request of the checker was answered exactly once")
async def _one_reply(r: _Runner) -> _Pass:
    def unanswered() -> list[tuple[AgentSession, Any, str]]:
        out = []
        for session in r.sessions:
            for request_id, method in _sent_methods(r, session.index):
                if r.reply_entry(session, request_id) is None:
                    out.append((session, request_id, method))
        return out

    with trio.move_on_after(min(GRACE, r.timeout)):
        while any(s.alive for s, _, _ in unanswered()):
            await r.transcript.wait_for(lambda e: True, r.transcript.mark())
    problems: list[str] = []
    evidence: list[WireEntry] = []
    total = lost = 0
    for session in r.sessions:
        sent = _sent_methods(r, session.index)
        total += len(sent)
        replies = [e for e in r.transcript.received(session.index) if e.is_response]
        for request_id, method in sent:
            matching = [e for e in replies if same_id(e.message.get("id"), request_id)]
            n = len(matching)
            if not n and any(i == session.index and same_id(request_id, a) for i, a in r.abandoned):
                lost += 1  # the agent died first: the check that waited failed
                continue
            if n != 1:
                answers = "no answer" if not n else f"{n} answers"
                problems.append(f"{method} (id {request_id!r}) got {answers}")
                evidence.extend(matching[:3])
        for entry in replies:
            reply_id = entry.message.get("id")
            if reply_id is not None and not any(same_id(reply_id, i) for i, _ in sent):
                problems.append(f"a reply to id {reply_id!r}, which was never sent")
                evidence.append(entry)
    if not total:
        raise _Skip("no request was sent")
    if problems:
        raise _Fail(
            f"{len(problems)} problem(s); first: {problems[0]}"
            + (f"; then: {problems[1]}" if len(problems) > 1 else ""),
            evidence,
        )
    note = f" ({lost} lost with an agent that died, judged by their checks)" if lost else ""
    return _Pass(f"{total - lost} requests, each answered exactly once{note}")


#: Every check, in the order they run.
CHECKS: Final[tuple[CheckInfo, ...]] = tuple(info for info, _ in _REGISTRY)


def _selected(only: Iterable[str] | None) -> list[tuple[CheckInfo, CheckFunc]]:
    if only is None:
        return list(_REGISTRY)
    wanted = set(only)
    unknown = wanted - {info.name for info in CHECKS}
    if unknown:
        raise ValueError(
            f"unknown checks: {', '.join(sorted(unknown))} "
            f"(known: {', '.join(info.name for info in CHECKS)})"
        )
    wanted.update(_SETUP)
    return [(info, func) for info, func in _REGISTRY if info.name in wanted]


@contextmanager
def _workspace() -> Iterator[str]:
    """A temporary directory the agent's sessions work in."""
    with tempfile.TemporaryDirectory(prefix="acp-check-") as path:
        with open(os.path.join(path, "README.md"), "w", encoding="utf-8") as file:
            file.write("A temporary workspace of acp_trio check-agent.\n")
        yield os.path.realpath(path)


#: The levels ``require`` may name.
GROUPS: Final = tuple(level.value for level in Level if level is not Level.REQUIRED)


def promoted_levels(strict: bool, require: Iterable[str] = ()) -> frozenset[Level]:
    """The levels counted as required besides :attr:`Level.REQUIRED`."""
    if strict:
        return frozenset(level for level in Level if level is not Level.REQUIRED)
    out: set[Level] = set()
    for name in require:
        try:
            level = Level(name)
        except ValueError:
            raise ValueError(
                f"unknown check group {name!r} (groups: {', '.join(GROUPS)})"
            ) from None
        if level is not Level.REQUIRED:
            out.add(level)
    return frozenset(out)


async def check_agent(
    command: Sequence[str],
    *,
    only: Iterable[str] | None = None,
    scenario: bool | None = None,
    timeout: float = 5.0,  # noqa: ASYNC109 - a per-check budget, not the caller's deadline
    schema: str | os.PathLike[str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    cancel_prompt: str = "wait_for_cancel",
    strict: bool = False,
    require: Iterable[str] = (),
    allow_skips: bool = False,
    permissions: str = "allow",
    terminals: bool = False,
    init_timeout: float | None = None,
    hold_prompt: str | None = None,
) -> CheckReport:
    """Run the conformance checks against the stdio agent ``command``.

    ``only`` names the checks to run (``initialize`` and ``session-new``
    always run: the others need them). ``scenario``: ``None`` runs the
    scenario checks if the agent answers ``echo <token>``, ``True`` forces
    them, ``False`` skips them. ``timeout`` bounds every wait, in seconds,
    but the answer to ``initialize`` (a process's first answer: real agents
    take seconds to start), which ``init_timeout`` bounds (default: 3 x
    ``timeout``, at least 15).
    ``schema`` is the ACP v1 ``schema.json`` to validate every message with
    ``jsonschema`` (``ValueError`` if it does not exist); by default the one
    :func:`find_schema` finds, else the generated types of
    :mod:`acp_trio.schema` (the report's ``validator`` says which ran).
    ``cwd`` and ``env`` are the agent's.
    ``cancel_prompt`` is the prompt ``session-cancel`` sends, then cancels:
    it must keep the agent busy for a moment.
    ``hold_prompt``, for agents that do not speak the scenario vocabulary, is
    a prompt on which the agent sends the client a request (a permission, a
    file, a terminal): the checker holds every such request unanswered, so
    the turn keeps running, and ``session-cancel`` and the cancellation
    checks but ``deadline`` run on it (each held request must be cancelled
    on the wire once the turn is cancelled).

    The verdict (:attr:`CheckReport.status`): required checks decide it;
    ``strict`` counts the recommended and cancellation checks as required
    too, ``require`` names the levels to count (``"recommended"``,
    ``"cancellation"``). A required check that could not run makes the run
    INCOMPLETE, unless ``allow_skips``.

    The checker answers the agent's requests as an editor would:
    ``permissions`` is ``"allow"`` (the first allow option), ``"reject"``
    (the first reject option) or ``"cancel"``; files are read and written in
    a temporary workspace, which is also the sessions' ``cwd``; terminal
    commands run there only with ``terminals``, else they are refused. (In
    the cancellation checks it plays the scenario's test client instead.)

    Never raises for a misbehaving agent: every problem is a verdict in the
    report. Raises ``ValueError`` for an empty command, an unknown check or group;
    other errors (of the checker's environment, such as a working directory
    that is gone) come out as one plain exception.
    """
    if not command:
        raise ValueError("command must not be empty")
    selected = _selected(only)
    promoted = promoted_levels(strict, require)
    if permissions not in PERMISSION_POLICIES:
        raise ValueError(
            f"permissions must be one of {', '.join(PERMISSION_POLICIES)}, not {permissions!r}"
        )
    validator = load_validator(schema)
    start = trio.current_time()
    results: list[CheckResult] = []
    with plain_exceptions(), _workspace() as workspace:
        # The agent's working directory (ours by default) must exist.
        os.stat(cwd if cwd is not None else os.getcwd())
        policy = EditorPolicy(permissions, os.fspath(workspace), terminals)
        async with trio.open_nursery() as nursery:
            runner = _Runner(
                nursery,
                command,
                timeout=timeout,
                scenario=scenario,
                schema=schema,
                cwd=cwd,
                env=env,
                cancel_prompt=cancel_prompt,
                promoted=promoted,
                policy=policy,
                validator=validator,
                init_timeout=init_timeout,
                hold_prompt=hold_prompt,
            )
            try:
                for info, func in selected:
                    results.append(await runner.run(info, func))
            finally:
                await runner.close_all()
    init = runner.init_result if isinstance(runner.init_result, dict) else {}
    return CheckReport(
        command=tuple(command),
        results=tuple(results),
        scenario=bool(runner.scenario),
        scenario_reason=runner.scenario_reason,
        agent_info=init.get("agentInfo"),
        protocol_version=init.get("protocolVersion"),
        duration=trio.current_time() - start,
        promoted=promoted,
        allow_skips=allow_skips,
        auth_required=runner.auth_required,
        validator=validator.description,
    )
