"""acp_trio as a user gets it, outside this checkout.

- The README's install lines work from a fresh clone: acp_trio is not on a
  package index, so a user installs a checkout or a wheel built from one,
  with extras. Each line of the README's "Install in your own project"
  block runs here, with ``/path/to/acp_trio`` being a fresh clone of this
  repository (or a copy of its tracked files), in a virtualenv of its own;
  the dependencies come from the package index, as for a user.
- Release-shaped: ``python -m build`` makes an sdist and, from it, a wheel,
  which ``twine check`` passes; the wheel, installed into a fresh
  virtualenv with nothing of the checkout beside it, runs ``check-agent
  --strict`` on the scenario agent with the schema check validating against
  the JSON Schema it ships, and the pytest plugin in a project of its own
  with ``trio_mode = true`` and ``--junitxml``.
- The CI recipe of ``docs/checking-in-ci.md`` works as written: each of its
  ``run:`` steps runs in a fresh folder, with acp_trio from a wheel and from
  a git URL, as the page says.

The clone is made in a temporary folder: nothing is beside it (in
particular no developers' notes folder).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import attrs
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


# -- release-shaped: the sdist, the wheel, and the wheel alone in a project --------------------

BIN = "Scripts" if sys.platform == "win32" else "bin"


@attrs.frozen
class Release:
    checkout: Path  # a fresh clone of the working tree, alone in its folder
    wheel: Path
    sdist: Path


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> Release:
    """Build once per module: sdist, then the wheel from the sdist (what
    ``python -m build`` does), from a fresh clone with nothing beside it."""
    where = tmp_path_factory.mktemp("release")
    checkout = fresh_clone(where / "acp_trio")
    assert sorted(p.name for p in where.iterdir()) == ["acp_trio"]
    dist = where / "dist"
    run([sys.executable, "-m", "build", "--outdir", str(dist), str(checkout)], where)
    (wheel,) = dist.glob("acp_trio-*-py3-none-any.whl")
    (sdist,) = dist.glob("acp_trio-*.tar.gz")
    return Release(checkout, wheel, sdist)


def venv(where: Path) -> Path:
    """A fresh virtualenv; its bin folder."""
    run([sys.executable, "-m", "venv", str(where)], where.parent)
    return where / BIN


def pip(bin_dir: Path, *args: str) -> None:
    run([str(bin_dir / "python"), "-m", "pip", "--quiet", "install", *args], bin_dir.parent)


@pytest.mark.timeout(900)
def test_the_sdist_and_wheel_pass_twine_and_carry_the_schema(release: Release) -> None:
    run(
        [
            sys.executable,
            "-m",
            "twine",
            "check",
            "--strict",
            str(release.wheel),
            str(release.sdist),
        ],
        release.wheel.parent,
    )
    import tarfile
    import zipfile

    names = zipfile.ZipFile(release.wheel).namelist()
    for name in ("v1/schema.json", "v2/schema.json"):
        assert f"acp_trio/schema/json/{name}" in names
    assert "acp_trio/py.typed" in names
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    with tarfile.open(release.sdist) as sdist:
        members = {m.name.split("/", 1)[1] for m in sdist.getmembers() if "/" in m.name}
    for name in ("pyproject.toml", "LICENSE", "README.md", "docs/scenario-agent.md"):
        assert name in members
    assert not [m for m in members if "node_modules" in m]


@pytest.mark.timeout(1200)
def test_from_the_wheel_alone_check_agent_and_the_pytest_plugin_work(
    release: Release, tmp_path: Path
) -> None:
    bin_dir = venv(tmp_path / "venv")
    pip(bin_dir, f"{release.wheel}[check]", "pytest", "pytest-trio")
    python = str(bin_dir / "python")
    project = tmp_path / "project"  # the user's project: no checkout anywhere near
    project.mkdir()
    where = run([python, "-c", "import acp_trio; print(acp_trio.__file__)"], project).strip()
    site = Path(where).parent
    assert site.is_relative_to(tmp_path / "venv"), where
    agent = [python, "-m", "acp_trio", "scenario-agent"]

    # check-agent --strict, with the schema check on the JSON Schema the wheel ships.
    out = run(
        [str(bin_dir / "acp-trio"), "check-agent", "--strict", "--json", "--", *agent], project
    )
    report = json.loads(out)
    assert report["ok"], out
    assert report["verdict"] == "CONFORMS"
    assert report["validator"] == f"jsonschema on {site / 'schema' / 'json' / 'v1' / 'schema.json'}"
    (schema,) = [c for c in report["checks"] if c["name"] == "schema"]
    assert schema["verdict"] == "pass", schema
    # ... and v2 the same way.
    v2 = json.loads(
        run([python, "-m", "acp_trio", "check-agent-v2", "--json", "--", *agent, "--v2"], project)
    )
    assert v2["ok"], v2
    assert v2["validator"] == f"jsonschema on {site / 'schema' / 'json' / 'v2' / 'schema.json'}"

    # The pytest plugin, in a project with trio_mode = true and its own async test.
    (project / "pyproject.toml").write_text("[tool.pytest.ini_options]\ntrio_mode = true\n")
    (project / "test_mine.py").write_text(
        "import trio\n\n\nasync def test_mine():\n    await trio.sleep(0)\n"
    )
    xml = project / "acp.xml"
    command = shlex.join(agent)
    run(
        [
            python,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "--acp-agent",
            command,
            "--acp-strict",
            f"--junitxml={xml}",
        ],
        project,
    )
    cases = list(ET.parse(xml).iter("testcase"))
    names = [case.get("name") for case in cases]
    assert names[0] == "test_mine"
    assert "acp-check[schema]" in names
    assert len(names) > 20
    assert not [c for c in cases if c.find("failure") is not None or c.find("error") is not None]


@pytest.mark.timeout(900)
def test_without_the_check_extra_the_checker_says_what_to_install(
    release: Release, tmp_path: Path
) -> None:
    bin_dir = venv(tmp_path / "venv")
    pip(bin_dir, str(release.wheel))
    python = str(bin_dir / "python")
    agent = [python, "-m", "acp_trio", "scenario-agent"]
    out = run(
        [python, "-m", "acp_trio", "check-agent", "--only", "schema", "--json", "--", *agent],
        tmp_path,
    )
    report = json.loads(out)
    assert report["ok"], out
    assert "jsonschema is not installed: pip install 'acp-trio[check]'" in report["validator"]
    explicit = subprocess.run(
        [
            python,
            "-m",
            "acp_trio",
            "check-agent",
            "--schema",
            str(release.checkout / "acp_trio" / "schema" / "json" / "v1" / "schema.json"),
            "--",
            *agent,
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert explicit.returncode == 2, explicit.stderr
    assert "pip install 'acp-trio[check]'" in explicit.stderr


# -- the CI recipe of docs/checking-in-ci.md -----------------------------------------------------

CI_PAGE = ROOT / "docs" / "checking-in-ci.md"


def recipe() -> tuple[str, list[str], str]:
    """The page's ``ACP_TRIO`` value, its ``run:`` steps in order, and the baseline file."""
    text = CI_PAGE.read_text()
    blocks = re.findall(r"<!-- ci-recipe -->\n```yaml\n(.*?)```", text, flags=re.DOTALL)
    steps = [step for block in blocks for step in re.findall(r"^\s+run: (.+)$", block, re.M)]
    (source,) = re.findall(r'^\s+ACP_TRIO: "(.+)"$', blocks[0], flags=re.MULTILINE)
    (baseline,) = re.findall(r"<!-- ci-baseline -->\n```yaml\n(.*?)```", text, flags=re.DOTALL)
    return source, steps, baseline


