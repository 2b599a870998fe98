"""From JSON-level messages to typed handler calls, and back.

:class:`TypedHandler` is the :class:`~acp_trio.lowlevel.Handler` behind both the
Agent and the Client APIs. It owns the policy that is the same on both
sides:

- params are structured into the schema class of the method (``null`` or
  absent params read as ``{}``); a :class:`SchemaValidationError` becomes one
  ``-32602`` reply whose ``data`` lists the problems;
- the handler's return value is unstructured into the result (``None``
  reads as ``{}``, for the many empty results);
- unknown methods: ``_``-prefixed ones go to the extension handlers (the
  registered ones first), others get ``-32601``; unknown notifications are
  ignored;
- session scopes: work that ``session/cancel`` must end (the agent's prompt,
  the client's pending permission requests) runs in a scope registered
  under its session, so a cancel of the session cancels exactly that work.

:class:`ProxyBase` is the shared base of the two proxies (``ClientProxy`` on the
agent side, ``AgentProxy`` on the client side): typed requests and
notifications over a connection.
"""

from __future__ import annotations

import inspect
import logging
import types
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, TypeVar

import attrs
import trio

from acp_trio._core._connection import Connection, Handler
from acp_trio._core._requests import RequestContext
from acp_trio._exceptions import RemoteProtocolError, RequestError
from acp_trio.schema import SchemaConverter, SchemaValidationError, converter

__all__ = [
    "Extensible",
    "implemented",
    "ExtensionHandlers",
    "ProxyBase",
    "Route",
    "SessionScopes",
    "TypedHandler",
    "one_connection",
]

_log = logging.getLogger("acp_trio.dispatch")

T = TypeVar("T")

RequestFunc = Callable[[Any], Awaitable[Any]]
NotificationFunc = Callable[[Any], Awaitable[None]]
ExtRequestFunc = Callable[[str, Any], Awaitable[Any]]
ExtNotificationFunc = Callable[[str, Any], Awaitable[None]]


@attrs.frozen
class Route:
    """One method a side handles: its params type and the typed function."""

    params: Any
    func: Callable[[Any], Awaitable[Any]]


class ExtensionHandlers:
    """Handlers registered for ``_``-prefixed extension methods, by name."""

    def __init__(self) -> None:
        self.requests: dict[str, ExtRequestFunc] = {}
        self.notifications: dict[str, ExtNotificationFunc] = {}

    def add_request(self, method: str, func: Callable[[Any], Awaitable[Any]]) -> None:
        _check_extension_name(method)
        self.requests[method] = lambda _name, params: func(params)

    def add_notification(self, method: str, func: Callable[[Any], Awaitable[None]]) -> None:
        _check_extension_name(method)
        self.notifications[method] = lambda _name, params: func(params)


class Extensible:
    """Extension-method registration, shared by :class:`Agent` and
    :class:`Client`."""

    def __init__(self) -> None:
        self._extensions = ExtensionHandlers()

    def _extension_handlers(self) -> ExtensionHandlers:
        # Subclasses may skip super().__init__(); be forgiving.
        try:
            return self._extensions
        except AttributeError:
            self._extensions = ExtensionHandlers()
            return self._extensions

    def add_extension_method(self, method: str, func: Callable[[Any], Awaitable[Any]]) -> None:
        """Handle the ``_``-prefixed request ``method`` with ``func(params)``."""
        self._extension_handlers().add_request(method, func)

    def add_extension_notification(
        self, method: str, func: Callable[[Any], Awaitable[None]]
    ) -> None:
        """Handle the ``_``-prefixed notification ``method`` with ``func(params)``."""
        self._extension_handlers().add_notification(method, func)


def _check_extension_name(method: str) -> None:
    if not method.startswith("_"):
        raise ValueError(f"extension method names start with '_': {method!r}")


# id() of each Agent and Client object on a connection right now (alive
# while there, so no id is reused meanwhile; ids, not the objects: a
# user's class need not be hashable).
_connected: set[int] = set()


@contextmanager
def one_connection(obj: object, error: str) -> Iterator[None]:
    """Mark ``obj`` as on a connection for the block; raise
    ``RuntimeError(error)`` if it already is.

    An :class:`Agent` or :class:`Client` object holds the proxy to its peer
    (``agent.client``, ``client.agent``), so one object on two connections
    at once would send one connection's output to the other: a clear error
    instead of that cross-talk. After the connection it is free again.
    """
    key = id(obj)
    if key in _connected:
        raise RuntimeError(error)
    _connected.add(key)
    try:
        yield
    finally:
        _connected.discard(key)


def implemented(obj: object, base: type, attr: str) -> bool:
    """Whether ``obj``'s class overrides ``base.attr`` (a method whose default
    only answers "method not found": then the method is simply not routed,
    and its params are not checked first)."""
    return getattr(type(obj), attr, None) is not getattr(base, attr)


class SessionScopes:
    """Cancel scopes of the work ``session/cancel`` ends, by session id."""

    def __init__(self) -> None:
        self._scopes: dict[str, set[trio.CancelScope]] = {}

    def add(self, session_id: str) -> trio.CancelScope:
        """A new scope registered under ``session_id``; the caller enters it
        and must :meth:`discard` it when done. Cancelling a scope that was
        not entered yet is fine: it is cancelled from the start."""
        scope = trio.CancelScope()
        self._scopes.setdefault(session_id, set()).add(scope)
        return scope

    def discard(self, session_id: str, scope: trio.CancelScope) -> None:
        scopes = self._scopes.get(session_id)
        if scopes is not None:
            scopes.discard(scope)
            if not scopes:
                del self._scopes[session_id]

    @contextmanager
    def register(self, session_id: str) -> Iterator[trio.CancelScope]:
        """:meth:`add` for the duration of the block."""
        scope = self.add(session_id)
        try:
            yield scope
        finally:
            self.discard(session_id, scope)

    def scopes(self, session_id: str) -> list[trio.CancelScope]:
        """The session's registered scopes, as a list (safe to cancel while
        iterating)."""
        return list(self._scopes.get(session_id, ()))

    def cancel(self, session_id: str) -> int:
        """Cancel the session's registered work; return how many scopes."""
        scopes = self._scopes.get(session_id, ())
        for scope in scopes:
            scope.cancel()
        return len(scopes)


