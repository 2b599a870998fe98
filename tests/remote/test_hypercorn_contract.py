"""The contract with hypercorn's private names.

The server's front (acp_trio/remote/_front.py) runs hypercorn's Trio
connection handler, lifespan and worker context itself, as
``hypercorn.trio.serve`` does, so it can answer WebSocket upgrades on our
own WebSocket: names that are not hypercorn's public API. Each one used is
checked here, with what we rely on (its parameters, the methods we call,
what it asks of the stream we hand it). A hypercorn that changes one fails
the test naming it, before a user sees it; ``make test-hypercorn-latest``
runs the remote tests against the newest hypercorn.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import inspect
import re
import socket
from typing import Any

import pytest

pytest.importorskip("hypercorn")

VERSION = importlib.metadata.version("hypercorn")


def private(dotted: str) -> Any:
    """The object named ``module:attribute``; a failure names it."""
    module_name, _, attribute = dotted.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:  # pragma: no cover (a hypercorn that moved it)
        pytest.fail(f"hypercorn {VERSION}: module {module_name} is gone ({exc}); {USED}")
    if not hasattr(module, attribute):  # pragma: no cover
        pytest.fail(f"hypercorn {VERSION}: {dotted} is gone; {USED}")
    return getattr(module, attribute)


USED = "acp_trio/remote/_front.py uses it"


def parameters(dotted: str, function: Any) -> list[str]:
    return [
        name
        for name, parameter in inspect.signature(function).parameters.items()
        if name != "self" and parameter.kind is not inspect.Parameter.VAR_KEYWORD
    ]


def expect_parameters(dotted: str, function: Any, expected: list[str]) -> None:
    got = parameters(dotted, function)
    assert got == expected, (
        f"hypercorn {VERSION} changed {dotted}'s parameters: {got}, where {expected} is what {USED}"
    )


def expect_methods(dotted: str, cls: Any, names: list[str]) -> None:
    missing = [name for name in names if not callable(getattr(cls, name, None))]
    assert not missing, f"hypercorn {VERSION}: {dotted} has no {missing}; {USED}"


#: Every private hypercorn name the front uses (hypercorn.config.Config is
#: public API, checked below for the attributes read).
NAMES = [
    "hypercorn.protocol.h2:H2Protocol",
    "hypercorn.trio.lifespan:Lifespan",
    "hypercorn.trio.tcp_server:TCPServer",
    "hypercorn.trio.worker_context:WorkerContext",
    "hypercorn.typing:ConnectionState",
    "hypercorn.utils:repr_socket_addr",
    "hypercorn.utils:wrap_app",
]


def test_the_front_imports_only_the_names_checked_here() -> None:
    """A private name added to the front without a check here fails."""
    import acp_trio.remote._front as front

    source = inspect.getsource(front)
    imported = set()
    for line in source.splitlines():
        if line.startswith("from hypercorn") and " import " in line:
            module, _, names = line.removeprefix("from ").partition(" import ")
            for name in names.split(","):
                imported.add(f"{module.strip()}:{name.strip()}")
    assert imported - {"hypercorn.config:Config"} == set(NAMES)


@pytest.mark.parametrize("dotted", NAMES)
def test_each_private_name_exists(dotted: str) -> None:
    private(dotted)


def test_lifespan() -> None:
    dotted = "hypercorn.trio.lifespan:Lifespan"
    lifespan = private(dotted)
    expect_parameters(dotted, lifespan.__init__, ["app", "config", "state"])
    expect_methods(dotted, lifespan, ["handle_lifespan", "wait_for_startup"])
    # Started with nursery.start: it takes task_status.
    assert "task_status" in parameters(dotted, lifespan.handle_lifespan), (
        f"hypercorn {VERSION}: {dotted}.handle_lifespan no longer takes task_status; {USED}"
    )
    # The scopes' state is the dict given to it (what the front copies into
    # the native WebSocket's scope).
    assert '"state": self.state' in inspect.getsource(lifespan.handle_lifespan), (
        f"hypercorn {VERSION}: {dotted} no longer hands the app its state dict; {USED}"
    )


def test_tcp_server() -> None:
    dotted = "hypercorn.trio.tcp_server:TCPServer"
    server = private(dotted)
    expect_parameters(dotted, server.__init__, ["app", "config", "context", "state", "stream"])
    assert callable(getattr(server, "__await__", None)), (
        f"hypercorn {VERSION}: {dotted} is no longer awaitable; {USED}"
    )
    # What it asks of the stream the front hands it (_GivenBack and
    # _GivenBackTLS provide exactly this).
    run = inspect.getsource(server.run)
    for attribute in ("do_handshake", "selected_alpn_protocol", "transport_stream", ".socket"):
        assert attribute in run, (
            f"hypercorn {VERSION}: {dotted}.run no longer reads the stream's {attribute}; "
            f"check what it reads now against _GivenBack in {USED}"
        )
    assert "except AttributeError" in run, (
        f"hypercorn {VERSION}: {dotted}.run no longer tells TLS from plain streams by "
        f"a missing do_handshake; {USED}"
    )


def test_tcp_server_protocol_and_send_lock() -> None:
    """The front's FrontConnection reaches hypercorn's protocol through the
    connection handler (``server.protocol``, a ProtocolWrapper, whose
    ``protocol`` is the H11Protocol or H2Protocol now in use, and whose
    ``handle`` the front wraps), and writes ``100 Continue`` under the
    handler's ``send_lock``."""
    dotted = "hypercorn.trio.tcp_server:TCPServer"
    server = private(dotted)
    assert "self.send_lock = trio.Lock()" in inspect.getsource(server.__init__), (
        f"hypercorn {VERSION}: {dotted} has no send_lock; {USED}"
    )
    run = inspect.getsource(server.run)
    assert "self.protocol = ProtocolWrapper(" in run, (
        f"hypercorn {VERSION}: {dotted}.run no longer makes self.protocol; {USED}"
    )
    # The protocol wrapper exists when idle_task.restart is first called.
    assert run.index("self.protocol = ProtocolWrapper(") < run.index("self.idle_task.restart("), (
        f"hypercorn {VERSION}: {dotted}.run restarts idle_task before its protocol; {USED}"
    )
    assert "self.protocol.handle(" in inspect.getsource(server), (
        f"hypercorn {VERSION}: {dotted} no longer feeds its protocol through handle; {USED}"
    )
    wrapper = importlib.import_module("hypercorn.protocol").ProtocolWrapper
    source = inspect.getsource(wrapper)
    for needed in ("self.protocol = H2Protocol(", "return await self.protocol.handle("):
        assert needed in source, (
            f"hypercorn {VERSION}: ProtocolWrapper no longer holds its protocol in .protocol; "
            f"{USED}"
        )


