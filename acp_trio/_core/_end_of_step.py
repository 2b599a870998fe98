"""Work owed at the end of the current task step.

Trio runs a task in steps: from the moment it is resumed to its next trap.
Its one hook at the end of a step is an instrument's ``after_task_step``.
An installed instrument costs every task step of the run a call (about
0.45 µs on the 2-core machine, a quarter of a bare step), so
:class:`EndOfStep` is in the run only from the first :meth:`EndOfStep.defer`
of a step to the end of that step: it pays what is owed and takes itself
out (adding and removing it costs about 1.3 µs).

The read right uses it: a caller that got its reply frees the right, and
the reader is woken only if the caller's step ends without the caller
taking the right again for its next call (see ``_read_right.py``).
"""

from __future__ import annotations

from collections.abc import Callable

import trio

__all__ = ["EndOfStep"]


class EndOfStep(trio.abc.Instrument):
    """Calls owed at the end of the current task step, in the order owed."""

    __slots__ = ("_installed", "_owed")

    def __init__(self) -> None:
        self._owed: list[Callable[[], object]] = []
        self._installed = False

    def __dir__(self) -> list[str]:
        # trio.lowlevel.add_instrument finds the hooks an instrument has by
        # dir(): only this one (the default dir() makes adding it 7x dearer).
        return ["after_task_step"]

    @property
    def installed(self) -> bool:
        """Whether the instrument is in the run now (something is owed)."""
        return self._installed

    def defer(self, fn: Callable[[], object]) -> None:
        """Call ``fn`` when the current task step ends (from a task step,
        in a run).

        ``fn`` runs inside Trio's run loop and must not call this method.
        If one raises, the others owed are still called, and Trio takes the
        instrument out and logs the error."""
        self._owed.append(fn)
        if not self._installed:
            trio.lowlevel.add_instrument(self)
            self._installed = True

    def after_task_step(self, task: trio.lowlevel.Task) -> None:
        owed, self._owed = self._owed, []
        self._installed = False
        error: BaseException | None = None
        for fn in owed:
            try:
                fn()
            except BaseException as exc:  # (the rest is still paid)
                error = exc
        if error is not None:
            raise error  # (Trio takes the instrument out, and logs this)
        trio.lowlevel.remove_instrument(self)
