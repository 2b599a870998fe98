"""CPU time of a process and everything it spawned, over a span: what a
round trip costs every process on its path, on a busy machine too.

The kernel counts, per thread, the nanoseconds it ran on a CPU and the
nanoseconds it was runnable but waited for one (``/proc/PID/task/TID/
schedstat``). Summed over a process tree between two snapshots, the first is
the CPU the work took (other processes' load changes it only through cold
caches), the second how much the machine's load added to the wall time.
Linux only; elsewhere the snapshots are empty.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import NamedTuple


class Snapshot(NamedTuple):
    """Per process of the tree: (name, ns on a CPU, ns waiting for one)."""

    processes: dict[int, tuple[str, int, int]]


def _children(pid: int) -> list[int]:
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*/children"):
        with contextlib.suppress(OSError):
            out += [int(child) for child in task.read_text().split()]
    return out


def _name(pid: int) -> str:
    """The process's script or module (``-m acp_trio conduct``: ``conduct``)."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return str(pid)
    words = [w.decode(errors="replace") for w in argv if w]
    for i, word in enumerate(words[1:], start=1):
        if word == "-m" and i + 1 < len(words):
            rest = words[i + 2 : i + 3]
            return rest[0] if rest and not rest[0].startswith("-") else words[i + 1]
        if word.endswith((".py", ".mjs", ".js")):
            return os.path.basename(word)
        if word == "-c":
            return "python -c"
    return os.path.basename(words[0]) if words else str(pid)


def _times(pid: int) -> tuple[int, int]:
    run = wait = 0
    for stat in Path(f"/proc/{pid}/task").glob("*/schedstat"):
        try:
            fields = stat.read_text().split()
        except OSError:
            continue
        run += int(fields[0])
        wait += int(fields[1])
    return run, wait


def snapshot(root: int | None = None) -> Snapshot:
    """Every process of the tree under ``root`` (this process by default)."""
    if not Path("/proc/self/task").is_dir():
        return Snapshot({})
    pending = [os.getpid() if root is None else root]
    processes: dict[int, tuple[str, int, int]] = {}
    while pending:
        pid = pending.pop()
        run, wait = _times(pid)
        processes[pid] = (_name(pid), run, wait)
        pending += _children(pid)
    return Snapshot(processes)


def spent(before: Snapshot, after: Snapshot) -> dict[str, tuple[float, float]]:
    """Seconds (on a CPU, waiting for one) per process between the two
    snapshots, by name (processes of one name summed; ``#2`` for a second
    one of a name, in pid order); only processes in both."""
    out: dict[str, tuple[float, float]] = {}
    for pid in sorted(before.processes.keys() & after.processes.keys()):
        name, run0, wait0 = before.processes[pid]
        _, run1, wait1 = after.processes[pid]
        key, n = name, 1
        while key in out:
            n += 1
            key = f"{name} #{n}"
        out[key] = ((run1 - run0) / 1e9, (wait1 - wait0) / 1e9)
    return out


def cpu_ms(before: Snapshot, root: int | None = None) -> float:
    """CPU milliseconds every process of the tree spent since ``before``."""
    return sum(run for run, _ in spent(before, snapshot(root)).values()) * 1000
