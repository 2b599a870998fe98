"""The committed generated files are exactly what the generator writes today.

Two sources: the structural schemas the package ships (every checkout has
them: the modules must be what they make), and the pinned
``@agentclientprotocol/sdk`` npm package they come from (the drift tests:
skipped, saying why, without npm's install; ``CI=true`` requires it, see
``tests/conftest.py``). Also checks the banners, and that no description
prose from the schema reached the package.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from ._schema_data import FLAVOURS, REPO_ROOT, SCHEMA_DIR, generator, load

OUT_DIR = REPO_ROOT / "acp_trio"


def _package() -> Any:
    generator()  # puts tools/ on sys.path
    import schemagen.source  # type: ignore[import-not-found]

    return schemagen.source


SOURCE = _package()
PINNED = SOURCE.pinned_version()
HAVE_PACKAGE = (SOURCE.PACKAGE_DIR / "package.json").is_file()
needs_package = pytest.mark.skipif(
    not HAVE_PACKAGE,
    reason=f"the pinned {SOURCE.PACKAGE} {PINNED} is not installed (npm is needed: make "
    "tests/interop/node_modules/.installed); CI=true requires it",
)


def generated_files() -> list[Path]:
    """Every generated file: v1's and v2's modules, the v2 proxies, the structural schemas."""
    return sorted(
        [
            *OUT_DIR.glob("schema/_generated_*.py"),
            *OUT_DIR.glob("schema/v2/_generated_*.py"),
            *OUT_DIR.glob("v2/_generated_*.py"),
            *OUT_DIR.glob("schema/json/*/*.json"),
        ]
    )


def committed() -> dict[str, str]:
    return {
        p.relative_to(OUT_DIR).as_posix(): p.read_text(encoding="utf-8") for p in generated_files()
    }


def stale(fresh: dict[str, str]) -> list[str]:
    current = committed()
    assert sorted(fresh) == sorted(current), "generated file set changed"
    return [name for name, text in fresh.items() if current[name] != text]


def test_the_modules_are_what_the_shipped_schemas_make() -> None:
    gen = generator()
    fresh: dict[str, str] = gen.generate_all(gen.build_parser().parse_args(["--from-shipped"]))
    assert not stale(fresh), "stale generated files: run `make regen`"


@needs_package
def test_the_committed_files_are_what_the_pinned_package_makes() -> None:
    gen = generator()
    fresh: dict[str, str] = gen.generate_all(gen.build_parser().parse_args([]))
    assert not stale(fresh), f"stale generated files: run `make regen` ({SOURCE.PACKAGE} {PINNED})"


@needs_package
def test_the_installed_package_is_the_pinned_one() -> None:
    assert SOURCE.package_version(SOURCE.PACKAGE_DIR) == PINNED
    lock = json.loads((SOURCE.NPM_PROJECT / "package-lock.json").read_text(encoding="utf-8"))
    assert lock["packages"][f"node_modules/{SOURCE.PACKAGE}"]["version"] == PINNED


def test_generation_is_deterministic() -> None:
    gen = generator()
    args = gen.build_parser().parse_args(["--from-shipped", "--no-unstable"])
    assert gen.generate_all(args) == gen.generate_all(args)


def test_check_mode_and_options(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    gen = generator()
    assert gen.main(["--check", "--from-shipped"]) == 0
    # a user regenerating into another folder
    assert gen.main(["--from-shipped", "--out", str(tmp_path)]) == 0
    for name in (
        "schema/_generated_types.py",
        "v2/_generated_proxies.py",
        "schema/json/v1/schema.json",
    ):
        assert (tmp_path / name).read_text() == (OUT_DIR / name).read_text()
    assert (
        gen.main(["--check", "--from-shipped", "--out", str(tmp_path), "--schema-version", "9"])
        == 1
    )
    assert "stale generated files" in capsys.readouterr().err
    with pytest.raises(SystemExit, match="exclude each other"):
        gen.main(["--from-shipped", "--package", str(tmp_path)])


def test_a_missing_or_wrong_package_is_a_clear_error(tmp_path: Path) -> None:
    gen = generator()
    with pytest.raises(SystemExit, match=r"is not installed at .*npm.*--from-shipped"):
        gen.main(["--check", "--package", str(tmp_path / "nowhere")])
    (tmp_path / "package.json").write_text(json.dumps({"name": "left-pad", "version": "1.0.0"}))
    with pytest.raises(SystemExit, match=r"is 'left-pad', not @agentclientprotocol/sdk"):
        gen.main(["--check", "--package", str(tmp_path)])
    (tmp_path / "package.json").write_text(json.dumps({"name": SOURCE.PACKAGE, "version": "9.9.9"}))
    with pytest.raises(SystemExit, match=r"9\.9\.9 has no schema/v1/schema\.json"):
        gen.main(["--check", "--package", str(tmp_path)])


def test_another_package_release_regenerates_with_its_version(tmp_path: Path) -> None:
    # What `make schema-update VERSION=...` does after npm: the package of
    # that release, read from its folder, labels every file with it.
    package = tmp_path / "sdk"
    for name in SOURCE.FILES.values():
        (package / "schema" / name).parent.mkdir(parents=True, exist_ok=True)
        schema = json.loads((SCHEMA_DIR / name).read_text(encoding="utf-8"))
        (package / "schema" / name).write_text(json.dumps(schema), encoding="utf-8")
    (package / "package.json").write_text(json.dumps({"name": SOURCE.PACKAGE, "version": "9.1.0"}))
    gen = generator()
    assert gen.main(["--package", str(package), "--out", str(tmp_path / "out")]) == 0
    types = (tmp_path / "out" / "schema" / "_generated_types.py").read_text()
    assert "ACP schema @agentclientprotocol/sdk@9.1.0 (v1/schema.json)" in types
    shipped = json.loads((tmp_path / "out" / "schema" / "json" / "v2" / "schema.json").read_text())
    assert shipped["x-source"] == "@agentclientprotocol/sdk@9.1.0"


@pytest.mark.parametrize("path", generated_files(), ids=lambda p: p.relative_to(OUT_DIR).as_posix())
def test_banner(path: Path) -> None:
    head = path.read_text(encoding="utf-8")[:600]
    label = f"@agentclientprotocol/sdk@{PINNED}"
    if path.suffix == ".json":
        schema = json.loads(path.read_text(encoding="utf-8"))
        assert schema["x-source"] == label
        assert "Generated by tools/gen_schema.py" in schema["$comment"]
        return
    assert f"Generated by tools/gen_schema.py from ACP schema {label}" in head
    assert "make regen" in head
    assert "make schema-update VERSION=X" in head


def descriptions(node: Any, out: set[str], *, in_properties: bool = False) -> None:
    """Every ``description`` keyword (not a property that happens to be called so)."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "description" and isinstance(value, str) and not in_properties:
                out.add(value)
            descriptions(value, out, in_properties=key == "properties" and not in_properties)
    elif isinstance(node, list):
        for value in node:
            descriptions(value, out)


