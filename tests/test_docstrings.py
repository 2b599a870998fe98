"""Every public function, class, method and property of the public modules
has a docstring of at least one sentence, and every async one (coroutine,
async generator, async context manager) says what cancellation does.

New public names are picked up as they are exported: the walk reads each
module's ``__all__`` (or its non-underscore names) and, for classes, the
public members defined in acp_trio classes of their MRO (not those of
``object`` or attrs). Inherited docstrings count (``inspect.getdoc``): an
override of a documented hook needs no copy.
"""

from __future__ import annotations

import importlib
import inspect
import re
import sys
import types
from collections.abc import Iterator
from typing import Any

import pytest

MODULES = [
    "acp_trio",
    "acp_trio.lowlevel",
    "acp_trio.remote",
    "acp_trio.testing",
    "acp_trio.contrib",
    "acp_trio.contrib.v2",
    "acp_trio.contrib.otel",
    "acp_trio.v2",
    "acp_trio.build",
    "acp_trio.proxy",
]

# Classes whose members are not checked.
EXCLUDED_MEMBERS_OF: set[str] = set()

# Async callables whose docstring need not mention cancellation, each with why.
CANCEL_ALLOWLIST: dict[str, str] = {}

# At least one sentence: four words and a full stop (or a colon before a list).
SENTENCE = re.compile(r"\w+\W+\w+\W+\w+\W+\w+[^.:]*[.:]", re.DOTALL)


def is_async(obj: Any) -> bool:
    """A coroutine function, an async generator or an async context manager."""
    while obj is not None:
        if inspect.iscoroutinefunction(obj) or inspect.isasyncgenfunction(obj):
            return True
        obj = getattr(obj, "__wrapped__", None)
    return False


def ours(obj: Any) -> bool:
    module = getattr(obj, "__module__", None) or ""
    if module == "acp_trio.schema._generated_proxies":
        return True  # the proxies' generated methods
    return module.startswith("acp_trio") and not module.startswith("acp_trio.schema")


def public_names(module: types.ModuleType) -> list[str]:
    names = getattr(module, "__all__", None)
    if names is None:
        names = [name for name in vars(module) if not name.startswith("_")]
    return list(names)


def members(cls: type) -> Iterator[tuple[str, Any, Any]]:
    """(name, the raw member, what getdoc reads) of cls's public members
    defined in acp_trio classes."""
    seen: set[str] = set()
    for base in cls.__mro__:
        if not ours(base):
            continue
        if f"{base.__module__}.{base.__qualname__}" in EXCLUDED_MEMBERS_OF:
            continue
        for name, raw in vars(base).items():
            if name.startswith("_") or name in seen:
                continue
            seen.add(name)
            function = raw.__func__ if isinstance(raw, (staticmethod, classmethod)) else raw
            if isinstance(function, property):
                yield name, function.fget, getattr(cls, name)
            elif inspect.isfunction(function):
                yield name, function, getattr(cls, name)


def documented_items(module_names: list[str]) -> Iterator[tuple[str, Any, Any]]:
    """(qualified name, the object to classify, the object getdoc reads) of
    every public item, each defining object once."""
    done: set[int] = set()
    for module_name in module_names:
        module = importlib.import_module(module_name)
        for name in public_names(module):
            obj = getattr(module, name)
            if not (inspect.isclass(obj) or inspect.isfunction(obj)) or not ours(obj):
                continue
            if id(obj) in done:
                continue
            done.add(id(obj))
            yield f"{obj.__module__}.{obj.__qualname__}", obj, obj
            if not inspect.isclass(obj):
                continue
            for _, raw, looked_up in members(obj):
                if id(raw) not in done:
                    done.add(id(raw))
                    yield f"{raw.__module__}.{raw.__qualname__}", raw, looked_up


def problems(module_names: list[str]) -> list[str]:
    found: list[str] = []
    for name, raw, looked_up in documented_items(module_names):
        if inspect.isclass(looked_up):
            doc = looked_up.__dict__.get("__doc__")
            doc = inspect.cleandoc(doc) if isinstance(doc, str) else None
        else:
            doc = inspect.getdoc(looked_up)
        if not doc or not SENTENCE.search(doc):
            found.append(f"{name}: no docstring of a sentence or more")
        elif is_async(raw) and "cancel" not in doc.lower() and name not in CANCEL_ALLOWLIST:
            found.append(f"{name}: async, but its docstring says nothing of cancellation")
    return found


def test_every_public_item_is_documented() -> None:
    found = problems(MODULES)
    assert not found, "\n".join(found)


