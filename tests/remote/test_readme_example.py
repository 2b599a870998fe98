"""The README's remote example runs as written."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import trio

README = Path(__file__).resolve().parents[2] / "README.md"


async def test_the_readme_remote_example_runs(tmp_path: Path) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)
    (code,) = [block for block in blocks if "acp_trio.remote" in block]
    script = tmp_path / "remote_example.py"
    script.write_text(code)
    with trio.fail_after(60):
        result = await trio.run_process(
            [sys.executable, str(script)], capture_stdout=True, capture_stderr=True, check=False
        )
    assert result.returncode == 0, result.stderr.decode()
