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

import re
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
    ("--acp-prompt-timeout", {"type": float, "help": "see check-agent --prompt-timeout"}),
    ("--acp-cancel-prompt", {"metavar": "TEXT", "help": "see check-agent --cancel-prompt"}),
    ("--acp-cancel-within", {"type": float, "help": "see check-agent --cancel-within"}),
)

#: check-agent's options, as this plugin names them (for the reasons it shows).
_AS_PLUGIN_OPTION = re.compile(
    r"--(hold-prompt|hold-deadline|timeout|prompt-timeout|init-timeout|cancel-prompt|"
    r"cancel-within|allow-skips|strict|require)\b"
)


def plugin_words(text: str) -> str:
    """``text`` (a reason of check-agent) with its options named as this
    plugin's (``--hold-prompt`` becomes ``--acp-hold-prompt``)."""
    return _AS_PLUGIN_OPTION.sub(lambda m: f"--acp-{m.group(1)}", text)


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
                prompt_timeout=config.getoption("--acp-prompt-timeout"),
                cancel_prompt=config.getoption("--acp-cancel-prompt") or "wait_for_cancel",
                cancel_within=config.getoption("--acp-cancel-within") or 1.0,
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
        # pytest-trio (``trio_mode = true``) reads every item's ``obj`` to
        # find the async test functions; a check is a plain call.
        self.obj = self.runtest

    def runtest(self) -> None:
        report = _report(self.config)
        result = report[self.check]
        counts = report.counts(result)
        reason = plugin_words(result.reason)
        if result.skipped:
            if counts and not report.allow_skips:
                raise AcpCheckFailed(f"required, but could not run: {reason}")
            pytest.skip(reason)
        if result.failed:
            text = "\n".join([reason, *result.evidence])
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

    added: list[pytest.Item] = [
        AcpCheckItem.from_parent(session, name=f"acp-check[{info.name}]", check=info.name)
        for info in CHECKS
    ]
    items.extend(added)
    # Counted as collected (the terminal's "collected N items"), as if found.
    report = pytest.CollectReport("acp-check", "passed", None, list[Any](added))
    session.config.hook.pytest_collectreport(report=report)
