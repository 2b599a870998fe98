"""The README's install lines work from a fresh clone: acp_trio is not on a
package index, so a user installs a checkout or a wheel built from one,
with extras. Each line of the README's "Install in your own project" block
runs here, with ``/path/to/acp_trio`` being a fresh clone of this
repository (or a copy of its tracked files), in a virtualenv of its own;
the dependencies come from the package index, as for a user."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"

pytestmark = pytest.mark.slow


def install_lines() -> list[str]:
    section = README.read_text().split("## Install in your own project", 1)[1]
    (block,) = re.findall(r"```sh\n(.*?)```", section.split("\n## ", 1)[0], flags=re.DOTALL)
    return [line.split("#", 1)[0].strip() for line in block.splitlines() if line.strip()]


def fresh_clone(target: Path) -> Path:
    if (ROOT / ".git").exists() and shutil.which("git"):
        subprocess.run(["git", "clone", "--quiet", str(ROOT), str(target)], check=True)
        # The clone has what is committed; the tests run on the working tree.
        changed = subprocess.run(
            ["git", "ls-files", "--modified", "--others", "--exclude-standard"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        for name in changed:
            if (ROOT / name).is_file():
                (target / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(ROOT / name, target / name)
        return target
    pytest.skip("needs git and a git checkout to clone")


def run(argv: list[str], cwd: Path) -> str:
    result = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, f"{argv}\n{result.stdout}\n{result.stderr}"
    return result.stdout


@pytest.mark.timeout(900)  # five pip runs against the package index, on a loaded machine
def test_the_readme_install_lines_work_from_a_fresh_clone(tmp_path: Path) -> None:
    lines = install_lines()
    assert len(lines) == 5, lines
    checkout = fresh_clone(tmp_path / "acp_trio")
    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", str(venv)], tmp_path)
    python = str(venv / "bin" / "python")
    probe = (
        "import acp_trio, acp_trio.remote, orjson, sys; "
        "print(acp_trio.__version__, acp_trio.__file__)"
    )
    for line in lines:
        argv = shlex.split(line.replace("/path/to/acp_trio", str(checkout)))
        assert argv[:2] in (["pip", "install"], ["pip", "wheel"]), line
        run([python, "-m", "pip", "--quiet", *argv[1:]], tmp_path)
        if argv[1] == "install" and "[remote,fast]" in line:
            version, where = run([python, "-c", probe], tmp_path).split()
            assert where.startswith(str(venv)), where  # a copy, not the checkout
    # The last line installed the wheel built just before.
    version, where = run([python, "-c", probe], tmp_path).split()
    assert (version, Path(where).parent.parent) == (
        acp_trio_version(),
        venv / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages",
    )
    run([python, "-m", "acp_trio", "check-agent", "--list"], tmp_path)


def acp_trio_version() -> str:
    import acp_trio

    return acp_trio.__version__
