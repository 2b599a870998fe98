"""Run a coroutine in the current task until it first blocks.

The connection's reader runs each incoming request's handler itself, at once,
instead of starting a task for it: most handlers answer without ever waiting
(a file read from memory, a permission already decided), and for those the
task start, its cancel scope and the extra pass of the scheduler are most of
the cost of a round trip. But a handler that waits must not hold up reading.

:func:`run_eagerly` is the bridge. It steps the handler's coroutine by hand;
if the coroutine finishes without yielding to Trio, that is the whole story.
At its first yield (any checkpoint: a wait, a sleep, ``checkpoint()``) it
calls ``on_block()`` *before* the yield reaches Trio, so the caller can hand
its other duties (reading) to a new task, and from then on it relays every
value and exception between Trio and the coroutine exactly as ``await`` would:
the coroutine keeps running in this task, under this task's cancel scopes.
"""

from __future__ import annotations

import contextvars
import types
from collections.abc import Callable, Coroutine, Generator
from typing import Any, TypeVar

__all__ = ["run_eagerly"]

T = TypeVar("T")


@types.coroutine
def run_eagerly(
    coro: Coroutine[Any, Any, T],
    on_block: Callable[[], None],
    context: contextvars.Context,
) -> Generator[Any, Any, T]:
    """``await run_eagerly(coro, on_block, context)`` is ``await coro``, except
    that ``on_block()`` is called once, just before ``coro`` first suspends
    (never, if it finishes first), and that ``coro`` runs in ``context`` (a
    copy of the caller's, as a new task would have: what the handler sets in
    context variables stays its own)."""
    run = context.run
    try:
        trap = run(coro.send, None)
    except StopIteration as stop:
        result: T = stop.value
        return result
    on_block()  # must not raise: the coroutine is suspended mid-way
    while True:
        try:
            sent = yield trap
        except GeneratorExit:
            run(coro.close)
            raise
        except BaseException as exc:  # delivered by Trio (Cancelled, KeyboardInterrupt)
            try:
                trap = run(coro.throw, exc)
            except StopIteration as stop:
                result = stop.value
                return result
        else:
            try:
                trap = run(coro.send, sent)
            except StopIteration as stop:
                result = stop.value
                return result
