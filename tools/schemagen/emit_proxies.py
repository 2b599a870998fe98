"""Emit the proxies module: one typed method per wire method, in two call forms.

For every request and notification a side handles, the proxy of the *other*
side gets a method (``AgentProxyMethods.new_session`` for ``session/new``,
``ClientProxyMethods.read_text_file`` for ``fs/read_text_file``) that takes
either the request object or its fields::

    await client.read_text_file(ReadTextFileRequest(session_id=s, path=p))
    await client.read_text_file(s, p, line=10, limit=20)

The required fields are positional (``session_id`` first), the rest are
keywords; list fields take any sequence. Each method builds the params and
awaits ``self._send_<name>(params)``, which by default sends the request or
notification; the hand-written proxies override the few hooks that do more
(capability checks, session bookkeeping, the prompt turn's cancellation).
A method whose params are a union (several variants) keeps the object form.
"""

from __future__ import annotations

from .emit_common import banner, q
from .emit_types import TypesEmitter
from .model import Field, Method, Model, resolve

#: Wire name -> Python method name, on the handler (``Agent``/``Client``) and
#: on the proxy alike. A wire method missing here gets its method-table key.
METHOD_NAMES: dict[str, str] = {
    "initialize": "initialize",
    "authenticate": "authenticate",
    "logout": "logout",
    "session/new": "new_session",
    "session/load": "load_session",
    "session/list": "list_sessions",
    "session/resume": "resume_session",
    "session/close": "close_session",
    "session/delete": "delete_session",
    "session/set_mode": "set_session_mode",
    "session/set_config_option": "set_session_config_option",
    "session/prompt": "prompt",
    "session/cancel": "cancel",
    "session/update": "session_update",
    "session/request_permission": "request_permission",
    "fs/read_text_file": "read_text_file",
    "fs/write_text_file": "write_text_file",
    "terminal/create": "create_terminal",
    "terminal/output": "terminal_output",
    "terminal/wait_for_exit": "wait_for_terminal_exit",
    "terminal/kill": "kill_terminal",
    "terminal/release": "release_terminal",
    "elicitation/create": "create_elicitation",
    "elicitation/complete": "complete_elicitation",
}

#: The v2 names (ACP v2 renames and adds methods; ``session/prompt`` is only
#: the request there, ``send_prompt``: the v2 proxy's ``prompt`` is the whole turn).
V2_METHOD_NAMES: dict[str, str] = {
    "initialize": "initialize",
    "auth/login": "login",
    "auth/logout": "logout",
    "session/new": "new_session",
    "session/list": "list_sessions",
    "session/resume": "resume_session",
    "session/close": "close_session",
    "session/delete": "delete_session",
    "session/set_config_option": "set_session_config_option",
    "session/prompt": "send_prompt",
    "session/cancel": "cancel",
    "tool_call/cancel": "cancel_tool_call",
    "terminal/cancel": "cancel_terminal",
    "session/update": "session_update",
    "session/request_permission": "request_permission",
    "elicitation/create": "create_elicitation",
    "elicitation/complete": "complete_elicitation",
}

#: (wire method, attribute) -> the default the keyword form gives a field the
#: schema requires: a Python expression, and the value the runtime fills in.
DEFAULTS: dict[tuple[str, str], tuple[str, str]] = {
    ("initialize", "protocol_version"): ("PROTOCOL_VERSION", "PROTOCOL_VERSION"),
    ("session/new", "mcp_servers"): ("()", "[]"),
    ("session/load", "mcp_servers"): ("()", "[]"),
    # v2 only (v1's initialize has no ``info``): the v2 proxy's hook fills it in.
    ("initialize", "info"): ("acp_trio's", "None"),
}

#: Which proxy calls the methods each side handles.
PROXIES = {"agent": "AgentProxyMethods", "client": "ClientProxyMethods"}


def method_name(
    meth: Method, meta_key: str | None = None, names: dict[str, str] | None = None
) -> str:
    return (names or METHOD_NAMES).get(meth.name) or meta_key or meth.name.replace("/", "_")


