"""``CI=true`` without the upstream schema stops the run before any test
(instead of skipping the drift and schema tests)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests import conftest


@pytest.mark.parametrize(
    ("ci", "present", "stops"), [("true", False, True), ("", False, False), ("true", True, False)]
)
def test_missing_schema_stops_a_ci_run(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, ci: str, present: bool, stops: bool
) -> None:
    schema = tmp_path / "schema.json"
    if present:
        schema.write_text("{}")
    monkeypatch.setattr(conftest, "SCHEMA", schema)
    monkeypatch.setenv("CI", ci)
    session: Any = None
    if stops:
        with pytest.raises(pytest.UsageError, match="upstream schema is missing"):
            conftest.pytest_sessionstart(session)
    else:
        conftest.pytest_sessionstart(session)
