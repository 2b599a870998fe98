"""The layering rules, read from the source: the sans-IO core imports no
Trio (nor anything of acp_trio but itself and the exceptions), the
per-request objects and the connection's parts import nothing of the
connection, and each part keeps its own state."""

from __future__ import annotations

import ast
from pathlib import Path

import acp_trio

PACKAGE = Path(acp_trio.__file__).parent


def imported(path: Path) -> set[str]:
    """Every module a file imports, including under ``if TYPE_CHECKING:``."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module is not None:
            found.add(node.module)
    return found


def test_the_sans_io_core_imports_no_trio() -> None:
    files = sorted((PACKAGE / "_jsonrpc").glob("*.py"))
    assert len(files) >= 5
    for path in files:
        for module in imported(path):
            assert module.split(".")[0] != "trio", (path.name, module)
            if module.startswith("acp_trio"):
                assert module.startswith("acp_trio._jsonrpc") or module == "acp_trio._exceptions", (
                    path.name,
                    module,
                )


def test_the_exceptions_import_no_trio() -> None:
    assert not {m for m in imported(PACKAGE / "_exceptions.py") if m.split(".")[0] == "trio"}


def test_the_request_objects_do_not_import_the_connection() -> None:
    # They talk to it through RequestOwner; only the public type is named,
    # for RequestContext.connection, and only for type checkers.
    source = (PACKAGE / "_core" / "_requests.py").read_text()
    runtime = [
        node
        for node in ast.parse(source).body
        if isinstance(node, ast.ImportFrom) and node.module == "acp_trio._core._connection"
    ]
    assert runtime == []
    assert "._conn._" not in source
    assert "conn._" not in source.replace("self._conn", "")


def test_no_connection_module_imports_the_connection_back() -> None:
    # The connection's parts get what they need when they are made.
    parts = ("_incoming", "_ordering", "_outgoing", "_reader", "_read_right", "_writer", "_status")
    for name in (*parts, "_handler", "_framed", "_message_stream", "_outbox", "_eager"):
        modules = imported(PACKAGE / "_core" / f"{name}.py")
        assert "acp_trio._core._connection" not in modules, name


def test_the_trio_core_imports_nothing_above_it() -> None:
    # The connection knows JSON, not the schema, the typed API or the kit.
    above = ("acp_trio._typed", "acp_trio.schema", "acp_trio.contrib", "acp_trio.testing")
    files = sorted((PACKAGE / "_core").glob("*.py"))
    assert len(files) >= 10
    for path in files:
        for module in imported(path):
            assert not module.startswith(above), (path.name, module)


def test_the_typed_layer_imports_no_test_kit() -> None:
    for path in sorted((PACKAGE / "_typed").glob("*.py")):
        for module in imported(path):
            assert not module.startswith("acp_trio.testing"), (path.name, module)


def test_no_class_in_the_core_declares_attributes_under_type_checking() -> None:
    # The connection's parts do not declare each other's attributes: a class
    # body has no ``if TYPE_CHECKING:`` block.
    for path in sorted((PACKAGE / "_core").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                blocks = [
                    item
                    for item in node.body
                    if isinstance(item, ast.If) and "TYPE_CHECKING" in ast.unparse(item.test)
                ]
                assert blocks == [], (path.name, node.name)


def test_the_read_right_names_its_states_alone() -> None:
    # Who reads is kept by one class: its states are named in its module only.
    def names(path: Path) -> set[str]:
        tree = ast.parse(path.read_text())
        return {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}

    states = {"_READER", "_CALLER", "_FREE"}
    assert states <= names(PACKAGE / "_core" / "_read_right.py")
    for path in sorted((PACKAGE / "_core").glob("*.py")):
        if path.name != "_read_right.py":
            assert not states & names(path), path.name