def test_the_recipe_is_found() -> None:
    source, steps, baseline = recipe()
    assert source.startswith("acp-trio[check] @ git+https://")
    assert steps[0] == 'pip install "$ACP_TRIO"'
    assert any(step.startswith("python -m acp_trio check-agent --strict ") for step in steps)
    assert any(step.startswith("pytest ") and "--acp-agent" in step for step in steps)
    assert "cancel-promptly:" in baseline
    # Every way of installing the page shows is one the test below runs.
    assert "pip install acp-trio\n" not in CI_PAGE.read_text()


def committed_clone(release: Release, where: Path) -> Path:
    """A clone whose HEAD has the working tree (a git URL installs HEAD)."""
    clone = where / "acp_trio.git"
    subprocess.run(["git", "clone", "--quiet", str(release.checkout), str(clone)], check=True)
    for name in subprocess.run(
        ["git", "ls-files", "--modified", "--others", "--exclude-standard"],
        cwd=release.checkout,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split():
        (clone / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(release.checkout / name, clone / name)
    git = ["git", "-c", "user.name=test", "-c", "user.email=test@example.invalid"]
    subprocess.run([*git, "add", "-A"], cwd=clone, check=True)
    subprocess.run(
        [*git, "commit", "--quiet", "--allow-empty", "-m", "working tree"], cwd=clone, check=True
    )
    return clone


@pytest.mark.timeout(1500)
@pytest.mark.parametrize("source", ["wheel", "git"])
def test_each_step_of_the_ci_recipe_runs_in_a_fresh_folder(
    release: Release, tmp_path: Path, source: str
) -> None:
    page_source, steps, baseline = recipe()
    if source == "wheel":
        vendor = tmp_path / "job" / "vendor"
        vendor.mkdir(parents=True)
        shutil.copy2(release.wheel, vendor)
        acp_trio_from = f"./vendor/{release.wheel.name}[check]"
        assert acp_trio_from in CI_PAGE.read_text()  # the page shows this very line
    else:
        clone = committed_clone(release, tmp_path)
        # (file://localhost/...: the pip of a fresh venv wants a host in the URL)
        acp_trio_from = re.sub(r"git\+https://\S+", f"git+file://localhost{clone}", page_source)
    # actions/checkout: the agent's repository (an agent with a known fault, and its baseline).
    job = tmp_path / "job"
    job.mkdir(exist_ok=True)
    agents = release.checkout / "tests" / "testing" / "agents"
    shutil.copy2(agents / "_mini.py", job / "_mini.py")
    shutil.copy2(agents / "stream_after_cancel.py", job / "agent.py")
    (job / "acp-baseline.yaml").write_text(baseline)
    # actions/setup-python: a python (and its pip) first on PATH.
    bin_dir = venv(tmp_path / "python")
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "ACP_TRIO": acp_trio_from,
    }
    env.pop("VIRTUAL_ENV", None)
    env.pop("PYTHONPATH", None)
    for step in steps:
        done = subprocess.run(
            ["bash", "-e", "-c", step],
            cwd=job,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
        assert done.returncode == 0, f"{step}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        if "check-agent" in step:
            assert "expected failure: cancel-promptly" in done.stdout
    where = run([str(bin_dir / "python"), "-c", "import acp_trio; print(acp_trio.__file__)"], job)
    assert Path(where.strip()).is_relative_to(tmp_path / "python")
    results = job / "acp-results"
    assert list(results.glob("check-agent-*.json"))
    assert list(results.glob("check-agent-*.xml"))
    assert (results / "pytest.xml").is_file()
