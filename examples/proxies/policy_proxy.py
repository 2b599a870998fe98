"""A chain proxy that decides permission requests by policy: a tool call
whose kind is in ``--reject`` (default ``delete,execute``) is refused here,
without asking the user; the others go on to the client as usual.

    python -m acp_trio conduct -- python examples/proxies/policy_proxy.py \\
        -- python examples/coding_agent.py
"""

from __future__ import annotations

import argparse
import sys

import trio

from acp_trio import schema
from acp_trio.proxy import Proxy, run_proxy


class PolicyProxy(Proxy):
    def __init__(self, reject: set[str]) -> None:
        super().__init__()
        self.reject = reject

    async def request_permission(
        self, params: schema.RequestPermissionRequest
    ) -> schema.RequestPermissionResponse:
        kind = params.tool_call.kind or "other"  # ACP's kind when none is given
        refuse = next((o for o in params.options if o.kind.startswith("reject")), None)
        if kind in self.reject and refuse is not None:
            print(f"policy-proxy: refused a {kind} tool call", file=sys.stderr, flush=True)
            chosen = schema.SelectedPermissionOutcome(option_id=refuse.option_id)
            return schema.RequestPermissionResponse(outcome=chosen)
        return await self.client.request_permission(params)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reject", default="delete,execute", help="tool kinds to refuse")
    kinds = {k.strip() for k in parser.parse_args().reject.split(",") if k.strip()}
    trio.run(run_proxy, PolicyProxy(kinds))
