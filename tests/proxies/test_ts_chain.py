"""The TypeScript SDK's client (``@agentclientprotocol/sdk`` 2.4.0, driven by
``tests/interop/ts_client.mjs``) through ``python -m acp_trio conduct`` with
two proxies (the typed context proxy and the logging proxy) in front of the
scenario agent: every scenario of the shared vocabulary, cancellation
included. Skipped without node or the SDK (``npm ci --prefix tests/interop``)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from acp_trio.testing import SCENARIO_AGENT_COMMAND
from tests.interop.test_typescript import (
    CANCEL,
    HELD,
    NODE,
    TS_CLIENT,
    Events,
    _skip_reason,
)

pytestmark = pytest.mark.skipif(bool(_skip_reason), reason=_skip_reason)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "proxies"
CONTEXT = [sys.executable, str(EXAMPLES / "context_proxy.py"), "--context", "CTX"]
LOGGING = [sys.executable, str(EXAMPLES / "logging_proxy.py"), "--quiet"]
CONDUCT = [sys.executable, "-m", "acp_trio", "conduct", "--", *CONTEXT, "--", *LOGGING, "--"]
CHAIN = [*CONDUCT, *SCENARIO_AGENT_COMMAND]

# One session, every command of docs/scenario-agent.md. The context
# proxy appends a text block to each prompt; the scenario agent reads only
# the first one, so the vocabulary is unchanged. The session/cancel of a
# wait_for_cancel is sent at once after its prompt: every hop keeps it
# behind the prompt (ForwardOrder), or the turn would never end.
SCRIPT: list[dict[str, Any]] = [
    {"prompt": "echo hello"},
    {"prompt": "stream 3 4"},
    {"prompt": "read 2 /a"},
    {"prompt": "write 2 /a 10"},
    {"prompt": "wait_for_cancel", "cancel": "session", "after_ms": 0},
    {"prompt": "wait_for_cancel", "cancel": "request", "after_ms": 100},
    {"prompt": "nested", "cancel": "session", "wait_requests": 3},
    {"prompt": "nested", "cancel": "request", "wait_requests": 3},
    {"prompt": "nested", "cancel": "session", "wait_requests": 3, "answer_permissions": True},
    {"prompt": "deadline 300"},
    {"prompt": "permission", "cancel": "session", "wait_requests": 1},
    {"prompt": "fail -32042 made up"},
    {"prompt": "sleep 20"},
    {"prompt": "frobnicate"},
    {"prompt": "echo after"},
]


def check_nested_cancelled(log: Events, step: int, cancel: str, *, answered: bool = False) -> None:
    """The three nested requests of the ``nested`` prompt of ``step`` reached
    the TS client before its cancel, each then got its own ``$/cancel_request``
    (the conductor's, on the client's hop) and exactly one answer from the TS
    client. Unlike a direct connection, the prompt's answer may come first:
    each hop answers its own request as soon as it is cancelled, and the
    nested cancels travel up the chain on their own hops. With ``answered``
    the TS client answered the permission ``cancelled`` after its
    ``session/cancel``, which may reach the agent before it cancels it."""
    prompts = [
        m["id"] for _, d, m in log.wire() if d == "send" and m.get("method") == "session/prompt"
    ]
    pid = prompts[step]
    start = log.first(lambda d, m: d == "send" and m.get("id") == pid and "method" in m)
    if cancel == "session":
        method, key = "session/cancel", None
    else:
        method, key = CANCEL, pid
    cancel_at = next(
        i
        for i, d, m in log.wire()
        if i > start
        and d == "send"
        and m.get("method") == method
        and (key is None or m["params"]["requestId"] == key)
    )
    nested = [
        m
        for i, d, m in log.wire()
        if start < i < cancel_at and d == "recv" and "method" in m and "id" in m
    ]
    assert sorted(m["method"] for m in nested) == sorted(HELD)
    for m in nested:
        cancels = [
            i
            for i, d, c in log.wire()
            if d == "recv" and c.get("method") == CANCEL and c["params"]["requestId"] == m["id"]
        ]
        replies = [
            r
            for _, d, r in log.wire()
            if d == "send" and r.get("id") == m["id"] and "method" not in r
        ]
        assert len(replies) == 1, m
        if answered and m["method"] == "session/request_permission":
            assert replies[0]["result"] == {"outcome": {"outcome": "cancelled"}}
            assert len(cancels) <= 1, m
            continue
        assert len(cancels) == 1, m
        assert cancels[0] > cancel_at, m


async def run_chain(script: list[dict[str, Any]]) -> Events:
    command = [NODE or "node", str(TS_CLIENT), "--script", json.dumps(script), "--", *CHAIN]
    done = await trio.run_process(command, capture_stdout=True, capture_stderr=True, check=False)
    stderr = done.stderr.decode(errors="replace")
    assert done.returncode == 0, stderr
    events = [json.loads(line) for line in done.stdout.decode().splitlines()]
    assert events[-1]["ev"] == "done", stderr
    assert events[-1]["agent_exit"] == 0, stderr  # the conductor ended cleanly
    return Events(events)


def answer_of(log: Events, step: int) -> Any:
    end = log.step(step)
    return end["result"] if end["ev"] == "result" else end["code"]


async def test_the_ts_client_passes_every_scenario_through_two_proxies() -> None:
    with trio.fail_after(90):
        log = await run_chain(SCRIPT)
    (init,) = log.of("initialized")
    assert init["result"]["protocolVersion"] == 1
    end_turn, cancelled = {"stopReason": "end_turn"}, {"stopReason": "cancelled"}
    answers = [answer_of(log, step) for step in range(len(SCRIPT))]
    assert answers[:4] == [end_turn] * 4
    assert answers[4] == cancelled
    assert answers[5] in (-32800, cancelled)  # $/cancel_request: either is allowed
    assert answers[6] == cancelled
    assert answers[7] in (-32800, cancelled)
    assert answers[8] == cancelled
    assert answers[9] == -32800  # the agent's own deadline
    assert answers[10] == cancelled  # session/cancel of a permission turn
    assert answers[11] == -32042
    assert log.step(11)["message"] == "made up"
    assert answers[12:] == [end_turn] * 3

    texts = [e["update"]["content"]["text"] for e in log.of("update")]
    assert texts == [
        "hello",
        "0...",
        "1...",
        "2...",
        "read 2 128",
        "unknown command",
        "after",
    ]
    writes = [e for e in log.of("request") if e["method"] == "fs/write_text_file"]
    assert [w["params"]["content"] for w in writes] == ["x" * 10] * 2

    # Cancelled turns: every nested request reached the TS client, was
    # cancelled there by its own $/cancel_request (sent by the conductor on
    # the client's hop) before the prompt's answer, and answered once.
    check_nested_cancelled(log, 6, "session")
    check_nested_cancelled(log, 7, "request")
    check_nested_cancelled(log, 8, "session", answered=True)
    held_reads = [
        m
        for _, d, m in log.wire()
        if d == "recv" and m.get("method") == "fs/read_text_file" and m["params"]["path"] == "/hold"
    ]
    received_cancels = [
        m["params"]["requestId"]
        for _, d, m in log.wire()
        if d == "recv" and m.get("method") == CANCEL
    ]
    # nested x3 and deadline: each held read cancelled exactly once.
    assert len(held_reads) == 4
    for read in held_reads:
        assert received_cancels.count(read["id"]) == 1, read

    # Every request either side sent got exactly one answer.
    for sender, answerer in (("send", "recv"), ("recv", "send")):
        for _, d, m in log.wire():
            if d == sender and "method" in m and "id" in m:
                replies = [
                    r
                    for _, d2, r in log.wire()
                    if d2 == answerer and "method" not in r and r.get("id") == m["id"]
                ]
                assert len(replies) == 1, m
