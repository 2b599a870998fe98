"""The public surface is small and deliberate: a change to it is a change to
this list (and to the CHANGELOG)."""

from __future__ import annotations

import importlib
import types

import pytest

import acp_trio
import acp_trio.lowlevel
import acp_trio.testing

TOP_LEVEL = {
    # errors
    "ACPError", "CapabilityError", "ConnectionClosed", "ErrorCode", "LocalProtocolError",
    "MessageTooLarge", "ProtocolError", "RemoteProtocolError", "RequestError",
    "TurnNotAnswered", "UnsupportedProtocolVersion",
    # typed APIs and the functions that serve and connect them
    "Agent", "AgentProxy", "Client", "ClientProxy", "ConnectionConfig",
    "open_agent", "open_agent_client_pair", "open_client", "open_spawned_agent", "run_agent",
    "serve_agent", "serve_tcp",
    # the agent author's kit (and the acp_trio.build module)
    "AgentSessions", "TerminalHandle", "ToolCallHandle",
}  # fmt: skip

LOWLEVEL = {
    "CANCEL_REQUEST_METHOD", "CancelCause", "Connection", "ConnectionStatistics",
    "FramedStream", "Handler", "MessageStream", "PendingRequest", "RequestContext",
    "RequestNode", "connect_connection", "current_request", "open_connection",
    "serve_connection", "json_backend", "use_json_backend", "AGENT_METHODS",
    "CLIENT_METHODS", "AgentProcess", "open_agent_process", "open_stdio_stream",
    "open_tcp_stream",
}  # fmt: skip

TESTING = {
    "AgentClientPair", "CHECKS", "CheckInfo", "CheckReport", "CheckResult",
    "ExpectationFailed", "HOLD_PATH", "Level", "NOT_JSON", "PeerEvent",
    "SCENARIO_AGENT_COMMAND", "SCENARIO_CLIENT_CAPABILITIES", "ScenarioAgent",
    "ScenarioClient", "ScriptedPeer", "Verdict", "check_agent", "find_schema",
    "open_memory_pair", "open_scripted_agent", "open_scripted_client",
    "open_scripted_process", "run_scenario_agent",
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


@pytest.mark.parametrize("name", sorted(acp_trio._MOVED))
def test_moved_names_still_import_with_a_warning(name: str) -> None:
    where = acp_trio._MOVED[name]
    with pytest.warns(DeprecationWarning, match=f"moved to {where}.{name}"):
        value = getattr(acp_trio, name)
    assert value is getattr(importlib.import_module(where), name)


def test_renamed_names_still_import_with_a_warning() -> None:
    with pytest.warns(DeprecationWarning, match="now acp_trio.open_spawned_agent"):
        from acp_trio import connect_to_agent  # type: ignore[attr-defined]
    assert connect_to_agent is acp_trio.open_spawned_agent


def test_unknown_names_raise_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_name"):
        acp_trio.no_such_name  # noqa: B018


def test_testing_names() -> None:
    assert public_names(acp_trio.testing) == TESTING


def test_public_names_live_in_private_modules() -> None:
    # Public modules only re-export; the code lives in `_`-prefixed modules.
    for module in (acp_trio, acp_trio.lowlevel, acp_trio.testing):
        for name in public_names(module):
            owner = getattr(getattr(module, name), "__module__", None)
            if isinstance(owner, str) and owner.startswith("acp_trio"):
                assert "._" in owner, f"{module.__name__}.{name} is defined in {owner}"
