"""Every generated proxy method, v1 and v2, object form and keyword form,
sends its own wire method with the params it was given (and returns what
the peer answered), through the ``_request``/``_notify`` hooks the SDK's
proxies implement."""

from __future__ import annotations

import types
from typing import Any

import attrs
import pytest

import acp_trio.schema as v1
import acp_trio.schema._generated_methods as v1_methods
import acp_trio.schema._generated_proxies as v1_proxies
import acp_trio.schema.v2 as v2
import acp_trio.schema.v2._generated_methods as v2_methods
import acp_trio.v2._generated_proxies as v2_proxies

from ._schema_data import Builder

VERSIONS = {
    "v1": (v1_proxies, v1_methods, v1.converter, "stable"),
    "v2": (v2_proxies, v2_methods, v2.converter, "v2"),
}


def recorder(base: type) -> Any:
    class Recorder(base):  # type: ignore[misc]
        def __init__(self) -> None:
            self.sent: list[tuple[str, Any, Any]] = []

        async def _request(self, method: str, params: Any, result_type: Any) -> Any:
            self.sent.append((method, params, result_type))
            return "the answer"

        async def _notify(self, method: str, params: Any) -> None:
            self.sent.append((method, params, None))

    return Recorder()


def cases() -> list[Any]:
    out = []
    for version, (proxies, _methods, _converter, _flavour) in VERSIONS.items():
        for side, names in (
            ("AgentProxyMethods", proxies.AGENT_METHOD_NAMES),
            ("ClientProxyMethods", proxies.CLIENT_METHOD_NAMES),
        ):
            for wire in names:
                out.append(pytest.param(version, side, wire, id=f"{version}-{wire}"))
    return out


def a_params_object(version: str, wire: str) -> Any:
    _proxies, methods, converter, flavour = VERSIONS[version]
    info = methods.METHODS[wire]
    json_instance = Builder(flavour).instances(info.params_name)[0]
    return info, converter.structure(json_instance, info.params)


@pytest.mark.parametrize(("version", "side", "wire"), cases())
async def test_each_method_sends_its_wire_method(version: str, side: str, wire: str) -> None:
    proxies = VERSIONS[version][0]
    names = (
        proxies.AGENT_METHOD_NAMES if side == "AgentProxyMethods" else proxies.CLIENT_METHOD_NAMES
    )
    info, params = a_params_object(version, wire)
    proxy = recorder(getattr(proxies, side))
    method = getattr(proxy, names[wire])
    answered = await method(params)
    assert proxy.sent == [(wire, params, info.result)]
    assert answered == ("the answer" if info.kind == "request" else None)
    # The keyword form builds the same params from the object's fields
    # (methods whose params are a union take the object only).
    if isinstance(info.params, type) and attrs.has(info.params):
        fields = {
            field.name: getattr(params, field.name)
            for field in attrs.fields(type(params))
            if getattr(params, field.name) is not field.default
        }
        proxy.sent.clear()
        await method(**fields)
        assert proxy.sent == [(wire, params, info.result)]


def test_every_wire_method_of_a_side_has_a_proxy_method() -> None:
    for proxies, methods, _converter, _flavour in VERSIONS.values():
        assert isinstance(proxies, types.ModuleType)
        handled = {m.name for m in methods.METHODS.values() if m.handled_by in ("agent", "client")}
        assert handled <= {*proxies.AGENT_METHOD_NAMES, *proxies.CLIENT_METHOD_NAMES}
