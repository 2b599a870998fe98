"""``CI=true`` without the pinned schema package stops the run before any
test (instead of skipping the schema drift tests)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests import conftest


@pytest.mark.parametrize(
    ("ci", "present", "stops"), [("true", False, True), ("", False, False), ("true", True, False)]
)
def test_a_missing_schema_package_stops_a_ci_run(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, ci: str, present: bool, stops: bool
) -> None:
    schema = tmp_path / "schema.json"
    if present:
        schema.write_text("{}")
    monkeypatch.setattr(conftest, "PACKAGE", schema)
    monkeypatch.setenv("CI", ci)
    session: Any = None
    if stops:
        with pytest.raises(pytest.UsageError, match="pinned schema package is missing"):
            conftest.pytest_sessionstart(session)
    else:
        conftest.pytest_sessionstart(session)


def test_the_path_is_the_generators() -> None:
    # The conftest names the package where the generator reads it.
    from tests.schema._schema_data import generator

    generator()
    from schemagen.source import FILES, PACKAGE_DIR  # type: ignore[import-not-found]

    assert PACKAGE_DIR / "schema" / FILES["v1"] == conftest.PACKAGE
