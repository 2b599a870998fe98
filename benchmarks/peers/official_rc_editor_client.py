"""``examples/editor_client.py`` written with the official Python SDK's
release candidate (``agent-client-protocol`` 1.0.0rc3, module ``acp``,
asyncio + pydantic) and its ``acp.contrib.SessionAccumulator``, doing the
same for its user: for the line counts in docs/compared.md
(``tools/count_lines.py``) and to run the same tests against
(``tests/examples/test_editor_client.py``). Run it with the interpreter of
``tests/interop/.venv-official-rc`` (``make tests/interop/.venv-official-rc/.installed``)::

    tests/interop/.venv-official-rc/bin/python benchmarks/peers/official_rc_editor_client.py \\
        --root DIR --prompt "fix DIR/main.py" -- AGENT_CMD...

It is ``official_editor_client.py`` (0.12.1) with 1.0.0rc3's API: the
client side of 1.0.0rc3 adds ``$/cancel_request`` (a cancelled incoming
request's handler is cancelled and answered ``-32800``; an outgoing one
cancelled is cancelled on the wire), which needs no code here, and nothing
that would shorten the rest. Written out, as for 0.12.1: the workspace
(paths resolved and kept inside the root, regular files only,
``line``/``limit``, atomic writes), the terminals (approval, a process group
each, output bounded from the front, kill and release, every process killed
on the way out), the turn as a task that Ctrl-C cancels, and the permission
questions of a cancelled turn answered ``cancelled`` after ``session/cancel``
(the SDK leaves them to the application). ``acp.contrib.PermissionBroker``
is agent-side (it *asks* for permission) and has no use in a client.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import tempfile
from pathlib import Path
from typing import Any

import acp
from acp.contrib import SessionAccumulator, SessionSnapshot
from acp.schema import (
    AgentMessageChunk,
    AgentPlanUpdate,
    AllowedOutcome,
    ClientCapabilities,
    CreateTerminalResponse,
    DeniedOutcome,
    FileSystemCapabilities,
    PermissionOption,
    ReadTextFileResponse,
    RequestPermissionResponse,
    SessionNotification,
    TerminalExitStatus,
    TerminalOutputResponse,
    TextContentBlock,
    ToolCallProgress,
    ToolCallStart,
    ToolCallUpdate,
    WaitForTerminalExitResponse,
    WriteTextFileResponse,
)

MAX_OUTPUT = 1024 * 1024
GRACE = 2.0


def say(text: str) -> None:
    print(text, flush=True)


class Terminal:
    def __init__(self, session_id: str, process: asyncio.subprocess.Process, limit: int) -> None:
        self.session_id = session_id
        self.process = process
        self.limit = limit
        self.output = b""
        self.truncated = False
        self.reader = asyncio.ensure_future(self.read())

    async def read(self) -> None:
        assert self.process.stdout is not None
        while chunk := await self.process.stdout.read(65536):
            self.output += chunk
            if len(self.output) > self.limit:
                cut = len(self.output) - self.limit
                while cut < len(self.output) and self.output[cut] & 0xC0 == 0x80:
                    cut += 1  # keep whole UTF-8 characters
                self.output, self.truncated = self.output[cut:], True

    def exit_status(self) -> TerminalExitStatus | None:
        code = self.process.returncode
        if code is None:
            return None
        if code < 0:
            return TerminalExitStatus(signal=signal.Signals(-code).name)
        return TerminalExitStatus(exit_code=code)

    async def wait(self) -> TerminalExitStatus:
        await self.process.wait()
        await self.reader
        status = self.exit_status()
        assert status is not None
        return status

    async def kill(self) -> None:
        if self.process.returncode is None:
            try:
                os.killpg(self.process.pid, signal.SIGTERM)
                try:
                    await asyncio.wait_for(self.process.wait(), GRACE)
                except TimeoutError:
                    os.killpg(self.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        await self.process.wait()
        self.reader.cancel()


class Editor:
    def __init__(self, root: Path, yes: bool) -> None:
        self.root = root
        self.yes = yes
        self.conn: Any = None
        self.sessions: dict[str, SessionAccumulator] = {}
        self.terminals: dict[str, Terminal] = {}
        self.cancelled: set[str] = set()
        self.questions: dict[str, set[asyncio.Future[RequestPermissionResponse]]] = {}
        self.stdin: asyncio.StreamReader | None = None

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    def render(self, snapshot: SessionSnapshot, notification: SessionNotification) -> None:
        update = notification.update
        if isinstance(update, AgentMessageChunk) and isinstance(update.content, TextContentBlock):
            print(update.content.text, end="", flush=True)
        elif isinstance(update, AgentPlanUpdate):
            say("\nplan: " + " / ".join(f"[{e.status}] {e.content}" for e in update.entries))
        elif isinstance(update, (ToolCallStart, ToolCallProgress)):
            call = snapshot.tool_calls[update.tool_call_id]
            say(f"\ntool call {call.title!r}: {call.status}")

    def session(self, session_id: str) -> SessionAccumulator:
        if session_id not in self.sessions:
            self.sessions[session_id] = SessionAccumulator()
            self.sessions[session_id].subscribe(self.render)
        return self.sessions[session_id]

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.session(session_id).apply(SessionNotification(session_id=session_id, update=update))

    def cancel_questions(self, session_id: str) -> None:
        self.cancelled.add(session_id)
        for question in self.questions.pop(session_id, set()):
            if not question.done():
                question.set_result(
                    RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
                )

    async def ask(self, title: str | None) -> str:
        if self.stdin is None:
            self.stdin = asyncio.StreamReader()
            protocol = asyncio.StreamReaderProtocol(self.stdin)
            await asyncio.get_running_loop().connect_read_pipe(lambda: protocol, sys.stdin)
        say(f"\nallow {title!r}? [y/N] ")
        return (await self.stdin.readline()).decode().strip().lower()

    async def request_permission(
        self,
        session_id: str,
        tool_call: ToolCallUpdate,
        options: list[PermissionOption],
        **kwargs: Any,
    ) -> RequestPermissionResponse:
        if session_id in self.cancelled:
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        call = self.session(session_id).snapshot().tool_calls.get(tool_call.tool_call_id)
        title = call.title if call is not None else tool_call.title
        allow = next((o for o in options if o.kind.startswith("allow")), None)
        reject = next((o for o in options if o.kind.startswith("reject")), None)
        if self.yes and allow is not None:
            return RequestPermissionResponse(
                outcome=AllowedOutcome(option_id=allow.option_id, outcome="selected")
            )
        question = asyncio.ensure_future(self.ask(title))
        cancelled: asyncio.Future[RequestPermissionResponse] = asyncio.Future()
        self.questions.setdefault(session_id, set()).add(cancelled)
        try:
            await asyncio.wait([question, cancelled], return_when=asyncio.FIRST_COMPLETED)
        finally:
            self.questions.get(session_id, set()).discard(cancelled)
            question.cancel()
        if cancelled.done():
            return cancelled.result()
        answer = question.result()
        choice = allow if answer == "y" and allow is not None else reject or options[0]
        return RequestPermissionResponse(
            outcome=AllowedOutcome(option_id=choice.option_id, outcome="selected")
        )

    def resolve(self, path: str) -> Path:
        if not os.path.isabs(path):
            raise acp.RequestError.invalid_params({"path": path, "reason": "not an absolute path"})
        resolved = Path(path).resolve()
        if not resolved.is_relative_to(self.root):
            raise acp.RequestError.invalid_params({"path": path, "reason": "outside the workspace"})
        if resolved.exists() and not resolved.is_file():
            raise acp.RequestError.invalid_params({"path": path, "reason": "not a regular file"})
        return resolved

    async def read_text_file(
        self,
        session_id: str,
        path: str,
        line: int | None = None,
        limit: int | None = None,
        **kwargs: Any,
    ) -> ReadTextFileResponse:
        target = self.resolve(path)
        try:
            text = await asyncio.to_thread(target.read_text, encoding="utf-8")
        except FileNotFoundError:
            raise acp.RequestError.resource_not_found(path) from None
        except UnicodeDecodeError:
            raise acp.RequestError.invalid_params({"path": path, "reason": "not UTF-8"}) from None
        if line is not None or limit is not None:
            lines = text.splitlines(keepends=True)[(line or 1) - 1 :]
            text = "".join(lines if limit is None else lines[:limit])
        return ReadTextFileResponse(content=text)

    def write_sync(self, target: Path, content: str) -> None:
        fd, temp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as file:
                file.write(content)
            os.replace(temp, target)
        except BaseException:
            os.unlink(temp)
            raise

    async def write_text_file(
        self, session_id: str, path: str, content: str, **kwargs: Any
    ) -> WriteTextFileResponse:
        target = self.resolve(path)
        if not target.parent.is_dir():
            raise acp.RequestError.resource_not_found(path)
        await asyncio.shield(asyncio.to_thread(self.write_sync, target, content))
        return WriteTextFileResponse()

    async def create_terminal(
        self,
        session_id: str,
        command: str,
        args: list[str] | None = None,
        env: list[Any] | None = None,
        cwd: str | None = None,
        output_byte_limit: int | None = None,
        **kwargs: Any,
    ) -> CreateTerminalResponse:
        say(f"\nrunning {command} {' '.join(args or ())}")
        environment = {**os.environ, **{v.name: v.value for v in env or ()}}
        process = await asyncio.create_subprocess_exec(
            command,
            *(args or ()),
            cwd=cwd or self.root,
            env=environment,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )
        terminal_id = f"term-{os.urandom(8).hex()}"
        limit = MAX_OUTPUT if output_byte_limit is None else min(output_byte_limit, MAX_OUTPUT)
        self.terminals[terminal_id] = Terminal(session_id, process, limit)
        return CreateTerminalResponse(terminal_id=terminal_id)

    def terminal(self, session_id: str, terminal_id: str) -> Terminal:
        terminal = self.terminals.get(terminal_id)
        if terminal is None or terminal.session_id != session_id:
            raise acp.RequestError.resource_not_found(terminal_id)
        return terminal

    async def terminal_output(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> TerminalOutputResponse:
        terminal = self.terminal(session_id, terminal_id)
        output = terminal.output.decode("utf-8", errors="replace")
        return TerminalOutputResponse(
            output=output, truncated=terminal.truncated, exit_status=terminal.exit_status()
        )

    async def wait_for_terminal_exit(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> WaitForTerminalExitResponse:
        status = await self.terminal(session_id, terminal_id).wait()
        return WaitForTerminalExitResponse(exit_code=status.exit_code, signal=status.signal)

    async def kill_terminal(self, session_id: str, terminal_id: str, **kwargs: Any) -> None:
        await asyncio.shield(self.terminal(session_id, terminal_id).kill())

    async def release_terminal(self, session_id: str, terminal_id: str, **kwargs: Any) -> None:
        terminal = self.terminal(session_id, terminal_id)
        del self.terminals[terminal_id]
        await asyncio.shield(terminal.kill())

    async def close(self) -> None:
        terminals, self.terminals = list(self.terminals.values()), {}
        await asyncio.gather(*(terminal.kill() for terminal in terminals))


async def run_turn(conn: Any, editor: Editor, sid: str, text: str) -> Any:
    """One prompt turn; Ctrl-C cancels it (and a second one leaves)."""
    loop = asyncio.get_running_loop()
    editor.cancelled.discard(sid)
    turn = asyncio.ensure_future(conn.prompt(session_id=sid, prompt=[TextContentBlock(text=text)]))
    cancels: list[asyncio.Future[None]] = []

    def on_ctrl_c() -> None:
        if cancels:
            turn.cancel()
            return
        say("\ncancelling the turn (Ctrl-C again to leave)")
        cancels.append(asyncio.ensure_future(conn.cancel(session_id=sid)))
        editor.cancel_questions(sid)

    loop.add_signal_handler(signal.SIGINT, on_ctrl_c)
    try:
        return await turn
    except asyncio.CancelledError:
        if cancels and turn.cancelled():
            raise KeyboardInterrupt from None
        raise
    finally:
        loop.remove_signal_handler(signal.SIGINT)
        await asyncio.gather(*cancels, return_exceptions=True)


async def main(root: Path, prompts: list[str], command: list[str], yes: bool) -> None:
    editor = Editor(root, yes)
    try:
        async with acp.spawn_agent_process(
            editor, command[0], *command[1:], transport_kwargs={"stderr": None}
        ) as (
            conn,
            _process,
        ):
            await conn.initialize(
                protocol_version=acp.PROTOCOL_VERSION,
                client_capabilities=ClientCapabilities(
                    fs=FileSystemCapabilities(read_text_file=True, write_text_file=True),
                    terminal=True,
                ),
            )
            sid = (await conn.new_session(cwd=str(root), mcp_servers=[])).session_id
            for text in prompts:
                answer = await run_turn(conn, editor, sid, text)
                say(f"\nstop reason: {answer.stop_reason if answer else 'none'}")
    finally:
        await asyncio.shield(editor.close())


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path.cwd())
    parser.add_argument("--prompt", action="append", default=[], help="a prompt (repeatable)")
    parser.add_argument("--yes", action="store_true", help="allow every permission request")
    parser.add_argument("command", nargs="+", help="the agent command, after --")
    args = parser.parse_args()
    asyncio.run(main(args.root.resolve(), args.prompt or ["hello"], args.command, args.yes))
