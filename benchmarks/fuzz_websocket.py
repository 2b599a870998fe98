"""The long run of the WebSocket differential test: seeded random byte
sequences fed to our protocol core (acp_trio.remote._ws_core) and to
wsproto's frame protocol, for the server and the client side, the
decisions compared (tests/remote/wsdiff.py; CI runs a short one in
tests/remote/test_websocket_differential.py).

    .venv/bin/python benchmarks/fuzz_websocket.py --sequences 1000000 --jobs 2

``--sequences`` counts both sides (half each). Prints the tallies and the
first disagreements; exit status 1 if there is any.
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "remote"))

import wsdiff


def _chunk(args: tuple[int, int]) -> dict[str, Any]:
    count, seed = args
    return wsdiff.run(count, seed)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sequences", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--chunk", type=int, default=10_000, help="sequences per task")
    args = parser.parse_args()
    pairs = max(1, args.sequences // 2)  # (run() does both sides per count)
    per = max(1, args.chunk // 2)
    tasks = [
        (min(per, pairs - start), args.seed * 1_000_003 + n)
        for n, start in enumerate(range(0, pairs, per))
    ]
    tally = {"agree": 0, "tolerated": 0, "disagree": 0}
    disagreements: list[tuple[bytes, bool, str]] = []
    started = time.perf_counter()
    with multiprocessing.Pool(args.jobs) as pool:
        for result in pool.imap_unordered(_chunk, tasks):
            for key, value in result["tally"].items():
                tally[key] += value
            disagreements += result["disagreements"]
    elapsed = time.perf_counter() - started
    total = sum(tally.values())
    print(f"{total:,} sequences in {elapsed:.0f} s (seed {args.seed}): {tally}")
    for data, client, verdict in disagreements[:20]:
        side = "client" if client else "server"
        print(f"- {side} {data[:120]!r}: {verdict[:500]}")
    return 1 if tally["disagree"] else 0


if __name__ == "__main__":
    sys.exit(main())
