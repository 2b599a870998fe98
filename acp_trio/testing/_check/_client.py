"""The agent side of ``check-client``: a scripted ACP agent on stdio, written
on raw JSON lines (so it sees every byte the client sends; the wire and the
report file are in ``_client_wire``), that checks what an agent relies
on in a client and writes its verdicts to a file.

The driving protocol (what a client under test must do):

1. spawn the agent, send ``initialize``, ``session/new``, then one
   ``session/prompt`` (any text);
2. answer the agent's requests as it normally would. The permission
   requests are told apart by their tool call's title: answer
   ``check-client: choose an option`` (by policy or by a user); the others
   (``check-client: this request will be cancelled`` and
   ``check-client: wait for session/cancel``) exercise cancellation only if
   they are left pending;
3. when an ``agent_message_chunk`` says ``check-client: cancel now``, send
   ``session/cancel`` for the session (what a user's stop button does);
4. when a turn is over (answered, or given up), if its messages said
   ``check-client: prompt again``, send another prompt on the same session;
   else close the connection. A client that never prompts again gets the
   checks of the later turns skipped.

The later turns: the second says ``prompt again``, then the cue, and ends
``end_turn`` at once, so the client's ``session/cancel`` reaches a turn that
is over (``idle-cancel``: the third prompt must come, and no stale
``session/cancel`` with it). The third says ``prompt again`` and the cue,
then ignores the ``session/cancel``: the client must not hang
(``ignored-cancel``: within ``--cancel-wait`` seconds a ``$/cancel_request``
of the prompt, answered ``-32800`` at once; or a new prompt, before which
the turn is answered ``cancelled``; or the end of the connection); the
fourth prompt must then come on the same session
(``usable-after-ignored-cancel``), and ends the script.

During the turn the agent sends, in order: an unknown notification, an
unknown ``session/update`` kind and a line that is not JSON (each followed
by a request for an unknown method, whose reply shows the client is still
there), ``fs/read_text_file``, ``fs/write_text_file`` of files in a
directory of its own in the session's cwd and a terminal running a short
Python command (each only if advertised), three permission requests (one
cancelled at once with ``$/cancel_request``), then the cue.

The report file is rewritten after every check (the client may kill the
agent at any time) and a last time at the end of input or on SIGTERM; it
says when the cue was sent (``"cue": true``, for the driver's ``on_cue``).
An agent side that got no prompt does not overwrite the report of one that
did (clients may spawn the agent more than once).
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import trio

from acp_trio.testing._check._client_wire import Wire, describe, error_code, same_id
from acp_trio.testing._check._report import Verdict

__all__ = ["CUE", "PERMISSION_TITLES", "PROMPT_AGAIN", "run_agent_side"]

#: The text of the update at which the client must send session/cancel.
CUE = "check-client: cancel now"
#: The text of the update that asks for one more prompt once the turn is over.
PROMPT_AGAIN = "check-client: prompt again"
#: How long a stale session/cancel has to show up after the next prompt.
_LEAK_WINDOW = 0.3
_END_TURN: dict[str, Any] = {"stopReason": "end_turn"}


class _ErrorAnswer(Exception):
    """The prompt is answered with this JSON-RPC error."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


