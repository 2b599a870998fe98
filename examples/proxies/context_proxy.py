"""A chain proxy that injects context into every prompt: it appends a text
block (``--context TEXT``, default: the project's conventions) to the
prompt and passes it on; everything else goes through unchanged. It works
in v1 chains (the typed ``prompt``) and in v2 ones (``session/prompt``
rewritten at the JSON level: the typed methods of ``Proxy`` are v1's).

    python -m acp_trio conduct -- python examples/proxies/context_proxy.py \\
        -- python examples/coding_agent.py
"""

from __future__ import annotations

import argparse
from typing import Any

import attrs
import trio

from acp_trio import schema
from acp_trio.proxy import Proxy, run_proxy

DEFAULT = "Project conventions: Python 3.11, trio, attrs; tests with pytest-trio."


class ContextProxy(Proxy):
    def __init__(self, context: str) -> None:
        super().__init__()
        self.context = context

    async def prompt(self, params: schema.PromptRequest) -> schema.PromptResponse:
        blocks = [*params.prompt, schema.TextContent(text=self.context)]
        return await self.successor.prompt(attrs.evolve(params, prompt=blocks))

    async def client_message(self, method: str, params: Any, is_request: bool) -> Any:
        if self.protocol_version == 2 and method == "session/prompt" and is_request:
            # v2: the same list of content blocks; the answer (the turn's
            # acceptance, {messageId}) comes back untouched.
            block = {"type": "text", "text": self.context}
            params = {**params, "prompt": [*params.get("prompt", []), block]}
        return await super().client_message(method, params, is_request)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--context", default=DEFAULT)
    trio.run(run_proxy, ContextProxy(parser.parse_args().context))
