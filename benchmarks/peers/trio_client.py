"""The acp_trio benchmark client (typed API: :class:`acp_trio.Client`,
:func:`acp_trio.open_spawned_agent`). Workloads and output: ``_common.py``.

Held requests (the read of ``/hold``, ``terminal/create``, permission) wait
until they are cancelled: by the agent's ``$/cancel_request`` (the SDK
answers ``-32800``), or, for a permission request, by our own
``session/cancel`` (the SDK answers it ``cancelled``).
"""

from __future__ import annotations

import os
import time
from typing import Any, NoReturn

import trio
from _common import CONTENT, HOLD_PATH, TreeCpu, check_answer, emit, parse_args, prompt_text

import acp_trio
from acp_trio import schema

CAPABILITIES = schema.ClientCapabilities(
    fs=schema.FileSystemCapabilities(read_text_file=True, write_text_file=True), terminal=True
)
_READ = schema.ReadTextFileResponse(content=CONTENT)


class BenchClient(acp_trio.Client):
    def __init__(self) -> None:
        super().__init__()
        self.chunks = 0
        self.last_text: str | None = None
        self.arrived = 0
        self.all_held = trio.Event()
        self.cancelled = 0

    def reset(self) -> None:
        self.chunks, self.last_text, self.arrived = 0, None, 0
        self.all_held = trio.Event()

    async def session_update(self, params: schema.SessionNotification) -> None:
        update = params.update
        if isinstance(update, schema.AgentMessageChunk):
            self.chunks += 1
            content = update.content
            if isinstance(content, schema.TextContent):
                self.last_text = content.text

    async def _hold(self) -> NoReturn:
        self.arrived += 1
        if self.arrived == 3:
            self.all_held.set()
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            self.cancelled += 1
            raise

    async def read_text_file(self, params: schema.ReadTextFileRequest) -> Any:
        if params.path == HOLD_PATH:
            await self._hold()
        return _READ

    async def write_text_file(self, params: schema.WriteTextFileRequest) -> Any:
        return schema.WriteTextFileResponse()

    async def create_terminal(self, params: schema.CreateTerminalRequest) -> Any:
        await self._hold()

    async def request_permission(self, params: schema.RequestPermissionRequest) -> Any:
        await self._hold()


async def main() -> None:
    args = parse_args()
    client = BenchClient()
    async with acp_trio.open_spawned_agent(client, args.command, stderr="inherit") as agent:
        await agent.initialize(
            schema.InitializeRequest(
                protocol_version=schema.PROTOCOL_VERSION,
                client_capabilities=CAPABILITIES,
                client_info=schema.Implementation(name="acp_trio-bench-client", version="1"),
            )
        )
        session = await agent.new_session(schema.NewSessionRequest(cwd=os.getcwd(), mcp_servers=[]))
        sid = session.session_id
        if args.workload == "cancel":
            latencies: list[float] = []
            for cycle in range(args.warmup + args.n):
                client.reset()
                answer: list[schema.PromptResponse] = []
                async with trio.open_nursery() as nursery:

                    async def run_prompt(answer: list[schema.PromptResponse] = answer) -> None:
                        answer.append(await agent.prompt_text(sid, "nested"))

                    nursery.start_soon(run_prompt)
                    await client.all_held.wait()
                    start = time.perf_counter()
                    await agent.cancel(sid)
                done = time.perf_counter()
                check_answer("cancel", 1, client.chunks, None, answer[0].stop_reason)
                if cycle >= args.warmup:
                    latencies.append((done - start) * 1000)
            emit("acp_trio", "cancel", args.n, latencies_ms=latencies, cancelled=client.cancelled)
        else:
            if args.warmup:
                await agent.prompt_text(sid, prompt_text(args.workload, args.warmup))
            client.reset()
            text = prompt_text(args.workload, args.n)
            tree = TreeCpu()
            tree.start()
            cpu = time.process_time()
            start = time.perf_counter()
            result = await agent.prompt_text(sid, text)
            seconds = time.perf_counter() - start
            cpu = time.process_time() - cpu
            tree_cpu = tree.seconds()
            check_answer(args.workload, args.n, client.chunks, client.last_text, result.stop_reason)
            emit(
                "acp_trio",
                args.workload,
                args.n,
                seconds=seconds,
                cpu_seconds=cpu,
                tree_cpu_seconds=tree_cpu,
            )


if __name__ == "__main__":
    trio.run(main)