PERMISSION_TITLES = {
    "answer": "check-client: choose an option",
    "cancel-request": "check-client: this request will be cancelled",
    "hold": "check-client: wait for session/cancel",
}
_OPTIONS = [
    {"optionId": "allow", "name": "Allow", "kind": "allow_once"},
    {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
]
_READ_CONTENT = "check-client line 1\nline 2 é\nline 3\n"
_WRITE_CONTENT = "written by check-client\nsecond line ü\n"
_TERMINAL_TEXT = "check-client terminal output"


def _outcome(reply: dict[str, Any]) -> tuple[str | None, str]:
    """(outcome, problem): the outcome name if the reply is a valid
    permission answer, else None and what is wrong."""
    if "result" not in reply:
        return None, describe(reply)
    result_ = reply["result"]
    outcome = result_.get("outcome") if isinstance(result_, dict) else None
    if not isinstance(outcome, dict):
        return None, f"the result has no outcome object: {describe(reply)}"
    kind = outcome.get("outcome")
    if kind == "cancelled":
        return "cancelled", ""
    if kind == "selected":
        option = outcome.get("optionId")
        if option in {o["optionId"] for o in _OPTIONS}:
            return "selected", ""
        return None, f"selected optionId {option!r} was not offered"
    return None, f"unknown outcome {kind!r}"


class _AgentSide(Wire):
    #: Where the idle cancel's session/cancel calls start (turn 2).
    idle_mark: int | None = None
    #: When the client gave the ignored turn up (turn 3), if it did.
    given_up_at: float | None = None
    third_turn_done: trio.Event | None = None
    nursery: trio.Nursery | None = None

    async def handle_request(self, message: dict[str, Any]) -> None:
        if not self.busy:
            self.idle = trio.Event()
        self.busy += 1
        try:
            await self._handle_request(message)
        finally:
            self.busy -= 1
            if not self.busy:
                self.idle.set()

    async def _handle_request(self, message: dict[str, Any]) -> None:
        method, id_, params = message["method"], message["id"], message.get("params")
        params = params if isinstance(params, dict) else {}
        if not self.initialized and method != "initialize":
            self.record(
                "initialize", Verdict.FAIL, f"the first request is {method}, not initialize"
            )
        answer: Any
        if method == "initialize":
            answer = self.on_initialize(params)
        elif method == "session/new":
            answer = self.on_new_session(params)
        elif method == "session/prompt":
            try:
                answer = await self.on_prompt(params, id_)
            except _ErrorAnswer as exc:
                error = {"code": exc.code, "message": exc.message}
                await self.send({"jsonrpc": "2.0", "id": id_, "error": error})
                return
        else:
            await self.send(
                {
                    "jsonrpc": "2.0",
                    "id": id_,
                    "error": {"code": -32601, "message": f"Method not found: {method}"},
                }
            )
            return
        await self.send({"jsonrpc": "2.0", "id": id_, "result": answer})

    def on_initialize(self, params: dict[str, Any]) -> dict[str, Any]:
        self.initialized = True
        version = params.get("protocolVersion")
        caps = params.get("clientCapabilities", {})
        self.protocol_version, self.capabilities = version, caps
        self.client_info = params.get("clientInfo")
        if not isinstance(version, int) or isinstance(version, bool):
            self.record("initialize", Verdict.FAIL, f"protocolVersion {version!r} is no integer")
        elif not isinstance(caps, dict):
            self.record("initialize", Verdict.FAIL, f"clientCapabilities {caps!r} is no object")
        else:
            self.record("initialize", Verdict.PASS, f"protocol version {version}")
        return {
            "protocolVersion": 1,
            "agentCapabilities": {"loadSession": False, "promptCapabilities": {}},
            "agentInfo": {"name": "acp-trio-check-client", "version": "1"},
            "authMethods": [],
        }

    def on_new_session(self, params: dict[str, Any]) -> dict[str, Any]:
        cwd, servers = params.get("cwd"), params.get("mcpServers")
        if not isinstance(cwd, str) or not os.path.isabs(cwd):
            self.record("session-new", Verdict.FAIL, f"cwd {cwd!r} is not an absolute path")
        elif not isinstance(servers, list):
            self.record("session-new", Verdict.FAIL, f"mcpServers {servers!r} is not an array")
        else:
            self.record("session-new", Verdict.PASS, f"cwd {cwd}")
        if isinstance(cwd, str) and os.path.isabs(cwd) and os.path.isdir(cwd):
            self.cwd = cwd
        self.session_id = self.session_id or f"check-client-{os.getpid()}"
        return {"sessionId": self.session_id}

    async def on_prompt(self, params: dict[str, Any], id_: Any) -> dict[str, Any]:
        self.prompts += 1
        if self.prompts == 2:
            return await self.idle_cancel_turn()
        if self.prompts == 3:
            return await self.ignored_cancel_turn(id_)
        if self.prompts == 4:
            await self.usable_turn(params)
        if self.prompts > 1:
            return _END_TURN
        if self.session_id is None or params.get("sessionId") != self.session_id:
            self.record(
                "prompt", Verdict.FAIL, f"sessionId {params.get('sessionId')!r} is not ours"
            )
        elif not isinstance(params.get("prompt"), list):
            self.record("prompt", Verdict.FAIL, "prompt is not an array of content blocks")
        else:
            self.record("prompt", Verdict.PASS, "one prompt, well-formed")
        await self.script()
        return {"stopReason": "cancelled" if self.cancelled.is_set() else "end_turn"}

    # -- the script

    async def probe(
        self, name: str, hazard: str, judge: Callable[[dict[str, Any]], None] | None = None
    ) -> bool:
        """A request for an unknown method right after a hazard: a reply
        shows the client survived it."""
        stray_before = len(self.stray)
        out = await self.request("_check_client/unknown_method", {"after": hazard})
        reply = await self.reply(out)
        if reply is None:
            self.record(name, Verdict.FAIL, f"after {hazard}: {self.lost(out)}")
            return False
        if judge is not None:
            judge(reply)
        if len(self.stray) > stray_before:
            self.record(name, Verdict.FAIL, f"the client replied to {hazard}")
        else:
            latency = (out.answered_at or out.sent_at) - out.sent_at
            self.record(name, Verdict.PASS, f"still answering after {hazard}", latency)
        return True

    def judge_unknown_method(self, reply: dict[str, Any]) -> None:
        code = error_code(reply)
        if code == -32601:
            self.record("unknown-method", Verdict.PASS, "-32601")
        elif "error" in reply:
            self.record("unknown-method", Verdict.PASS, f"error {code} (-32601 is usual)")
        else:
            self.record("unknown-method", Verdict.FAIL, f"answered with a {describe(reply)}")

    async def cue(self) -> None:
        """Ask the client to cancel (what a user's stop button does)."""
        await self.say(f"{CUE}\n")
        self.cue_sent = True
        self.cues += 1
        self.write_report(final=False)

    # -- the later turns

    def watch_for_prompt(self, count: int, name: str, after: str) -> None:
        """Record ``name`` failed unless prompt number ``count`` comes within
        ``timeout`` (the check may be judged before: the first verdict stays)."""

        async def watch() -> None:
            self.busy += 1
            try:
                if await self.until(lambda: self.prompt_requests >= count, self.timeout):
                    return
                if self.closed.is_set():
                    why = f"the client closed the connection instead of prompting again {after}"
                else:
                    why = f"no prompt within {self.timeout:g} s {after}"
                self.record(name, Verdict.FAIL, f"{why} (the turn said `{PROMPT_AGAIN}`)")
            finally:
                self.busy -= 1
                if not self.busy:
                    self.idle.set()

        if self.nursery is not None:
            if not self.busy:
                self.idle = trio.Event()
            self.nursery.start_soon(watch)

    async def idle_cancel_turn(self) -> dict[str, Any]:
        """Turn 2: the cue, and the answer at once: the client's
        session/cancel reaches a turn that is over."""
        await self.say(f"{PROMPT_AGAIN}\n")
        self.idle_mark = len(self.session_cancels)
        await self.cue()
        self.watch_for_prompt(
            3, "idle-cancel", "after the second turn, whose cue came with its answer"
        )
        return _END_TURN

    def judge_idle_cancel(self, arrived: int, since: float) -> None:
        """Turn 3 began: a session/cancel the client sent at turn 2's cue
        reached an idle session; one that came with this turn is stale."""
        mark = self.idle_mark if self.idle_mark is not None else arrived
        late = self.session_cancels[arrived:]
        if late:
            self.record(
                "idle-cancel",
                Verdict.FAIL,
                f"a session/cancel came {(late[0][0] - since) * 1000:.0f} ms into the next turn, "
                "before any cue: the cancel of the turn that had ended leaked into the next one",
            )
        elif arrived > mark:
            self.record(
                "idle-cancel",
                Verdict.PASS,
                "the session/cancel that came after the turn's answer changed nothing: the next "
                "prompt came, with no session/cancel after it",
            )
        else:
            self.record(
                "idle-cancel",
                Verdict.SKIP,
                "the client sent no session/cancel at the second turn's cue",
            )

    async def ignored_cancel_turn(self, prompt_id: Any) -> dict[str, Any]:
        """Turn 3: the cue, then the client's session/cancel is ignored."""
        self.third_turn_done = done = trio.Event()
        try:
            return await self._ignored_cancel_turn(prompt_id)
        finally:
            done.set()

    async def _ignored_cancel_turn(self, prompt_id: Any) -> dict[str, Any]:
        # As the third prompt was read: a cancel that follows it is stale.
        started, arrived = self.prompt_marks[2]
        await self.say(f"{PROMPT_AGAIN}\n")
        await self.until(lambda: len(self.session_cancels) > arrived, _LEAK_WINDOW)
        self.judge_idle_cancel(arrived, started)
        mark = len(self.session_cancels)
        await self.cue()
        if not await self.until(lambda: len(self.session_cancels) > mark, self.timeout):
            why = "the client sent no session/cancel at the third turn's cue"
            if self.closed.is_set():
                why = "the connection closed before the third turn's cue was answered"
            self.record("ignored-cancel", Verdict.SKIP, why)
            self.record("usable-after-ignored-cancel", Verdict.SKIP, why)
            return _END_TURN
        cancelled_at = self.session_cancels[mark][0]
        requests = len(self.cancel_requests)

        def escalated() -> bool:
            return any(same_id(i, prompt_id) for _, i in self.cancel_requests[requests:])

        def moved() -> bool:
            return escalated() or self.prompt_requests > 3

        await self.until(moved, self.cancel_wait)
        waited = trio.current_time() - cancelled_at
        if escalated():
            self.given_up_at = trio.current_time()
            self.record(
                "ignored-cancel",
                Verdict.PASS,
                f"$/cancel_request for the prompt {waited:.1f} s after its ignored "
                "session/cancel (answered -32800)",
                waited,
            )
            self.watch_for_prompt(
                4, "usable-after-ignored-cancel", "after its ignored turn was answered -32800"
            )
            raise _ErrorAnswer(-32800, "Request cancelled")
        if self.prompt_requests > 3:
            self.given_up_at = trio.current_time()
            self.record(
                "ignored-cancel",
                Verdict.PASS,
                f"gave the turn up and prompted again {waited:.1f} s after its ignored "
                "session/cancel (the turn is then answered cancelled, late)",
                waited,
            )
            return {"stopReason": "cancelled"}
        if self.closed.is_set():
            self.record(
                "ignored-cancel",
                Verdict.PASS,
                f"closed the connection {waited:.1f} s after its ignored session/cancel",
                waited,
            )
            self.record(
                "usable-after-ignored-cancel",
                Verdict.FAIL,
                "the client closed the connection instead of prompting again after the turn "
                f"whose session/cancel the agent ignored (the turn said `{PROMPT_AGAIN}`)",
            )
            return _END_TURN
        self.record(
            "ignored-cancel",
            Verdict.FAIL,
            f"the client hangs: no $/cancel_request of the prompt, no new prompt and no close "
            f"within {self.cancel_wait:g} s (--cancel-wait) of its session/cancel, which the "
            "agent ignored; the checker then answered the turn cancelled",
        )
        self.record(
            "usable-after-ignored-cancel",
            Verdict.SKIP,
            "the client never gave the turn up (see ignored-cancel)",
        )
        return {"stopReason": "cancelled"}

    async def usable_turn(self, params: dict[str, Any]) -> None:
        """Turn 4, after the client gave the ignored turn up."""
        if self.third_turn_done is not None:
            await self.wait_any(self.third_turn_done)
        if self.given_up_at is None:
            return
        if params.get("sessionId") != self.session_id:
            self.record(
                "usable-after-ignored-cancel",
                Verdict.FAIL,
                f"the next prompt names session {params.get('sessionId')!r}, not "
                f"{self.session_id!r}",
            )
            return
        after = trio.current_time() - self.given_up_at
        self.record(
            "usable-after-ignored-cancel",
            Verdict.PASS,
            f"the next prompt came on the same session {max(after, 0.0):.1f} s after the turn "
            "was given up, and was answered",
        )

    # -- the first turn

    async def script(self) -> None:
        await self.say("check-client: starting the checks\n")
        await self.say(f"{PROMPT_AGAIN}\n")
        await self.notify("_check_client/unknown_notification", {"note": "ignore me"})
        if not await self.probe(
            "unknown-notification", "an unknown notification", self.judge_unknown_method
        ):
            return
        await self.update({"sessionUpdate": "_check_client_unknown_kind", "note": "ignore me"})
        if not await self.probe("unknown-update", "a session/update of an unknown kind"):
            return
        await self.send(b'{"jsonrpc": "2.0", "method": "session/update", "params": \n')
        if not await self.probe("malformed-input", "a line that is not JSON"):
            return
        fs = self.capabilities.get("fs") if isinstance(self.capabilities, dict) else None
        fs = fs if isinstance(fs, dict) else {}
        await self.check_read(fs.get("readTextFile") is True)
        await self.check_write(fs.get("writeTextFile") is True)
        terminal = isinstance(self.capabilities, dict) and self.capabilities.get("terminal")
        await self.check_terminal(terminal is True)
        await self.check_permission()
        await self.check_cancel_request()
        await self.check_session_cancel()

    def refused(self, name: str, reply: dict[str, Any]) -> bool:
        """An error reply: -32601 ignores the advertised capability."""
        if "error" not in reply:
            return False
        if error_code(reply) == -32601:
            self.record(name, Verdict.FAIL, f"advertised, but answered {describe(reply)}")
        else:
            self.record(name, Verdict.PASS, f"refused ({describe(reply)}), which is allowed")
        return True

    async def check_read(self, advertised: bool) -> None:
        if not advertised:
            self.record("fs-read", Verdict.SKIP, "fs.readTextFile not advertised")
            return
        path = self.files() / "read-me.txt"
        path.write_text(_READ_CONTENT, encoding="utf-8")
        out = await self.request(
            "fs/read_text_file", {"sessionId": self.session_id, "path": str(path)}
        )
        reply = await self.reply(out)
        if reply is None:
            self.record("fs-read", Verdict.FAIL, self.lost(out))
        elif not self.refused("fs-read", reply):
            content = reply.get("result", {}).get("content") if isinstance(reply, dict) else None
            if isinstance(reply.get("result"), dict) and content == _READ_CONTENT:
                self.record("fs-read", Verdict.PASS, "the content, exactly")
            else:
                self.record("fs-read", Verdict.FAIL, f"not the file's content: {describe(reply)}")

    async def check_write(self, advertised: bool) -> None:
        if not advertised:
            self.record("fs-write", Verdict.SKIP, "fs.writeTextFile not advertised")
            return
        path = self.files() / "written.txt"
        out = await self.request(
            "fs/write_text_file",
            {"sessionId": self.session_id, "path": str(path), "content": _WRITE_CONTENT},
        )
        reply = await self.reply(out)
        if reply is None:
            self.record("fs-write", Verdict.FAIL, self.lost(out))
        elif not self.refused("fs-write", reply):
            result_ = reply.get("result")
            try:
                written = path.read_text(encoding="utf-8")
            except OSError as exc:
                written = f"<{exc.strerror}>"
            if result_ is not None and not isinstance(result_, dict):
                self.record("fs-write", Verdict.FAIL, f"the result is {describe(reply)}")
            elif written != _WRITE_CONTENT:
                self.record(
                    "fs-write", Verdict.FAIL, f"answered, but the file holds {written[:80]!r}"
                )
            else:
                self.record("fs-write", Verdict.PASS, "written, exactly")

    async def terminal_call(self, method: str, params: dict[str, Any]) -> dict[str, Any] | str:
        """The result of one terminal request, or what went wrong."""
        out = await self.request(method, {"sessionId": self.session_id, **params})
        reply = await self.reply(out)
        if reply is None:
            return self.lost(out)
        if "error" in reply:
            return f"{method}: {describe(reply)}"
        result_ = reply.get("result")
        return result_ if isinstance(result_, dict) else {}

    async def check_terminal(self, advertised: bool) -> None:
        if not advertised:
            self.record("terminal", Verdict.SKIP, "terminal not advertised")
            return
        command = {"command": sys.executable, "args": ["-c", f"print({_TERMINAL_TEXT!r})"]}
        out = await self.request("terminal/create", {"sessionId": self.session_id, **command})
        reply = await self.reply(out)
        if reply is None:
            self.record("terminal", Verdict.FAIL, self.lost(out))
            return
        if self.refused("terminal", reply):
            return
        created = reply.get("result")
        terminal_id = created.get("terminalId") if isinstance(created, dict) else None
        if not isinstance(terminal_id, str):
            self.record("terminal", Verdict.FAIL, f"no terminalId: {describe(reply)}")
            return
        ids = {"terminalId": terminal_id}
        exited = await self.terminal_call("terminal/wait_for_exit", ids)
        output = await self.terminal_call("terminal/output", ids)
        released = await self.terminal_call("terminal/release", ids)
        if isinstance(exited, str) or isinstance(output, str) or isinstance(released, str):
            problem = next(a for a in (exited, output, released) if isinstance(a, str))
            self.record("terminal", Verdict.FAIL, problem)
        elif exited.get("exitCode") != 0:
            self.record("terminal", Verdict.FAIL, f"wait_for_exit answered {exited}, not exit 0")
        elif _TERMINAL_TEXT not in str(output.get("output")):
            self.record("terminal", Verdict.FAIL, f"the output is {output.get('output')!r}")
        else:
            self.record("terminal", Verdict.PASS, "ran, exit 0, output, released")

    def files(self) -> Path:
        """Where the fs checks' files go: a fresh directory in the session's
        cwd (clients may refuse paths outside it), removed at the end; else
        one in the system's temporary directory."""
        if self.files_dir is None:
            try:
                self.files_dir = Path(tempfile.mkdtemp(prefix=".acp-check-client-", dir=self.cwd))
            except (OSError, TypeError):
                self.files_dir = Path(tempfile.mkdtemp(prefix="files-", dir=self.workdir))
        return self.files_dir

    def permission(self, which: str) -> dict[str, Any]:
        return {
            "sessionId": self.session_id,
            "toolCall": {
                "toolCallId": f"check-client-{which}",
                "title": PERMISSION_TITLES[which],
                "kind": "other",
                "status": "pending",
            },
            "options": _OPTIONS,
        }

    async def check_permission(self) -> None:
        await self.update(
            {
                "sessionUpdate": "tool_call",
                "toolCallId": "check-client-answer",
                "title": PERMISSION_TITLES["answer"],
                "kind": "other",
                "status": "pending",
            }
        )
        out = await self.request("session/request_permission", self.permission("answer"))
        reply = await self.reply(out)
        if reply is None:
            self.record("permission-outcome", Verdict.FAIL, self.lost(out))
            return
        outcome, problem = _outcome(reply)
        if outcome is None:
            self.record("permission-outcome", Verdict.FAIL, problem)
        else:
            latency = (out.answered_at or out.sent_at) - out.sent_at
            self.record("permission-outcome", Verdict.PASS, f"outcome {outcome}", latency)

    async def check_cancel_request(self) -> None:
        out = await self.request("session/request_permission", self.permission("cancel-request"))
        await self.notify("$/cancel_request", {"requestId": out.id})
        reply = await self.reply(out)
        if reply is None:
            self.record("cancel-request", Verdict.FAIL, self.lost(out) + " after $/cancel_request")
        elif error_code(reply) == -32800:
            latency = (out.answered_at or out.sent_at) - out.sent_at
            self.record("cancel-request", Verdict.PASS, "-32800", latency)
        elif "result" in reply and _outcome(reply)[0] is not None:
            self.record(
                "cancel-request",
                Verdict.PASS,
                f"a result (outcome {_outcome(reply)[0]}), which is allowed; -32800 is usual",
            )
        else:
            self.record("cancel-request", Verdict.FAIL, f"{describe(reply)}, not -32800")

    async def check_session_cancel(self) -> None:
        out = await self.request("session/request_permission", self.permission("hold"))
        await self.cue()
        with trio.move_on_after(self.timeout):
            await self.wait_any(self.cancelled, out.first)
        early = out.replies[0] if out.replies else None
        if early is not None and (
            self.cancel_seq is None or self.cancel_seq > (out.answered_seq or 0)
        ):
            # Answered before any session/cancel: nothing pending to cancel.
            outcome, problem = _outcome(early)
            if outcome == "cancelled":
                self.record("cancelled-permission", Verdict.PASS, "answered cancelled")
            elif outcome is None:
                self.record("cancelled-permission", Verdict.FAIL, problem)
            else:
                self.record(
                    "cancelled-permission",
                    Verdict.SKIP,
                    "the client answered the permission request before sending session/cancel",
                )
            with trio.move_on_after(self.timeout):
                await self.wait_any(self.cancelled)
            if self.cancelled.is_set():
                self.record_session_cancel()
                return
        if not self.cancelled.is_set():
            why = "the connection closed" if self.closed.is_set() else f"{self.timeout:g} s"
            self.record("session-cancel", Verdict.FAIL, f"no session/cancel after the cue ({why})")
            self.record("cancelled-permission", Verdict.SKIP, "the client sent no session/cancel")
            if not out.replies:
                await self.notify("$/cancel_request", {"requestId": out.id})
                await self.reply(out)
            return
        self.record_session_cancel()
        reply = await self.reply(out)
        if reply is None:
            self.record(
                "cancelled-permission",
                Verdict.FAIL,
                self.lost(out) + " after session/cancel (must be the cancelled outcome)",
            )
            return
        outcome, problem = _outcome(reply)
        if outcome == "cancelled":
            self.record("cancelled-permission", Verdict.PASS, "cancelled")
        else:
            self.record(
                "cancelled-permission",
                Verdict.FAIL,
                f"{problem or 'outcome ' + str(outcome)}, not the cancelled outcome",
            )

    def record_session_cancel(self) -> None:
        params = self.cancel_params if isinstance(self.cancel_params, dict) else {}
        session = params.get("sessionId")
        if session != self.session_id:
            self.record("session-cancel", Verdict.FAIL, f"session/cancel names {session!r}")
        else:
            self.record("session-cancel", Verdict.PASS, "session/cancel for the session")

    async def run(self) -> None:
        async with trio.open_nursery() as nursery:
            self.nursery = nursery
            nursery.start_soon(self.read_loop, nursery)

            async def on_signal() -> None:
                with trio.open_signal_receiver(signal.SIGTERM, signal.SIGHUP) as signals:
                    async for _ in signals:
                        nursery.cancel_scope.cancel()
                        return

            nursery.start_soon(on_signal)
            await self.closed.wait()
            # The handlers see the close and record their verdicts.
            with trio.move_on_after(self.timeout):
                await self.idle.wait()
            nursery.cancel_scope.cancel()
        if not self.initialized:
            self.record("initialize", Verdict.FAIL, "the client sent no initialize request")
        if self.session_id is None:
            self.record("session-new", Verdict.FAIL, "the client sent no session/new")
        if self.prompts == 0:
            self.record(
                "prompt",
                Verdict.FAIL,
                "the client sent no session/prompt (check-client needs one to drive it)",
            )
        self.write_report(final=True, missing="not reached: the connection closed")


async def run_agent_side(
    report: str | os.PathLike[str],
    *,
    timeout: float = 5.0,  # noqa: ASYNC109 - per wait
    cancel_wait: float | None = None,
) -> None:
    """Serve the checking agent on stdin/stdout until the client closes the
    connection; the verdicts go to ``report`` (JSON). ``cancel_wait``: how
    long an ignored ``session/cancel`` may leave the client waiting
    (default 3 x ``timeout``)."""
    with tempfile.TemporaryDirectory(prefix="acp-check-client-") as workdir:
        receive = trio.lowlevel.FdStream(os.dup(0))
        send = trio.lowlevel.FdStream(os.dup(1))
        async with receive, send:
            side = _AgentSide(receive, send, Path(report), timeout, Path(workdir), cancel_wait)
            side.write_report(final=False)
            try:
                await side.run()
            finally:
                if side.files_dir is not None:
                    shutil.rmtree(side.files_dir, ignore_errors=True)
