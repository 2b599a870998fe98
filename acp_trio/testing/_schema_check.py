"""Validating what an agent sends against the ACP schema.

Two validators, with one interface (``check(message, answered_method)``):

- :class:`MessageValidator`: ``jsonschema`` on a JSON Schema file: by
  default the structural schema this package ships
  (``acp_trio/schema/json/``: the upstream schema the types are generated
  from, without its descriptions; see :func:`find_schema`). ``jsonschema``
  comes with the ``check`` extra (``pip install 'acp-trio[check]'``) and is
  imported only here, only when a validation is asked for. The schema's
  root is loose (its extension branches accept any object), so each message
  is also checked against the definition of its own method: the params of a
  request or notification, the result of a response (found from the
  request it answers), the error object of an error.
- :class:`TypedValidator`: the generated strict types of
  :mod:`acp_trio.schema`, structuring each message by the method table. It
  needs no ``jsonschema``, so the schema check always runs: it is what runs
  without the extra (the report's ``validator`` says so, and why).

:func:`load_validator` picks one.
"""

from __future__ import annotations

import importlib
import json
import os
from pathlib import Path
from typing import Any, Final

from acp_trio._jsonrpc import ErrorResponse, Notification, Request, Response, classify
from acp_trio.schema import METHODS

__all__ = [
    "DEFAULT_SCHEMA",
    "DEFAULT_SCHEMA_V2",
    "NO_JSONSCHEMA",
    "MessageValidator",
    "TypedValidator",
    "find_schema",
    "load_validator",
]

_SHIPPED: Final = Path(__file__).resolve().parent.parent / "schema" / "json"
#: The ACP v1 schema the checker validates against by default: the structural
#: copy of the schema this package's types are generated from.
DEFAULT_SCHEMA: Final = _SHIPPED / "v1" / "schema.json"
#: The same for ACP v2 (``check-agent-v2``).
DEFAULT_SCHEMA_V2: Final = _SHIPPED / "v2" / "schema.json"
#: Why :class:`MessageValidator` cannot run without ``jsonschema``, and the fix.
NO_JSONSCHEMA: Final = (
    "jsonschema is not installed: pip install 'acp-trio[check]' to validate against the JSON Schema"
)


def _methods(version: int) -> Any:
    if version == 2:
        from acp_trio.schema.v2 import METHODS as V2_METHODS

        return V2_METHODS
    return METHODS


def _agent_sends(methods: Any) -> frozenset[str]:
    """Methods an agent may send (requests and notifications it makes)."""
    return frozenset(
        name for name, info in methods.items() if info.handled_by in ("client", "protocol", "both")
    )


def find_schema(
    path: str | os.PathLike[str] | None = None, version: int = 1
) -> tuple[Path | None, list[Path]]:
    """The schema file to use, and every place looked at.

    An explicit ``path`` is taken as is; otherwise the structural schema of
    ACP ``version`` that this package ships
    (``acp_trio/schema/json/v1/schema.json`` or ``.../v2/schema.json``),
    which every install has.
    """
    candidates = [Path(path) if path is not None else _default(version)]
    for candidate in candidates:
        if candidate.is_file():
            return candidate.resolve(), candidates
    return None, candidates


def _default(version: int) -> Path:
    # Looked up when called, so a test can point the defaults elsewhere.
    return Path(DEFAULT_SCHEMA_V2 if version == 2 else DEFAULT_SCHEMA)


