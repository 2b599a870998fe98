"""``python -m acp_trio``: the command line.

- ``check-agent [--json] [--strict] [--require GROUPS] [--allow-skips] [--only NAMES]
  [--scenario] [--timeout S] [--schema PATH] -- CMD...`` runs the conformance
  checks against any stdio ACP agent; exit status 0 CONFORMS, 1 DOES NOT
  CONFORM, 3 INCOMPLETE (a required check could not run), 2 usage error.
- ``check-client [--json] [--timeout S] [--limit S] -- CLIENT_CMD...`` runs
  a client that spawns the checking agent (``{agent}``/``{agent-args}`` in
  its command); ``check-client --agent-side --report FILE`` is that agent.
- ``trace --log FILE -- CMD...``: a stdio proxy that logs every message.
- ``check-agent-v2 [options] -- CMD...``: checks an ACP v2 (Preview)
  agent (lifecycle, held prompts, per-entity cancel, ``-32022``).
- ``scenario-agent [--v2]``: serves the reference scenario agent on stdio (with
  ``--v2``, the v1 and v2 ones behind the version router).
- ``conduct [--trace FILE] -- PROXY_CMD... [-- PROXY_CMD...] -- AGENT_CMD...``: serves a
  proxy chain (proxy-chains RFD, Draft) as one agent on stdio.
- ``serve --http HOST:PORT [--token T] -- AGENT_CMD...`` and ``connect URL``:
  remote ACP (WebSocket, Streamable HTTP; the ``remote`` extra).

``scenario-agent``, ``check-agent``, ``conduct``, ``serve`` and ``connect`` take
``--otel``: OpenTelemetry tracing, the SDK configured from the standard
``OTEL_*`` variables (``OTEL_TRACES_EXPORTER=console`` prints spans to
stderr, never stdout); needs the ``otel`` extra and ``opentelemetry-sdk``.
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import sys
from collections.abc import Sequence

import attrs
import trio

from acp_trio._cli._kit import (
    AGENT_NO_SESSION,
    V2_NO_SESSION,
    add_kit_options,
    baseline,
    finish,
    selected,
)
from acp_trio.testing._check._report import Level

__all__ = ["main"]


def _command(parser: argparse.ArgumentParser, words: list[str]) -> list[str]:
    if words and words[0] == "--":
        words = words[1:]
    if not words:
        parser.error("give the agent's command after --")
    return words


def _names(values: list[str] | None) -> list[str] | None:
    if not values:
        return None
    return [name.strip() for value in values for name in value.split(",") if name.strip()]


#: The tools that take --otel.
OTEL_TOOLS = ("scenario-agent", "check-agent", "conduct", "serve", "connect")


def _add_otel(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--otel",
        action="store_true",
        help="trace with OpenTelemetry, configured from the OTEL_* environment variables "
        "(e.g. OTEL_TRACES_EXPORTER=console: spans on stderr); needs the otel extra and "
        "opentelemetry-sdk",
    )


def _parser() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    parser = argparse.ArgumentParser(
        prog="python -m acp_trio",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="tool", required=True, metavar="TOOL")

    check = sub.add_parser(
        "check-agent",
        help="run the conformance checks against a stdio ACP agent",
        description="Spawn a stdio ACP agent (any SDK) and check its conformance. "
        "Exit status: 0 CONFORMS (every required check ran and passed), 1 DOES NOT CONFORM "
        "(a required check failed), 3 INCOMPLETE (a required check could not run; see "
        "--allow-skips), 2 usage error.",
    )
    check.add_argument(
        "--strict",
        action="store_true",
        help="count the recommended and cancellation checks as required",
    )
    check.add_argument(
        "--require",
        action="append",
        metavar="GROUPS",
        help="comma-separated check levels to count as required: recommended, cancellation "
        "(repeatable)",
    )
    check.add_argument(
        "--allow-skips",
        action="store_true",
        help="a required check that could not run does not make the run INCOMPLETE",
    )
    check.add_argument("--json", action="store_true", help="print one JSON document")
    add_kit_options(check)
    check.add_argument(
        "--scenario",
        action="store_true",
        help="run the scenario checks even if `echo <token>` does not detect the scenario "
        "vocabulary (docs/scenario-agent.md in acp_trio's source)",
    )
    check.add_argument("--no-scenario", action="store_true", help="skip the scenario checks")
    check.add_argument(
        "--timeout",
        type=float,
        default=5.0,
        metavar="S",
        help="seconds each wait of a check may take (default 5)",
    )
    check.add_argument(
        "--init-timeout",
        type=float,
        default=None,
        metavar="S",
        help="seconds an agent process may take to answer initialize (default: 3 x "
        "--timeout, at least 15)",
    )
    check.add_argument(
        "--prompt-timeout",
        type=float,
        default=None,
        metavar="S",
        help="seconds a prompt may take to be answered (a model's turn; default: 3 x "
        "--timeout, at least 15); raising it does not slow the other checks",
    )
    check.add_argument(
        "--cancel-within",
        type=float,
        default=1.0,
        metavar="S",
        help="seconds a cancelled turn may take to stop its output and answer (default 1)",
    )
    check.add_argument(
        "--schema",
        metavar="PATH",
        help="validate with jsonschema against this ACP v1 schema.json (default: the schema "
        "acp_trio ships, with jsonschema from the 'check' extra; without it, the generated "
        "types of acp_trio.schema)",
    )
    check.add_argument(
        "--cancel-prompt",
        default="wait_for_cancel",
        metavar="TEXT",
        help="the prompt session-cancel sends and then cancels; it must keep the agent "
        "busy for a moment (default: wait_for_cancel)",
    )
    check.add_argument(
        "--hold-prompt",
        metavar="TEXT",
        help="for agents without the scenario vocabulary (docs/scenario-agent.md in acp_trio's "
        "source): a prompt on which the agent sends "
        "the client a request (permission, file, terminal); the checker holds it unanswered "
        "and runs session-cancel and the cancellation checks (but deadline) on that turn",
    )
    check.add_argument(
        "--hold-deadline",
        type=float,
        metavar="SECONDS",
        help="with --hold-prompt: the agent's own time limit on that turn; the deadline check "
        "then requires the turn to end by itself with -32800, the held requests cancelled",
    )
    check.add_argument(
        "--permissions",
        choices=("allow", "reject", "cancel"),
        default="allow",
        help="how the checker answers the agent's permission requests: the first allow "
        "option (default), the first reject option, or cancelled",
    )
    check.add_argument(
        "--terminals",
        action="store_true",
        help="run the agent's terminal commands (in the temporary workspace); by default "
        "they are refused",
    )
    check.add_argument("--list", action="store_true", help="list the checks and exit")
    check.add_argument("--verbose", "-v", action="store_true", help="show acp_trio's log")
    check.add_argument("command", nargs=argparse.REMAINDER, help="-- AGENT_CMD...")

    client = _client_parser(sub)

    trace = sub.add_parser(
        "trace",
        help="a logging stdio proxy between a client and an agent",
        description="Forward stdin/stdout between a client (us) and the agent CMD unchanged, "
        "pass its stderr through, and log every message as JSON lines to FILE. "
        "Exits with the agent's exit code.",
    )
    trace.add_argument("--log", required=True, metavar="FILE", help="where to write the log")
    trace.add_argument(
        "--grace",
        type=float,
        default=2.0,
        metavar="S",
        help="seconds the agent gets to exit after the client closed its stdin (default 2)",
    )
    trace.add_argument("command", nargs=argparse.REMAINDER, help="-- AGENT_CMD...")

    check_v2 = sub.add_parser(
        "check-agent-v2",
        help="run the conformance checks against a stdio ACP v2 (Preview) agent",
        description="Spawn a stdio ACP v2 agent (any SDK) and check the v2 rules: negotiation, "
        "-32022, requests before and repeated initialize, the prompt lifecycle, robustness; "
        "held prompts, tool_call/cancel and error turns with the v2 scenario vocabulary "
        "(`python -m acp_trio scenario-agent --v2`; docs/scenario-agent.md in acp_trio's "
        "source). Exit status as check-agent's: 0 CONFORMS, "
        "1 DOES NOT CONFORM, 3 INCOMPLETE, 2 usage error.",
    )
    for name in ("--strict", "--allow-skips", "--json", "--list", "--verbose"):
        check_v2.add_argument(name, action="store_true", help=f"as check-agent {name}")
    check_v2.add_argument("--require", action="append", metavar="NAMES", help="as check-agent's")
    check_v2.add_argument(
        "--hold-prompt",
        metavar="TEXT",
        help="for agents without the v2 scenario vocabulary (docs/scenario-agent.md in "
        "acp_trio's source): a prompt on which the agent sends the client a request (a "
        "permission); held-prompts then runs on that turn",
    )
    add_kit_options(check_v2)
    check_v2.add_argument("--timeout", type=float, default=5.0, metavar="S", help="(default 5)")
    for name in ("--init-timeout", "--prompt-timeout"):
        check_v2.add_argument(name, type=float, metavar="S", help=f"as check-agent {name}")
    check_v2.add_argument(
        "--schema",
        metavar="PATH",
        help="validate with jsonschema against this ACP v2 schema.json (default: the one "
        "acp_trio ships, as for check-agent)",
    )
    check_v2.add_argument("command", nargs=argparse.REMAINDER, help="-- AGENT_CMD...")

    agent = sub.add_parser("scenario-agent", help="serve the reference scenario agent on stdio")
    agent.add_argument(
        "--v2",
        action="store_true",
        help="serve the v1 and the ACP v2 (Preview) scenario agents behind the version router",
    )
    conduct = sub.add_parser(
        "conduct",
        help="serve a chain of proxies and an agent as one agent on stdio",
        description="Spawn each component (proxies first, the agent last; each command "
        "after its own --) and serve the chain as one agent on stdio: proxy/initialize to "
        "each component with a successor, proxy/successor routed hop by hop, each hop's "
        "requests cancelled on its own connection. Ends when the client closes stdin or a "
        "component exits; no process is left behind.",
    )
    conduct.add_argument(
        "--trace",
        metavar="FILE",
        help="append every hop's messages to FILE as JSON lines, with each hop's own ids",
    )
    conduct.add_argument(
        "command",
        nargs=argparse.REMAINDER,
        help="-- PROXY_CMD... [-- PROXY_CMD...] -- AGENT_CMD...",
    )
    from acp_trio._cli._remote import add_parsers

    remote = add_parsers(sub)
    tools = {
        **remote,
        "conduct": conduct,
        "check-agent": check,
        "check-client": client,
        "trace": trace,
        "check-agent-v2": check_v2,
        "scenario-agent": agent,
    }
    for tool in OTEL_TOOLS:
        _add_otel(tools[tool])
    return parser, tools


def _client_parser(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
) -> argparse.ArgumentParser:
    client = sub.add_parser(
        "check-client",
        help="check a stdio ACP client against a scripted agent",
        description="Run CLIENT_CMD, which must spawn the checking agent: its command "
        "replaces {agent} (one shell-quoted word) or {agent-args} (the words) in "
        "CLIENT_CMD, and is in $ACP_CHECK_CLIENT_AGENT. The client must send a "
        "prompt, session/cancel when the agent says `check-client: cancel now`, and "
        "another prompt when a turn said `check-client: prompt again`. "
        "Exit status: 0 CONFORMS, 1 a required check failed, 3 INCOMPLETE (a required "
        "check could not run), 2 usage error. With --agent-side, serve the "
        "checking agent on stdio and write the verdicts to --report.",
    )
    client.add_argument("--json", action="store_true", help="print one JSON document")
    client.add_argument(
        "--timeout",
        type=float,
        default=5.0,
        metavar="S",
        help="seconds each wait for the client may take (default 5)",
    )
    client.add_argument(
        "--limit",
        type=float,
        default=120.0,
        metavar="S",
        help="seconds the client may run before it is killed (default 120)",
    )
    client.add_argument(
        "--cancel-wait",
        type=float,
        default=None,
        metavar="S",
        help="seconds the checking agent ignores a session/cancel before it calls the client "
        "hung (ignored-cancel; default 3 x --timeout): more than the client's own grace",
    )
    client.add_argument("--cwd", metavar="DIR", help="run the client in DIR")
    client.add_argument(
        "--on-cue",
        metavar="CMD",
        help="a shell command run once the agent sent its cue `check-client: cancel now` "
        "(for clients cancelled from outside, e.g. \"acpx --agent '{agent}' cancel\"), and "
        "again at each later cue; the placeholders work as in CLIENT_CMD",
    )
    client.add_argument("--list", action="store_true", help="list the checks and exit")
    client.add_argument(
        "--show", metavar="FILE", help="print the verdicts of an --agent-side report and exit"
    )
    client.add_argument("--agent-side", action="store_true", help="be the checking agent")
    client.add_argument("--report", metavar="FILE", help="with --agent-side: the verdicts")
    add_kit_options(client)
    client.add_argument("command", nargs=argparse.REMAINDER, help="-- CLIENT_CMD...")
    return client


def _check_client(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    from acp_trio.testing._check._client import run_agent_side
    from acp_trio.testing._check._client_run import check_client, read_report

    if args.timeout <= 0 or args.limit <= 0:
        parser.error("--timeout and --limit must be positive")
    if args.cancel_wait is not None and args.cancel_wait <= 0:
        parser.error("--cancel-wait must be positive")
    if args.list:
        from acp_trio.testing import CLIENT_CHECKS
        from acp_trio.testing._check._report import list_lines

        print("\n".join(list_lines(CLIENT_CHECKS)))
        return 0
    if args.show:
        report = read_report(args.show)
        print(json.dumps(report.to_json(), indent=2) if args.json else report.format_table())
        return report.exit_code
    if args.agent_side:
        if not args.report:
            parser.error("--agent-side needs --report FILE")
        side = functools.partial(
            run_agent_side, args.report, timeout=args.timeout, cancel_wait=args.cancel_wait
        )
        trio.run(side)
        return 0
    command = _command(parser, args.command)
    from acp_trio.testing import CLIENT_CHECKS

    only = selected(parser, args, CLIENT_CHECKS, None)
    expected = baseline(parser, args, CLIENT_CHECKS)
    on_cue = None if args.on_cue is None else ["sh", "-c", args.on_cue]
    run = functools.partial(
        check_client,
        command,
        timeout=args.timeout,
        limit=args.limit,
        cwd=args.cwd,
        on_cue=on_cue,
        cancel_wait=args.cancel_wait,
    )
    report = trio.run(run)
    if only is not None:  # every check runs (one scripted session); these are judged
        report = attrs.evolve(report, results=tuple(r for r in report if r.name in only))
    return finish(args, "check-client", report, lambda r: r.level is Level.REQUIRED, expected)


def _list_checks() -> str:
    from acp_trio.testing import CHECKS
    from acp_trio.testing._check._report import list_lines

    return "\n".join(list_lines(CHECKS))


def _check_agent(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    from acp_trio.testing import CHECKS, check_agent
    from acp_trio.testing._check import promoted_levels

    if args.list:
        print(_list_checks())
        return 0
    command = _command(parser, args.command)
    only = selected(parser, args, CHECKS, AGENT_NO_SESSION)
    expected = baseline(parser, args, CHECKS)
    if args.scenario and args.no_scenario:
        parser.error("--scenario and --no-scenario exclude each other")
    if args.timeout <= 0:
        parser.error("--timeout must be positive")
    for name in ("init_timeout", "prompt_timeout", "cancel_within"):
        value = getattr(args, name)
        if value is not None and value <= 0:
            parser.error(f"--{name.replace('_', '-')} must be positive")
    if args.schema is not None:
        from acp_trio.testing._schema_check import load_validator

        try:
            load_validator(args.schema)
        except ValueError as exc:
            parser.error(str(exc))
    require = _names(args.require) or []
    if args.hold_deadline is not None and (args.hold_prompt is None or args.hold_deadline <= 0):
        parser.error("--hold-deadline needs --hold-prompt, and a positive number of seconds")
    try:
        promoted_levels(args.strict, require)
    except ValueError as exc:
        parser.error(str(exc))
    if not args.verbose:
        # Replies to the checker's malformed input are logged as warnings.
        logging.getLogger("acp_trio").addHandler(logging.NullHandler())
        logging.getLogger("acp_trio").propagate = False
    scenario = True if args.scenario else False if args.no_scenario else None
    run = functools.partial(
        check_agent,
        command,
        only=only,
        scenario=scenario,
        timeout=args.timeout,
        schema=args.schema,
        cancel_prompt=args.cancel_prompt,
        hold_prompt=args.hold_prompt,
        hold_deadline=args.hold_deadline,
        strict=args.strict,
        require=require,
        allow_skips=args.allow_skips,
        permissions=args.permissions,
        terminals=args.terminals,
        init_timeout=args.init_timeout,
        prompt_timeout=args.prompt_timeout,
        cancel_within=args.cancel_within,
    )
    report = trio.run(run)
    return finish(
        args, "check-agent", report, report.counts, expected, allow_skips=args.allow_skips
    )


def _check_agent_v2(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    from acp_trio.testing._check import promoted_levels
    from acp_trio.testing._check._v2 import V2_CHECKS, check_agent_v2

    if args.list:
        from acp_trio.testing._check._report import list_lines

        print("\n".join(list_lines(V2_CHECKS)))
        return 0
    command = _command(parser, args.command)
    only = selected(parser, args, V2_CHECKS, V2_NO_SESSION)
    expected = baseline(parser, args, V2_CHECKS)
    for name in ("timeout", "init_timeout", "prompt_timeout"):
        value = getattr(args, name)
        if value is not None and value <= 0:
            parser.error(f"--{name.replace('_', '-')} must be positive")
    require = _names(args.require) or []
    try:
        promoted_levels(args.strict, require)
        if args.schema is not None:
            from acp_trio.testing._schema_check import load_validator

            load_validator(args.schema, 2)
    except ValueError as exc:
        parser.error(str(exc))
    if not args.verbose:
        logging.getLogger("acp_trio").addHandler(logging.NullHandler())
        logging.getLogger("acp_trio").propagate = False
    run = functools.partial(
        check_agent_v2,
        command,
        only=only,
        timeout=args.timeout,
        init_timeout=args.init_timeout,
        prompt_timeout=args.prompt_timeout,
        schema=args.schema,
        strict=args.strict,
        require=require,
        allow_skips=args.allow_skips,
        hold_prompt=args.hold_prompt,
    )
    report = trio.run(run)
    return finish(
        args, "check-agent-v2", report, report.counts, expected, allow_skips=args.allow_skips
    )


def _conduct(parser: argparse.ArgumentParser, words: list[str], trace: str | None) -> int:
    components: list[list[str]] = []
    for word in words:
        if word == "--":
            components.append([])
        elif not components:
            parser.error("give each component's command after its own --")
        else:
            components[-1].append(word)
    if not components or any(not command for command in components):
        parser.error("give each component's command after its own -- (the agent last)")
    from acp_trio._proxy._conductor import serve_conductor
    from acp_trio._transports import open_stdio_stream

    try:
        log = None if trace is None else open(trace, "a", encoding="utf-8")  # noqa: SIM115
    except OSError as exc:
        parser.error(f"cannot open the trace {trace}: {exc}")

    async def run() -> None:
        async with open_stdio_stream() as stream:
            await serve_conductor(stream, components, trace=log)

    from acp_trio._cli._signals import TERMINATED, run_until_terminated

    try:
        terminated = trio.run(run_until_terminated, run)
    except KeyboardInterrupt:
        return 130
    finally:
        if log is not None:
            log.close()
    return TERMINATED if terminated else 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    parser, tools = _parser()
    args = parser.parse_args(argv)
    if not getattr(args, "otel", False):
        return _run(tools, args)
    try:
        from acp_trio._otel._sdk import start_tracing

        # check-agent is a client: its checks are one trace, under one span.
        root = "check-agent" if args.tool == "check-agent" else None
        stop = start_tracing(f"acp_trio {args.tool}", root)
    except ImportError as exc:
        tools[args.tool].error(
            f"--otel needs the OpenTelemetry SDK (pip install 'acp-trio[otel]' "
            f"opentelemetry-sdk): {exc}"
        )
    except ValueError as exc:
        tools[args.tool].error(str(exc))
    try:
        return _run(tools, args)
    finally:
        stop()


def _run(tools: dict[str, argparse.ArgumentParser], args: argparse.Namespace) -> int:
    if args.tool == "check-agent":
        return _check_agent(tools["check-agent"], args)
    if args.tool == "check-agent-v2":
        return _check_agent_v2(tools["check-agent-v2"], args)
    if args.tool == "check-client":
        return _check_client(tools["check-client"], args)
    if args.tool == "trace":
        from acp_trio._proxy._trace import run_trace

        command = _command(tools["trace"], args.command)
        try:
            log = open(args.log, "a", encoding="utf-8")  # noqa: SIM115 - closed below
        except OSError as exc:
            tools["trace"].error(f"cannot open the log {args.log}: {exc}")
        with log:
            return trio.run(functools.partial(run_trace, command, log=log, grace=args.grace))
    if args.tool == "conduct":
        return _conduct(tools["conduct"], args.command, args.trace)
    if args.tool in ("serve", "connect"):
        from acp_trio._cli._remote import run

        return run(tools[args.tool], args)
    if args.v2:
        from acp_trio.testing._scenario_v2 import run_scenario_router

        trio.run(run_scenario_router)
        return 0
    from acp_trio.testing import run_scenario_agent

    trio.run(run_scenario_agent)
    return 0


if __name__ == "__main__":
    sys.exit(main())
