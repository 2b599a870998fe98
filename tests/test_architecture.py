"""The architecture, read from the source: no module of acp_trio imports
itself back through others (type-checking imports counted), the sans-IO
core imports no Trio (nor anything of acp_trio but itself and the
exceptions), the per-request objects and the connection's parts import
nothing of the connection, each part keeps its own state (no module of the
core writes another part's fields or uses another module's private names),
the parts are made with keywords only and the one event dispatch is typed,
no Trio instrument drives scheduling, and each concept has a room of its own
under the public faces."""

from __future__ import annotations

import ast
import functools
import typing
from pathlib import Path

import pytest

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


def module_name(root: Path, path: Path) -> str:
    parts = [root.name, *path.relative_to(root).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(root: Path = PACKAGE) -> dict[str, set[str]]:
    """Each module of the package and the modules of it that it imports
    (under ``if TYPE_CHECKING:`` too; relative imports resolved; a name
    imported from a package counts as its submodule when it is one)."""
    paths = {module_name(root, path): path for path in root.rglob("*.py")}

    def known(name: str) -> str:
        while name not in paths:
            name = name.rpartition(".")[0]
        return name

    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        here = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    package = here.rsplit(".", node.level - 1)[0] if node.level > 1 else here
                    base = f"{package}.{base}" if base else package
                targets = [
                    f"{base}.{alias.name}" if f"{base}.{alias.name}" in paths else base
                    for alias in node.names
                ]
            else:
                continue
            found |= {known(t) for t in targets if t.split(".")[0] == root.name}
        graph[name] = found - {name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles: each strongly connected set of two or more modules."""
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        order[node] = low[node] = len(order)
        stack.append(node)
        for target in graph[node]:
            if target not in order:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], order[target])
        if low[node] == order[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in order:
            visit(node)
    return found


@functools.cache
def package_graph() -> dict[str, frozenset[str]]:
    return {name: frozenset(targets) for name, targets in import_graph().items()}


def test_no_import_circle_in_the_package() -> None:
    graph = {name: set(targets) for name, targets in package_graph().items()}
    assert len(graph) > 100
    assert "acp_trio._core._requests" in graph["acp_trio._core._connection"]
    assert cycles(graph) == []


def test_the_circle_finder_finds_circles(tmp_path: Path) -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a", "d"}, "e": set()}
    assert cycles(graph) == [["a", "b", "c"]]
    # Relative imports, a package's submodule by name, type-checking imports.
    root = tmp_path / "pkg"
    (root / "sub").mkdir(parents=True)
    (root / "__init__.py").write_text("from pkg.sub import a\n")
    (root / "sub" / "__init__.py").write_text("")
    (root / "sub" / "a.py").write_text("from . import b\n")
    (root / "sub" / "b.py").write_text("from ..c import X\n")
    (root / "c.py").write_text("if TYPE_CHECKING:\n    from .sub.a import Y\n")
    graph = import_graph(root)
    assert graph["pkg"] == {"pkg.sub.a"}
    assert graph["pkg.sub.a"] == {"pkg.sub.b"}
    assert graph["pkg.sub.b"] == {"pkg.c"}
    assert cycles(graph) == [["pkg.c", "pkg.sub.a", "pkg.sub.b"]]
    # A type-checking import back is a circle too.
    graph = {name: set(targets) for name, targets in package_graph().items()}
    graph["acp_trio._core._requests"].add("acp_trio._core._connection")
    (circle,) = cycles(graph)
    assert {"acp_trio._core._connection", "acp_trio._core._requests"} <= set(circle)


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
    # A PendingRequest talks to the part that sent it through CallOwner, and
    # RequestContext.connection is typed as the ConnectionAPI protocol: not
    # even type checkers import the connection or its parts; of the core the
    # per-request objects import only the records they name.
    path = PACKAGE / "_core" / "_requests.py"
    core = {m for m in imported(path) if m.startswith("acp_trio._core")}
    assert core == {"acp_trio._core._records"}


def test_no_core_module_writes_another_parts_fields() -> None:
    # A part changes another only by calling its methods: no module of the
    # core assigns, augments or deletes an attribute, on anything but
    # self/cls, that is a field of a class of another module of the core.
    fields = {name: class_fields(tree) for name, tree in core_trees().items()}
    found = []
    for name, tree in core_trees().items():
        others = set().union(*(f for n, f in fields.items() if n != name)) - fields[name]
        found += [f"{name}:{line}: {text}" for line, text in foreign_writes(tree, others)]
    assert found == []


def test_no_core_module_uses_another_modules_private_names() -> None:
    # A part's privates stay in its module: no module of the core uses a
    # ``_``-name (a field or a method) on anything but self/cls unless its
    # own classes define that name and no class of another module of the
    # core or of the sans-IO core does (so that a name two modules share
    # cannot hide a use of the other's). The per-request objects' fields
    # are touched by _requests.py only; what the parts do to them is a
    # function of that module.
    trees = core_trees()
    private = {name: class_privates(tree) for name, tree in trees.items()}
    jsonrpc = set().union(
        *(
            class_privates(ast.parse(path.read_text()))
            for path in (PACKAGE / "_jsonrpc").glob("*.py")
        )
    )
    found = []
    for name, tree in trees.items():
        others = jsonrpc.union(*(p for n, p in private.items() if n != name))
        for line, text, attr in foreign_uses(tree):
            if attr in BELOW_THE_CORE:
                continue
            if attr not in private[name] or attr in others:
                found.append(f"{name}:{line}: {text}")
    assert found == []


def test_the_part_checks_find_what_they_look_for() -> None:
    # What the two tests above look for, on a module written for the test:
    # the writes and private uses the parts made before they had methods.
    source = """
class Mine:
    __slots__ = ("_own", "count")
    def __init__(self):
        self._own = 0
        self.count = 0
    def step(self, reader, right, pending, other):
        self.count += 1
        other._own = 1
        reader.scope_exposed = True
        right.handed_back = None
        del right.handed_back
        reader.cancels_due += [pending]
        return pending._state, pending._settle(None, None, 0), reader.scope
"""
    tree = ast.parse(source)
    writes = [
        text
        for _, text in foreign_writes(
            tree, {"scope_exposed", "handed_back", "cancels_due", "count"} - class_fields(tree)
        )
    ]
    assert writes == [
        "reader.scope_exposed",
        "right.handed_back",
        "right.handed_back",
        "reader.cancels_due",
    ]
    uses = [text for _, text, attr in foreign_uses(tree) if attr not in class_privates(tree)]
    assert uses == ["pending._settle", "pending._state"]
    # Against the core as it is: the names the parts wrote, and the
    # per-request fields the reader read, are still there to be found.
    fields = set().union(*(class_fields(t) for t in core_trees().values()))
    privates = set().union(*(class_privates(t) for t in core_trees().values()))
    assert {"handed_back", "closed", "nursery"} <= fields
    assert {
        "_cause",
        "_cancel_scope",
        "_barrier",
        "_deadline",
        "_entry",
        "_task",
        "_state",
    } <= privates


#: The one private hook of a module below the core that the core calls: what
#: a peer is told of a ProtocolError a handler let through (in the -32603's
#: data), which CapabilityError extends (acp_trio/_exceptions.py).
BELOW_THE_CORE = {"_error_data"}


def core_trees() -> dict[str, ast.Module]:
    return {
        path.name: ast.parse(path.read_text()) for path in sorted((PACKAGE / "_core").glob("*.py"))
    }


def _is_self(node: ast.expr) -> bool:
    return isinstance(node, ast.Name) and node.id in ("self", "cls")


def class_fields(tree: ast.AST) -> set[str]:
    """The fields the classes of ``tree`` define: slots, class-level
    annotations, and what their methods assign on ``self``."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.ClassDef):
            continue
        for item in node.body:
            if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                names.add(item.target.id)
            elif isinstance(item, ast.Assign):
                for target in item.targets:
                    if isinstance(target, ast.Name) and target.id == "__slots__":
                        assert isinstance(item.value, ast.Tuple)
                        names.update(
                            e.value for e in item.value.elts if isinstance(e, ast.Constant)
                        )
        for sub in ast.walk(node):
            if (
                isinstance(sub, ast.Attribute)
                and isinstance(sub.ctx, ast.Store)
                and _is_self(sub.value)
            ):
                names.add(sub.attr)
    return names


def class_privates(tree: ast.AST) -> set[str]:
    """The ``_``-names the classes of ``tree`` define: fields and methods."""
    names = class_fields(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            names.update(
                item.name
                for item in node.body
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
            )
    return {name for name in names if name.startswith("_") and not name.startswith("__")}


def foreign_writes(tree: ast.AST, names: set[str]) -> list[tuple[int, str]]:
    """Assignments and deletions of ``names`` on anything but self/cls."""
    return [
        (node.lineno, ast.unparse(node))
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.ctx, ast.Store | ast.Del)
        and node.attr in names
        and not _is_self(node.value)
    ]


def foreign_uses(tree: ast.AST) -> list[tuple[int, str, str]]:
    """Uses of ``_``-names on anything but self/cls."""
    return sorted(
        (node.lineno, ast.unparse(node), node.attr)
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and node.attr.startswith("_")
        and not node.attr.startswith("__")
        and not _is_self(node.value)
    )


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


def test_only_the_command_line_stands_on_the_test_kit() -> None:
    # The library is a floor under the test kit, and the command line stands
    # on both: nothing but the kit itself and the command line imports
    # acp_trio.testing, and nothing but ``python -m acp_trio`` imports the
    # command line.
    graph = package_graph()
    for name, targets in graph.items():
        if name.startswith(("acp_trio.testing", "acp_trio._cli")):
            continue
        assert not {t for t in targets if t.startswith("acp_trio.testing")}, name
        if name != "acp_trio.__main__":
            assert not {t for t in targets if t.startswith("acp_trio._cli")}, name


def test_each_concept_has_a_room() -> None:
    # The top of the package holds the public faces and the few modules every
    # layer shares; the code of a concept lives in its own package.
    top = {path.name for path in PACKAGE.glob("*.py")}
    assert top == {
        "__init__.py", "__main__.py", "_exceptions.py", "_public.py", "_version.py",
        "build.py", "lowlevel.py", "proxy.py",
    }  # fmt: skip


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


#: The connection's parts: each is made by the facade, with keywords only.
PARTS = {
    "_ordering.py": "NotificationOrdering",
    "_read_right.py": "ReadRight",
    "_reader.py": "Reader",
    "_incoming.py": "IncomingRequests",
    "_outgoing.py": "OutgoingCalls",
    "_writer.py": "Writer",
    "_status.py": "Status",
}


def positional_parameters(tree: ast.AST, name: str) -> list[str]:
    """The parameters of class ``name``'s ``__init__`` (or of function
    ``name``) that may be passed by position, ``self`` aside."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == name:
            inits = [
                i for i in node.body if isinstance(i, ast.FunctionDef) and i.name == "__init__"
            ]
            if not inits:
                return []
            args = inits[0].args
            return [a.arg for a in (*args.posonlyargs, *args.args)][1:] + (
                [args.vararg.arg] if args.vararg else []
            )
        if isinstance(node, ast.FunctionDef) and node.name == name:
            args = node.args
            return [a.arg for a in (*args.posonlyargs, *args.args)] + (
                [args.vararg.arg] if args.vararg else []
            )
    raise AssertionError(f"{name} not found")


def test_the_parts_constructors_take_keywords_only() -> None:
    # Up to eleven arguments, each passed by name: a part cannot be made with
    # two of them swapped. The per-request objects have no public constructor;
    # the connection makes them with keyword-only functions.
    trees = core_trees()
    made = [
        *PARTS.items(),
        ("_requests.py", "new_request_context"),
        ("_requests.py", "new_pending_request"),
    ]
    found = {name: positional_parameters(trees[module], name) for module, name in made}
    found = {name: params for name, params in found.items() if params}
    assert found == {}
    # What the check finds, on a constructor written for the test.
    sample = ast.parse(
        "class Part:\n"
        "    def __init__(self, peer, /, outbox, *rest, status): ...\n"
        "def new_thing(owner, *, entry): ...\n"
    )
    assert positional_parameters(sample, "Part") == ["peer", "outbox", "rest"]
    assert positional_parameters(sample, "new_thing") == ["owner"]


def test_the_per_request_objects_have_no_public_constructor() -> None:
    from acp_trio._core._requests import PendingRequest, RequestContext

    for cls in (RequestContext, PendingRequest):
        with pytest.raises(TypeError, match="made by its connection"):
            cls()


def test_on_frame_is_typed() -> None:
    # The one event dispatch says what it leaves to its caller (Left), and
    # nothing of it is Any.
    from acp_trio._core import _reader
    from acp_trio._core._ordering import Queued
    from acp_trio._core._requests import PendingRequest, RequestContext
    from acp_trio._jsonrpc import OversizedFrame, RequestReceived

    hints = typing.get_type_hints(_reader.Reader.on_frame)
    assert hints == {"frame": bytes | OversizedFrame, "return": _reader.Left}
    assert set(typing.get_args(_reader.Left)) == {
        _reader._Done,
        PendingRequest,
        Queued,
        RequestReceived[RequestContext],
        type(None),
    }


#: How a Trio instrument gets into a run, and the hooks it may have.
INSTRUMENT_NAMES = {
    "add_instrument",
    "remove_instrument",
    "Instrument",
    "instruments",
    "before_task_step",
    "after_task_step",
    "task_scheduled",
    "before_io_wait",
    "after_io_wait",
    "before_run",
    "after_run",
}


def instrument_uses(tree: ast.AST) -> list[str]:
    """The names of ``tree`` that install a Trio instrument or define one."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in INSTRUMENT_NAMES:
            found.append(ast.unparse(node))
        elif isinstance(node, ast.Name) and node.id in INSTRUMENT_NAMES:
            found.append(node.id)
        elif isinstance(node, ast.alias) and node.name.split(".")[-1] in INSTRUMENT_NAMES:
            found.append(node.name)
        elif (
            isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            and node.name in INSTRUMENT_NAMES
        ):
            found.append(f"def {node.name}")
    return sorted(found)


def test_no_trio_instrument_drives_scheduling() -> None:
    # Trio documents instruments for monitoring: none of the package installs
    # one or defines one (an end-of-step instrument once deferred the
    # reader's wake; a give-back now wakes the reader at once, _read_right.py).
    found = {
        str(path.relative_to(PACKAGE)): uses
        for path in sorted(PACKAGE.rglob("*.py"))
        if (uses := instrument_uses(ast.parse(path.read_text())))
    }
    assert found == {}
    # What the check finds, on a module written for the test.
    sample = ast.parse(
        "import trio\n"
        "from trio.abc import Instrument\n"
        "class Hook(trio.abc.Instrument):\n"
        "    def after_task_step(self, task): ...\n"
        "trio.lowlevel.add_instrument(Hook())\n"
    )
    assert instrument_uses(sample) == [
        "Instrument",
        "def after_task_step",
        "trio.abc.Instrument",
        "trio.lowlevel.add_instrument",
    ]


def private_uses_across_modules(trees: dict[str, ast.Module]) -> list[str]:
    """The uses, in each module of ``trees``, of a ``_``-name on anything but
    self/cls that its own classes do not define or that a class of another
    module of ``trees`` defines."""
    private = {name: class_privates(tree) for name, tree in trees.items()}
    found = []
    for name, tree in trees.items():
        others = set().union(*(p for n, p in private.items() if n != name))
        for line, text, attr in foreign_uses(tree):
            if attr not in private[name] or attr in others:
                found.append(f"{name}:{line}: {text}")
    return found


#: The remote modules' reaches into other libraries' privates (httpcore2's
#: HTTP/2 connection), each checked by tests/remote/test_httpcore_contract.py.
REMOTE_REACHES = {"connection._h2_state", "connection._write_outgoing_data"}
#: The front's reach into hypercorn's HTTP/2 protocol (flushing a reset
#: stream's frame), named in tests/remote/test_hypercorn_contract.py.
HYPERCORN_REACHES = {"protocol._flush"}


def test_no_remote_module_uses_another_modules_private_names() -> None:
    # The WebSocket's fast path asks FrameReader (next_whole_data_frame) and
    # reads none of its buffer; no module of acp_trio.remote uses another's
    # privates, and the reaches into httpcore2 are the named ones.
    trees = {
        path.name: ast.parse(path.read_text()) for path in sorted((PACKAGE / "remote").glob("*.py"))
    }
    found = private_uses_across_modules(trees)
    assert {use.split(": ", 1)[1] for use in found} == REMOTE_REACHES | HYPERCORN_REACHES
    assert all(
        use.startswith("_http_client.py:")
        if use.split(": ", 1)[1] in REMOTE_REACHES
        else use.startswith("_front.py:")
        for use in found
    )
    # The uses _ws_core.py made before the fast path was FrameReader's.
    trees["_ws_core.py"] = ast.parse(
        "def fast(reader):\n    return reader._buffer[reader._pos :]\n"
    )
    found = private_uses_across_modules(trees)
    assert [use for use in found if use.startswith("_ws_core")] == [
        "_ws_core.py:2: reader._buffer",
        "_ws_core.py:2: reader._pos",
    ]
