"""The wire and the bookkeeping of ``check-client``'s agent side: raw JSON
lines in and out, every request the agent sent and each reply it got, the
verdicts and the report file. The script is in ``_client``."""

from __future__ import annotations

import collections
import itertools
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import trio

from acp_trio.testing._check._client_checks import CLIENT_CHECKS, result
from acp_trio.testing._check._report import CheckResult, Verdict

EVIDENCE_LINES = 12
EVIDENCE_WIDTH = 300

__all__ = ["Outgoing", "Wire", "describe", "error_code", "same_id"]


@attrs.define(eq=False)
class Outgoing:
    """A request the agent side sent, and every reply it got."""

    id: int
    method: str
    replies: list[dict[str, Any]] = attrs.Factory(list)
    first: trio.Event = attrs.Factory(trio.Event)
    sent_at: float = 0.0
    answered_at: float | None = None
    #: The first reply's place among the client's messages.
    answered_seq: int | None = None


def describe(reply: dict[str, Any] | None) -> str:
    if reply is None:
        return "no reply"
    if "error" in reply:
        error = reply["error"]
        if isinstance(error, dict):
            return f"error {error.get('code')} {error.get('message')!r}"
        return f"error {error!r}"
    return f"result {json.dumps(reply.get('result'))[:200]}"


def same_id(a: Any, b: Any) -> bool:
    """JSON-RPC id equality: ``1`` and ``"1"`` differ."""
    return type(a) is type(b) and a == b


def error_code(reply: dict[str, Any]) -> Any:
    error = reply.get("error")
    return error.get("code") if isinstance(error, dict) else None


def _prompted(path: Path) -> bool:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and data.get("prompted") is True


