"""The public surface is small and deliberate: a change to it is a change to
this list (and to the CHANGELOG)."""

from __future__ import annotations

import types

import acp_trio
import acp_trio.testing

TOP_LEVEL = {
    # connection layer
    "CANCEL_REQUEST_METHOD", "CancelCause", "Connection", "ConnectionConfig",
    "ConnectionStatistics", "FramedStream", "Handler", "PendingRequest", "RequestContext",
    "RequestNode", "connect_connection", "current_request", "open_connection",
    "serve_connection",
    # JSON library choice
    "json_backend", "use_json_backend",
    # errors
    "ACPError", "CapabilityError", "ConnectionClosed", "ErrorCode", "LocalProtocolError",
    "MessageTooLarge", "ProtocolError", "RemoteProtocolError", "RequestError",
    "TurnNotAnswered", "UnsupportedProtocolVersion",
    # typed APIs
    "AGENT_METHODS", "Agent", "AgentProxy", "CLIENT_METHODS", "Client", "ClientProxy",
    "connect_to_agent", "open_agent", "open_agent_client_pair", "open_client", "run_agent",
    "serve_agent",
    # transports
    "AgentProcess", "open_agent_process", "open_stdio_stream", "open_tcp_stream", "serve_tcp",
    # agent helpers (and the acp_trio.build module)
    "AgentSessions", "TerminalHandle", "ToolCallHandle",
    # client helpers
    "ApproveFunc", "TerminalManager", "TerminalsMixin", "WorkspaceFiles",
    "WorkspaceFilesMixin", "open_terminal_manager",
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


def test_testing_names() -> None:
    assert public_names(acp_trio.testing) == TESTING


def test_public_names_live_in_private_modules() -> None:
    # Public modules only re-export; the code lives in `_`-prefixed modules.
    for module in (acp_trio, acp_trio.testing):
        for name in public_names(module):
            owner = getattr(getattr(module, name), "__module__", None)
            if isinstance(owner, str) and owner.startswith("acp_trio"):
                assert "._" in owner, f"{module.__name__}.{name} is defined in {owner}"