def _positional(meth: Method, fields: list[Field]) -> list[Field]:
    required = [
        f
        for f in fields
        if f.required and not f.has_default and (meth.name, f.attr) not in DEFAULTS
    ]
    # session_id first: it is the first thing every session method names.
    return sorted(required, key=lambda f: f.attr != "session_id")


class ProxiesEmitter:
    """``methods_module`` (where ``PROTOCOL_VERSION`` comes from) and
    ``names`` default to v1's; the v2 proxies pass their own."""

    def __init__(
        self,
        m: Model,
        types_module: str,
        methods_module: str = "acp_trio.schema._generated_methods",
        names: dict[str, str] | None = None,
    ) -> None:
        self.m = m
        self.types_module = types_module
        self.methods_module = methods_module
        self.names = names or METHOD_NAMES
        self.te = TypesEmitter(m, "")

    def keyword_annotation(self, f: Field) -> str:
        ann = self.te.field_annotation(f)
        t = resolve(f.type, self.m)
        if t.kind == "list" and ann.startswith("list["):
            ann = "Sequence[" + ann[len("list[") :]
        return ann

    def emit_method(self, meth: Method) -> list[str]:
        name = method_name(meth, names=self.names)
        params = meth.params
        result = meth.result or "None"
        send = (
            f"self._request({q(meth.name)}, params, {result})"
            if meth.kind == "request"
            else f"self._notify({q(meth.name)}, params)"
        )
        cls = self.m.classes.get(params)
        kind = "request" if meth.kind == "request" else "notification"
        doc = [
            f'        """Send ``{meth.name}`` (a {kind}): pass a :class:`{params}`',
        ]
        out: list[str] = []
        if cls is None or cls.base or cls.unknown_of:
            # A union of variants: the object form only.
            doc[0] += "."
            out += [
                f"    async def {name}(self, params: {params}, /) -> {result}:",
                *doc,
                *self.doc_tail(meth),
                f"        return await self._send_{name}(params)",
            ]
        else:
            fields = [f for f in cls.fields if not f.flatten]
            pos = _positional(meth, fields)
            kw = [f for f in fields if f not in pos]
            lists = [f.attr for f in fields if resolve(f.type, self.m).kind == "list"]
            optional_object = " | None = None" if not pos else ""
            pos_sig = "".join(f", {f.attr}: {self.keyword_annotation(f)}" for f in pos)
            kw_sig = "".join(f", {f.attr}: {self.keyword_annotation(f)} = ..." for f in kw)
            star = ", *" if kw else ""
            names = ", ".join(f.attr for f in pos) or "no positional fields"
            doc[0] += " or its fields"
            doc += [
                f"        ({names}; the rest as keywords).",
            ]
            present = {f.attr for f in fields}
            defaults = {
                a: v for (w, a), (_, v) in DEFAULTS.items() if w == meth.name and a in present
            }
            for (w, a), (shown, _) in DEFAULTS.items():
                if w == meth.name and a in present:
                    doc.append(f"        ``{a}`` defaults to ``{shown}``.")
            defaults_arg = (
                "{" + ", ".join(f"{q(a)}: {v}" for a, v in defaults.items()) + "}"
                if defaults
                else "None"
            )
            pos_names = "(" + "".join(f"{q(f.attr)}, " for f in pos) + ")"
            list_names = "(" + "".join(f"{q(a)}, " for a in lists) + ")"
            out += [
                "    @overload",
                f"    async def {name}(self, params: {params}{optional_object}, /)"
                f" -> {result}: ...",
                "    @overload",
                f"    async def {name}(self{pos_sig}{star}{kw_sig}) -> {result}: ...",
                f"    async def {name}(self, *args: Any, **kwargs: Any) -> {result}:",
                *doc,
                *self.doc_tail(meth),
                f"        params = build_params({params}, {q(name)}, {pos_names}, {list_names}, "
                f"args, kwargs, {defaults_arg})",
                f"        return await self._send_{name}(params)",
            ]
        out += [
            "",
            f"    async def _send_{name}(self, params: {params}) -> {result}:",
        ]
        if meth.kind == "request":
            out += [
                f"        result: {result} = await {send}",
                "        return result",
            ]
        else:
            out += [f"        await {send}"]
        return out

    def doc_tail(self, meth: Method) -> list[str]:
        if meth.kind == "request":
            tail = [
                "",
                f"        Returns the :class:`{meth.result}` the peer answered.",
                "        Raises :class:`~acp_trio.RequestError` if it answered an error,",
                "        :class:`~acp_trio.CapabilityError` (nothing",
                "        sent) if it did not advertise the capability the method needs,",
                "        :class:`~acp_trio.ConnectionClosed` if the connection ends first.",
                "        Cancelling the caller sends ``$/cancel_request`` for it.",
                '        """',
            ]
        else:
            tail = [
                "",
                "        Raises :class:`~acp_trio.ConnectionClosed` if the connection has",
                "        ended; a notification has no answer to wait for, so cancelling",
                "        the caller only stops it waiting for room in the output queue.",
                '        """',
            ]
        return tail

    def emit(self, schema_version: str, source: str, meta_keys: dict[str, str]) -> str:
        out = [
            banner(
                schema_version,
                source,
                "ACP proxy methods: one typed method per wire method, object or keyword form.\n\n"
                "``AgentProxyMethods`` calls what agents handle, ``ClientProxyMethods`` what\n"
                "clients handle. Each method takes the params object or its fields (required\n"
                "ones positional, ``session_id`` first; the rest keywords) and awaits\n"
                "``self._send_<name>(params)``; the SDK's proxies override the hooks that do\n"
                "more than send. ``AGENT_METHOD_NAMES`` / ``CLIENT_METHOD_NAMES`` name the\n"
                "handler method of each wire method.",
                noqa="F403, F405",
            ),
            "from __future__ import annotations\n",
            "from collections.abc import Mapping, Sequence",
            "from typing import TYPE_CHECKING, Any, Final, overload\n",
            f"from {self.methods_module} import PROTOCOL_VERSION",
            f"from {self.types_module} import *",
            "from acp_trio.schema._runtime import build_params\n",
            "__all__ = [",
            '    "AGENT_METHOD_NAMES",',
            '    "CLIENT_METHOD_NAMES",',
            '    "AgentProxyMethods",',
            '    "ClientProxyMethods",',
            "]\n",
        ]
        for side in ("agent", "client"):
            rows = [
                f"    {q(meth.name)}: {q(method_name(meth, meta_keys.get(meth.name), self.names))},"
                for meth in self.sorted_methods(side)
            ]
            out += [
                f"#: Wire name -> handler method name, for every method {side}s handle.",
                f"{side.upper()}_METHOD_NAMES: Final[Mapping[str, str]] = {{",
                *rows,
                "}\n",
            ]
        for side, cls_name in PROXIES.items():
            other = "client" if side == "agent" else "agent"
            out += [
                "",
                f"class {cls_name}:",
                f'    """The typed calls a {other} makes of its {side}: every method {side}s',
                '    handle, in both call forms (mixed into the SDK\'s proxy)."""',
                "",
                "    if TYPE_CHECKING:",
                "",
                "        async def _request(self, method: str, params: Any, result_type: Any)"
                " -> Any: ...",
                "",
                "        async def _notify(self, method: str, params: Any) -> None: ...",
            ]
            for meth in self.sorted_methods(side):
                out += ["", *self.emit_method(meth)]
            out.append("")
        return "\n".join(out) + "\n"

    def sorted_methods(self, side: str) -> list[Method]:
        order = list(self.names)
        methods = [m for m in self.m.methods if m.handled_by == side]
        return sorted(
            methods, key=lambda m: (order.index(m.name) if m.name in order else len(order), m.name)
        )
