"""Public names say where users import them from."""

from __future__ import annotations

import types
from collections.abc import MutableMapping


def fix_module_names(namespace: str, names: MutableMapping[str, object]) -> None:
    """Give the classes and functions a public module re-exports the
    ``__module__`` of that module (as Trio does), so that reprs, tracebacks
    and documentation name ``acp_trio.Agent``, not ``acp_trio._agent.Agent``.

    Only names defined in a private module of acp_trio are changed, each once:
    a name re-exported by two namespaces keeps the first. A class's own
    methods and properties follow it.
    """
    for name, value in names.items():
        if name.startswith("_") or isinstance(value, types.ModuleType):
            continue
        if not isinstance(value, type | types.FunctionType):
            continue
        module = getattr(value, "__module__", None)
        if isinstance(module, str) and module.startswith("acp_trio.") and _private(module):
            value.__module__ = namespace
            if isinstance(value, type):
                _fix_members(value, module, namespace)


def _fix_members(cls: type, module: str, namespace: str) -> None:
    for member in vars(cls).values():
        if isinstance(member, staticmethod | classmethod):
            member = member.__func__
        elif isinstance(member, property):
            member = member.fget
        if isinstance(member, types.FunctionType) and member.__module__ == module:
            member.__module__ = namespace


def _private(module: str) -> bool:
    return any(part.startswith("_") for part in module.split(".")[1:])