def test_h2_protocol() -> None:
    """What the front asks of hypercorn's HTTP/2 protocol: its streams (a
    dict looked up with ``streams[id]``, which the front replaces with one
    that answers unknown ids), each stream's ASGI ``scope``, its stream
    buffers (``buffer``, ``drain``), its h2 connection, and ``_flush``."""
    dotted = "hypercorn.protocol.h2:H2Protocol"
    protocol = private(dotted)
    init = inspect.getsource(protocol.__init__)
    for attribute in ("self.streams: dict", "self.stream_buffers: dict", "self.connection ="):
        assert attribute in init, f"hypercorn {VERSION}: {dotted} has no {attribute}; {USED}"
    handle_events = inspect.getsource(protocol._handle_events)
    assert "await self.streams[event.stream_id].handle(" in handle_events, (
        f"hypercorn {VERSION}: {dotted} no longer looks streams up with streams[id]; {USED}"
    )
    expect_methods(dotted, protocol, ["_flush"])
    buffer = private("hypercorn.protocol.h2:StreamBuffer")
    expect_methods("hypercorn.protocol.h2:StreamBuffer", buffer, ["drain", "push", "pop"])
    assert "self.buffer = bytearray()" in inspect.getsource(buffer.__init__)
    stream = private("hypercorn.protocol.http_stream:HTTPStream")
    assert "self.scope = {" in inspect.getsource(stream.handle), (
        f"hypercorn {VERSION}: HTTPStream no longer keeps its scope; {USED}"
    )
    assert "self.app, self.config, self.scope, self.app_send" in inspect.getsource(stream.handle), (
        f"hypercorn {VERSION}: HTTPStream no longer hands the app its own scope; {USED}"
    )


