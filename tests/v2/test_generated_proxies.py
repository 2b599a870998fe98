"""The committed v2 proxies are what ``tools/gen_v2_proxies.py`` makes from
the v2 schema now, and the typed-usage module imports."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = ROOT.parent / "shared" / "acp-schema" / "v2" / "schema.json"


def load_generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "gen_v2_proxies", ROOT / "tools" / "gen_v2_proxies.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(not SCHEMA.is_file(), reason=f"the v2 schema is not at {SCHEMA}")
def test_the_committed_v2_proxies_match_a_fresh_run() -> None:
    generator = load_generator()
    fresh = generator.generate(SCHEMA)
    committed = (ROOT / "acp_trio" / "v2" / "_generated_proxies.py").read_text()
    assert committed == fresh, "stale: run python tools/gen_v2_proxies.py"


def test_the_typed_usage_module_imports() -> None:
    spec = importlib.util.spec_from_file_location(
        "v2_usage", ROOT / "tests" / "typed_usage" / "v2_usage.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    agent = module.UsageAgent()
    assert agent.info.name == "acp_trio"
