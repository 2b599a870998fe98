"""Hypothesis budgets that follow the loaded profile (``tests/conftest.py``).

``examples(400)`` is 400 examples in CI's profile (``ci``: 100 for a test
with no budget of its own), a fifth of that in ``dev`` (the default, for
the inner loop) and ten times it in ``deep``: each test keeps its weight
relative to the others, and the profile sets the depth of the whole run.
"""

from __future__ import annotations

from hypothesis import settings

#: The ``max_examples`` of the ``ci`` profile: budgets are written for it.
CI_EXAMPLES = 100


def examples(in_ci: int) -> int:
    """The loaded profile's share of a budget of ``in_ci`` examples in CI."""
    return max(10, in_ci * settings.default.max_examples // CI_EXAMPLES)
