"""Schema (de)serialisation speed: acp_trio's generated cattrs hooks vs the official SDK.

Run with an interpreter that has both installed, for example::

    python3 -m venv .venv-bench
    .venv-bench/bin/pip install -e . agent-client-protocol
    .venv-bench/bin/python benchmarks/bench_schema.py

For each realistic message it times, per call:

- acp_trio: ``converter.structure(data, Cls)`` and ``converter.unstructure(obj)``;
- official SDK (pydantic, module ``acp``): ``Model.model_validate(data)`` and
  ``model.model_dump(by_alias=True, exclude_none=True)``;
- acp_trio unstable: the same messages through ``acp_trio.schema.unstable``'s
  converter (its own module, generated as a delta over the stable one), so the
  unstable codec's speed can be compared across generator changes. Only the
  unstable rows: ``--unstable-only`` (no pydantic needed).

Numbers are the best of several repeats (least disturbed by other load).
This is a script that prints numbers, not a test with a time limit.
"""

from __future__ import annotations

import argparse
import sys
import timeit
from collections.abc import Callable
from typing import Any

import acp_trio.schema as acp_trio_schema
import acp_trio.schema.unstable as acp_trio_unstable

MESSAGES: dict[str, tuple[str, dict[str, Any]]] = {
    "session/update text chunk": (
        "SessionNotification",
        {
            "sessionId": "sess_01HZY3K8J2",
            "update": {
                "sessionUpdate": "agent_message_chunk",
                "content": {"type": "text", "text": "Sure, I'll look at the failing test first."},
            },
        },
    ),
    "session/update tool call + diff": (
        "SessionNotification",
        {
            "sessionId": "sess_01HZY3K8J2",
            "update": {
                "sessionUpdate": "tool_call",
                "toolCallId": "call_7",
                "title": "Edit src/app.py",
                "kind": "edit",
                "status": "pending",
                "content": [
                    {
                        "type": "diff",
                        "path": "/home/user/project/src/app.py",
                        "oldText": "def main():\n    run()\n",
                        "newText": "def main() -> None:\n    run(check=True)\n",
                    }
                ],
                "locations": [{"path": "/home/user/project/src/app.py", "line": 12}],
                "rawInput": {"path": "src/app.py", "edits": 1},
            },
        },
    ),
    "initialize request": (
        "InitializeRequest",
        {
            "protocolVersion": 1,
            "clientCapabilities": {
                "fs": {"readTextFile": True, "writeTextFile": True},
                "terminal": True,
            },
            "clientInfo": {"name": "zed", "title": "Zed", "version": "0.201.3"},
            "_meta": {"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
        },
    ),
}


def per_call(fn: Callable[[], object], repeat: int) -> float:
    """Best seconds per call over ``repeat`` runs of a self-calibrated loop."""
    timer = timeit.Timer(fn)
    number, _ = timer.autorange()
    number = max(number, 2000)
    return min(timer.repeat(repeat=repeat, number=number)) / number


def load_pydantic() -> Any:
    try:
        from acp import schema as pydantic_schema
    except ImportError as exc:
        print(f"official SDK not importable ({exc}); install it with")
        print("    pip install agent-client-protocol")
        print("showing acp_trio numbers only.\n")
        return None
    return pydantic_schema


def fmt(seconds: float) -> str:
    return f"{seconds * 1e6:7.2f} us  {1 / seconds:>11,.0f}/s"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument(
        "--unstable-only", action="store_true", help="only the v1 unstable converter's rows"
    )
    args = parser.parse_args()

    print(f"Python {sys.version.split()[0]}; best of {args.repeat} repeats; per call\n")
    if args.unstable_only:
        unstable_rows(args.repeat)
        return 0
    conv = acp_trio_schema.converter
    pyd = load_pydantic()
    for label, (cls_name, data) in MESSAGES.items():
        cls = getattr(acp_trio_schema, cls_name)
        obj = conv.structure(data, cls)
        assert conv.unstructure(obj) == data, "acp_trio round trip changed the message"
        ours_s = per_call(lambda cls=cls, data=data: conv.structure(data, cls), args.repeat)
        ours_u = per_call(lambda obj=obj: conv.unstructure(obj), args.repeat)
        print(f"{label}  ({cls_name})")
        print(f"  acp_trio   structure   {fmt(ours_s)}")
        print(f"  acp_trio   unstructure {fmt(ours_u)}")
        print(f"  acp_trio   both        {fmt(ours_s + ours_u)}")
        if pyd is None:
            print()
            continue
        model_cls = getattr(pyd, cls_name)
        model = model_cls.model_validate(data)
        dumped = model.model_dump(by_alias=True, exclude_none=True)
        theirs_s = per_call(lambda m=model_cls, data=data: m.model_validate(data), args.repeat)
        theirs_u = per_call(
            lambda model=model: model.model_dump(by_alias=True, exclude_none=True), args.repeat
        )
        print(f"  pydantic   validate    {fmt(theirs_s)}")
        print(f"  pydantic   dump        {fmt(theirs_u)}")
        print(f"  pydantic   both        {fmt(theirs_s + theirs_u)}")
        both = (theirs_s + theirs_u) / (ours_s + ours_u)
        note = "" if dumped == data else "  (pydantic's dump differs from the input)"
        print(
            f"  speed-up   structure {theirs_s / ours_s:.2f}x,"
            f" unstructure {theirs_u / ours_u:.2f}x, both {both:.2f}x{note}"
        )
        print()
    unstable_rows(args.repeat)
    return 0


def unstable_rows(repeat: int) -> None:
    """The same messages through the v1 unstable module's own converter."""
    conv = acp_trio_unstable.converter
    total = 0.0
    for label, (cls_name, data) in MESSAGES.items():
        cls = getattr(acp_trio_unstable, cls_name)
        obj = conv.structure(data, cls)
        assert conv.unstructure(obj) == data, "acp_trio unstable round trip changed the message"
        s = per_call(lambda cls=cls, data=data: conv.structure(data, cls), repeat)
        u = per_call(lambda obj=obj: conv.unstructure(obj), repeat)
        total += s + u
        print(f"{label}  ({cls_name}, unstable)")
        print(f"  acp_trio   structure   {fmt(s)}")
        print(f"  acp_trio   unstructure {fmt(u)}")
        print(f"  acp_trio   both        {fmt(s + u)}")
        print()
    print(f"unstable, all {len(MESSAGES)} messages, both ways: {total * 1e6:.2f} us")
    timer = timeit.Timer(acp_trio_unstable.make_converter)
    build = min(timer.repeat(repeat=repeat, number=20)) / 20
    print(f"unstable make_converter() (registers every hook): {build * 1e3:.2f} ms")


if __name__ == "__main__":
    raise SystemExit(main())
