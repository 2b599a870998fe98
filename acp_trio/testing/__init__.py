"""The acp_trio test kit: what the project's own tests use, shipped.

- :func:`open_memory_pair`: an agent and a client connected in memory (the
  scenario agent and test client by default), initialized.
- :class:`FakeEditor`: the client to reach for in agent tests (an in-memory
  workspace, a permission policy, fake terminals, every update and request
  recorded, a typed view of each session); :class:`FakeAgent`: the agent to
  reach for in client tests (a script of steps per prompt: text, tool
  calls, permission, file reads and writes, waiting for the cancel).
- :class:`ScenarioAgent` / :class:`ScenarioClient`: the reference agent of
  the scenario vocabulary (``docs/scenario-agent.md``), and its matching
  test client (subclass
  either). ``python -m acp_trio scenario-agent`` serves the agent on stdio.
  :class:`ScenarioAgentV2` is the same vocabulary over ACP v2, and
  :func:`run_scenario_router` serves both behind the version router
  (``scenario-agent --v2``).
- :class:`ScriptedPeer`: write exact bytes, read exact replies, expect
  silence; over memory (:func:`open_scripted_client`,
  :func:`open_scripted_agent`) or a spawned agent
  (:func:`open_scripted_process`).
- :func:`check_agent`: the conformance checks for any stdio agent, without
  pytest (``python -m acp_trio check-agent -- CMD...`` on the command line).
  Its schema check validates every message with ``jsonschema`` against the
  schema this package ships (:func:`find_schema`) when the ``check`` extra
  is installed (``pip install 'acp-trio[check]'``), else with the generated
  types, and the report says which.
- :func:`check_client`: the same for any stdio client, which spawns the
  checking agent (``python -m acp_trio check-client -- CLIENT_CMD...``).
- ``acp_trio.testing.pytest_plugin``: pytest-trio fixtures over all this.

This module only re-exports.
"""

from acp_trio._public import fix_module_names as _fix_module_names
from acp_trio.testing._check import CHECKS as CHECKS
from acp_trio.testing._check import CheckInfo as CheckInfo
from acp_trio.testing._check import check_agent as check_agent
from acp_trio.testing._check._client_checks import CLIENT_CHECKS as CLIENT_CHECKS
from acp_trio.testing._check._client_checks import ClientCheckInfo as ClientCheckInfo
from acp_trio.testing._check._client_run import check_client as check_client
from acp_trio.testing._check._report import CheckReport as CheckReport
from acp_trio.testing._check._report import CheckResult as CheckResult
from acp_trio.testing._check._report import ClientCheckReport as ClientCheckReport
from acp_trio.testing._check._report import Level as Level
from acp_trio.testing._check._report import Rule as Rule
from acp_trio.testing._check._report import Verdict as Verdict
from acp_trio.testing._fake_agent import AskPermission as AskPermission
from acp_trio.testing._fake_agent import Call as Call
from acp_trio.testing._fake_agent import EndTurn as EndTurn
from acp_trio.testing._fake_agent import Fail as Fail
from acp_trio.testing._fake_agent import FakeAgent as FakeAgent
from acp_trio.testing._fake_agent import FakeTurn as FakeTurn
from acp_trio.testing._fake_agent import ReadFile as ReadFile
from acp_trio.testing._fake_agent import SendText as SendText
from acp_trio.testing._fake_agent import SendThought as SendThought
from acp_trio.testing._fake_agent import SendUpdate as SendUpdate
from acp_trio.testing._fake_agent import Sleep as Sleep
from acp_trio.testing._fake_agent import StartToolCall as StartToolCall
from acp_trio.testing._fake_agent import Step as Step
from acp_trio.testing._fake_agent import UpdateToolCall as UpdateToolCall
from acp_trio.testing._fake_agent import WaitForCancel as WaitForCancel
from acp_trio.testing._fake_agent import WriteFile as WriteFile
from acp_trio.testing._fake_editor import FakeCommand as FakeCommand
from acp_trio.testing._fake_editor import FakeEditor as FakeEditor
from acp_trio.testing._fake_editor import FakeTerminal as FakeTerminal
from acp_trio.testing._fake_editor import PermissionPolicy as PermissionPolicy
from acp_trio.testing._memory import AgentClientPair as AgentClientPair
from acp_trio.testing._memory import open_memory_pair as open_memory_pair
from acp_trio.testing._peer import NOT_JSON as NOT_JSON
from acp_trio.testing._peer import ExpectationFailed as ExpectationFailed
from acp_trio.testing._peer import PeerEvent as PeerEvent
from acp_trio.testing._peer import ScriptedPeer as ScriptedPeer
from acp_trio.testing._peer import open_scripted_agent as open_scripted_agent
from acp_trio.testing._peer import open_scripted_client as open_scripted_client
from acp_trio.testing._peer import open_scripted_process as open_scripted_process
from acp_trio.testing._scenario import HOLD_PATH as HOLD_PATH
from acp_trio.testing._scenario import SCENARIO_AGENT_COMMAND as SCENARIO_AGENT_COMMAND
from acp_trio.testing._scenario import SCENARIO_CLIENT_CAPABILITIES as SCENARIO_CLIENT_CAPABILITIES
from acp_trio.testing._scenario import ScenarioAgent as ScenarioAgent
from acp_trio.testing._scenario import ScenarioClient as ScenarioClient
from acp_trio.testing._scenario import run_scenario_agent as run_scenario_agent
from acp_trio.testing._scenario_v2 import ScenarioAgentV2 as ScenarioAgentV2
from acp_trio.testing._scenario_v2 import run_scenario_router as run_scenario_router
from acp_trio.testing._schema_check import find_schema as find_schema

_fix_module_names("acp_trio.testing", globals())
