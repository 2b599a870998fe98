"""A chain proxy that decides permission requests by policy: a tool call
whose kind is in ``--reject`` (default ``delete,execute``) is refused here,
without asking the user; the others go on to the client as usual. In a v2
chain the request has another shape (a ``subject``, which may name the tool
call); the policy is applied to it at the JSON level (the typed methods of
``Proxy`` are v1's).

    python -m acp_trio conduct -- python examples/proxies/policy_proxy.py \\
        -- python examples/coding_agent.py
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import trio

from acp_trio import schema
from acp_trio.proxy import Proxy, run_proxy
from acp_trio.schema import SchemaValidationError
from acp_trio.schema import v2 as schema_v2


def options_of(
    options: list[schema.PermissionOption] | list[schema_v2.PermissionOption],
) -> list[tuple[str, str]]:
    return [(o.kind, o.option_id) for o in options]


class PolicyProxy(Proxy):
    def __init__(self, reject: set[str]) -> None:
        super().__init__()
        self.reject = reject

    def refusal(self, kind: str, options: list[tuple[str, str]]) -> str | None:
        """The option to choose for a tool call of ``kind``, given the
        options' (kind, id): a reject option if the policy refuses the kind,
        else ``None`` (ask the client)."""
        refuse = next((id_ for k, id_ in options if k.startswith("reject")), None)
        if kind not in self.reject or refuse is None:
            return None
        print(f"policy-proxy: refused a {kind} tool call", file=sys.stderr, flush=True)
        return refuse

    async def successor_message(self, method: str, params: Any, is_request: bool) -> Any:
        if self.protocol_version == 2 and method == "session/request_permission" and is_request:
            try:
                typed = schema_v2.converter.structure(params, schema_v2.RequestPermissionRequest)
            except SchemaValidationError:  # not ours to judge: the client answers it
                return await super().successor_message(method, params, is_request)
            subject = typed.subject
            tool = (
                subject.tool_call
                if isinstance(subject, schema_v2.ToolCallPermissionSubject)
                else None
            )
            chosen = self.refusal((tool and tool.kind) or "other", options_of(typed.options))
            if chosen is not None:
                outcome = schema_v2.SelectedPermissionOutcome(option_id=chosen)
                answer = schema_v2.RequestPermissionResponse(outcome=outcome)
                return schema_v2.converter.unstructure(answer)
        return await super().successor_message(method, params, is_request)

    async def request_permission(
        self, params: schema.RequestPermissionRequest
    ) -> schema.RequestPermissionResponse:
        kind = params.tool_call.kind or "other"  # ACP's kind when none is given
        refused = self.refusal(kind, options_of(params.options))
        if refused is not None:
            chosen = schema.SelectedPermissionOutcome(option_id=refused)
            return schema.RequestPermissionResponse(outcome=chosen)
        return await self.client.request_permission(params)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reject", default="delete,execute", help="tool kinds to refuse")
    kinds = {k.strip() for k in parser.parse_args().reject.split(",") if k.strip()}
    trio.run(run_proxy, PolicyProxy(kinds))
