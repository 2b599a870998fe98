"""The method table against meta.json and the JSON-RPC routing definitions.

Each method's params (and result) instances are wrapped in a JSON-RPC
envelope and validated against the whole schema, which exercises the six
routing definitions (``ClientRequest``, ``AgentNotification``...) that the
generator reads but does not turn into classes.
"""

from __future__ import annotations

import json
import types
from typing import Any

import pytest

import acp_trio.schema as stable
import acp_trio.schema.unstable as unstable
import acp_trio.schema.v2 as v2
import acp_trio.schema.v2.unstable as v2_unstable
from acp_trio.schema import MethodInfo

from ._schema_data import (
    FLAVOURS,
    Builder,
    load,
    load_meta,
    root_validator,
)

MODULES: dict[str, types.ModuleType] = {
    "stable": stable,
    "unstable": unstable,
    "v2": v2,
    "v2-unstable": v2_unstable,
}

STABLE_NOTIFICATIONS = {
    "session/cancel",
    "session/update",
    "elicitation/complete",
    "$/cancel_request",
}


def test_stable_table_shape() -> None:
    assert stable.PROTOCOL_VERSION == 1
    notifications = {n for n, m in stable.METHODS.items() if m.kind == "notification"}
    assert notifications == STABLE_NOTIFICATIONS
    prompt = stable.METHODS["session/prompt"]
    assert prompt == MethodInfo(
        "session/prompt",
        "request",
        "agent",
        stable.PromptRequest,
        stable.PromptResponse,
        "PromptRequest",
        "PromptResponse",
    )
    update = stable.METHODS["session/update"]
    assert (update.kind, update.handled_by, update.result) == ("notification", "client", None)
    assert stable.METHODS["$/cancel_request"].handled_by == "protocol"
    assert (
        stable.METHODS["session/set_config_option"].params is stable.SetSessionConfigOptionRequest
    )
    assert set(stable.REQUESTS) | set(stable.NOTIFICATIONS) == set(stable.METHODS)


def test_unstable_dual_method() -> None:
    req = unstable.REQUESTS["mcp/message"]
    note = unstable.NOTIFICATIONS["mcp/message"]
    assert (req.kind, req.handled_by, req.params) == ("request", "both", unstable.MessageMcpRequest)
    assert (note.kind, note.params) == ("notification", unstable.MessageMcpNotification)
    assert unstable.METHODS["mcp/message"] is req


def test_unstable_proxy_methods() -> None:
    init = unstable.REQUESTS["proxy/initialize"]
    assert init.handled_by == "proxy"
    assert init.params is unstable.InitializeRequest  # InitializeProxyRequest names it
    assert init.result is unstable.InitializeResponse
    assert (init.params_name, init.result_name) == (
        "InitializeProxyRequest",
        "InitializeProxyResponse",
    )
    wrapped = {"method": "session/prompt", "params": {"sessionId": "s", "prompt": []}}
    req = unstable.converter.structure(wrapped, unstable.REQUESTS["proxy/successor"].params)
    assert req == unstable.ProxySuccessorRequest(method="session/prompt", params=wrapped["params"])
    note = unstable.NOTIFICATIONS["proxy/successor"]
    assert (note.handled_by, note.params) == ("proxy", unstable.ProxySuccessorNotification)
    assert "mcp/message" not in stable.METHODS


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_table_matches_the_schemas_method_tables(flavour: str) -> None:
    meta = load_meta(flavour)
    defs = load(flavour)["$defs"]
    mod = MODULES[flavour]
    sides = {
        "agentMethods": "agent",
        "clientMethods": "client",
        "protocolMethods": "protocol",
        "proxyMethods": "proxy",
    }
    expected: dict[str, set[str]] = {}
    for group, side in sides.items():
        for wire in meta.get(group, {}).values():
            expected.setdefault(wire, set()).add(side)
    assert set(mod.METHODS) == set(expected)
    for info in [*mod.REQUESTS.values(), *mod.NOTIFICATIONS.values()]:
        want = expected[info.name]
        assert info.handled_by == ("both" if {"agent", "client"} <= want else next(iter(want)))
        assert defs[info.params_name]["x-method"] == info.name
        assert (info.result is None) == (info.kind == "notification")
        if info.result_name:
            assert defs[info.result_name]["x-method"] == info.name


def envelope_cases() -> list[Any]:
    out = []
    for flavour in FLAVOURS:
        for table in ("REQUESTS", "NOTIFICATIONS"):
            for name, info in getattr(MODULES[flavour], table).items():
                out.append(pytest.param(flavour, info, id=f"{flavour}-{info.kind}-{name}"))
    return out


@pytest.mark.parametrize(("flavour", "info"), envelope_cases())
def test_wire_messages_validate_and_round_trip(flavour: str, info: MethodInfo) -> None:
    builder = Builder(flavour)
    conv = MODULES[flavour].converter
    check = root_validator(flavour)
    for params in builder.instances(info.params_name):
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": info.name, "params": params}
        if info.kind == "request":
            message["id"] = 1
        check.validate(message)
        obj = conv.structure(params, info.params)
        out = conv.unstructure(obj, unstructure_as=info.params)
        assert json.dumps(out, sort_keys=True) == json.dumps(params, sort_keys=True)
    if info.result_name is None:
        return
    for result in builder.instances(info.result_name):
        check.validate({"jsonrpc": "2.0", "id": "r-1", "result": result})
        obj = conv.structure(result, info.result)
        out = conv.unstructure(obj, unstructure_as=info.result)
        assert json.dumps(out, sort_keys=True) == json.dumps(result, sort_keys=True)
