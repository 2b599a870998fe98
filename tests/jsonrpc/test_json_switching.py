"""Choosing the JSON backend: switching, the environment variable, end to end.

(Split from one file; the shared helpers are in ``json_cases.py``.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tracemalloc
from typing import Any

import pytest
import trio
from connection.conftest import FnHandler, connection_pair

from acp_trio._jsonrpc._messages import (
    decode_frame,
    encode_frame,
    json_backend,
    use_json_backend,
)
from acp_trio.lowlevel import RequestContext
from jsonrpc.json_cases import (
    BACKENDS,
    REPO,
    needs_orjson,
    same,
    using,
)

# --- 5. switching --------------------------------------------------------------


def test_unknown_backend_is_refused_and_changes_nothing(backend: str) -> None:
    for name in ("nope", "", "ORJSON", "json"):
        with pytest.raises(ValueError, match="unknown JSON backend"):
            use_json_backend(name)
        assert json_backend() == backend


def test_orjson_backend_needs_orjson() -> None:
    """Without orjson (blocked from importing, in a fresh interpreter), the
    backend is the standard library and asking for orjson is refused."""
    script = (
        "import sys; sys.modules['orjson'] = None\n"
        "from acp_trio.lowlevel import json_backend, use_json_backend\n"
        "print(json_backend())\n"
        "try:\n"
        "    use_json_backend('orjson')\n"
        "except ValueError as exc:\n"
        "    print(exc)\n"
        "print(json_backend())\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "ACP_TRIO_JSON"}
    out = subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert out[0] == "stdlib"
    assert "orjson is not installed" in out[1]
    assert out[2] == "stdlib"


@needs_orjson
def test_switching_round_trips(monkeypatch: pytest.MonkeyPatch) -> None:
    import orjson

    dumped: list[Any] = []
    real_dumps = orjson.dumps

    def counting_dumps(*args: Any, **kwargs: Any) -> bytes:
        dumped.append(args[0])
        return real_dumps(*args, **kwargs)

    previous = json_backend()
    try:
        with monkeypatch.context() as patch:
            # Taken when the backend is chosen: count what goes through orjson.
            patch.setattr(orjson, "dumps", counting_dumps)
            use_json_backend("stdlib")
            assert json_backend() == "stdlib"
            assert encode_frame({"a": [1]}) == b'{"a":[1]}\n'
            assert dumped == []
            use_json_backend("orjson")
            assert json_backend() == "orjson"
            # The orjson backend really is orjson, so the comparisons above compare.
            assert encode_frame({"a": [1]}) == b'{"a":[1]}\n'
            assert dumped == [{"a": [1]}]
            use_json_backend("orjson")
            assert json_backend() == "orjson"
            use_json_backend("stdlib")
            use_json_backend("stdlib")
            assert json_backend() == "stdlib"
            encode_frame({"b": 2})
            assert dumped == [{"a": [1]}]
    finally:
        use_json_backend(previous)  # the real orjson functions again
    assert json_backend() == previous


def test_fixture_restores_the_previous_backend(backend: str) -> None:
    other = "stdlib" if backend == "orjson" else BACKENDS[0]
    with using(other):
        assert json_backend() == other
    assert json_backend() == backend


# --- 6. the environment variable -------------------------------------------------


def _backend_in_subprocess(env_value: str | None) -> str:
    env = dict(os.environ)
    env.pop("ACP_TRIO_JSON", None)
    if env_value is not None:
        env["ACP_TRIO_JSON"] = env_value
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "from acp_trio._jsonrpc._messages import json_backend; print(json_backend())",
        ],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


@pytest.mark.parametrize("value", ["stdlib", " StdLib "])
def test_env_selects_stdlib_at_import(value: str) -> None:
    assert _backend_in_subprocess(value) == "stdlib"


@needs_orjson
@pytest.mark.parametrize("value", [None, "orjson"])
def test_orjson_is_the_default_when_installed(value: str | None) -> None:
    assert _backend_in_subprocess(value) == "orjson"


# --- 7. end to end ---------------------------------------------------------------

# Each call's params alone: a lone surrogate or a long digit run anywhere in a
# frame sends it all to the stdlib, which would hide what orjson does with
# the rest.
CALLS: list[Any] = [
    {
        "big": 2**70,
        "text": "héllo wörld ✓ 日本語 😀 \u2028",
        "nested": {"a": [1, 2.5, -0.0, {"b": None, "c": [True, False]}], "ключ": {"d": {}}},
    },
    {"negative_big": -(2**64) - 1, "u64": 2**64 - 1, "i64": [2**63 - 1, -(2**63)]},
    {"digits_in_text": "12345678901234567890123", "lone": "a\ud800b", "n": 2**200},
    [2**70, "ü", {"x": {"y": {"z": [0.1]}}}],
]


async def test_request_round_trip_end_to_end(backend: str) -> None:
    seen: list[Any] = []

    async def echo(ctx: RequestContext, params: Any) -> Any:
        seen.append(params)
        return {"echo": params, "extra": 2**65}

    results = []
    with trio.fail_after(5):
        async with connection_pair(None, FnHandler({"echo": echo})) as (a, _b, wire_a, wire_b):
            for params in CALLS:
                results.append(await a.call("echo", params))
    assert json_backend() == backend
    assert len(seen) == len(results) == len(CALLS)
    # What went over the wire (the trace parses it with the stdlib json module).
    sent = [m["params"] for m in wire_a.sent_requests()]
    answers = [m["result"] for m in wire_b.sent_responses()]
    for params, got, result, on_wire, answer in zip(
        CALLS, seen, results, sent, answers, strict=True
    ):
        assert same(got, params), got
        assert same(result, {"echo": params, "extra": 2**65}), result
        assert same(on_wire, params), on_wire
        assert same(answer, {"echo": params, "extra": 2**65}), answer


@needs_orjson
def test_orjson_decodes_ordinary_frames(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fast path is taken for the usual small frame, and skipped for a
    frame it could misread (whose value is then exact)."""
    import orjson

    calls: list[bytes] = []
    real = orjson.loads

    def counting(frame: bytes) -> Any:
        calls.append(frame)
        return real(frame)

    previous = json_backend()
    try:
        with monkeypatch.context() as patch:
            # Taken when the backend is chosen: count what goes through orjson.
            patch.setattr(orjson, "loads", counting)
            use_json_backend("orjson")
            ordinary = (
                b'{"jsonrpc":"2.0","id":7,"method":"fs/read_text_file","params":{"path":"/a"}}'
            )
            assert decode_frame(ordinary) == json.loads(ordinary)
            assert calls == [ordinary]
            big = b'{"jsonrpc":"2.0","id":18446744073709551616,"method":"m"}'
            value = decode_frame(big)
            assert calls == [ordinary]
            assert value["id"] == 2**64
            assert type(value["id"]) is int
            use_json_backend("stdlib")
            assert decode_frame(ordinary) == json.loads(ordinary)
            assert calls == [ordinary]
    finally:
        use_json_backend(previous)  # the real orjson functions again


def test_a_frame_costs_about_its_size_in_memory(backend: str) -> None:
    """A frame waiting in the outbox holds only its bytes. (orjson builds its
    output in a 4 KiB buffer that it does not shrink, so its result is copied
    into a bytes object of the right size, with the newline.)"""
    message = {"jsonrpc": "2.0", "id": 1, "method": "session/cancel", "params": {"sessionId": "s"}}
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        frames = [encode_frame(message) for _ in range(100)]
        per_frame = (tracemalloc.get_traced_memory()[0] - before) / len(frames)
    finally:
        tracemalloc.stop()
    assert frames[0].endswith(b"\n")
    assert per_frame < 256, per_frame
