"""What the eager-handler tests share: the task tree, seen from inside."""

from __future__ import annotations

from collections import Counter
from contextvars import ContextVar

import pytest
import trio
import trio.lowlevel

READER = "acp reader"
HANDLER = "acp handler"

both_ways = pytest.mark.parametrize("eager", [True, False], ids=["eager", "tasks"])

_var: ContextVar[str] = ContextVar("test_eager_var", default="unset")


def all_tasks() -> list[trio.lowlevel.Task]:
    """Every task of the run, right now."""

    def walk(task: trio.lowlevel.Task) -> list[trio.lowlevel.Task]:
        found = [task]
        for nursery in task.child_nurseries:
            for child in nursery.child_tasks:
                found += walk(child)
        return found

    root = trio.lowlevel.current_root_task()
    assert root is not None
    return walk(root)


def task_names() -> Counter[str]:
    return Counter(t.name for t in all_tasks())


def this_task() -> trio.lowlevel.Task:
    return trio.lowlevel.current_task()
