"""Every python block of the README and of the docs pages is tested: each
page's files type-check with ``mypy --strict``, and each program runs (the
markers, and who runs what, are described in ``tests/docblocks.py``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import trio
from docblocks import (
    ROOT,
    RUN_BY_TESTS,
    blocks,
    page_files,
    pages,
    programs,
    unmarked,
    write_page,
)

import acp_trio
import acp_trio.testing

LIMIT = 180  # real seconds: mypy and programs in subprocesses, on a loaded machine

#: What a program prints, where it is known: (page, file) -> stdout.
STDOUT: dict[tuple[str, str], str] = {
    ("docs/lowlevel.md", "connection.py"): "{'hi': 1}\n",
    ("docs/v2.md", "v2_example.py"): "2 end_turn\n",
    (
        "docs/client-kit.md",
        "files_and_terminals.py",
    ): "refused: path is outside the workspace roots\nok\n\n",
}

#: What a program prints, line by line with the ends stripped.
STDOUT_LINES: dict[tuple[str, str], list[str]] = {
    ("docs/agent-kit.md", "editing_agent.py"): [
        "Plan",
        "ToolCall in_progress",
        "ToolCallUpdate",
        "ToolCallUpdate completed",
        "AgentMessageChunk",
    ],
}

PYTHON_PAGES = [page for page in pages() if page_files(page)]


def env_with_this_python() -> dict[str, str]:
    """The environment, with this interpreter's folder first on PATH, so
    that ``python`` in a page means the python that has acp_trio."""
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    return dict(os.environ, PATH=path)


async def run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[bytes]:
    with trio.fail_after(LIMIT):
        return await trio.run_process(
            argv,
            cwd=cwd,
            env=env_with_this_python(),
            stdin=subprocess.DEVNULL,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )


def test_markers_are_read() -> None:
    # The extraction itself: a marker takes the block right after it (blank
    # lines between allowed), steps of one file are joined in order, a
    # not-run block is a file of its own, and an unmarked python block is found.
    text = (
        "<!-- file: a.py -->\n```python\nx = 1\n```\n```sh\nls\n```\n"
        "<!-- file: a.py -->\n\n```python\ny = 2\n```\n"
        "<!-- not-run: a fragment -->\n```python\nz = 3\n```\n"
        "```python\nw = 4\n```\n"
    )
    found = blocks("t.md", text)
    assert [(b.lang, b.file, b.not_run) for b in found] == [
        ("python", "a.py", None),
        ("sh", None, None),
        ("python", "a.py", None),
        ("python", None, "a fragment"),
        ("python", None, None),
    ]
    assert page_files("t.md", text) == {"a.py": "x = 1\ny = 2\n", "not_run_3.py": "z = 3\n"}
    assert [b.code for b in unmarked("t.md", text)] == ["w = 4\n"]


@pytest.mark.parametrize("page", pages())
def test_every_python_block_is_marked(page: str) -> None:
    missing = [f"{page}:{block.line}" for block in unmarked(page)]
    assert not missing, f"python blocks with no marker (see tests/docblocks.py): {missing}"
    text = (ROOT / page).read_text()
    markers = text.count("<!-- file: ") + text.count("<!-- not-run: ")
    marked = [block for block in blocks(page) if block.file or block.not_run]
    assert markers == len(marked), f"{page}: a marker with no code block right after it"


def test_the_named_runs_are_of_files_that_exist() -> None:
    for page, names in RUN_BY_TESTS.items():
        assert names <= set(page_files(page)), (page, names - set(page_files(page)))


def test_every_python_block_is_covered() -> None:
    # The pages with python blocks are the ones the two tests below take.
    assert {"README.md", "docs/agents.md", "docs/clients.md", "docs/lowlevel.md"} <= set(
        PYTHON_PAGES
    )
    for page, name in [*STDOUT, *STDOUT_LINES]:
        assert name in programs(page), (page, name)


@pytest.mark.parametrize("page", PYTHON_PAGES)
async def test_the_page_type_checks(
    page: str, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    files = write_page(page, tmp_path)
    python = sorted(name for name in files if name.endswith(".py"))
    cache = tmp_path_factory.getbasetemp() / "mypy-cache-docs"  # shared by the pages
    argv = [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(cache), *python]
    result = await run(argv, tmp_path)
    assert result.returncode == 0, result.stdout.decode() + result.stderr.decode()


@pytest.mark.parametrize("page", [page for page in PYTHON_PAGES if programs(page)])
async def test_the_page_programs_run(page: str, tmp_path: Path) -> None:
    write_page(page, tmp_path)
    for name in programs(page):
        result = await run([sys.executable, name], tmp_path)
        out = result.stdout.decode()
        assert result.returncode == 0, f"{page}: {name}\n{out}{result.stderr.decode()[-3000:]}"
        if (page, name) in STDOUT:
            assert out == STDOUT[page, name], (page, name, out)
        if (page, name) in STDOUT_LINES:
            lines = [line.strip() for line in out.splitlines()]
            assert lines == STDOUT_LINES[page, name], (page, name, out)


async def test_the_proxy_example_adds_its_note_in_a_chain(tmp_path: Path) -> None:
    write_page("docs/proxies.md", tmp_path)
    agent = [sys.executable, str(ROOT / "tests" / "proxies" / "echo_all_agent.py")]
    proxy = [sys.executable, str(tmp_path / "context_proxy.py")]
    command = [sys.executable, "-m", "acp_trio", "conduct", "--", *proxy, "--", *agent]
    client = acp_trio.testing.ScenarioClient()
    with trio.fail_after(60):
        async with acp_trio.open_spawned_agent(client, command, stderr="capture") as conn:
            await conn.initialize(client.initialize_request())
            session = (await conn.new_session("/")).session_id
            reply = await conn.prompt_text(session, "hello")
    assert reply.stop_reason == "end_turn"
    assert "".join(client.texts(session)) == "hello | Project conventions: trio, attrs."