class TypedHandler(Handler):
    """A :class:`Handler` that routes by method to typed functions."""

    def __init__(
        self,
        requests: Mapping[str, Route],
        notifications: Mapping[str, Route],
        ext_request: ExtRequestFunc,
        ext_notification: ExtNotificationFunc,
        extensions: ExtensionHandlers,
        *,
        intercepts: Mapping[str, Callable[[Any], None]] | None = None,
        schema_converter: SchemaConverter = converter,
    ) -> None:
        self._requests = dict(requests)
        self._notifications = dict(notifications)
        self._ext_request = ext_request
        self._ext_notification = ext_notification
        self._extensions = extensions
        self._intercepts = dict(intercepts or {})
        self.converter = schema_converter

    def structure_params(self, params: Any, params_type: Any) -> Any:
        try:
            return self.converter.structure({} if params is None else params, params_type)
        except SchemaValidationError as exc:
            raise RequestError.invalid_params({"errors": exc.errors}) from exc

    async def handle_request(self, ctx: RequestContext, method: str, params: Any) -> Any:
        try:
            route = self._requests.get(method)
            if route is None:
                if method.startswith("_"):
                    func = self._extensions.requests.get(method, self._ext_request)
                    return await func(method, params)
                raise RequestError.method_not_found(method)
            result = await route.func(self.structure_params(params, route.params))
            return {} if result is None else self.converter.unstructure(result)
        except trio.TooSlowError as exc:
            # The handler's own deadline (trio.fail_after) expired: a timeout
            # is answered like every other cancellation, -32800.
            raise RequestError.request_cancelled() from exc

    async def handle_notification(self, method: str, params: Any) -> None:
        route = self._notifications.get(method)
        if route is None:
            if method.startswith("_"):
                func = self._extensions.notifications.get(method, self._ext_notification)
                await func(method, params)
            else:
                _log.debug("ignoring unknown notification %s", method)
            return
        try:
            typed = self.converter.structure({} if params is None else params, route.params)
        except SchemaValidationError as exc:
            _log.warning("ignoring malformed %s notification: %s", method, {"errors": exc.errors})
            return
        await route.func(typed)

    def intercept_notification(self, method: str, params: Any) -> bool:
        # Acts at once in the reader, then lets the notification go on to
        # its ordered handler as usual.
        intercept = self._intercepts.get(method)
        if intercept is not None and isinstance(params, dict):
            intercept(params)
        return False


_C = TypeVar("_C", bound=type)


def adopt_hook_docs(cls: _C) -> _C:
    """Class decorator for a proxy over a generated ``*ProxyMethods`` mixin:
    where the class overrides a method's ``_send_<name>`` hook with a
    docstring, the public method (the mixin's, unchanged) is copied onto
    the class with that docstring in front of the generated one, so
    ``help()`` and the docs show what the hook adds."""
    for name, hook in list(vars(cls).items()):
        if not name.startswith("_send_") or not getattr(hook, "__doc__", None):
            continue
        public = name[len("_send_") :]
        method = getattr(cls, public, None)
        if not isinstance(method, types.FunctionType) or public in vars(cls):
            continue
        copy = types.FunctionType(
            method.__code__, method.__globals__, public, method.__defaults__, method.__closure__
        )
        copy.__kwdefaults__ = method.__kwdefaults__
        copy.__qualname__ = f"{cls.__qualname__}.{public}"
        copy.__doc__ = (
            inspect.cleandoc(hook.__doc__) + "\n\n" + inspect.cleandoc(method.__doc__ or "")
        )
        setattr(cls, public, copy)
    return cls


class ProxyBase:
    """Typed calls to the other side of a connection."""

    def __init__(self, connection: Connection, schema_converter: SchemaConverter) -> None:
        self.connection = connection
        self.converter = schema_converter

    async def _request(self, method: str, params: Any, result_type: Any) -> Any:
        raw = await self.connection.call(method, self.converter.unstructure(params))
        return self._structure_result(method, raw, result_type)

    def _structure_result(self, method: str, raw: Any, result_type: Any) -> Any:
        try:
            return self.converter.structure({} if raw is None else raw, result_type)
        except SchemaValidationError as exc:
            raise RemoteProtocolError(f"invalid result for {method}: {exc}") from exc

    async def _notify(self, method: str, params: Any) -> None:
        await self.connection.notify(method, self.converter.unstructure(params))

    async def ext_method(self, method: str, params: Any = None) -> Any:
        """Call an extension method (a name starting with ``_``), sent exactly
        as given; ``params`` and the result are plain JSON values.

        Raises ``ValueError`` for a name without the ``_``,
        :class:`RequestError` for the peer's error reply and
        :class:`ConnectionClosed` if the connection ends first. Cancelling the
        call sends one ``$/cancel_request`` and drops the late answer.
        """
        _check_extension_name(method)
        return await self.connection.call(method, params)

    async def ext_notification(self, method: str, params: Any = None) -> None:
        """Send an extension notification (a name starting with ``_``).

        Raises ``ValueError`` for a name without the ``_`` and
        :class:`ConnectionClosed` once the connection is closing. Cancelled
        while waiting for room in the output queue, nothing is sent.
        """
        _check_extension_name(method)
        await self.connection.notify(method, params)
