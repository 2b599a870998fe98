"""The runner: the agent processes, sessions, probes and transcript queries the checks use."""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shlex
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Iterator,
    Mapping,
    Sequence,
)
from contextlib import asynccontextmanager, contextmanager
from typing import Any, Final

import trio

from acp_trio._core._requests import PendingRequest
from acp_trio._exceptions import ConnectionClosed, ProtocolError, RequestError
from acp_trio.testing._check._base import (
    NESTED,
    SCENARIO_DOCS,
    CheckFunc,
    CheckInfo,
    _brief,
    _Fail,
    _init_params,
    _prompt,
    _Reply,
    _Skip,
)
from acp_trio.testing._check._queries import _WireQueries
from acp_trio.testing._check._report import CheckResult, Level
from acp_trio.testing._check._running import run_check
from acp_trio.testing._check._wire import (
    AgentSession,
    EditorPolicy,
    IncomingRequest,
    Transcript,
    WireEntry,
    start_session,
)
from acp_trio.testing._peer import NOT_JSON
from acp_trio.testing._schema_check import MessageValidator, TypedValidator, load_validator

#: How an agent's error says it could not reach its model (no network).
_UNREACHABLE: Final = re.compile(
    r"cannot connect|unable to connect|ECONNREFUSED|ENOTFOUND|EAI_AGAIN|fetch failed|"
    r"network is unreachable|getaddrinfo",
    re.IGNORECASE,
)


