"""The two-process cancel cascade in bare Trio: the floor of
``bench_connection.cascade_two_processes``, with the other side of it
(``cascade_floor.bare_trio_two_processes``, in the client's process).

The same tree of 1,000 requests as acp_trio's, split the same way between a
client and the agent process it spawned, over the agent's stdin and stdout:
``chain`` (each level a request from one process to the other, its handler
calling the next level back) or ``fan`` (the agent's handler calls ``hold``
1,000 times on the client). Cancelled at the client's root; timed until
neither process has anything in flight, the client asking the agent
(``pending``) every millisecond once its own side is done, as acp_trio's
benchmark does. Each side is :class:`ProcessSide`: ``cascade_floor._Side``'s
reader and writer (cancels matched by their bytes, the cancels of one cancel
joined into one write, the replies of a cancelled fan joined into one write,
a lone frame written at once), a task and a ``CancelScope`` per incoming
request, an outgoing request parked in ``wait_task_rescheduled`` whose abort
writes its ``$/cancel_request``; the requests that build the tree (not
timed) are decoded with orjson.

Why nothing honest beats it: each request is one task in its own scope
(the least that lets cancelling a scope cancel its nested requests), each
cancel and reply one frame matched or written as bytes, every write joined
as far as the tree allows; what is left is Trio's own cost of cancelling
and finishing 1,000 tasks and the pipe between the processes, which any
program that cascades a cancel across two processes pays.

    python trio_cascade_peer.py   (spawned by cascade_floor.py)
"""

from __future__ import annotations

import itertools
import os
import sys
from typing import Any

import orjson
import outcome
import trio

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from cascade_floor import _CANCEL, _CANCEL_HEAD, _CANCELLED, RECEIVE_SIZE, _Side

_CANCELLED_TAIL = b'"Request cancelled"}}'
_LINE = orjson.OPT_APPEND_NEWLINE


class ProcessSide(_Side):
    """One process's end of the cascade: handlers for the requests it
    reads, calls of its own, and how much it has in flight."""

    def __init__(self, read_fd: int, write_fd: int, nursery: trio.Nursery) -> None:
        super().__init__(read_fd, write_fd)
        self.nursery = nursery
        self.ids = itertools.count(1)
        self.outgoing = 0  # calls waiting (cancelled ones are forgotten at once)
        self.waiting: dict[int, trio.lowlevel.Task] = {}  # calls answered: the poll
        self.bottom = trio.Event()  # the chain's last level started here

    @property
    def in_flight(self) -> int:
        return len(self.scopes) + self.outgoing

    async def reader(self) -> None:
        held = b""
        while True:
            await trio.lowlevel.wait_readable(self.read_fd)
            data = os.read(self.read_fd, RECEIVE_SIZE)
            if not data:
                return
            *lines, held = (held + data).split(b"\n")
            for line in lines:
                if line.startswith(_CANCEL_HEAD):
                    self.cancel(line)
                elif not line.endswith(_CANCELLED_TAIL):
                    self.message(orjson.loads(line))
                # else: a -32800 reply to a call that is gone: dropped

    def message(self, msg: dict[str, Any]) -> None:
        method = msg.get("method")
        if method == "pending":
            self.write(
                orjson.dumps(
                    {"jsonrpc": "2.0", "id": msg["id"], "result": self.in_flight}, option=_LINE
                )
            )
        elif method is not None:
            self.nursery.start_soon(self.serve, msg["id"], method, msg.get("params"))
        else:
            task = self.waiting.pop(msg["id"])
            trio.lowlevel.reschedule(task, outcome.Value(msg["result"]))

    async def serve(self, request_id: int, method: str, params: Any) -> None:
        with trio.CancelScope() as scope:
            self.scopes[request_id] = scope
            if method == "chain":
                if params["depth"] == 0:
                    self.bottom.set()
                    await trio.sleep_forever()
                await self.call("chain", {"depth": params["depth"] - 1})
            elif method == "fan":
                async with trio.open_nursery() as nursery:
                    for _ in range(params["n"]):
                        nursery.start_soon(self.call, "hold", None)
            else:
                await trio.sleep_forever()
        del self.scopes[request_id]
        self.write(_CANCELLED % request_id)

    async def call(self, method: str, params: Any) -> None:
        """A request that is only ever cancelled: its cancel is written by the
        abort, at once."""
        request_id = next(self.ids)
        message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        self.write(orjson.dumps(message, option=_LINE))
        self.outgoing += 1

        def abort(_: Any) -> trio.lowlevel.Abort:
            self.outgoing -= 1
            self.write(_CANCEL % request_id)
            return trio.lowlevel.Abort.SUCCEEDED

        await trio.lowlevel.wait_task_rescheduled(abort)

    async def ask(self, method: str) -> Any:
        """A request answered (the poll): its result."""
        request_id = next(self.ids)
        self.write(
            orjson.dumps({"jsonrpc": "2.0", "id": request_id, "method": method}, option=_LINE)
        )
        self.waiting[request_id] = trio.lowlevel.current_task()
        return await trio.lowlevel.wait_task_rescheduled(lambda _: trio.lowlevel.Abort.FAILED)


async def serve_peer() -> None:
    """The agent's side, on this process's stdin and stdout, until stdin ends."""
    read_fd, write_fd = os.dup(0), os.dup(1)
    for fd in (read_fd, write_fd):
        os.set_blocking(fd, False)
    async with trio.open_nursery() as nursery:
        side = ProcessSide(read_fd, write_fd, nursery)
        nursery.start_soon(side.writer)
        await side.reader()
        nursery.cancel_scope.cancel()


if __name__ == "__main__":
    trio.run(serve_peer)
