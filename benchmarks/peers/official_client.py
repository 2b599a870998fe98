"""The benchmark client written with the official Python SDK,
``agent-client-protocol`` 0.12.1 (module ``acp``, asyncio + pydantic):
``acp.spawn_agent_process`` and a class implementing ``acp.Client``.
Workloads and output: ``_common.py``. Run with the ``.venv-bench`` interpreter.

Held requests (the read of ``/hold``, ``terminal/create``, permission) never
answer on their own. The SDK has no ``$/cancel_request``: an agent's cancel
of a held request cannot reach the handler (the SDK logs it as an error), so
those stay held; an observer counts the ``$/cancel_request`` frames that
arrived. On our own ``session/cancel`` the pending permission requests get
the ``cancelled`` outcome (our code: the SDK does not do it).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from typing import Any

import acp
from _common import CONTENT, HOLD_PATH, check_answer, emit, parse_args, prompt_text
from acp.schema import (
    AgentMessageChunk,
    ClientCapabilities,
    DeniedOutcome,
    FileSystemCapabilities,
    Implementation,
    ReadTextFileResponse,
    RequestPermissionResponse,
    TextContentBlock,
    WriteTextFileResponse,
)

_READ = ReadTextFileResponse(content=CONTENT)
_CANCELLED = RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))


class BenchClient:
    """Implements the ``acp.Client`` protocol (methods found by name)."""

    def __init__(self) -> None:
        self.chunks = 0
        self.last_text: str | None = None
        self.arrived = 0
        self.all_held = asyncio.Event()
        self.permissions: set[asyncio.Future[RequestPermissionResponse]] = set()
        self.wire_cancels = 0

    def reset(self) -> None:
        self.chunks, self.last_text, self.arrived = 0, None, 0
        self.all_held = asyncio.Event()

    def on_connect(self, conn: Any) -> None:
        pass

    def observe(self, event: Any) -> None:
        if event.message.get("method") == "$/cancel_request":
            self.wire_cancels += 1

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        if isinstance(update, AgentMessageChunk):
            self.chunks += 1
            if isinstance(update.content, TextContentBlock):
                self.last_text = update.content.text

    def _arrive(self) -> None:
        self.arrived += 1
        if self.arrived == 3:
            self.all_held.set()

    async def read_text_file(self, session_id: str, path: str, **kwargs: Any) -> Any:
        if path == HOLD_PATH:
            self._arrive()
            await asyncio.Future()
        return _READ

    async def write_text_file(self, session_id: str, path: str, content: str, **kwargs: Any) -> Any:
        return WriteTextFileResponse()

    async def create_terminal(self, session_id: str, command: str, **kwargs: Any) -> Any:
        self._arrive()
        await asyncio.Future()

    async def request_permission(self, session_id: str, **kwargs: Any) -> Any:
        answer: asyncio.Future[RequestPermissionResponse] = asyncio.Future()
        self.permissions.add(answer)
        self._arrive()
        try:
            return await answer
        finally:
            self.permissions.discard(answer)

    def cancel_permissions(self) -> None:
        for answer in list(self.permissions):
            if not answer.done():
                answer.set_result(_CANCELLED)


async def main() -> None:
    args = parse_args()
    # The SDK logs every $/cancel_request it receives as an ERROR traceback.
    logging.disable(logging.CRITICAL)
    client = BenchClient()
    observers = [client.observe] if args.workload == "cancel" else None
    async with acp.spawn_agent_process(
        client,
        args.command[0],
        *args.command[1:],
        transport_kwargs={"stderr": None},
        observers=observers,
    ) as (conn, _process):
        await conn.initialize(
            protocol_version=acp.PROTOCOL_VERSION,
            client_capabilities=ClientCapabilities(
                fs=FileSystemCapabilities(read_text_file=True, write_text_file=True),
                terminal=True,
            ),
            client_info=Implementation(name="official-python-bench-client", version="0.12.1"),
        )
        session = await conn.new_session(cwd=os.getcwd(), mcp_servers=[])
        sid = session.session_id
        if args.workload == "cancel":
            latencies: list[float] = []
            for cycle in range(args.warmup + args.n):
                client.reset()
                prompt = asyncio.ensure_future(
                    conn.prompt(session_id=sid, prompt=[acp.text_block("nested")])
                )
                await client.all_held.wait()
                start = time.perf_counter()
                await conn.cancel(session_id=sid)
                client.cancel_permissions()
                result = await prompt
                done = time.perf_counter()
                check_answer("cancel", 1, client.chunks, None, result.stop_reason)
                if cycle >= args.warmup:
                    latencies.append((done - start) * 1000)
            emit(
                "official",
                "cancel",
                args.n,
                latencies_ms=latencies,
                wire_cancels=client.wire_cancels,
            )
        else:
            if args.warmup:
                block = acp.text_block(prompt_text(args.workload, args.warmup))
                await conn.prompt(session_id=sid, prompt=[block])
            client.reset()
            block = acp.text_block(prompt_text(args.workload, args.n))
            cpu = time.process_time()
            start = time.perf_counter()
            result = await conn.prompt(session_id=sid, prompt=[block])
            seconds = time.perf_counter() - start
            cpu = time.process_time() - cpu
            check_answer(args.workload, args.n, client.chunks, client.last_text, result.stop_reason)
            emit("official", args.workload, args.n, seconds=seconds, cpu_seconds=cpu)


if __name__ == "__main__":
    asyncio.run(main())
