"""``pytest --acp-agent "CMD"``: the agent checks as pytest test items.

One item per check (``acp-check[session-cancel]``, ...), so a CI job gets
the verdicts in its usual report and in ``--junitxml``. The checks run once,
on the first item, with the options below; each item then reports its
check: PASS passes; FAIL fails (with the reason and the wire lines) when the
check counts as required under the options, else passes with a warning;
SKIP skips with its reason, except a required check that could not run,
which fails unless ``--acp-allow-skips`` (the command line's INCOMPLETE).
"""

from __future__ import annotations

import shlex
import warnings
from typing import Any

import pytest

OPTIONS = (
    ("--acp-agent", {"metavar": "CMD", "help": "run the ACP agent checks against CMD"}),
    ("--acp-strict", {"action": "store_true", "help": "count recommended/cancellation checks"}),
    ("--acp-require", {"metavar": "GROUPS", "help": "levels to count as required (a,b)"}),
    ("--acp-allow-skips", {"action": "store_true", "help": "a required check may skip"}),
    ("--acp-hold-prompt", {"metavar": "TEXT", "help": "see check-agent --hold-prompt"}),
    ("--acp-hold-deadline", {"type": float, "help": "see check-agent --hold-deadline"}),
    ("--acp-timeout", {"type": float, "default": 5.0, "help": "seconds per wait (5)"}),
)

_REPORT = pytest.StashKey[Any]()


class AcpCheckWarning(UserWarning):
    """A check that does not count as required failed."""


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("acp", "ACP conformance (acp_trio)")
    for name, kwargs in OPTIONS:
        group.addoption(name, **kwargs)


def _report(config: pytest.Config) -> Any:
    """Run the checks once per session (on the first item that asks)."""
    if _REPORT not in config.stash:
        import trio

        from acp_trio.testing import check_agent

        require = config.getoption("--acp-require") or ""

        async def run() -> Any:
            return await check_agent(
                shlex.split(config.getoption("--acp-agent")),
                strict=config.getoption("--acp-strict"),
                require=[g.strip() for g in require.split(",") if g.strip()],
                allow_skips=config.getoption("--acp-allow-skips"),
                hold_prompt=config.getoption("--acp-hold-prompt"),
                hold_deadline=config.getoption("--acp-hold-deadline"),
                timeout=config.getoption("--acp-timeout"),
            )

        config.stash[_REPORT] = trio.run(run)
    return config.stash[_REPORT]


class AcpCheckFailed(Exception):
    """A required check failed (the message has the reason and the wire)."""


class AcpCheckItem(pytest.Item):
    """One check of ``check_agent`` as a test item."""

    def __init__(self, *, check: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.check = check

    def runtest(self) -> None:
        report = _report(self.config)
        result = report[self.check]
        counts = report.counts(result)
        if result.skipped:
            if counts and not report.allow_skips:
                raise AcpCheckFailed(f"required, but could not run: {result.reason}")
            pytest.skip(result.reason)
        if result.failed:
            text = "\n".join([result.reason, *result.evidence])
            if counts:
                raise AcpCheckFailed(text)
            message = f"{self.check} ({result.level.value}): {text}"
            warnings.warn(AcpCheckWarning(message), stacklevel=2)

    def repr_failure(self, excinfo: Any, style: Any = None) -> Any:
        if isinstance(excinfo.value, AcpCheckFailed):
            return f"{self.check}: {excinfo.value}"
        return super().repr_failure(excinfo)

    def reportinfo(self) -> tuple[Any, int | None, str]:
        return self.path, None, f"acp-check[{self.check}]"


def add_items(session: pytest.Session, items: list[pytest.Item]) -> None:
    """Append one item per check when ``--acp-agent`` is given."""
    if not session.config.getoption("--acp-agent"):
        return
    from acp_trio.testing import CHECKS

    for info in CHECKS:
        items.append(
            AcpCheckItem.from_parent(session, name=f"acp-check[{info.name}]", check=info.name)
        )