class _Runner(_WireQueries):
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
        hold_deadline: float | None = None,
        prompt_timeout: float | None = None,
        cancel_within: float = 1.0,
        protocol: int = 1,
    ) -> None:
        self.nursery = nursery
        #: The protocol version the checker speaks (1: check-agent, 2: check-agent-v2).
        self.protocol = protocol
        self.cancel_prompt = cancel_prompt
        self.hold_prompt = hold_prompt
        self.hold_deadline = hold_deadline
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
        # The initialize result of an agent that answered version 1 with another.
        self.other_version: Any = None
        self.scenario: bool | None = scenario
        self.scenario_reason = {
            None: "not checked",
            True: "forced on",
            False: "turned off",
        }[scenario]
        self.token = "acp-check-" + secrets.token_hex(4)
        # The agent answered `echo <token>` without the token: a model, say.
        self.no_vocabulary = False
        # check-agent-v2: the agent answers `echo <token>` with the token.
        self.v2_vocabulary = False
        self.promoted = promoted
        self.init_timeout = max(3 * timeout, 15.0) if init_timeout is None else init_timeout
        #: A model turn is not a protocol round trip: prompts have their own limit.
        self.prompt_timeout = max(3 * timeout, 15.0) if prompt_timeout is None else prompt_timeout
        #: How soon after a cancel the turn must be answered and its output stop.
        self.cancel_within = cancel_within
        # Each process's stderr bytes when the running check started.
        self.stderr_marks: dict[int, int] = {}
        self.validator: MessageValidator | TypedValidator = (
            validator if validator is not None else load_validator(schema)
        )
        self.auth_required: str | None = None
        #: Why no prompt can be answered here: the agent said it cannot reach
        #: its model (no network); the checks that need an answered prompt
        #: are then skipped, as for want of authentication.
        self.model_unreachable: str | None = None
        # Where authentication was demanded: the method and the refusing reply.
        self.auth_refusal: tuple[str, WireEntry | None] | None = None
        # (session, id) of our requests the agent died before answering.
        self.abandoned: set[tuple[int, Any]] = set()
        #: The turn cancelled with session/cancel, once a check ran it:
        #: ``session-cancel`` and ``cancel-promptly`` judge the same turn.
        self.cancelled_turn: Any = None

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
            name = (
                "--prompt-timeout"
                if limit == self.prompt_timeout and what.startswith("answer to a prompt")
                else "--timeout"
                if limit == self.timeout
                else "derived from --timeout"
            )
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
            session, "initialize", _init_params(version, self.protocol), limit=self.init_timeout
        )
        session.initialize_result = reply.result
        return reply

    async def new_session(self, session: AgentSession) -> tuple[str, float]:
        params = {"cwd": self.session_cwd, "mcpServers": []}
        reply = await self.request(session, "session/new", params)
        if reply.error is not None and self.auth_methods():
            self.refused_for_auth(session, "session/new", reply, force=True)
        self.refused_for_auth(session, "session/new", reply)
        if reply.error is not None:
            raise _Fail(f"session/new was answered with {_brief(reply.error)}")
        result = reply.result
        session_id = result.get("sessionId") if isinstance(result, dict) else None
        if not isinstance(session_id, str):
            raise _Fail(f"session/new answered {_brief(result)}: no string sessionId")
        return session_id, reply.latency

    def refused_for_auth(
        self,
        session: AgentSession,
        method: str,
        reply: _Reply,
        *,
        force: bool = False,
        entry: WireEntry | None = None,
    ) -> None:
        """Skip the check if ``reply`` refuses ``method`` for want of
        authentication (``-32000``, or an error saying so), wherever it
        comes: session/new, a prompt, a load or resume."""
        error = reply.error
        if error is None:
            return
        if not (force or error.code == -32000 or "authenticat" in error.message.lower()):
            return
        self.auth_required = self.auth_methods() or "(no authMethods listed)"
        if self.auth_refusal is None and entry is None:
            entry = next(
                (
                    e
                    for e in reversed(self.transcript.received(session.index))
                    if e.is_response and e.message.get("error") is not None
                ),
                None,
            )
        if self.auth_refusal is None:
            self.auth_refusal = (method, entry)
        raise _Skip(
            f"authentication required: {self.auth_required} ({method} was answered "
            f"with {_brief(error)}; this checker does not authenticate)"
        )

    def no_model(self, reply: _Reply) -> None:
        """Skip the check if ``reply`` (to a prompt) says the agent cannot
        reach its model: a machine without network access to it can check
        no answered prompt, as without credentials."""
        error = reply.error
        if error is not None and _UNREACHABLE.search(f"{error.message} {error.data!r}"):
            self.model_unreachable = (
                f"the agent cannot reach its model here (a prompt was answered with "
                f"{_brief(error)})"
            )
        self.require_model()

    def require_model(self) -> None:
        """Skip the check if no prompt can be answered here (see :meth:`no_model`)."""
        if self.model_unreachable is not None:
            raise _Skip(f"no model reachable: {self.model_unreachable}")

    def auth_methods(self) -> str:
        """The ``authMethods`` of the initialize result, named, or ``""``."""
        init = self.init_result if isinstance(self.init_result, dict) else {}
        methods = init.get("authMethods")
        if not isinstance(methods, list) or not methods:
            return ""
        names = [
            str(m.get("id") or m.get("methodId") or m.get("name") or "?")
            if isinstance(m, dict)
            else _brief(m, 40)
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
            await self.initialize(session, self.protocol)
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
                    session,
                    "session/prompt",
                    _prompt(session.session_id, f"echo {token}"),
                    "answer to a prompt",
                    self.prompt_timeout,
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

    # -- the wire (and see _WireQueries)

    async def wait_entry(
        self,
        session: AgentSession,
        match: Callable[[WireEntry], bool],
        mark: int,
        what: str,
        limit: float | None = None,
    ) -> WireEntry:
        """The first received line that matches; fails at once if the
        agent's connection closes first."""
        found: list[WireEntry] = []

        def ours(entry: WireEntry) -> bool:
            return (
                entry.session == session.index and entry.direction == "received" and (match(entry))
            )

        name = "--prompt-timeout" if limit is not None and limit == self.prompt_timeout else None
        with self.waiting(what, session, limit, name):
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
            self.no_vocabulary = True
            answer = _brief(texts, 60) if texts else "no text"
            self.scenario_reason = (
                f"not detected (`echo {token}` was answered with {answer} and {reply.describe()})"
            )

    async def echo(self, session: AgentSession, session_id: str) -> tuple[_Reply, list[str]]:
        """``echo <token>``: notes whether the agent speaks the vocabulary;
        skips if the prompt is refused for want of authentication."""
        token = self.token
        mark = self.transcript.mark()
        try:
            reply = await self.request(
                session,
                "session/prompt",
                _prompt(session_id, f"echo {token}"),
                "answer to a prompt",
                self.prompt_timeout,
            )
        except _Fail as exc:
            if self.scenario is None:
                self.scenario = False
                self.scenario_reason = f"not detected (`echo {token}`: {exc.reason})"
            raise
        if self.scenario is None and reply.error is not None:
            self.scenario = False
            self.scenario_reason = (
                f"not detected (`echo {token}` was answered with {_brief(reply.error)})"
            )
        self.refused_for_auth(session, "session/prompt", reply)
        self.no_model(reply)
        texts = self.texts(session, session_id, mark)
        self.note_echo(texts, reply, token)
        return reply, texts

    async def require_scenario(self) -> None:
        if self.auth_required is not None:
            raise _Skip(f"authentication required: {self.auth_required}")
        self.require_model()
        if self.scenario is None:
            session = await self.ensure_main()
            assert session.session_id is not None
            with contextlib.suppress(_Fail):  # the scenario's reason says why
                await self.echo(session, session.session_id)
        if not self.scenario:
            raise _Skip(
                f"scenario vocabulary ({SCENARIO_DOCS}) {self.scenario_reason}; for an agent "
                "without it, "
                "--hold-prompt TEXT (a prompt on which it asks the client something) runs "
                "this check"
            )

    # -- running

    async def run(self, info: CheckInfo, func: CheckFunc) -> CheckResult:
        """Run one check; every outcome is a verdict (see ``_running``)."""
        return await run_check(self, info, func)


# ---------------------------------------------------------------------------
# The checks, in the order they run.
