"""The scenario vocabulary is a page of the project's docs
(``docs/scenario-agent.md``): it lists every command the reference agents
know, and every hint of the checkers that names the vocabulary points
there."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import trio

from acp_trio.testing import check_agent
from acp_trio.testing._check._base import SCENARIO_DOCS
from acp_trio.testing._check._v2 import check_agent_v2

from .conftest import REAL_LIMIT, agent_command

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "scenario-agent.md"
HINTS = [
    *sorted((ROOT / "acp_trio" / "testing" / "_check").glob("*.py")),
    *sorted((ROOT / "acp_trio" / "_cli").glob("*.py")),
]


def table_commands(section: str) -> set[str]:
    """The first word of each row of the first table after ``section``'s heading."""
    text = PAGE.read_text().split(section, 1)[1]
    rows = re.findall(r"^\| `(\w+)", text.split("\n## ", 1)[0], flags=re.MULTILINE)
    return set(rows)


def agent_commands(module: str, pattern: str) -> set[str]:
    return set(re.findall(pattern, (ROOT / "acp_trio" / "testing" / module).read_text()))


def test_the_page_names_what_the_checker_points_at() -> None:
    assert "docs/scenario-agent.md" in SCENARIO_DOCS
    assert PAGE.is_file()


def test_the_page_lists_every_command_of_the_reference_agents() -> None:
    v1 = agent_commands("_scenario.py", r'command == "(\w+)"')
    assert v1 == table_commands("## Commands")
    v2 = agent_commands("_scenario_v2.py", r'command == "(\w+)"')
    assert v2 - v1 == table_commands("## ACP v2")


def docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def test_every_hint_that_names_the_vocabulary_points_at_the_page() -> None:
    unpointed = []
    seen = 0
    for path in HINTS:
        tree = ast.parse(path.read_text())
        skip = docstrings(tree)
        # The literal parts of an f-string are judged with the f-string.
        skip |= {
            id(part)
            for node in ast.walk(tree)
            if isinstance(node, ast.JoinedStr)
            for part in node.values
        }
        for node in ast.walk(tree):
            if id(node) in skip or not isinstance(node, ast.Constant | ast.JoinedStr):
                continue
            if isinstance(node, ast.Constant) and not isinstance(node.value, str):
                continue
            text = ast.unparse(node)
            if "vocabulary" not in text:
                continue
            seen += 1
            if "docs/scenario-agent.md" not in text and "SCENARIO_DOCS" not in text:
                unpointed.append(f"{path.name}:{node.lineno}: {text[:80]}")
    assert not unpointed
    assert seen >= 5


async def test_a_skip_for_want_of_the_vocabulary_names_the_page() -> None:
    with trio.fail_after(REAL_LIMIT):
        report = await check_agent(
            agent_command("ask_permission"), only=["nested-session-cancel"], timeout=3
        )
        v2 = await check_agent_v2(agent_command("v2_only"), only=["tool-call-cancel"], timeout=3)
    assert report["nested-session-cancel"].skipped
    assert "docs/scenario-agent.md" in report["nested-session-cancel"].reason
    assert v2["tool-call-cancel"].skipped, v2.format_table()
    assert "docs/scenario-agent.md" in v2["tool-call-cancel"].reason
