"""Sphinx glue for acp_trio's documentation.

- Cross-references to a name by its private home (``acp_trio._core._x.Name``,
  as type hints spell it) or by its bare name (``ConnectionClosed`` in a
  docstring of another namespace) resolve to where the reference documents
  it: the first public namespace that exports that very object.
- ``acp-method-table``: the method table of a schema module (wire name,
  kind, side that handles it, params and result classes), generated from
  ``METHODS``, so the schema page cannot drift from the code.

There is no network at build time (so no intersphinx): references into
other projects (Trio, the standard library, attrs, ...) stay plain text,
listed in ``conf.py``'s ``nitpick_ignore_regex``. Every reference into
acp_trio must resolve.
"""

from __future__ import annotations

import importlib
import types
from typing import Any, TypeVar

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.addnodes import pending_xref
from sphinx.application import Sphinx
from sphinx.environment import BuildEnvironment
from sphinx.transforms.post_transforms import SphinxPostTransform
from sphinx.util.docutils import SphinxDirective

#: Where a reference may land, in order of preference.
PUBLIC = [
    "acp_trio",
    "acp_trio.lowlevel",
    "acp_trio.contrib",
    "acp_trio.testing",
    "acp_trio.remote",
    "acp_trio.proxy",
    "acp_trio.build",
    "acp_trio.v2",
    "acp_trio.contrib.v2",
    "acp_trio.contrib.otel",
    "acp_trio.schema",
    "acp_trio.schema.v2",
]


def _lookup(path: str) -> Any:
    """The object a dotted path names, or None."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for part in parts[cut:]:
                obj = getattr(obj, part)
        except AttributeError:
            return None
        return obj
    return None


def _public_names(target: str, node: pending_xref) -> list[str]:
    """Public spellings to try for a reference that did not resolve."""
    head, _, last = target.rpartition(".")
    candidates: list[str] = []
    if head.startswith("acp_trio") and "._" in f".{head}":
        # A private home: the public namespace exporting the same object.
        obj = _lookup(target)
        if obj is not None:
            for namespace in PUBLIC:
                module = importlib.import_module(namespace)
                if getattr(module, last, None) is obj:
                    candidates.append(f"{namespace}.{last}")
        # A member of a class with a private home (``_x.Class.method``).
        owner = _lookup(head)
        if owner is not None and isinstance(owner, type):
            for namespace in PUBLIC:
                module = importlib.import_module(namespace)
                if getattr(module, owner.__name__, None) is owner:
                    candidates.append(f"{namespace}.{owner.__name__}.{last}")
    elif not head.startswith("acp_trio"):
        # A bare or class-relative name (``ConnectionClosed``,
        # ``Connection.call``) written in some namespace's docstring.
        context = node.get("py:module") or ""
        for namespace in [context, *PUBLIC]:
            if namespace:
                candidates.append(f"{namespace}.{target}")
    return candidates


def _context_objects(node: pending_xref) -> list[Any]:
    """The class (and its bases) and module a reference was written in."""
    module = _lookup(node.get("py:module") or "")
    found: list[Any] = []
    cls = (
        _lookup(f"{node.get('py:module')}.{node.get('py:class')}") if node.get("py:class") else None
    )
    if isinstance(cls, type):
        found += [base for base in cls.__mro__ if base.__module__.startswith("acp_trio")]
    if module is not None:
        found.append(module)
    return found


def _exists_in_context(node: pending_xref) -> bool:
    """Whether a name the reference spells exists where it was written: an
    attribute of the class (instance attributes and attrs fields included),
    or a global of the module that defines the class or module's code."""
    first = node["reftarget"].lstrip(".~").split(".")[0]
    for obj in _context_objects(node):
        if hasattr(obj, first) or first in getattr(obj, "__annotations__", {}):
            return True
        if isinstance(obj, type):
            if any(field.name == first for field in getattr(obj, "__attrs_attrs__", ())):
                return True
            for member in vars(obj).values():
                function = getattr(member, "__func__", member)
                if first in getattr(function, "__globals__", {}):
                    return True
                code = getattr(function, "__code__", None)
                if code is not None and first in code.co_names:
                    return True  # self.<name> = ... in a method
    return False


