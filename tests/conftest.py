"""Suite-wide: with ``CI=true``, the pinned ``@agentclientprotocol/sdk``
npm package (``make`` installs it into ``tests/interop/node_modules``; it
needs npm) is required, so the schema drift tests, which compare the
committed generated files with it, cannot quietly skip in CI; elsewhere they
skip, visibly, when it is absent. Every other schema test reads the
structural schema the package ships, which every checkout has."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

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


def pytest_sessionstart(session: pytest.Session) -> None:
    if os.environ.get("CI", "").lower() == "true" and not PACKAGE.is_file():
        raise pytest.UsageError(
            f"CI=true but the pinned schema package is missing at {PACKAGE}: the schema drift"
            " tests would be skipped (run `make tests/interop/node_modules/.installed`, which"
            " needs npm, or unset CI)"
        )
