"""The ``backend`` fixture: each test runs once per JSON backend."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from acp_trio._jsonrpc._messages import json_backend, use_json_backend
from jsonrpc.json_cases import needs_orjson


@pytest.fixture(params=[pytest.param("orjson", marks=needs_orjson), "stdlib"])
def backend(request: pytest.FixtureRequest) -> Iterator[str]:
    """Run the test under one backend, then restore the one in use before."""
    previous = json_backend()
    use_json_backend(request.param)
    try:
        yield request.param
    finally:
        use_json_backend(previous)
