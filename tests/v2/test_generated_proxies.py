"""The typed-usage module of the v2 proxies imports (that the committed
proxies are what ``tools/gen_schema.py`` makes now is checked with every
generated module, in ``tests/schema/test_generated.py``)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


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
