"""``check_agent``: conformance checks for any stdio ACP agent, any SDK.

The checker spawns the agent with :func:`acp_trio.lowlevel.open_agent_process`
(stderr captured) and talks to it mostly through a JSON-level
:class:`acp_trio.lowlevel.Connection` whose handler plays the matching test client of
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
import tempfile
from collections.abc import (
    Callable,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from contextlib import contextmanager
from typing import Final

import trio

from acp_trio._core._groups import plain_exceptions

# The check modules register their checks when imported.
from acp_trio.testing._check import (  # noqa: F401
    _cancellation,
    _isolation,
    _lifecycle,
    _robustness,
    _transcript,
)
from acp_trio.testing._check._base import (
    _REGISTRY,
    _SETUP,
    CheckFunc,
    CheckInfo,
)
from acp_trio.testing._check._base import _brief as _brief
from acp_trio.testing._check._report import CheckReport, CheckResult, Level
from acp_trio.testing._check._runner import _Runner
from acp_trio.testing._check._wire import (
    PERMISSION_POLICIES,
    EditorPolicy,
)
from acp_trio.testing._schema_check import load_validator

__all__ = ["CHECKS", "GROUPS", "ORDER", "CheckInfo", "check_agent", "promoted_levels"]

#: The order the checks run and are listed in (the registry is filled by theme).
ORDER: Final = (
    "initialize",
    "version-negotiation",
    "agent-info",
    "session-new",
    "prompt",
    "session-cancel",
    "cancel-promptly",
    "idle-cancel",
    "cancel-isolation",
    "unknown-method",
    "invalid-params",
    "unknown-notification",
    "stray-cancels",
    "cancel-request-prompt",
    "nested-session-cancel",
    "nested-cancel-request",
    "deadline",
    "parse-error",
    "batch-array",
    "scalar-message",
    "malformed-input",
    "auth-methods",
    "stdout-json-only",
    "schema",
    "one-reply-per-request",
)
_REGISTRY.sort(key=lambda entry: ORDER.index(entry[0].name))

#: Every check of ``check-agent``, in the order it runs them: name, level and
#: what it checks (``python -m acp_trio check-agent --list`` prints them).
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


async def run_selected(
    selected: Iterable[tuple[CheckInfo, CheckFunc]],
    cwd: str | os.PathLike[str] | None,
    make_runner: Callable[[trio.Nursery, str], _Runner],
) -> tuple[_Runner, tuple[CheckResult, ...], float]:
    """Run the ``selected`` checks in order with the runner ``make_runner``
    makes (given its nursery and a fresh workspace), every agent process
    closed at the end: the runner, the results and the seconds it took. The
    agent's working directory (``cwd``, ours by default) must exist."""
    start = trio.current_time()
    results: list[CheckResult] = []
    with plain_exceptions(), _workspace() as workspace:
        os.stat(cwd if cwd is not None else os.getcwd())
        async with trio.open_nursery() as nursery:
            runner = make_runner(nursery, workspace)
            try:
                for info, func in selected:
                    results.append(await runner.run(info, func))
            finally:
                await runner.close_all()
    return runner, tuple(results), trio.current_time() - start


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
    hold_deadline: float | None = None,
    prompt_timeout: float | None = None,
    cancel_within: float = 1.0,
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
    this package ships (:func:`find_schema`), or, without ``jsonschema``
    (``pip install 'acp-trio[check]'``), the generated types of
    :mod:`acp_trio.schema` (the report's ``validator`` says which ran).
    ``cwd`` and ``env`` are the agent's.
    ``prompt_timeout`` bounds the answer to a prompt (a model's turn, not a
    protocol round trip; default: 3 x ``timeout``, at least 15).
    ``cancel_prompt`` is the prompt ``session-cancel`` sends, then cancels:
    it must keep the agent busy for a moment (for a model: a long task).
    ``cancel_within`` (seconds) bounds the time from a ``session/cancel`` to
    the turn's answer and to its last output.
    ``hold_prompt``, for agents that do not speak the scenario vocabulary, is
    a prompt on which the agent sends the client a request (a permission, a
    file, a terminal): the checker holds every such request unanswered, so
    the turn keeps running, and ``session-cancel`` and the cancellation
    checks but ``deadline`` run on it (each held request must be cancelled
    on the wire once the turn is cancelled). ``hold_deadline`` (seconds) is
    the agent's own time limit on that turn, if it has one: ``deadline``
    then runs too, and requires the turn to end by itself at that limit
    with ``-32800``, every held request cancelled on the wire.

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
    if hold_deadline is not None and (hold_prompt is None or not hold_deadline > 0):
        raise ValueError("hold_deadline needs hold_prompt, and must be a positive number")
    selected = _selected(only)
    promoted = promoted_levels(strict, require)
    if permissions not in PERMISSION_POLICIES:
        raise ValueError(
            f"permissions must be one of {', '.join(PERMISSION_POLICIES)}, not {permissions!r}"
        )
    validator = load_validator(schema)

    def make_runner(nursery: trio.Nursery, workspace: str) -> _Runner:
        return _Runner(
            nursery,
            command,
            timeout=timeout,
            scenario=scenario,
            schema=schema,
            cwd=cwd,
            env=env,
            cancel_prompt=cancel_prompt,
            promoted=promoted,
            policy=EditorPolicy(permissions, workspace, terminals),
            validator=validator,
            init_timeout=init_timeout,
            hold_prompt=hold_prompt,
            hold_deadline=hold_deadline,
            prompt_timeout=prompt_timeout,
            cancel_within=cancel_within,
        )

    runner, results, duration = await run_selected(selected, cwd, make_runner)
    init = runner.init_result if isinstance(runner.init_result, dict) else {}
    other = runner.other_version if isinstance(runner.other_version, dict) else {}
    if not init and other:
        init = {"agentInfo": other.get("agentInfo") or other.get("info"), **other}
    return CheckReport(
        command=tuple(command),
        results=results,
        scenario=bool(runner.scenario),
        scenario_reason=runner.scenario_reason,
        agent_info=init.get("agentInfo"),
        protocol_version=init.get("protocolVersion"),
        duration=duration,
        promoted=promoted,
        allow_skips=allow_skips,
        auth_required=runner.auth_required,
        validator=validator.description,
        only_version=other.get("protocolVersion") if other else None,
    )
