"""What every benchmark client shares: its command line and its one JSON line
of output. Standard library only (it is imported by clients running in
different interpreters: the floor, acp_trio, the official Python SDK).

Command line of every client::

    CLIENT --workload {stream,read,cancel} --n N [--warmup W] -- AGENT COMMAND...

- ``stream``: one ``stream N`` prompt; seconds from sending it to having its
  answer with all N chunks seen by the client's handler.
- ``read``: one ``read N /bench/file`` prompt (the client answers each
  ``fs/read_text_file`` with 64 ``x``); seconds from sending it to its answer.
- ``cancel``: N cycles of a ``nested`` prompt: once its three nested requests
  (permission, read of ``/hold``, ``terminal/create``) are held by the client,
  ``session/cancel``; the latency is from sending the cancel to the prompt's
  answer.

Before the measured prompt(s), the same session runs a small warm-up of the
same workload (``--warmup``), so imports and first-call costs are not timed.

Output (stdout, one line): ``{"client", "workload", "n", ...}`` with
``seconds``, ``per_second`` and the client process's ``cpu_seconds`` over
the same span (stream, read; the Python clients; the floor and acp_trio
clients also ``tree_cpu_seconds``: the client and every process it spawned,
from ``benchmarks/proc_cpu.py``) or ``latencies_ms`` (cancel), plus what the
client checked.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import proc_cpu

READ_PATH = "/bench/file"
HOLD_PATH = "/hold"
CONTENT = "x" * 64
CLIENT_CAPABILITIES = {"fs": {"readTextFile": True, "writeTextFile": True}, "terminal": True}
#: Warm-up sizes by workload (``--warmup`` default).
WARMUP = {"stream": 500, "read": 100, "cancel": 3}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    argv = sys.argv[1:] if argv is None else argv
    if "--" not in argv:
        sys.exit("usage: CLIENT --workload W --n N [--warmup W] -- AGENT COMMAND...")
    cut = argv.index("--")
    parser = argparse.ArgumentParser()
    parser.add_argument("--workload", choices=("stream", "read", "cancel"), required=True)
    parser.add_argument("--n", type=int, required=True)
    parser.add_argument("--warmup", type=int)
    args = parser.parse_args(argv[:cut])
    args.command = argv[cut + 1 :]
    if not args.command:
        sys.exit("give the agent's command after --")
    if args.warmup is None:
        args.warmup = WARMUP[args.workload]
    return args


def prompt_text(workload: str, n: int) -> str:
    if workload == "stream":
        return f"stream {n}"
    if workload == "read":
        return f"read {n} {READ_PATH}"
    return "nested"


def check_answer(
    workload: str, n: int, chunks: int, last_text: str | None, stop_reason: str
) -> None:
    """Fail loudly if a measured prompt did not do its work."""
    if workload == "cancel":
        if stop_reason != "cancelled":
            raise SystemExit(f"nested prompt ended {stop_reason!r}, not 'cancelled'")
        return
    if stop_reason != "end_turn":
        raise SystemExit(f"{workload} prompt ended {stop_reason!r}")
    if workload == "stream" and chunks != n:
        raise SystemExit(f"stream {n}: the client's handler saw {chunks} chunks")
    if workload == "read" and last_text != f"read {n} {n * len(CONTENT)}":
        raise SystemExit(f"read {n}: the agent answered {last_text!r}")


class TreeCpu:
    """CPU seconds of this process and every process it spawned, from
    :meth:`start` to :meth:`seconds` (``None`` where ``/proc`` has none)."""

    def start(self) -> None:
        self._before = proc_cpu.snapshot()

    def seconds(self) -> float | None:
        if not self._before.processes:
            return None
        return proc_cpu.cpu_ms(self._before) / 1000


def emit(client: str, workload: str, n: int, **fields: Any) -> None:
    out = {"client": client, "workload": workload, "n": n}
    if "seconds" in fields:
        fields["per_second"] = n / fields["seconds"]
    out.update(fields)
    print(json.dumps(out), flush=True)
