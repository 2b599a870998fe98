"""The end-of-step give-back of the read right (``_core/_end_of_step.py``)
at its edges: the giving task exits or is cancelled in the step it gave
back, two connections give back in turn, and the instrument is in the run
only until the step that owes something ends (an owed call that raises
loses nothing)."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from acp_trio._core._end_of_step import EndOfStep

from .conftest import LIMIT, READER, FnHandler, assert_idle, ok, req, settle, this_task
from .test_caller_reads import answer_first, echo, over_a_pipe


async def test_task_exits_in_the_step_it_gave_back(autojump_clock: Any) -> None:
    handler = FnHandler({"echo": echo})
    with trio.fail_after(LIMIT):
        async with over_a_pipe(handler) as (conn, peer, wire, _):
            got: list[Any] = []

            tasks: list[trio.lowlevel.Task] = []

            async def caller() -> None:
                tasks.append(this_task())
                got.append(await conn.call("first"))
                got.append(await conn.call("second"))  # read by this task, then it exits

            async with trio.open_nursery() as nursery:
                nursery.start_soon(caller)
                await answer_first(peer)
                assert await peer.receive() == req(1, "second")
                await settle()
                await peer.send(ok(1, "two"))
            assert got == ["one", "two"]
            assert wire.reader_of(ok(1, "two")) is tasks[0]
            await peer.send(req("r", "echo", {"z": 1}))
            assert await peer.receive() == ok("r", {"z": 1})
            assert wire.reader_of(req("r", "echo", {"z": 1})).name == READER
            await settle()
            assert_idle(conn)


async def test_two_connections_give_back_in_turn(autojump_clock: Any) -> None:
    with trio.fail_after(LIMIT):
        async with over_a_pipe(FnHandler({"echo": echo})) as (a, pa, _wa, _):
            async with over_a_pipe(FnHandler({"echo": echo})) as (b, pb, _wb, _):

                async def answer(peer: Any, n: int) -> None:
                    for i in range(n):
                        msg = await peer.receive()
                        await peer.send(ok(msg["id"], i))

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(answer, pa, 20)
                    nursery.start_soon(answer, pb, 20)
                    for i in range(10):
                        assert await a.call("x") == 2 * i
                        assert await a.call("x") == 2 * i + 1
                        assert await b.call("y") == 2 * i
                        assert await b.call("y") == 2 * i + 1
            # b closed, a still serves
            await pa.send(req("r", "echo", {"q": 1}))
            assert await pa.receive() == ok("r", {"q": 1})
            async with trio.open_nursery() as nursery:
                nursery.start_soon(answer, pa, 2)
                assert await a.call("x") == 0
                assert await a.call("x") == 1
            await pa.send(req("r2", "echo", {"q": 2}))
            assert await pa.receive() == ok("r2", {"q": 2})


async def test_give_back_then_cancelled_in_same_step(autojump_clock: Any) -> None:
    handler = FnHandler({"echo": echo})
    with trio.fail_after(LIMIT):
        async with over_a_pipe(handler) as (conn, peer, wire, _):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(answer_first, peer)
                assert await conn.call("first") == "one"

                async def second() -> None:
                    assert await peer.receive() == req(1, "second")
                    await peer.send(ok(1, "two"))

                nursery.start_soon(second)
                with trio.CancelScope() as scope:
                    assert await conn.call("second") == "two"
                    scope.cancel()
                    await trio.sleep_forever()
            await peer.send(req("r", "echo", {"z": 1}))
            assert await peer.receive() == ok("r", {"z": 1})
            assert wire.reader_of(req("r", "echo", {"z": 1})).name == READER
            await settle()
            assert_idle(conn)


async def test_the_hook_is_in_the_run_only_until_the_step_that_owes_ends() -> None:
    hook = EndOfStep()
    paid: list[str] = []
    assert not hook.installed
    hook.defer(lambda: paid.append("a"))
    hook.defer(lambda: paid.append("b"))
    assert hook.installed
    assert paid == []  # (this step has not ended)
    await trio.lowlevel.checkpoint()
    assert paid == ["a", "b"]
    assert not hook.installed
    with pytest.raises(KeyError):
        trio.lowlevel.remove_instrument(hook)  # (out of the run)
    hook.defer(lambda: paid.append("c"))
    await trio.lowlevel.checkpoint()
    assert paid == ["a", "b", "c"]


async def test_an_owed_call_that_raises_loses_nothing(caplog: pytest.LogCaptureFixture) -> None:
    """Trio takes out an instrument that raises (and logs the error): the
    calls owed with the one that raised are still made, and the next
    :meth:`EndOfStep.defer` puts the hook back."""
    hook = EndOfStep()
    paid: list[str] = []

    def boom() -> None:
        raise ValueError("boom")

    hook.defer(lambda: paid.append("a"))
    hook.defer(boom)
    hook.defer(lambda: paid.append("b"))
    await trio.lowlevel.checkpoint()
    assert paid == ["a", "b"]
    assert "boom" in caplog.text
    assert not hook.installed
    with pytest.raises(KeyError):
        trio.lowlevel.remove_instrument(hook)  # (Trio took it out)
    hook.defer(lambda: paid.append("c"))
    await trio.lowlevel.checkpoint()
    assert paid == ["a", "b", "c"]
