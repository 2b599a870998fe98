"""Profile one side of an acp_trio pair on a workload of ``bench_sdks.py``.

Runs ``peers/trio_client.py`` against the acp_trio scenario agent (or the
floor peer on the other side, to isolate one side) and profiles the agent or
the client, then prints the functions that dominate:

- with py-spy (``pip install py-spy`` in ``.venv-bench``): a sampling profile
  of the real process, attached after the warm-up (no slowdown of the code
  under test);
- otherwise ``cProfile`` (deterministic; inflates small calls).

Examples::

    .venv-bench/bin/python benchmarks/profile_sdks.py stream --side agent
    .venv-bench/bin/python benchmarks/profile_sdks.py read --side client --peer floor

The listing is "self" time (time in the function itself) and "inclusive"
time; time the process spends waiting in ``epoll`` is left out.
"""

from __future__ import annotations

import argparse
import collections
import pstats
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
PEERS = HERE / "peers"
PY = sys.executable
IDLE = ("EpollIOManager.get_events", "_bootstrap", "attr/_make.py")


def _py_spy() -> str | None:
    local = Path(PY).with_name("py-spy")
    return str(local) if local.exists() else shutil.which("py-spy")


def _wrapped(command: list[str], out: Path, spy: str | None, delay: float) -> list[str]:
    """``command`` profiled into ``out``. py-spy writes to stdout, which is the
    protocol pipe: it attaches from a background shell to the exec'd pid."""
    if spy is None:
        return [PY, "-m", "cProfile", "-o", str(out), *command[1:]]
    record = f"{spy} record --nonblocking --format raw -r 1000 -o {out} -p $$"
    script = f'( sleep {delay}; {record} >/dev/null 2>&1 ) & exec "$@"'
    return ["sh", "-c", script, "sh", *command]


def _summary_raw(path: Path, top: int) -> None:
    own: collections.Counter[str] = collections.Counter()
    incl: collections.Counter[str] = collections.Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack:
            continue
        names = [re.sub(r":\d+\)$", ")", f) for f in stack.split(";")]
        if any(marker in name for marker in IDLE for name in names[-1:]):
            continue
        n = int(count)
        total += n
        own[names[-1]] += n
        for name in set(names):
            incl[name] += n
    print(f"{total} busy samples")
    for title, table in (("self", own), ("inclusive", incl)):
        print(f"--- {title}")
        for name, n in table.most_common(top):
            print(f"{100 * n / total:5.1f}%  {name}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workload", choices=("stream", "read"))
    parser.add_argument("--side", choices=("agent", "client"), default="agent")
    parser.add_argument(
        "--peer",
        choices=("acp_trio", "floor"),
        default="acp_trio",
        help="the other side (floor: the stdlib peer, to profile one side alone)",
    )
    parser.add_argument("--n", type=int, help="default: 400,000 (stream), 40,000 (read)")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--cprofile", action="store_true", help="use cProfile even with py-spy")
    args = parser.parse_args()
    n = args.n or (400_000 if args.workload == "stream" else 40_000)
    warmup = n // 4
    spy = None if args.cprofile else _py_spy()
    agent = [PY, "-m", "acp_trio", "scenario-agent"]
    client = [PY, str(PEERS / "trio_client.py")]
    if args.peer == "floor":
        if args.side == "agent":
            client = [PY, str(PEERS / "floor_client.py")]
        else:
            agent = [PY, str(PEERS / "floor_agent.py")]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "profile"
        if args.side == "agent":
            agent = _wrapped(agent, out, spy, delay=1.0)
        else:
            client = _wrapped(client, out, spy, delay=1.0)
        workload = ["--workload", args.workload, "--n", str(n), "--warmup", str(warmup)]
        done = subprocess.run([*client, *workload, "--", *agent], check=False)
        if done.returncode != 0:
            sys.exit(f"the run failed (exit {done.returncode})")
        subprocess.run(["sleep", "1"], check=False)  # py-spy writes after the exit
        if not out.exists():
            sys.exit("no profile was written (py-spy needs ptrace rights; try --cprofile)")
        how = "py-spy" if spy else "cProfile"
        print(f"\n{how}: acp_trio {args.side}, {args.workload} {n:,} (peer: {args.peer})")
        if spy:
            _summary_raw(out, args.top)
        else:
            stats = pstats.Stats(str(out))
            stats.sort_stats("tottime").print_stats(args.top)


if __name__ == "__main__":
    main()