def resolve_public(
    app: Sphinx, env: BuildEnvironment, node: pending_xref, contnode: nodes.Element
) -> nodes.Element | None:
    if node.get("refdomain") != "py":
        return None
    if isinstance(_lookup(node["reftarget"]), TypeVar):
        return contnode  # a type variable in a signature: plain text
    domain = env.get_domain("py")
    candidates = _public_names(node["reftarget"], node)
    for candidate in candidates:
        found = domain.find_obj(env, "", "", candidate, node["reftype"], 1)  # type: ignore[attr-defined]
        if found:
            name, _ = found[0]
            return domain.resolve_xref(
                env, node["refdoc"], app.builder, node["reftype"], name, node, contnode
            )
    if node["reftype"] in {"attr", "meth", "data", "func", "obj"} and _exists_in_context(node):
        # A real name with no entry of its own (an instance attribute, a
        # module constant of a private module): plain text, no link.
        return contnode
    return None


class PreferSameVersion(SphinxPostTransform):
    """A bare type name in a signature (``PromptRequest``) that v1 and v2
    both define links to the one of the version being documented."""

    default_priority = 5  # before the references are resolved

    def run(self, **kwargs: Any) -> None:
        domain = self.env.get_domain("py")
        objects = domain.objects  # type: ignore[attr-defined]
        for node in self.document.findall(pending_xref):
            target = node.get("reftarget", "")
            if node.get("refdomain") != "py" or "." in target or not target:
                continue
            context = f"{node.get('py:module') or ''}.{node.get('py:class') or ''}"
            v2 = ".v2" in context or "V2" in context
            order = V2_FIRST if v2 else V1_FIRST
            if f"{node.get('py:module')}.{target}" in objects:
                continue  # Sphinx finds it next to the reference
            hits = [f"{ns}.{target}" for ns in order if f"{ns}.{target}" in objects]
            if hits:
                node["reftarget"] = hits[0]


V1_FIRST = ["acp_trio", "acp_trio.schema", "acp_trio.contrib", "acp_trio.v2", "acp_trio.schema.v2"]
V2_FIRST = [
    "acp_trio.v2",
    "acp_trio.schema.v2",
    "acp_trio.contrib.v2",
    "acp_trio",
    "acp_trio.schema",
]


def drop_private_bases(app: Sphinx, name: str, obj: Any, options: Any, bases: list[Any]) -> None:
    """``Bases:`` names only what a reader can look up: a private base
    (whose public members are shown on the class itself) is left out."""
    bases[:] = [
        base
        for base in bases
        if not (
            isinstance(base, type)
            and base.__module__.startswith("acp_trio")
            and "._" in f".{base.__module__}"
        )
    ]


class MethodTable(SphinxDirective):
    """A schema module's method table, from its ``METHODS``."""

    required_arguments = 1  # the module: acp_trio.schema or acp_trio.schema.v2

    def run(self) -> list[nodes.Node]:
        module_name = self.arguments[0]
        module = importlib.import_module(module_name)
        rows = sorted(module.METHODS.values(), key=lambda info: info.name)
        table = nodes.table()
        group = nodes.tgroup(cols=5)
        table += group
        for width in (30, 12, 10, 24, 24):
            group += nodes.colspec(colwidth=width)
        head = nodes.thead()
        group += head
        head += self._row(["method", "kind", "handled by", "params", "result"])
        body = nodes.tbody()
        group += body
        for info in rows:
            params = self._type(module_name, info.params_name)
            result = self._type(module_name, info.result_name)
            body += self._row([info.name, info.kind, info.handled_by, params, result])
        return [table]

    def _type(self, module_name: str, name: str | None) -> nodes.Node:
        if name is None:
            return nodes.Text("")
        ref = pending_xref("", refdomain="py", reftype="class", reftarget=f"{module_name}.{name}")
        ref += nodes.literal(name, name)
        return ref

    def _row(self, cells: list[Any]) -> nodes.row:
        row = nodes.row()
        for cell in cells:
            entry = nodes.entry()
            paragraph = nodes.paragraph()
            paragraph += cell if isinstance(cell, nodes.Node) else nodes.literal(cell, cell)
            entry += paragraph
            row += entry
        return row


