"""Suite-wide: with ``CI=true``, the upstream schema beside the checkout is
required (``../shared/acp-schema``), so the drift and schema tests cannot
quietly skip in CI; elsewhere they skip, visibly, when it is absent."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

SCHEMA = Path(__file__).resolve().parents[1].parent / "shared" / "acp-schema" / "v1" / "schema.json"


def pytest_sessionstart(session: pytest.Session) -> None:
    if os.environ.get("CI", "").lower() == "true" and not SCHEMA.is_file():
        raise pytest.UsageError(
            f"CI=true but the upstream schema is missing at {SCHEMA}: the drift and schema"
            " tests would be skipped (put ../shared beside the checkout, or unset CI)"
        )
