"""The public surface is small and deliberate: a change to it is a change to
this list (and to the CHANGELOG)."""

from __future__ import annotations

import ast
import inspect
import traceback
import types
from pathlib import Path

import pytest

import acp_trio
import acp_trio.contrib
import acp_trio.contrib.v2
import acp_trio.lowlevel
import acp_trio.proxy
import acp_trio.remote
import acp_trio.testing
import acp_trio.v2

ACP_TRIO = Path(acp_trio.__file__).parent

TOP_LEVEL = {
    # errors
    "ACPError", "CapabilityError", "ConnectionClosed", "ErrorCode", "LocalProtocolError",
    "MessageTooLarge", "ProtocolError", "RemoteProtocolError", "RequestError",
    "TurnNotAnswered", "UnsupportedProtocolVersion", "PromptNotSent", "passing_errors_on",
    # typed APIs and the functions that serve and connect them
    "Agent", "AgentProxy", "Client", "ClientProxy", "ConnectionConfig",
    "open_client", "open_agent_client_pair", "open_agent", "open_spawned_agent", "run_agent",
    "serve_agent", "serve_tcp",
    # the agent author's kit (and the acp_trio.build module)
    "AgentSessions", "TerminalHandle", "ToolCallHandle",
    # how a cancelled turn ended (AgentProxy.cancel_turn)
    "AbandonPolicy", "CancelOutcome",
}  # fmt: skip

LOWLEVEL = {
    "CANCEL_REQUEST_METHOD", "CancelCause", "Connection", "ConnectionAPI", "ConnectionInstrument",
    "ConnectionStatistics", "Instrumentation",
    "BufferedMessageStream", "FramedStream", "Handler", "MessageStream", "PendingRequest",
    "RequestContext",
    "RequestNode", "connect_connection", "current_request", "open_connection",
    "serve_connection", "json_backend", "use_json_backend", "AGENT_METHODS",
    "CLIENT_METHODS", "AgentProcess", "open_agent_process", "open_stdio_stream",
    "open_tcp_stream", "StderrStatistics",
}  # fmt: skip

TESTING = {
    "AgentClientPair", "CHECKS", "CheckInfo", "CheckReport", "CheckResult",
    "ExpectationFailed", "HOLD_PATH", "Level", "NOT_JSON", "PeerEvent", "Rule",
    "SCENARIO_AGENT_COMMAND", "SCENARIO_CLIENT_CAPABILITIES", "ScenarioAgent",
    "ScenarioClient", "ScriptedPeer", "Verdict", "check_agent", "find_schema",
    "open_memory_pair", "open_scripted_agent", "open_scripted_client",
    "open_scripted_process", "run_scenario_agent",
    # the scenario vocabulary over ACP v2, and both versions behind the router
    "ScenarioAgentV2", "run_scenario_router",
    # check-client
    "CLIENT_CHECKS", "ClientCheckInfo", "ClientCheckReport", "check_client",
    # the fake editor and the fake agent (with its script steps)
    "FakeCommand", "FakeEditor", "FakeTerminal", "PermissionPolicy", "FakeAgent", "FakeTurn",
    "Step", "AskPermission", "Call", "EndTurn", "Fail", "ReadFile", "SendText", "SendThought",
    "SendUpdate", "Sleep", "StartToolCall", "UpdateToolCall", "WaitForCancel", "WriteFile",
}  # fmt: skip


def public_names(module: types.ModuleType) -> set[str]:
    return {
        name
        for name, value in vars(module).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }


def test_top_level_names() -> None:
    assert public_names(acp_trio) == TOP_LEVEL


def test_lowlevel_names() -> None:
    assert public_names(acp_trio.lowlevel) == LOWLEVEL


def test_unknown_names_raise_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_name"):
        acp_trio.no_such_name  # noqa: B018


def test_testing_names() -> None:
    assert public_names(acp_trio.testing) == TESTING


@pytest.mark.parametrize(
    "module",
    [
        acp_trio,
        acp_trio.lowlevel,
        acp_trio.contrib,
        acp_trio.contrib.v2,
        acp_trio.proxy,
        acp_trio.testing,
        acp_trio.v2,
        acp_trio.remote,
    ],
)
def test_public_modules_only_re_export(module: types.ModuleType) -> None:
    # The code lives in `_`-prefixed modules; a public module imports names
    # and fixes their __module__, nothing else (no shims, no __getattr__).
    tree = ast.parse(Path(inspect.getfile(module)).read_text())
    for node in tree.body:
        if isinstance(node, ast.ClassDef | ast.AsyncFunctionDef | ast.FunctionDef):
            raise AssertionError(f"{module.__name__} defines {node.name}")
    for name in public_names(module):
        value = getattr(module, name)
        if isinstance(value, types.FunctionType):
            path = Path(inspect.getfile(inspect.unwrap(value)))
            assert any(part.startswith("_") for part in path.relative_to(ACP_TRIO).parts)


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (acp_trio.Agent, "acp_trio.Agent"),
        (acp_trio.run_agent, "acp_trio.run_agent"),
        (acp_trio.RequestError, "acp_trio.RequestError"),
        (acp_trio.lowlevel.Connection, "acp_trio.lowlevel.Connection"),
        (acp_trio.contrib.WorkspaceFiles, "acp_trio.contrib.WorkspaceFiles"),
        (acp_trio.testing.ScenarioAgent, "acp_trio.testing.ScenarioAgent"),
        (acp_trio.v2.Agent, "acp_trio.v2.Agent"),
    ],
)
def test_public_names_show_where_they_are_imported_from(value: object, shown: str) -> None:
    assert f"{value.__module__}.{value.__qualname__}" == shown  # type: ignore[attr-defined]


def test_a_public_error_shows_its_public_name_in_a_traceback() -> None:
    line = traceback.format_exception_only(acp_trio.RequestError(-32600, "bad"))[-1]
    assert line.startswith("acp_trio.RequestError")


@pytest.mark.parametrize(
    "cls",
    [
        acp_trio.AgentProxy,
        acp_trio.ClientProxy,
        acp_trio.ToolCallHandle,
        acp_trio.TerminalHandle,
        acp_trio.contrib.TerminalManager,
        acp_trio.lowlevel.AgentProcess,
        acp_trio.v2.AgentProxy,
        acp_trio.v2.ClientProxy,
        acp_trio.v2.Turn,
        acp_trio.v2.ToolCallHandle,
        acp_trio.v2.TerminalHandle,
    ],
)
def test_live_objects_have_no_public_constructor(cls: type) -> None:
    with pytest.raises(TypeError, match="has no public constructor"):
        cls()
