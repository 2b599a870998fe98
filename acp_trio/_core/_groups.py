"""No ``ExceptionGroup`` escapes a public call.

Trio nurseries wrap every error in an exception group, even a single one.
The nurseries inside acp_trio are an implementation detail, so every public
function and context manager that opens one unwraps it with
:func:`plain_exceptions`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import trio

from acp_trio._exceptions import ConnectionClosed

__all__ = ["collapse_group", "plain_exceptions", "single_leaf"]


def single_leaf(exc: BaseException) -> BaseException:
    """Unwrap groups of exactly one exception."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


def collapse_group(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The one exception to raise instead of ``group``: its only leaf, or its
    only leaf that is not a ``trio.Cancelled``, or else the only one that is
    not a :class:`ConnectionClosed` either (when a connection fails, the
    calls in flight fail with ``ConnectionClosed``: consequences of the one
    error that ended it), or else the first ``ConnectionClosed`` if that is
    all there is. Otherwise (independent errors) the group itself."""
    leaves: list[BaseException] = []

    def walk(exc: BaseException) -> None:
        if isinstance(exc, BaseExceptionGroup):
            for inner in exc.exceptions:
                walk(inner)
        else:
            leaves.append(exc)

    walk(group)
    if len(leaves) == 1:
        return leaves[0]
    non_cancel = [e for e in leaves if not isinstance(e, trio.Cancelled)]
    if len(non_cancel) == 1:
        return non_cancel[0]
    causes = [e for e in non_cancel if not isinstance(e, ConnectionClosed)]
    if len(causes) == 1:
        return causes[0]
    if not causes and non_cancel:
        return non_cancel[0]
    return group


@contextmanager
def plain_exceptions() -> Iterator[None]:
    """Re-raise a group that holds one real error as that error."""
    try:
        yield
    except BaseExceptionGroup as group:
        collapsed = collapse_group(group)
        if collapsed is group:
            raise
        raise collapsed from collapsed.__cause__
