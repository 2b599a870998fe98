"""Suite-wide settings: the tiers, the Hypothesis profiles, and CI's schema rule.

**Tiers** (docs/testing-the-project.md). The default run is everything but:

- ``slow``: tests that measure time or memory under load, or run for
  minutes (the benchmark scripts, attack budgets, installs from the package
  index). Skipped unless ``--run-slow`` (``make test-slow``).
- ``typecheck``: tests that run ``mypy --strict`` on code outside the
  package (the README's and the guides' blocks). Skipped unless
  ``--run-typecheck`` (``make typecheck``, beside its own mypy step).

**Hypothesis profiles**: ``dev`` (the default), ``ci`` (with ``CI=true``) and
``deep``; ``HYPOTHESIS_PROFILE`` chooses one. A test with no budget of its
own runs the profile's ``max_examples``; a test that sets one writes it as
``examples(N)`` (``tests/budget.py``): N in CI, a fifth of it locally, ten
times it in ``deep``.

**CI's schema rule**: with ``CI=true``, the upstream schema beside the
checkout is required (``../shared/acp-schema``), so the drift and schema tests
cannot quietly skip in CI; elsewhere they skip, visibly, when it is absent.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

SCHEMA = Path(__file__).resolve().parents[1].parent / "shared" / "acp-schema" / "v1" / "schema.json"

#: Marker -> (option that runs it, where it runs).
TIERS = {
    "slow": ("--run-slow", "make test-slow"),
    "typecheck": ("--run-typecheck", "make typecheck"),
}

# Timing is never the assertion: no per-example deadline, and no health
# check that fails a test because the machine was busy.
_UNTIMED = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow]}
settings.register_profile("dev", max_examples=20, **_UNTIMED)
settings.register_profile("ci", max_examples=100, print_blob=True, **_UNTIMED)
settings.register_profile("deep", max_examples=1000, print_blob=True, **_UNTIMED)


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() == "true"


PROFILE = os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if _in_ci() else "dev")
settings.load_profile(PROFILE)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("acp_trio tiers")
    group.addoption(
        "--run-slow",
        action="store_true",
        help="also run the slow tier (time or memory under load: `make test-slow`)",
    )
    group.addoption(
        "--run-typecheck",
        action="store_true",
        help="also run mypy on the README's and guides' code (`make typecheck`)",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for marker, (option, target) in TIERS.items():
        if config.getoption(option):
            continue
        skip = pytest.mark.skip(reason=f"{marker} tier: run by `{target}` ({option})")
        for item in items:
            if marker in item.keywords:
                item.add_marker(skip)


def pytest_report_header(config: pytest.Config) -> str:
    return f"hypothesis profile: {PROFILE} (max_examples {settings.default.max_examples})"


def pytest_sessionstart(session: pytest.Session) -> None:
    if _in_ci() and not SCHEMA.is_file():
        raise pytest.UsageError(
            f"CI=true but the upstream schema is missing at {SCHEMA}: the drift and schema"
            " tests would be skipped (put ../shared beside the checkout, or unset CI)"
        )