def _short(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _telling(error: Any) -> Any:
    """For a union, the error of the branch the instance meant: branches
    whose tag (``const``/``enum``) did not match are set aside, then the
    deepest error wins."""
    while error.context:
        branches: dict[Any, list[Any]] = {}
        for sub in error.context:
            key = sub.relative_schema_path[0] if sub.relative_schema_path else None
            branches.setdefault(key, []).append(sub)
        meant = [
            sub
            for subs in branches.values()
            if not any(e.validator in ("const", "enum") for e in subs)
            for sub in subs
        ]
        error = max(meant or error.context, key=lambda e: len(e.absolute_path))
    return error


class MessageValidator:
    """Checks agent→client messages against one schema file.

    Build it with :meth:`load`, which returns a reason string instead when
    validation cannot run (``jsonschema`` missing, schema unreadable).
    """

    def __init__(
        self, root: dict[str, Any], validator_class: Any, path: Path, version: int = 1
    ) -> None:
        self.path = path
        self.version = version
        self._methods = _methods(version)
        self._agent_sends = _agent_sends(self._methods)
        self.description = f"jsonschema on {path}"
        self._root = root
        self._class = validator_class
        self._defs: dict[str, Any] = root.get("$defs", {})
        self._cache: dict[str, Any] = {}
        self._root_validator = validator_class(root)

    @classmethod
    def load(
        cls, path: str | os.PathLike[str] | None = None, version: int = 1
    ) -> MessageValidator | str:
        try:
            validators = importlib.import_module("jsonschema.validators")
        except ImportError:
            return NO_JSONSCHEMA
        found, tried = find_schema(path, version)
        if found is None:
            return "schema not found (looked at " + ", ".join(str(p) for p in tried) + ")"
        try:
            root = json.loads(found.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            return f"cannot read the schema {found}: {exc}"
        if not isinstance(root, dict) or not isinstance(root.get("$defs"), dict):
            return f"{found} does not look like the ACP JSON Schema"
        return cls(root, validators.validator_for(root), found, version)

    def _validator(self, name: str) -> Any:
        validator = self._cache.get(name)
        if validator is None:
            schema = {"$defs": self._defs, "$ref": f"#/$defs/{name}"}
            if "$schema" in self._root:
                schema["$schema"] = self._root["$schema"]
            validator = self._cache[name] = self._class(schema)
        return validator

    def _problem(self, validator: Any, instance: Any, where: str) -> str | None:
        best_match = importlib.import_module("jsonschema.exceptions").best_match
        error = best_match(validator.iter_errors(instance))
        if error is None:
            return None
        error = _telling(error)
        path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
        return f"{where}{path}: {_short(error.message)}"

    def check_definition(self, name: str, instance: Any, where: str) -> str | None:
        if name not in self._defs:
            return None
        return self._problem(self._validator(name), instance, where)

    def check(self, message: Any, answered_method: str | None = None) -> str | None:
        """The first problem of one message from the agent, or ``None``.

        ``answered_method`` is the method of the request a response answers
        (``None`` when unknown, e.g. a reply to malformed input).
        """
        problem = self._problem(self._root_validator, message, "message")
        if problem is not None:
            return problem
        parsed = classify(message)
        if isinstance(parsed, Request | Notification):
            method = parsed.method
            if method.startswith("_"):
                return None  # extension: any JSON
            info = self._methods.get(method)
            kind = "request" if isinstance(parsed, Request) else "notification"
            if info is None or method not in self._agent_sends or info.kind != kind:
                return f"{method}: not a {kind} an agent sends in ACP v{self.version}"
            if parsed.params is None and "params" not in message:
                return self.check_definition(info.params_name, {}, f"{method} params")
            return self.check_definition(info.params_name, parsed.params, f"{method} params")
        if isinstance(parsed, ErrorResponse):
            return self.check_definition("Error", message["error"], "error")
        if isinstance(parsed, Response):
            if answered_method is None or answered_method.startswith("_"):
                return None
            info = self._methods.get(answered_method)
            if info is None or info.result_name is None:
                return None
            where = f"result of {answered_method}"
            return self.check_definition(info.result_name, parsed.result, where)
        return f"not a JSON-RPC message: {parsed.error.data}"


def _agent_method_problem(method: str, kind: str, version: int = 1) -> str | None:
    methods = _methods(version)
    info = methods.get(method)
    if info is None or method not in _agent_sends(methods) or info.kind != kind:
        return f"{method}: not a {kind} an agent sends in ACP v{version}"
    return None


class TypedValidator:
    """Checks agent→client messages with the generated strict types of
    :mod:`acp_trio.schema` (``converter.structure`` by the method table)."""

    def __init__(self, note: str = "", version: int = 1) -> None:
        if version == 2:
            from acp_trio.schema.v2 import SCHEMA_VERSION
        else:
            from acp_trio.schema import SCHEMA_VERSION

        self.version = version
        self._methods = _methods(version)
        self.path = None
        self.description = f"acp_trio.schema types (generated from {SCHEMA_VERSION})" + (
            f"; {note}" if note else ""
        )

    def _structure(self, value: Any, kind: Any, where: str) -> str | None:
        from acp_trio.schema import SchemaValidationError, converter

        if self.version == 2:
            from acp_trio.schema.v2 import converter
        try:
            converter.structure(value, kind)
        except (SchemaValidationError, ValueError, TypeError) as exc:
            return f"{where}: {_short(str(exc))}"
        return None

    def check(self, message: Any, answered_method: str | None = None) -> str | None:
        """The first problem of one message from the agent, or ``None``."""
        parsed = classify(message)
        if isinstance(parsed, Request | Notification):
            method = parsed.method
            if method.startswith("_"):
                return None  # extension: any JSON
            kind = "request" if isinstance(parsed, Request) else "notification"
            problem = _agent_method_problem(method, kind, self.version)
            if problem is not None:
                return problem
            params = {} if parsed.params is None else parsed.params
            return self._structure(params, self._methods[method].params, f"{method} params")
        if isinstance(parsed, ErrorResponse):
            return None  # classify checked the code and the message
        if isinstance(parsed, Response):
            if answered_method is None or answered_method.startswith("_"):
                return None
            info = self._methods.get(answered_method)
            if info is None or info.result is None:
                return None
            return self._structure(parsed.result, info.result, f"result of {answered_method}")
        return f"not a JSON-RPC message: {parsed.error.data}"


def load_validator(
    path: str | os.PathLike[str] | None = None, version: int = 1
) -> MessageValidator | TypedValidator:
    """The validator of the schema check.

    An explicit ``path``: ``jsonschema`` on that file; raises ``ValueError``
    when it cannot be used (missing, unreadable, no ``jsonschema``). Without
    one: ``jsonschema`` on the schema this package ships (see
    :func:`find_schema`), else (no ``jsonschema``: the ``check`` extra is not
    installed) :class:`TypedValidator`, saying why.
    """
    if path is not None:
        if not Path(path).is_file():
            raise ValueError(f"the schema {os.fspath(path)} does not exist (--schema PATH)")
        loaded = MessageValidator.load(path, version)
        if isinstance(loaded, str):
            raise ValueError(loaded)
        return loaded
    found = MessageValidator.load(None, version)
    if isinstance(found, MessageValidator):
        return found
    return TypedValidator(found, version)
