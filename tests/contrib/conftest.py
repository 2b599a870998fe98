"""Shared helpers of the ``acp_trio.contrib`` tests: in-memory, autojump clock."""

from __future__ import annotations

import pytest
import trio.testing

#: Virtual seconds an in-memory test may take.
LIMIT = 600


@pytest.fixture
def autojump_clock() -> trio.testing.MockClock:
    return trio.testing.MockClock(autojump_threshold=0)