def test_the_shipped_schemas_have_no_prose() -> None:
    for flavour in FLAVOURS:
        texts: set[str] = set()
        descriptions(load(flavour), texts)
        assert not texts, flavour
    # ... but a property that is called "description" is still there.
    assert "description" in load("unstable")["$defs"]["SubagentUpdate"]["properties"]


@needs_package
def test_no_description_prose_is_copied() -> None:
    texts: set[str] = set()
    _, schemas = SOURCE.read_package()
    for schema in schemas.values():
        descriptions(schema, texts)
    fragments = {line.strip() for t in texts for line in t.splitlines() if len(line.strip()) >= 30}
    assert len(fragments) > 100
    for path in generated_files():
        source = path.read_text(encoding="utf-8")
        leaked = [f for f in fragments if f in source]
        assert not leaked, f"{path.name} copies schema prose: {leaked[:3]}"


@needs_package
def test_the_structural_schemas_validate_as_the_published_ones() -> None:
    # Same verdicts on every instance the roundtrip tests build, and on a
    # broken copy of each: leaving the prose out changed no rule.
    from jsonschema import Draft202012Validator

    from ._schema_data import Builder

    _, published = SOURCE.read_package()
    names = {"stable": "v1", "unstable": "v1-unstable", "v2": "v2", "v2-unstable": "v2-unstable"}
    for flavour in FLAVOURS:
        full = published[names[flavour]]
        shipped = load(flavour)
        checked = 0
        for name in list(full["$defs"])[::7]:
            ref = {"$ref": f"#/$defs/{name}"}
            a = Draft202012Validator({**ref, "$defs": full["$defs"]})
            b = Draft202012Validator({**ref, "$defs": shipped["$defs"]})
            for instance in Builder(flavour).instances(name):
                for probe in (instance, {"broken": [instance]}, 12345):
                    assert a.is_valid(probe) == b.is_valid(probe), (flavour, name, probe)
                    checked += 1
        assert checked > 50, flavour


def test_the_schema_pages_commands_exist() -> None:
    # docs/schema.md's commands: the make targets (dry run) and the generator's option.
    page = (REPO_ROOT / "docs" / "schema.md").read_text()
    (block,) = re.findall(r"```sh\n(.*?)```", page, flags=re.DOTALL)
    lines = [line.split("#", 1)[0].strip() for line in block.splitlines() if line.strip()]
    assert lines == [
        "make regen",
        "make schema-update VERSION=2.5.0",
        "python tools/gen_schema.py --check",
    ]
    if shutil.which("make") is None:
        pytest.skip("make is not installed: the page's commands run through it")
    for line in lines[:2]:
        dry = subprocess.run(
            [*line.split(), "-n"], cwd=REPO_ROOT, capture_output=True, text=True, check=False
        )
        assert dry.returncode == 0, dry.stderr
        assert "tools/gen_schema.py" in dry.stdout
    assert (
        "@agentclientprotocol/sdk@2.5.0"
        in subprocess.run(
            ["make", "-n", "schema-update", "VERSION=2.5.0"],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
