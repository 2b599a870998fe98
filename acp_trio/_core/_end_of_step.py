"""Work owed at the end of the current task step.

Trio runs a task in steps: from the moment it is resumed to its next trap.
Its one hook at the end of a step is an instrument's ``after_task_step``;
:class:`EndOfStep` is that instrument, one per run, installed while some
part of the SDK uses it (:meth:`EndOfStep.attach` to
:meth:`EndOfStep.detach`). Installed, it costs every task step of the run
one call that finds nothing owed (a few percent of an empty step's cost;
``benchmarks/bench_sdks.py`` measures the read path it serves).

The read right uses it: a caller that got its reply frees the right, and
the reader is woken only if the caller's step ends without the caller
taking the right again for its next call (see ``_read_right.py``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import trio
from trio.lowlevel import RunVar

__all__ = ["EndOfStep", "end_of_step"]

_RUN: RunVar[EndOfStep] = RunVar("acp_trio.end_of_step")


class EndOfStep(trio.abc.Instrument):
    """Calls owed at the end of the current task step, in the order owed."""

    __slots__ = ("_installed", "_owed", "_users")

    def __init__(self) -> None:
        self._owed: list[Callable[[], object]] = []
        self._users = 0
        self._installed = False

    @property
    def installed(self) -> bool:
        """Whether the instrument is in the run now."""
        return self._installed

    def attach(self) -> None:
        """One more user: installed while there is any."""
        self._users += 1
        if not self._installed:
            trio.lowlevel.add_instrument(self)
            self._installed = True

    def detach(self) -> None:
        """One user fewer; the last one takes the instrument out, first
        paying what is owed (nothing owed is ever dropped)."""
        self._users -= 1
        if self._users <= 0 and self._installed:
            self._users = 0
            self._pay()
            self._installed = False
            # (Already out, or the run is over.)
            with contextlib.suppress(KeyError, RuntimeError):
                trio.lowlevel.remove_instrument(self)

    def defer(self, fn: Callable[[], object]) -> None:
        """Call ``fn`` when the current task step ends (attached only).

        ``fn`` must not raise: it runs inside Trio's run loop."""
        if not self._installed:
            if self._users <= 0:
                raise RuntimeError("EndOfStep.defer() needs attach() first")
            # (Trio took it out after an owed call raised: back in.)
            trio.lowlevel.add_instrument(self)
            self._installed = True
        self._owed.append(fn)

    def after_task_step(self, task: trio.lowlevel.Task) -> None:
        if self._owed:
            self._pay()

    def _pay(self) -> None:
        owed, self._owed = self._owed, []
        error: BaseException | None = None
        for fn in owed:
            try:
                fn()
            except BaseException as exc:  # (the rest is still paid)
                error = exc
        if error is not None:
            # Trio takes out an instrument that raises, and logs the error:
            # the next defer() puts it back.
            self._installed = False
            raise error


def end_of_step() -> EndOfStep:
    """The current run's :class:`EndOfStep` (made on first use)."""
    try:
        return _RUN.get()
    except LookupError:
        hook = EndOfStep()
        _RUN.set(hook)
        return hook