class SchemaTypes(SphinxDirective):
    """Every generated type of a schema module, one autodoc entry each:
    classes with their fields in the signature, aliases (string enums,
    unions, ids) with their value."""

    required_arguments = 1  # the module: acp_trio.schema or acp_trio.schema.v2

    def run(self) -> list[nodes.Node]:
        module_name = self.arguments[0]
        generated = importlib.import_module(f"{module_name}._generated_types")
        public = importlib.import_module(module_name)
        lines = []
        for name in sorted(generated.__all__, key=str.lower):
            obj = getattr(public, name)
            kind = "autoclass" if isinstance(obj, type) else "autodata"
            lines.append(f".. {kind}:: {module_name}.{name}")
            if kind == "autoclass":
                lines.append("   :no-show-inheritance:")
            lines.append("")
        container = nodes.container()
        self.state.nested_parse(StringList(lines, source=module_name), 0, container)
        return container.children


class ExportedData(SphinxDirective):
    """The data a namespace exports (constants, type aliases), which autodoc
    leaves out of a module that only re-exports: each with the ``#:``
    comment of the module that defines it, else its value."""

    required_arguments = 1  # the public namespace

    def run(self) -> list[nodes.Node]:
        from sphinx.pycode import ModuleAnalyzer

        namespace = importlib.import_module(self.arguments[0])
        names = getattr(namespace, "__all__", None) or [
            name for name in vars(namespace) if not name.startswith("_")
        ]
        lines: list[str] = []
        for name in names:
            obj = getattr(namespace, name)
            if isinstance(obj, (type, types.ModuleType)) or (callable(obj) and not _is_alias(obj)):
                continue
            doc = self._doc_comment(name, obj, ModuleAnalyzer)
            lines.append(f".. py:data:: {name}")
            if doc is None:
                value = repr(obj)
                if len(value) < 200:
                    lines.append(f"   :value: {value}")
            lines.append("")
            for line in doc or ["A constant of this namespace."]:
                lines.append(f"   {line}")
            lines.append("")
        container = nodes.container()
        self.state.nested_parse(StringList(lines, source=self.arguments[0]), 0, container)
        return container.children

    def _doc_comment(self, name: str, obj: Any, analyzer_class: Any) -> list[str] | None:
        for module in _defining_modules(name, obj):
            try:
                docs = analyzer_class.for_module(module).find_attr_docs()
            except Exception:
                continue
            if ("", name) in docs:
                return list(docs["", name])
        return None


def _is_alias(obj: Any) -> bool:
    """A type alias (``Literal[...]``, a union, ``Callable[...]``)."""
    return type(obj).__module__ in {"typing", "types"} or hasattr(obj, "__origin__")


def _defining_modules(name: str, obj: Any) -> list[str]:
    """The private acp_trio modules that hold ``obj`` as ``name`` at their top level."""
    import sys

    return sorted(
        module_name
        for module_name, module in list(sys.modules.items())
        if module_name.startswith("acp_trio.")
        and module is not None
        and vars(module).get(name) is obj
        and "._" in f".{module_name}"
    )


def setup(app: Sphinx) -> dict[str, Any]:
    app.connect("missing-reference", resolve_public)
    app.connect("autodoc-process-bases", drop_private_bases)
    app.add_post_transform(PreferSameVersion)
    app.add_directive("acp-method-table", MethodTable)
    app.add_directive("acp-schema-types", SchemaTypes)
    app.add_directive("acp-exported-data", ExportedData)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
