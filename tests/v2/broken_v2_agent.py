"""A v2 scenario agent that breaks one rule, for ``check-agent-v2``'s own
tests: it swallows handler errors (``fail`` ends ``end_turn``, not
``error``). Served by ``run_agent`` alone (no router)."""

from __future__ import annotations

import sys
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from acp_trio import v2
from acp_trio.schema import v2 as s2
from acp_trio.testing import ScenarioAgentV2


class Broken(ScenarioAgentV2):
    async def prompt(self, params: s2.PromptRequest, turn: v2.Turn) -> str | None:
        try:
            return await super().prompt(params, turn)
        except Exception:
            return "end_turn"


if __name__ == "__main__":
    trio.run(lambda: v2.run_agent(Broken))