class Wire:
    """The agent side's connection and state; the script subclasses it."""

    def __init__(
        self,
        receive: trio.abc.ReceiveStream,
        send: trio.abc.SendStream,
        report: Path,
        timeout: float,
        workdir: Path,
        cancel_wait: float | None = None,
    ) -> None:
        self.receive_stream = receive
        self.send_stream = send
        self.report_path = report
        self.timeout = timeout
        #: How long the agent side ignores a session/cancel before it calls
        #: the client hung (the client's own grace must fit in it).
        self.cancel_wait = 3 * timeout if cancel_wait is None else cancel_wait
        self.workdir = workdir
        self.send_lock = trio.StrictFIFOLock()
        self.ids = itertools.count(1)
        self.results: dict[str, CheckResult] = {}
        self.outgoing: dict[Any, Outgoing] = {}
        self.stray: list[dict[str, Any]] = []
        self.parse_error_replies = 0
        self.bad_lines: list[str] = []
        self.messages = 0
        self.closed = trio.Event()
        self.cancelled = trio.Event()
        self.cancel_params: Any = None
        self.cancel_seq: int | None = None
        self.cwd: str | None = None
        self.cue_sent = False
        #: How many cues were sent (``--on-cue`` runs at each).
        self.cues = 0
        self.files_dir: Path | None = None
        self.session_id: str | None = None
        self.client_info: Any = None
        self.protocol_version: Any = None
        self.capabilities: Any = None
        self.prompts = 0
        self.initialized = False
        self.busy = 0
        self.idle = trio.Event()
        self.idle.set()
        #: Every session/cancel and $/cancel_request of the client: (time, params).
        self.session_cancels: list[tuple[float, Any]] = []
        self.cancel_requests: list[tuple[float, Any]] = []
        #: The session/prompt requests read so far (counted as they are read),
        #: and for each, when it was read and how many session/cancel came before.
        self.prompt_requests = 0
        self.prompt_marks: list[tuple[float, int]] = []
        self._activity = trio.Event()
        #: The last lines both ways ("> " sent, "< " received), for evidence.
        self.wire: collections.deque[str] = collections.deque(maxlen=EVIDENCE_LINES)

    def log(self, arrow: str, data: bytes) -> None:
        text = data.decode("utf-8", "replace").rstrip("\n")
        self.wire.append(f"{arrow} {text[:EVIDENCE_WIDTH]}")

    # -- output

    def record(
        self, name: str, verdict: Verdict, reason: str, latency: float | None = None
    ) -> None:
        if name not in self.results:
            evidence = tuple(self.wire) if verdict is Verdict.FAIL else ()
            self.results[name] = result(name, verdict, reason, latency, evidence)
        self.write_report(final=False)

    def _one_reply(self) -> CheckResult:
        problems = []
        for out in self.outgoing.values():
            if len(out.replies) > 1:
                problems.append(f"{out.method} id {out.id} got {len(out.replies)} replies")
            for reply in out.replies:
                if reply.get("jsonrpc") != "2.0" or (("result" in reply) == ("error" in reply)):
                    problems.append(f"malformed reply to {out.method}: {json.dumps(reply)[:200]}")
        for reply in self.stray:
            problems.append(f"a reply for an id the agent never used: {json.dumps(reply)[:200]}")
        if problems:
            lines = [json.dumps(r)[:EVIDENCE_WIDTH] for r in self.stray[:EVIDENCE_LINES]]
            for out in self.outgoing.values():
                if len(out.replies) > 1 or any(
                    (r.get("jsonrpc") != "2.0" or ("result" in r) == ("error" in r))
                    for r in out.replies
                ):
                    lines.extend(f"< {json.dumps(r)[:EVIDENCE_WIDTH]}" for r in out.replies)
            return result(
                "one-reply",
                Verdict.FAIL,
                "; ".join(problems[:5]),
                evidence=tuple(lines[:EVIDENCE_LINES]) or tuple(self.wire),
            )
        answered = sum(bool(o.replies) for o in self.outgoing.values())
        return result(
            "one-reply",
            Verdict.PASS,
            f"{answered} of {len(self.outgoing)} requests answered, none twice",
        )

    def _jsonrpc(self) -> CheckResult:
        if self.bad_lines:
            return result(
                "jsonrpc",
                Verdict.FAIL,
                f"{len(self.bad_lines)} lines are not JSON-RPC 2.0, the first: "
                f"{self.bad_lines[0][:200]!r}",
                evidence=tuple(f"< {b[:EVIDENCE_WIDTH]}" for b in self.bad_lines[:EVIDENCE_LINES]),
            )
        return result("jsonrpc", Verdict.PASS, f"{self.messages} messages, all JSON-RPC 2.0")

    def write_report(self, *, final: bool, missing: str = "not reached") -> None:
        checks = []
        for info in CLIENT_CHECKS:
            if info.name == "one-reply":
                r = self._one_reply()
            elif info.name == "jsonrpc":
                r = self._jsonrpc()
            else:
                r = self.results.get(info.name) or result(info.name, Verdict.SKIP, missing)
            checks.append(r.to_json())
        if not self.prompts and _prompted(self.report_path):
            # Another agent side of the same run (a client that spawns the
            # agent once to set up, once to prompt) wrote the real verdicts.
            return
        data = {
            "final": final,
            "pid": os.getpid(),
            "prompted": bool(self.prompts),
            "cue": self.cue_sent,
            "cues": self.cues,
            "client_info": self.client_info,
            "protocol_version": self.protocol_version,
            "client_capabilities": self.capabilities,
            "checks": checks,
        }
        tmp = self.report_path.with_name(f"{self.report_path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data, indent=2), encoding="utf-8")
        os.replace(tmp, self.report_path)

    async def send(self, message: dict[str, Any] | bytes) -> bool:
        data = message if isinstance(message, bytes) else json.dumps(message).encode() + b"\n"
        async with self.send_lock:
            self.log(">", data)
            try:
                await self.send_stream.send_all(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                self.closed.set()
                return False
        return True

    async def notify(self, method: str, params: Any) -> None:
        await self.send({"jsonrpc": "2.0", "method": method, "params": params})

    async def request(self, method: str, params: Any) -> Outgoing:
        out = Outgoing(next(self.ids), method, sent_at=trio.current_time())
        self.outgoing[out.id] = out
        sent = await self.send({"jsonrpc": "2.0", "id": out.id, "method": method, "params": params})
        if not sent or self.closed.is_set():
            out.first.set()
        return out

    async def reply(self, out: Outgoing) -> dict[str, Any] | None:
        with trio.move_on_after(self.timeout):
            await out.first.wait()
        return out.replies[0] if out.replies else None

    def lost(self, out: Outgoing) -> str:
        if self.closed.is_set():
            return f"no reply to {out.method}: the client closed the connection"
        return f"no reply to {out.method} within {self.timeout:g} s"

    async def update(self, update: dict[str, Any]) -> None:
        await self.notify("session/update", {"sessionId": self.session_id, "update": update})

    async def say(self, text: str) -> None:
        await self.update(
            {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}
        )

    async def until(self, condition: Callable[[], bool], limit: float) -> bool:
        """Wait until ``condition()`` holds, the connection closes, or
        ``limit`` seconds pass (it is tested after each message of the
        client); whether it holds."""
        with trio.move_on_after(limit):
            while not condition() and not self.closed.is_set():
                await self._activity.wait()
        return condition()

    async def wait_any(self, *events: trio.Event) -> None:
        """Until one of ``events`` is set, or the connection closed."""
        async with trio.open_nursery() as nursery:

            async def until(event: trio.Event) -> None:
                await event.wait()
                nursery.cancel_scope.cancel()

            for event in (*events, self.closed):
                nursery.start_soon(until, event)

    # -- input

    async def read_loop(self, nursery: trio.Nursery) -> None:
        buffer = b""
        while True:
            try:
                data = await self.receive_stream.receive_some(65536)
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                data = b""
            if not data:
                break
            buffer += data
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                if line.strip():
                    self.handle_line(line, nursery)
        if buffer.strip():
            self.handle_line(buffer, nursery)
        self.closed.set()
        self._activity.set()
        for out in self.outgoing.values():
            out.first.set()

    def handle_line(self, line: bytes, nursery: trio.Nursery) -> None:
        self.log("<", line)
        try:
            message = json.loads(line)
        except ValueError:
            message = None
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            self.bad_lines.append(line.decode("utf-8", "replace"))
            return
        self.messages += 1
        method = message.get("method")
        now = trio.current_time()
        if method is None:
            self.handle_reply(message)
        elif "id" in message:
            if method == "session/prompt":
                self.prompt_requests += 1
                self.prompt_marks.append((now, len(self.session_cancels)))
            nursery.start_soon(self.handle_request, message)
        elif method == "session/cancel":
            self.session_cancels.append((now, message.get("params")))
            if not self.cancelled.is_set():
                self.cancel_params = message.get("params")
                self.cancel_seq = self.messages
                self.cancelled.set()
        elif method == "$/cancel_request":
            params = message.get("params")
            self.cancel_requests.append(
                (now, params.get("requestId") if isinstance(params, dict) else None)
            )
        self._activity.set()
        self._activity = trio.Event()

    def handle_reply(self, message: dict[str, Any]) -> None:
        id_ = message.get("id")
        out = self.outgoing.get(id_) if isinstance(id_, int) else None
        if out is None:
            if id_ is None and error_code(message) == -32700:
                self.parse_error_replies += 1
            else:
                self.stray.append(message)
            return
        out.replies.append(message)
        if out.answered_at is None:
            out.answered_at = trio.current_time()
            out.answered_seq = self.messages
        out.first.set()

    async def handle_request(self, message: dict[str, Any]) -> None:
        raise NotImplementedError  # the agent: _client
