"""Public names say where users import them from."""

from __future__ import annotations

import types
from collections.abc import MutableMapping
from typing import Any, NoReturn, TypeVar


def fix_module_names(namespace: str, names: MutableMapping[str, object]) -> None:
    """Give the classes and functions a public module re-exports the
    ``__module__`` of that module (as Trio does), so that reprs, tracebacks
    and documentation name ``acp_trio.Agent``, not ``acp_trio._typed._agent.Agent``.

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


T = TypeVar("T")


class NoPublicConstructor(type):
    """The metaclass of live objects (a proxy, a handle, a process), which
    only acp_trio makes, with ``cls._create(...)``; calling the class raises
    ``TypeError``, as Trio's live objects do."""

    def __call__(cls, *args: object, **kwargs: object) -> NoReturn:
        raise TypeError(
            f"{cls.__module__}.{cls.__qualname__} has no public constructor: "
            "acp_trio makes it (see its docstring for the function that does)"
        )

    def _create(cls: type[T], *args: Any, **kwargs: Any) -> T:
        return type.__call__(cls, *args, **kwargs)  # type: ignore[no-any-return]
