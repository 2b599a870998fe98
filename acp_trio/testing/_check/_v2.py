"""``check-agent-v2``: conformance checks for a stdio ACP v2 (Preview) agent.

The same machinery as ``check-agent`` (:mod:`acp_trio.testing._check._agent`): one
runner speaking version 2, every line kept in one transcript, levels,
authentication-aware SKIPs, INCOMPLETE, a per-wait ``timeout`` and its own
``prompt_timeout``. Every check that needs no credentials runs on any agent:

- ``initialize``: asking version 2 is answered 2, with ``info``;
- ``version-negotiation``: asking 65535 is answered with the agent's latest;
- ``unsupported-version``: asking 0 gets ``-32022`` with ``data: {requested,
  supported}``; the connection stays usable;
- ``before-initialize``: a request before ``initialize`` gets ``-32600``;
- ``repeated-initialize``: a second ``initialize`` (same version, before any
  other request) is answered 2 again;
- the robustness and transcript checks of ``check-agent`` (unknown methods
  and notifications, stray cancels, malformed input, stdout, the v2 schema,
  one reply per request).

``session-new`` and ``lifecycle`` (a prompt is answered with its
``messageId``, a ``user_message`` carries it, ``running`` then one ``idle``
with a stop reason) need a session and a turn: an agent that demands
authentication gets them skipped (INCOMPLETE). ``held-prompts``,
``tool-call-cancel`` and ``error-turn`` need the v2 scenario vocabulary
(detected by ``lifecycle``'s ``echo <token>``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final

import trio

from acp_trio._exceptions import RequestError
from acp_trio.testing._check._agent import promoted_levels, run_selected
from acp_trio.testing._check._base import (
    _REGISTRY,
    CANCELLATION,
    RECOMMENDED,
    REQUIRED,
    SCENARIO_DOCS,
    CheckFunc,
    CheckInfo,
    _brief,
    _Fail,
    _init_params,
    _Pass,
    _prompt,
    _Reply,
    _Skip,
)
from acp_trio.testing._check._report import CheckReport, Level, Rule
from acp_trio.testing._check._runner import _Runner
from acp_trio.testing._check._v2_scenario import run_scenario_check
from acp_trio.testing._check._wire import EditorPolicy, WireEntry
from acp_trio.testing._schema_check import load_validator

__all__ = ["V2_CHECKS", "check_agent_v2"]

_V2: list[tuple[CheckInfo, CheckFunc]] = []
#: The checks of check-agent reused as they are.
_SHARED: Final = {info.name: (info, func) for info, func in _REGISTRY}


def _v2(name: str, level: Level, description: str, rule: Rule) -> Callable[[CheckFunc], CheckFunc]:
    def register(func: CheckFunc) -> CheckFunc:
        _V2.append((CheckInfo(name, level, description, rule), func))
        return func

    return register


def _shared(name: str) -> None:
    _V2.append(_SHARED[name])


@_v2(
    "initialize",
    REQUIRED,
    "initialize asking protocol version 2 is answered 2, with info",
    Rule(
        "MUST",
        "v2/initialization",
        "an agent that supports the version asked for answers with that version, and gives its "
        "implementation information (info)",
    ),
)
async def _initialize(r: _Runner) -> _Pass:
    try:
        session = r.main = await r.spawn()
        reply = await r.initialize(session, 2)
        version = reply.result.get("protocolVersion")
        if version == 1:
            r.other_version = reply.result
            raise _Fail(
                "a client asking version 2 got 1: the agent speaks version 1 only; check it "
                "with `python -m acp_trio check-agent -- AGENT`"
            )
        if version != 2:
            raise _Fail(f"a client asking version 2 got protocolVersion {_brief(version)}")
        info = reply.result.get("info")
        if not isinstance(info, dict) or not all(
            isinstance(info.get(k), str) for k in ("name", "version")
        ):
            raise _Fail(f"the v2 initialize result requires info {{name, version}}: {_brief(info)}")
    except _Fail as exc:
        r.setup_error = "initialize failed"
        raise _Fail(exc.reason) from None
    r.init_result = reply.result
    methods = r.auth_methods()
    note = f"; authMethods: {methods}" if methods else ""
    return _Pass(f"protocolVersion 2; {info['name']} {info['version']}{note}", reply.latency)


_shared("version-negotiation")


@_v2(
    "unsupported-version",
    REQUIRED,
    "initialize asking version 0 gets -32022 with data {requested, supported}; then 2 works",
    Rule(
        "MUST",
        "v2/initialization; v2 schema InitializeResponse",
        "the agent MUST answer initialize; when it supports no version at or below the one asked "
        "for, initialization fails with -32022 (data: requested, supported)",
    ),
)
async def _unsupported_version(r: _Runner) -> _Pass:
    if r.setup_error is not None:
        raise _Skip(f"needs a working initialize ({r.setup_error})")
    session = await r.spawn()
    try:
        reply = await r.request(session, "initialize", _init_params(0, 2), limit=r.init_timeout)
        if reply.error is None:
            raise _Fail(f"initialize asking version 0 was accepted: {reply.describe()}")
        if reply.error.code != -32022:
            raise _Fail(f"initialize asking version 0 got {reply.describe()}: expected -32022")
        data = reply.error.data
        supported = data.get("supported") if isinstance(data, dict) else None
        if (
            not isinstance(data, dict)
            or data.get("requested") != 0
            or not isinstance(supported, list)
            or 2 not in supported
        ):
            raise _Fail(
                f"-32022 data must be {{requested: 0, supported: [..., 2]}}, got {_brief(data)}"
            )
        again = await r.initialize(session, 2)
        if again.result.get("protocolVersion") != 2:
            raise _Fail(f"then initialize asking 2 got {_brief(again.result)}")
    finally:
        await session.aclose()
    return _Pass(f"-32022, supported {supported}; then version 2", reply.latency)


@_v2(
    "before-initialize",
    RECOMMENDED,
    "a request before initialize gets -32600; then 2 works",
    Rule(
        "none",
        "v2/initialization; JSON-RPC 2.0 §5.1",
        "clients MUST initialize first, so nothing says how an agent answers a request before "
        "it; the SDKs' routers answer -32600 Invalid Request",
    ),
)
async def _before_initialize(r: _Runner) -> _Pass:
    if r.setup_error is not None:
        raise _Skip(f"needs a working initialize ({r.setup_error})")
    session = await r.spawn()
    try:
        params = {"cwd": r.session_cwd, "mcpServers": []}
        reply = await r.request(session, "session/new", params, limit=r.init_timeout)
        if reply.error is None:
            raise _Fail(f"session/new before initialize was answered {reply.describe()}")
        if reply.error.code != -32600:
            raise _Fail(f"session/new before initialize got {reply.describe()}: expected -32600")
        await r.initialize(session, 2)
    finally:
        await session.aclose()
    return _Pass("-32600; then initialize works", reply.latency)


@_v2(
    "repeated-initialize",
    REQUIRED,
    "a second initialize (version 2, before other requests) is answered 2 again",
    Rule(
        "MUST",
        "v2/initialization",
        "the agent MUST answer initialize with the chosen version; v2 lets a client repeat "
        "initialize (same version) before other requests, so the repeat is answered too",
    ),
)
async def _repeated_initialize(r: _Runner) -> _Pass:
    if r.setup_error is not None:
        raise _Skip(f"needs a working initialize ({r.setup_error})")
    session = await r.spawn()
    try:
        await r.initialize(session, 2)
        reply = await r.request(session, "initialize", _init_params(2, 2))
    finally:
        await session.aclose()
    if reply.error is not None:
        raise _Fail(f"the repeated initialize got {reply.describe()}: v2 allows it")
    version = reply.result.get("protocolVersion") if isinstance(reply.result, dict) else None
    if version != 2:
        raise _Fail(f"the repeated initialize was answered {_brief(reply.result)}, not version 2")
    return _Pass("answered 2 again", reply.latency)


_shared("session-new")


def _update(entry: WireEntry) -> dict[str, Any]:
    update = entry.params.get("update")
    return update if isinstance(update, dict) else {}


@_v2(
    "lifecycle",
    REQUIRED,
    "a prompt is answered with its messageId; user_message carries it; running, then one idle",
    Rule(
        "MUST",
        "v2/prompt-lifecycle",
        "the agent answers an accepted prompt, reports the user message with its messageId, "
        "sends running when work starts and idle with the StopReason when it ends",
    ),
)
async def _lifecycle(r: _Runner) -> _Pass:
    session = await r.ensure_main()
    sid = session.session_id
    assert sid is not None
    mark = r.transcript.mark()
    params = _prompt(sid, f"echo {r.token}")
    try:
        reply = await r.request(
            session, "session/prompt", params, "answer to a prompt", r.prompt_timeout
        )
    except _Fail as exc:
        r.scenario_reason = f"not detected (`echo {r.token}`: {exc.reason})"
        raise
    if reply.error is not None:
        r.scenario_reason = f"not detected (`echo {r.token}` got {_brief(reply.error)})"
    r.refused_for_auth(session, "session/prompt", reply)
    if reply.error is not None:
        raise _Fail(f"the prompt was answered with {reply.describe()}")
    result = reply.result if isinstance(reply.result, dict) else {}
    message_id = result.get("messageId")
    if not isinstance(message_id, str):
        raise _Fail(f"the prompt's answer {_brief(reply.result)} has no messageId")

    def idle(entry: WireEntry) -> bool:
        if not entry.is_notification or entry.method != "session/update":
            return False
        update = _update(entry)
        return (
            entry.params.get("sessionId") == sid
            and update.get("sessionUpdate") == "state_update"
            and update.get("state") == "idle"
            and update.get("stopReason") is not None
        )

    end = await r.wait_entry(session, idle, mark, "state_update idle", r.prompt_timeout)
    error = _update(end).get("error")
    if _update(end).get("stopReason") == "error" and isinstance(error, dict):
        # v2 reports a failed turn in its idle update: authentication too.
        refusal = RequestError(error.get("code", 0), str(error.get("message", "")))
        r.scenario_reason = f"not detected (`echo {r.token}` ended with {_brief(refusal)})"
        r.refused_for_auth(session, "session/prompt (its turn)", _Reply(error=refusal), entry=end)
    await trio.sleep(0.2)  # a second idle would be a second ending
    updates = r.updates(session, sid, mark)
    users = [
        u
        for u in updates
        if _update(u).get("sessionUpdate") in ("user_message", "user_message_chunk")
    ]
    if not any(_update(u).get("messageId") == message_id for u in users):
        raise _Fail(f"no user_message carries the prompt's messageId {message_id!r}")
    states = [
        (_update(u).get("state"), _update(u).get("stopReason"))
        for u in updates
        if _update(u).get("sessionUpdate") == "state_update"
    ]
    if states[:1] != [("running", None)]:
        raise _Fail(f"the first state_update is {states[:1]}, not running")
    ends = [s for s in states if s[0] == "idle" and s[1] is not None]
    if len(ends) != 1:
        raise _Fail(f"{len(ends)} idle updates with a stop reason, not 1")
    spoken = any(
        r.token in u.data.decode("utf-8", "replace")
        for u in updates
        if u not in users and u.time <= end.time
    )
    r.v2_vocabulary = spoken
    r.scenario_reason = (
        "detected (the agent answers `echo <token>`)"
        if spoken
        else f"not detected (`echo {r.token}` was answered without the token)"
    )
    return _Pass(f"messageId {message_id!r}; running, then idle {_brief(ends[0][1])}")


for _name in ("unknown-method", "invalid-params", "unknown-notification", "stray-cancels"):
    _shared(_name)


async def _held_prompts_on_hold(r: _Runner) -> _Pass:
    """``held-prompts`` on ``--hold-prompt``: the agent's request to the
    client is held, so its turn runs; two more prompts must be held; a
    ``session/cancel`` ends the turn ``idle`` ``cancelled``, answers both
    ``-32800``, and the held request is cancelled on the wire (a permission
    request the checker answers ``cancelled`` counts as ended)."""
    assert r.hold_prompt is not None
    session, sid = await r.fresh_session(hold_all=True)
    mark = r.transcript.mark()
    client = session.client
    first = await r.request(
        session,
        "session/prompt",
        _prompt(sid, r.hold_prompt),
        "answer to a prompt",
        r.prompt_timeout,
    )
    r.refused_for_auth(session, "session/prompt", first)
    if first.error is not None:
        raise _Fail(f"the hold prompt was answered with {first.describe()}")
    with trio.move_on_after(r.prompt_timeout):
        while not client.requests_of(sid):
            await client.changed()
    held = client.requests_of(sid)
    if not held:
        raise _Skip(
            f"the hold prompt {r.hold_prompt!r} did not make the agent send the client a "
            f"request within {r.prompt_timeout:g} s; choose another with --hold-prompt"
        )
    async with (
        r.open_prompt(session, sid, "echo held 1") as one,
        r.open_prompt(session, sid, "echo held 2") as two,
    ):
        await trio.sleep(0.2)
        if one.done or two.done:
            raise _Fail("a prompt sent while the turn ran was not held (it was answered)")
        await session.connection.notify("session/cancel", {"sessionId": sid})
        client.cancel_permissions(sid)
        answers = [
            await r.outcome(session, p.result, "answer to a held prompt") for p in (one, two)
        ]
    codes = [a.error.code if a is not None and a.error is not None else None for a in answers]
    if codes != [-32800, -32800]:
        described = [a.describe() if a is not None else "no answer" for a in answers]
        raise _Fail(f"after session/cancel the held prompts got {described}, not -32800 twice")

    def idle(entry: WireEntry) -> bool:
        update = _update(entry) if entry.is_notification else {}
        return update.get("sessionUpdate") == "state_update" and update.get("state") == "idle"

    end = await r.wait_entry(session, idle, mark, "state_update idle after session/cancel")
    if _update(end).get("stopReason") != "cancelled":
        raise _Fail(f"the turn ended {_brief(_update(end).get('stopReason'))}, not cancelled")
    missing = await r.wait_cancelled(session, [q for q in held if q.answered != "cancelled"], mark)
    if missing:
        names = ", ".join(f"{q.method} (id {q.id!r})" for q in missing)
        raise _Fail(
            "the turn ended cancelled, but these held requests were never cancelled on the "
            f"wire: {names}"
        )
    return _Pass(f"idle cancelled; both held prompts -32800; {len(held)} held request(s) ended")


def _scenario(name: str, level: Level, description: str, rule: Rule) -> None:
    async def check(r: _Runner) -> _Pass:
        if r.setup_error is not None:
            raise _Skip(f"needs a working initialize ({r.setup_error})")
        if r.auth_required is not None:
            raise _Skip(f"authentication required: {r.auth_required}")
        if name == "held-prompts" and r.hold_prompt is not None:
            return await _held_prompts_on_hold(r)
        if not r.v2_vocabulary:
            hint = (
                "; for an agent without it, --hold-prompt TEXT (a prompt on which it asks the "
                "client something) runs this check"
                if name == "held-prompts"
                else ""
            )
            raise _Skip(
                f"needs the v2 scenario vocabulary (acp_trio.testing.ScenarioAgentV2's; "
                f"{SCENARIO_DOCS}): "
                f"{r.scenario_reason}{hint}"
            )
        env = dict(r.env) if r.env is not None else None
        seconds = r.init_timeout + 2 * r.prompt_timeout
        problem = await run_scenario_check(name, r.command, seconds, cwd=r.cwd, env=env)
        if problem is not None:
            raise _Fail(problem)
        return _Pass(description)

    _V2.append((CheckInfo(name, level, description, rule), check))


_SCENARIO: Final = frozenset({"held-prompts", "tool-call-cancel", "error-turn"})
_scenario(
    "held-prompts",
    CANCELLATION,
    "`wait_for_cancel`, two held prompts, session/cancel: idle cancelled, both -32800",
    Rule(
        "none",
        "v2/prompt-lifecycle#cancellation; v2 schema CancelSessionNotification",
        "an agent may hold prompts while busy (an answer means inserted, not held); "
        "session/cancel cancels the foreground work and the prompts not yet inserted",
    ),
)
_scenario(
    "tool-call-cancel",
    CANCELLATION,
    "`tools 2`: tool_call/cancel ends tool-0 cancelled, tool-1 completes; unknown id -32602",
    Rule(
        "none",
        "v2/tool-calls#cancelling-tool-calls",
        "tool_call/cancel (offered per tool call) ends that tool call only, confirmed by a final "
        "tool_call_update; an unknown or final one gets -32602",
    ),
)
_scenario(
    "error-turn",
    RECOMMENDED,
    "`fail -32042 boom` ends idle with stopReason error",
    Rule(
        "SHOULD",
        "v2 schema ErrorStopReason",
        "a turn that fails ends idle with the stop reason error, which SHOULD carry the failure "
        "as a JSON-RPC error object",
    ),
)

for _name in (
    "parse-error",
    "batch-array",
    "scalar-message",
    "malformed-input",
    "auth-methods",
    "stdout-json-only",
    "schema",
    "one-reply-per-request",
):
    _shared(_name)

#: Every check of check-agent-v2, in the order they run.
V2_CHECKS: Final[tuple[CheckInfo, ...]] = tuple(info for info, _ in _V2)


async def check_agent_v2(
    command: Sequence[str],
    *,
    only: Iterable[str] | None = None,
    timeout: float = 5.0,  # noqa: ASYNC109 - a per-check budget, not the caller's deadline
    init_timeout: float | None = None,
    prompt_timeout: float | None = None,
    schema: str | os.PathLike[str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    strict: bool = False,
    require: Iterable[str] = (),
    allow_skips: bool = False,
    hold_prompt: str | None = None,
) -> CheckReport:
    """Run the v2 checks against the stdio agent ``command``; the options
    are :func:`acp_trio.testing.check_agent`'s (``schema``: the ACP v2
    ``schema.json``; by default the one this package ships, or without
    ``jsonschema`` (the ``check`` extra) the generated v2 types).
    ``hold_prompt``: for an agent without the v2 scenario vocabulary, a
    prompt on which it sends the client a request (a permission):
    ``held-prompts`` then runs on that turn."""
    if not command:
        raise ValueError("command must not be empty")
    selected = list(_V2)
    if only is not None:
        wanted = set(only)
        unknown = wanted - {info.name for info in V2_CHECKS}
        if unknown:
            raise ValueError(f"unknown checks: {', '.join(sorted(unknown))}")
        wanted.update(("initialize", "session-new"))
        if wanted & _SCENARIO:
            wanted.add("lifecycle")  # it detects the vocabulary
        selected = [(info, func) for info, func in _V2 if info.name in wanted]
    promoted = promoted_levels(strict, require)
    validator = load_validator(schema, 2)

    def make_runner(nursery: trio.Nursery, workspace: str) -> _Runner:
        return _Runner(
            nursery,
            command,
            timeout=timeout,
            scenario=None,
            schema=schema,
            cwd=cwd,
            env=env,
            policy=EditorPolicy("allow", workspace, False),
            validator=validator,
            init_timeout=init_timeout,
            prompt_timeout=prompt_timeout,
            protocol=2,
            hold_prompt=hold_prompt,
        )

    runner, results, duration = await run_selected(selected, cwd, make_runner)
    init = runner.init_result if isinstance(runner.init_result, dict) else {}
    other = runner.other_version if isinstance(runner.other_version, dict) else {}
    agent = init.get("info") or other.get("agentInfo")
    return CheckReport(
        command=tuple(command),
        results=results,
        scenario=runner.v2_vocabulary,
        scenario_reason=runner.scenario_reason,
        agent_info=agent,
        protocol_version=(init or other).get("protocolVersion"),
        duration=duration,
        promoted=promoted,
        allow_skips=allow_skips,
        auth_required=runner.auth_required,
        validator=validator.description,
        only_version=other.get("protocolVersion") if other else None,
    )
