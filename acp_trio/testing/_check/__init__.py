"""The conformance checkers: one package, three checkers over one transcript
and one report.

- ``_agent`` (and the check modules it registers: ``_lifecycle``,
  ``_cancellation``, ``_robustness``, ``_transcript``, run by ``_runner``):
  :func:`check_agent`, any stdio ACP agent (``check-agent``).
- ``_client`` (``_client_checks``, ``_client_wire``, ``_client_run``):
  ``check_client``, any stdio client, against a checking agent
  (``check-client``).
- ``_v2`` (``_v2_scenario``): ``check_agent_v2``, a v2 agent, with the agent
  checker's runner and the checks it shares (``check-agent-v2``).
- Shared: ``_wire`` (the transcript of every line both ways, and the
  checking client the agent checkers play), ``_report`` (results, levels,
  verdicts and reports of all three), ``_kit`` (baselines and the output
  formats of the command line).

This module re-exports the agent checker's names.
"""

from acp_trio.testing._check._agent import CHECKS as CHECKS
from acp_trio.testing._check._agent import GROUPS as GROUPS
from acp_trio.testing._check._agent import ORDER as ORDER
from acp_trio.testing._check._agent import CheckInfo as CheckInfo
from acp_trio.testing._check._agent import _brief as _brief
from acp_trio.testing._check._agent import check_agent as check_agent
from acp_trio.testing._check._agent import promoted_levels as promoted_levels
