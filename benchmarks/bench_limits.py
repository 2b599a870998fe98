"""What the JSON structure limits cost (acp_trio._jsonrpc._limits), beside
what decoding costs, on the frames a remote server reads.

For each frame: ``decode_frame`` (the parse, unchanged by the limits), the
peer's ``receive`` (decode, classify, register: the hot path), the quick
bound every remote message passes (``surely_within``: one C pass), and the
exact count (``StructureCheck``), which only frames the quick bound cannot
clear take (source code with many brackets, hostile structure). Best of
several runs, microseconds per frame.

    python benchmarks/bench_limits.py
"""

from __future__ import annotations

import base64
import json
import os
import time
from collections.abc import Callable
from pathlib import Path

from acp_trio._jsonrpc import Peer, decode_frame

try:
    from acp_trio._jsonrpc import StructureCheck, surely_within
except ImportError:  # (an older checkout, for before/after runs)
    StructureCheck = None  # type: ignore[assignment,misc]
    surely_within = None  # type: ignore[assignment]

CODE = (Path(__file__).resolve().parent.parent / "acp_trio" / "remote" / "_front.py").read_text()


def request(request_id: int, params: object) -> bytes:
    message = {"jsonrpc": "2.0", "id": request_id, "method": "session/prompt", "params": params}
    return json.dumps(message, separators=(",", ":")).encode()


def prompt(text: str) -> dict[str, object]:
    return {"sessionId": "sess-1", "prompt": [{"type": "text", "text": text}]}


def update(entries: int) -> bytes:
    plan = [
        {"content": f"step {i}: do the thing", "priority": "high", "status": "pending"}
        for i in range(entries)
    ]
    params = {"sessionId": "sess-1", "update": {"sessionUpdate": "plan", "entries": plan}}
    message = {"jsonrpc": "2.0", "method": "session/update", "params": params}
    return json.dumps(message, separators=(",", ":")).encode()


FRAMES = {
    "notification 0.3 KB": update(2),
    "prompt 1 KB": request(1, prompt(CODE[:900])),
    "prompt 8 KB (code)": request(1, prompt(CODE[:8000])),
    "plan 7 KB (100 entries)": update(100),
    "prompt 64 KB (code)": request(1, prompt((CODE * 4)[:64000])),
    "prompt 1 MB (code)": request(1, prompt(CODE * 45)),
    "prompt 4 MB (image)": request(
        1,
        {
            "sessionId": "sess-1",
            "prompt": [
                {
                    "type": "image",
                    "mimeType": "image/png",
                    "data": base64.b64encode(os.urandom(3 << 20)).decode(),
                }
            ],
        },
    ),
}


def best(fn: Callable[[], object], total: float = 0.4) -> float:
    """Best microseconds per call over several rounds."""
    calls = 1
    while True:
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        if time.perf_counter() - start > 0.02:
            break
        calls *= 2
    results = []
    deadline = time.perf_counter() + total
    while time.perf_counter() < deadline or len(results) < 5:
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        results.append((time.perf_counter() - start) / calls)
    return min(results) * 1e6


def receive(frame: bytes) -> Callable[[], object]:
    peer: Peer[None, None] = Peer()

    def run() -> object:
        event = peer.receive(frame)
        entry = getattr(event, "entry", None)
        if entry is not None:  # answered, so the id is free again
            peer.respond(entry, {})
        return event

    return run


def exact(frame: bytes) -> Callable[[], object]:
    def run() -> object:
        check = StructureCheck(frame, 128, 65536)
        while not check.step(4096):
            pass
        return check.error

    return run


def main() -> None:
    print(f"{'frame':26} {'bytes':>9} {'decode':>10} {'receive':>10} {'quick':>9} {'exact':>10}")
    for name, frame in FRAMES.items():
        decode = best(lambda frame=frame: decode_frame(frame))
        peer = best(receive(frame))
        if surely_within is None:
            quick = exact_us = "n/a"
        else:
            quick = f"{best(lambda frame=frame: surely_within(frame, 128, 65536)):.2f}"
            exact_us = f"{best(exact(frame)):.1f}"
        print(f"{name:26} {len(frame):>9} {decode:>10.2f} {peer:>10.2f} {quick:>9} {exact_us:>10}")


if __name__ == "__main__":
    main()
