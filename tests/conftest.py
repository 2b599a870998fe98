"""Suite-wide settings: the tiers, the Hypothesis profiles, and CI's schema rule.

**Tiers** (docs/testing-the-project.md). The default run is everything but:

- ``slow``: tests that measure time or memory under load, or run for
  minutes (the benchmark scripts, attack budgets, installs from the package
  index). Skipped unless ``--run-slow`` (``make test-slow``).
- ``typecheck``: tests that run ``mypy --strict`` on code outside the
  package (the README's and the guides' blocks). Skipped unless
  ``--run-typecheck`` (``make typecheck``, beside its own mypy step).

And ``process`` (tests that start processes or wait on their timing: every
test in :data:`PROCESS_FOLDERS` and :data:`PROCESS_MODULES`, and others
marked by hand), in the default run but not in ``make check``'s fast one.

**Hypothesis profiles**: ``dev`` (the default), ``ci`` (with ``CI=true``) and
``deep``; ``HYPOTHESIS_PROFILE`` chooses one. A test with no budget of its
own runs the profile's ``max_examples``; a test that sets one writes it as
``examples(N)`` (``tests/budget.py``): N in CI, a fifth of it locally, ten
times it in ``deep``.

**CI's schema rule**: with ``CI=true``, the pinned ``@agentclientprotocol/sdk``
npm package (``make`` installs it into ``tests/interop/node_modules``; it needs
npm) is required, so the schema drift tests, which compare the committed
generated files with it, cannot quietly skip in CI; elsewhere they skip,
visibly, when it is absent. Every other schema test reads the structural
schema the package ships, which every checkout has.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

PACKAGE = (
    Path(__file__).resolve().parent
    / "interop"
    / "node_modules"
    / "@agentclientprotocol"
    / "sdk"
    / "schema"
    / "v1"
    / "schema.json"
)

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


# When a Hypothesis test fails, its pytest plugin imports hypothesis.extra._patching
# to suggest a patch; pytest rewrites that module on import, and on CPython
# 3.11.7 its ast.parse can fail there with "SystemError: AST constructor
# recursion depth mismatch", which kills the xdist worker and hides the real
# failure. Without the patch suggestion the failure is reported as usual.
sys.modules.setdefault("hypothesis.extra._patching", None)


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


#: Folders whose tests start processes or wait on their timing: every test in
#: them is marked ``process`` (left out of ``make check``'s fast run only).
PROCESS_FOLDERS = frozenset(
    {"hardening", "interop", "remote", "otel", "proxies", "examples", "transports"}
)
#: Modules elsewhere that start processes (check-agent and check-client runs,
#: pytest and mypy in subprocesses, the README's and guides' programs).
PROCESS_MODULES = frozenset(
    {
        "testing/test_check_agent.py",
        "testing/test_check_client.py",
        "testing/test_check_hold.py",
        "testing/test_check_kit.py",
        "testing/test_check_verdicts.py",
        "testing/test_plugin.py",
        "testing/test_plugin_conformance.py",
        "testing/test_real_agents.py",
        "testing/test_trace.py",
        "v2/test_check_v2.py",
        "typed/test_subprocess.py",
        "test_guides.py",
        "test_readme.py",
    }
)
TESTS = Path(__file__).resolve().parent


def _starts_processes(item: pytest.Item) -> bool:
    parts = item.path.relative_to(TESTS).parts
    return (len(parts) > 1 and parts[0] in PROCESS_FOLDERS) or "/".join(parts) in PROCESS_MODULES


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if _starts_processes(item):
            item.add_marker(pytest.mark.process)
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
    if _in_ci() and not PACKAGE.is_file():
        raise pytest.UsageError(
            f"CI=true but the pinned schema package is missing at {PACKAGE}: the schema drift"
            " tests would be skipped (run `make tests/interop/node_modules/.installed`, which"
            " needs npm, or unset CI)"
        )
