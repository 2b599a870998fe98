"""No module outside ``acp_trio/_core/`` uses a ``_``-name of ``Connection``,
``PendingRequest`` or ``RequestContext``: what the typed layer, the handles,
v2, the proxies and the conductor need of the core has a public name (which
proxies and tools written by users can use too).

The check reads the source: it collects the ``_``-names the three classes
(and the parts ``Connection`` is made of) define, then looks for an
attribute access of one of them on anything but ``self``/``cls`` outside
``_core``. A module whose own classes define the same name (a
``self._closed`` of its own) is not checked for that name, so that its own
attributes are not taken for the core's."""

from __future__ import annotations

import ast
from pathlib import Path

import acp_trio

PACKAGE = Path(acp_trio.__file__).parent
CORE = PACKAGE / "_core"

#: Connection and the parts it is made of, and the per-request objects.
CLASSES = {
    "Connection",
    "OutgoingCalls",
    "IncomingRequests",
    "NotificationOrdering",
    "Reader",
    "ReadRight",
    "PendingRequest",
    "RequestContext",
}


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _defined_names(tree: ast.AST, classes: set[str] | None) -> set[str]:
    """The ``_``-names the classes of ``tree`` (those in ``classes``, or all)
    define: methods, class attributes, slots and ``self._x = ...``."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.ClassDef) or (classes is not None and node.name not in classes):
            continue
        for item in node.body:
            if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                names.add(item.name)
            elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                names.add(item.target.id)
            elif isinstance(item, ast.Assign):
                for target in item.targets:
                    if isinstance(target, ast.Name):
                        names.add(target.id)
                        if target.id == "__slots__" and isinstance(item.value, ast.Tuple):
                            names.update(
                                e.value
                                for e in item.value.elts
                                if isinstance(e, ast.Constant) and isinstance(e.value, str)
                            )
            elif isinstance(item, ast.If):  # if TYPE_CHECKING: declarations
                names |= _defined_names(ast.Module(body=item.body, type_ignores=[]), None)
        for sub in ast.walk(node):
            if (
                isinstance(sub, ast.Attribute)
                and isinstance(sub.ctx, ast.Store)
                and isinstance(sub.value, ast.Name)
                and sub.value.id == "self"
            ):
                names.add(sub.attr)
    return {name for name in names if _private(name)}


def core_private_names() -> set[str]:
    names: set[str] = set()
    for path in CORE.glob("*.py"):
        names |= _defined_names(ast.parse(path.read_text(encoding="utf-8")), CLASSES)
    return names


def uses(tree: ast.AST, names: set[str]) -> list[ast.Attribute]:
    """Attribute accesses in ``tree`` of ``names`` its own classes do not
    define, on anything but ``self``/``cls``."""
    checked = names - _defined_names(tree, None)
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and node.attr in checked
        and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
    ]


def uses_outside_core(names: set[str]) -> list[str]:
    found: list[str] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if CORE in path.parents:
            continue
        for node in uses(ast.parse(path.read_text(encoding="utf-8")), names):
            where = path.relative_to(PACKAGE.parent)
            found.append(f"{where}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_the_scan_knows_the_core_names() -> None:
    names = core_private_names()
    # A few of each class, so that a change in how they are defined (slots,
    # parts) does not empty the check silently.
    assert {"_calls", "_status", "_ordering", "_reader", "_peer"} <= names
    assert {"_cancels_due", "_queued", "_right", "_parked"} <= names
    assert {"_state", "_barrier", "_entry", "_task", "_detached"} <= names
    assert {"_cancel_scope", "_lent", "_cause"} <= names


def test_the_scan_finds_a_use_and_leaves_a_module_its_own_names() -> None:
    names = core_private_names()
    source = """
async def forward(conn, pending):
    conn._calls.send_cancel(pending)
    return pending._state

class Session:
    def __init__(self):
        self._closed = False

def done(session):
    return session._closed
"""
    found = [ast.unparse(node) for node in uses(ast.parse(source), names)]
    assert sorted(found) == ["conn._calls", "pending._state"]


def test_no_module_outside_core_uses_a_private_name_of_the_core() -> None:
    assert uses_outside_core(core_private_names()) == []


#: What modules outside ``_core`` may import from ``_core/_requests.py``: its
#: public classes and ``current_request``; the rest (``settle``,
#: ``lend_scope``, ...) is what the connection's parts do to the
#: per-request objects.
REQUESTS_PUBLIC = {
    "CancelCause",
    "ConnectionAPI",
    "PendingRequest",
    "RequestContext",
    "current_request",
}


def test_no_module_outside_core_imports_the_parts_side_of_the_request_objects() -> None:
    found: list[str] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if CORE in path.parents:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module == "acp_trio._core._requests":
                names = {alias.name for alias in node.names} - REQUESTS_PUBLIC
                found += [f"{path.relative_to(PACKAGE.parent)}: {name}" for name in sorted(names)]
    assert found == []
