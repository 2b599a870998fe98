"""The README's v2 example runs as printed: the script serves itself through
the version router and talks v2 to itself."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import trio

README = Path(__file__).resolve().parents[2] / "README.md"
HEADING = "## ACP v2 (Preview): `acp_trio.v2` and the version routers"


def v2_block() -> str:
    text = README.read_text()
    section = text[text.index(HEADING) :]
    section = section[: section.index("\n## ", len(HEADING))]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.DOTALL)
    assert len(blocks) == 1
    return blocks[0]


async def test_the_readme_v2_example_runs(tmp_path: Path) -> None:
    script = tmp_path / "v2_example.py"
    script.write_text(v2_block())
    with trio.fail_after(60):
        result = await trio.run_process(
            [sys.executable, str(script)], capture_stdout=True, capture_stderr=True, check=False
        )
    assert result.returncode == 0, result.stderr.decode()[-2000:]
    assert result.stdout.decode().split() == ["2", "end_turn"]