def test_tcp_server_idle_task() -> None:
    """The front puts its own idle-timeout task in ``TCPServer.idle_task``:
    the handler must make it in ``__init__`` (so the front's replaces it
    before the handler runs), use it only through ``restart(task_group,
    action)`` and ``stop()``, and pass a task group with ``spawn``."""
    dotted = "hypercorn.trio.tcp_server:TCPServer"
    server = private(dotted)
    assert "self.idle_task = " in inspect.getsource(server.__init__), (
        f"hypercorn {VERSION}: {dotted}.__init__ no longer makes idle_task; {USED}"
    )
    uses = set(re.findall(r"self\.idle_task\.(\w+)\(", inspect.getsource(server)))
    assert uses == {"restart", "stop"}, (
        f"hypercorn {VERSION}: {dotted} uses idle_task's {sorted(uses)}; {USED}"
    )
    assert "self.idle_task.restart(self._task_group, " in inspect.getsource(server), (
        f"hypercorn {VERSION}: {dotted} no longer restarts idle_task with its task group; {USED}"
    )
    dotted = "hypercorn.trio.task_group:TaskGroup"
    expect_methods(dotted, private(dotted), ["spawn"])
    expect_parameters(dotted, private(dotted).spawn, ["func", "args"])


async def test_worker_context() -> None:
    dotted = "hypercorn.trio.worker_context:WorkerContext"
    context_class = private(dotted)
    expect_parameters(dotted, context_class.__init__, ["max_requests"])
    context = context_class(None)
    terminated = getattr(context, "terminated", None)
    assert terminated is not None, f"hypercorn {VERSION}: {dotted}() has no terminated; {USED}"
    assert inspect.iscoroutinefunction(terminated.set), (
        f"hypercorn {VERSION}: {dotted}().terminated.set is no longer a coroutine; {USED}"
    )
    await terminated.set()
    assert terminated.is_set()


def test_connection_state() -> None:
    state = private("hypercorn.typing:ConnectionState")({"a": 1})
    assert state == {"a": 1}


def test_utils() -> None:
    dotted = "hypercorn.utils:repr_socket_addr"
    repr_socket_addr = private(dotted)
    expect_parameters(dotted, repr_socket_addr, ["family", "address"])
    assert repr_socket_addr(socket.AF_INET, ("127.0.0.1", 8000)) == "127.0.0.1:8000"
    dotted = "hypercorn.utils:wrap_app"
    wrap_app = private(dotted)
    expect_parameters(dotted, wrap_app, ["app", "wsgi_max_body_size", "mode"])

    async def app(scope: Any, receive: Any, send: Any) -> None:  # pragma: no cover
        pass

    assert callable(wrap_app(app, 2**20, "asgi"))


def test_config_attributes_read() -> None:
    from hypercorn.config import Config

    config = Config()
    for name in (
        "backlog",
        "bind",
        "certfile",
        "graceful_timeout",
        "insecure_bind",
        "keep_alive_timeout",
        "keyfile",
        "log",
        "quic_bind",
        "root_path",
        "ssl_handshake_timeout",
        "websocket_max_message_size",
        "wsgi_max_body_size",
    ):
        assert hasattr(config, name), f"hypercorn {VERSION}: Config has no {name}; {USED}"
    expect_methods("hypercorn.config:Config", Config, ["create_sockets", "create_ssl_context"])
    for field in ("secure_sockets", "insecure_sockets", "quic_sockets"):
        assert field in inspect.getsource(Config.create_sockets), (
            f"hypercorn {VERSION}: Config.create_sockets no longer returns {field}; {USED}"
        )