def test_the_walk_sees_functions_methods_properties_and_async_ones() -> None:
    names = {name: raw for name, raw, _ in documented_items(MODULES)}
    assert is_async(names["acp_trio.open_spawned_agent"])  # async context manager
    assert is_async(names["acp_trio.TerminalHandle.wait_for_exit"])
    assert not is_async(names["acp_trio.build.text"])
    assert "acp_trio.contrib.WorkspaceFiles.roots" in names  # a property
    assert "acp_trio.testing.ScriptedPeer.request" in names
    schema = [name for name in names if name.startswith("acp_trio.schema")]
    assert all(name.startswith("acp_trio.schema._generated_proxies.") for name in schema)
    # The proxies' methods, generated ones included.
    assert "acp_trio.AgentProxy.cancel_turn" in names
    assert any(name.endswith("AgentProxyMethods.new_session") for name in names)


def test_the_check_reports_what_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    module = types.ModuleType("acp_trio._docstring_probe")

    def bare() -> None:
        pass

    async def quiet() -> None:
        """Waits for something to happen and then returns."""

    class Thing:
        """A thing with one method and nothing else at all."""

        def method(self) -> None:
            """Ok."""

    for obj in (bare, quiet, Thing):
        obj.__module__ = module.__name__
    module.__all__ = ["bare", "quiet", "Thing"]  # type: ignore[attr-defined]
    module.bare, module.quiet, module.Thing = bare, quiet, Thing  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, module.__name__, module)
    found = problems([module.__name__])
    assert [line.split(":")[0].rsplit(".", 2)[-1] for line in found] == [
        "bare",
        "quiet",
        "method",
    ]
    assert "cancellation" in found[1]


#: Every public namespace (the API reference has a page for each).
NAMESPACES = [*MODULES, "acp_trio.schema", "acp_trio.schema.v2"]


def data_names(module: types.ModuleType) -> list[str]:
    """The public names of a namespace that are neither classes, functions
    nor modules: constants and type aliases."""
    return [
        name
        for name in public_names(module)
        if not (
            inspect.isclass(getattr(module, name))
            or inspect.isroutine(getattr(module, name))
            or inspect.ismodule(getattr(module, name))
        )
    ]


def has_doc_comment(name: str, value: object) -> bool:
    """A ``#:`` comment right above ``name``'s assignment in a module of
    acp_trio that holds the same object under that name."""
    for module_name, module in list(sys.modules.items()):
        if not module_name.startswith("acp_trio") or vars(module).get(name) is not value:
            continue
        try:
            source = inspect.getsource(module)
        except (OSError, TypeError):
            continue
        if re.search(rf"^#:.*\n(?:#:.*\n)*{re.escape(name)}\b", source, flags=re.MULTILINE):
            return True
    return False


@pytest.mark.parametrize("namespace", NAMESPACES)
def test_every_public_name_of_every_namespace_has_a_docstring(namespace: str) -> None:
    """Classes and functions by their docstrings (schema classes included,
    whose docstrings are generated); constants and type aliases by a ``#:``
    comment where they are defined, or by the namespace's own docstring
    naming them. The generated schema aliases document themselves by their
    value (a ``Literal``, a union) on the schema pages."""
    module = importlib.import_module(namespace)
    missing = []
    for name in public_names(module):
        obj = getattr(module, name)
        if inspect.isclass(obj) or inspect.isroutine(obj):
            doc = obj.__dict__.get("__doc__") if inspect.isclass(obj) else obj.__doc__
            if not isinstance(doc, str) or not doc.strip():
                missing.append(name)
    generated = set()
    if namespace.startswith("acp_trio.schema"):
        generated = set(importlib.import_module(f"{namespace}._generated_types").__all__)
    for name in data_names(module):
        if name in generated or f"``{name}``" in (module.__doc__ or ""):
            continue
        if f":data:`{name}`" in (module.__doc__ or "") or has_doc_comment(
            name, getattr(module, name)
        ):
            continue
        missing.append(name)
    assert not missing, f"{namespace}: no docstring for {missing}"


def test_the_namespace_check_sees_a_name_without_a_docstring(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    module = types.ModuleType("acp_trio._namespace_probe")

    class Bare:
        pass

    module.__all__ = ["Bare", "LIMIT"]  # type: ignore[attr-defined]
    module.Bare, module.LIMIT = Bare, 12345  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, module.__name__, module)
    with pytest.raises(AssertionError, match=r"\['Bare', 'LIMIT'\]"):
        test_every_public_name_of_every_namespace_has_a_docstring(module.__name__)
