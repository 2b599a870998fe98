"""The public seams proxies, tools and the typed layer build on, each
through the public API: ``Connection.send_request``,
``notify_past_limit_nowait``, ``run_in_notification_order_soon``,
``serve``, ``start_soon``, ``closed_error``, ``handler``; ``PendingRequest.cancel``,
``result_nowait``, ``add_done_callback``, ``detached``."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from acp_trio import ConnectionClosed, LocalProtocolError, RequestError
from acp_trio.lowlevel import Connection, PendingRequest

from .conftest import (
    LIMIT,
    FnHandler,
    cancel,
    err,
    notif,
    ok,
    raw_connection,
    raw_peer,
    req,
    settle,
)


async def test_send_request_leaves_the_request_to_its_caller(autojump_clock: Any) -> None:
    with trio.fail_after(LIMIT):
        async with raw_connection() as (conn, peer, wire):
            pending = await conn.send_request("slow", {"n": 1})
            assert isinstance(pending, PendingRequest)
            assert await peer.receive() == req(0, "slow", {"n": 1})
            assert not pending.done
            # A wait for it given up is not a cancel on the wire.
            with trio.move_on_after(1):
                await pending.result()
            assert not pending.done
            assert not pending.cancel_sent
            await peer.respond(0, {"answer": 42})
            assert await pending.result() == {"answer": 42}
            assert wire.sent_cancels() == []


async def test_send_request_refuses_bad_params_and_a_closed_connection(
    autojump_clock: Any,
) -> None:
    with trio.fail_after(LIMIT):
        async with raw_connection() as (conn, _peer, _wire):
            with pytest.raises(LocalProtocolError, match="params must be"):
                await conn.send_request("m", "a string")
        with pytest.raises(ConnectionClosed):
            await conn.send_request("m")


async def test_cancel_sends_one_cancel_at_once_and_the_answer_still_comes(
    autojump_clock: Any,
) -> None:
    with trio.fail_after(LIMIT):
        async with raw_connection() as (conn, peer, wire):
            pending = await conn.send_request("slow")
            assert await peer.receive() == req(0, "slow")
            with trio.testing.assert_no_checkpoints():
                pending.cancel()
                pending.cancel()  # idempotent
            assert pending.cancel_sent
            assert not pending.done
            assert await peer.receive() == cancel(0)
            await peer.send(err(0, -32800, "Request cancelled"))
            with pytest.raises(RequestError) as caught:
                await pending.result()
            assert caught.value.code == -32800
            pending.cancel()  # answered: nothing more is sent
            await settle()
            assert len(wire.sent_cancels()) == 1


async def test_result_nowait_answers_at_once_and_from_any_task(autojump_clock: Any) -> None:
    with trio.fail_after(LIMIT):
        async with raw_connection() as (conn, peer, _wire):
            pending = await conn.send_request("slow")
            with pytest.raises(trio.WouldBlock):
                pending.result_nowait()
            got: list[Any] = []
            async with trio.open_nursery() as nursery:

                async def wait() -> None:
                    got.append(await pending.result())

                nursery.start_soon(wait)
                await settle()
                await peer.respond(0, [1, 2])
                await settle()
                # The waiting task has its answer; another reads it too.
                assert pending.result_nowait() == [1, 2]
            assert got == [[1, 2]]

            failing = await conn.send_request("fails")
            await peer.send(err(1, -32001, "no"))
            await settle()
            for _ in range(2):  # a fresh exception each time
                with pytest.raises(RequestError, match="no"):
                    failing.result_nowait()


async def test_add_done_callback_runs_once_settled(autojump_clock: Any) -> None:
    with trio.fail_after(LIMIT):
        async with raw_connection() as (conn, peer, _wire):
            pending = await conn.send_request("slow")
            seen: list[str] = []
            pending.add_done_callback(lambda: seen.append("first"))
            pending.add_done_callback(lambda: seen.append(repr(pending.result_nowait())))
            assert seen == []
            await peer.send(ok(0, "yes"))
            await settle()
            assert seen == ["first", "'yes'"]
            # Already settled: at once.
            pending.add_done_callback(lambda: seen.append("late"))
            assert seen[-1] == "late"

            cut = await conn.send_request("slow")
            errors: list[BaseException] = []

            def record() -> None:
                try:
                    cut.result_nowait()
                except BaseException as exc:
                    errors.append(exc)

            cut.add_done_callback(record)
        # Closing settles what was pending.
        assert len(errors) == 1
        assert isinstance(errors[0], ConnectionClosed)


async def test_detached(autojump_clock: Any) -> None:
    with trio.fail_after(LIMIT):
        async with raw_connection() as (conn, _peer, wire):
            async with conn.open_request("slow") as pending:
                assert not pending.detached
                pending.detach()
                assert pending.detached
            await settle()
            assert wire.sent_cancels() == []


async def test_notify_past_limit_nowait_queues_where_notify_nowait_would_block(
    autojump_clock: Any,
) -> None:
    with trio.fail_after(LIMIT):
        async with raw_connection(
            stream_pair=trio.testing.lockstep_stream_pair, outbox_limit=2
        ) as (conn, peer, _wire):
            with trio.testing.assert_no_checkpoints():
                conn.notify_nowait("note", {"n": 0})
                conn.notify_nowait("note", {"n": 1})
                with pytest.raises(trio.WouldBlock):
                    conn.notify_nowait("note", {"n": 2})
                assert conn.notify_past_limit_nowait("session/cancel", {"sessionId": "s"})
            got = [await peer.receive() for _ in range(3)]
            assert got == [
                notif("note", {"n": 0}),
                notif("note", {"n": 1}),
                notif("session/cancel", {"sessionId": "s"}),
            ]
            with pytest.raises(LocalProtocolError, match="params must be"):
                conn.notify_past_limit_nowait("note", "a string")  # type: ignore[arg-type]
        # Nothing more is written: nothing is sent, and it says so.
        assert not conn.notify_past_limit_nowait("note", {})


async def test_run_in_notification_order_soon_runs_between_notifications(
    autojump_clock: Any,
) -> None:
    order: list[str] = []

    async def note(method: str, params: Any) -> None:
        await trio.sleep(1)
        order.append(f"note {params['n']}")

    with trio.fail_after(LIMIT):
        async with raw_connection(FnHandler(notifications={"note": note})) as (conn, peer, _w):
            await peer.send(notif("note", {"n": 1}), notif("note", {"n": 2}))
            await trio.sleep(0.5)  # both read, the first being handled

            async def ours() -> None:
                order.append(f"ours, in {trio.lowlevel.current_task().name}")

            with trio.testing.assert_no_checkpoints():
                assert conn.run_in_notification_order_soon(ours)
            await peer.send(notif("note", {"n": 3}))
            await trio.sleep(10)
            assert order == ["note 1", "note 2", "ours, in acp notifications", "note 3"]

            async def fails() -> None:
                raise ValueError("logged, as a notification handler's error is")

            assert conn.run_in_notification_order_soon(fails)
            await peer.send(notif("note", {"n": 4}))
            await trio.sleep(10)
            assert order[-1] == "note 4"
        assert not conn.run_in_notification_order_soon(ours)


async def test_serve_runs_a_connection_made_beforehand(autojump_clock: Any) -> None:
    with trio.fail_after(LIMIT):
        ours, theirs = trio.testing.memory_stream_pair()
        conn = Connection(ours, FnHandler({"echo": lambda ctx, params: _echo(params)}))
        peer = raw_peer(theirs)
        async with trio.open_nursery() as nursery:
            assert await nursery.start(conn.serve) is conn
            await peer.send(req(1, "echo", {"x": 1}))
            assert await peer.receive() == ok(1, {"x": 1})
            with pytest.raises(RuntimeError, match="once"):
                await conn.serve()
            # Cancelling serve() closes the connection.
            nursery.cancel_scope.cancel()
        assert conn.closed
        await peer.expect_eof()


async def _echo(params: Any) -> Any:
    return params


async def test_start_soon_runs_a_task_until_the_connection_closes(autojump_clock: Any) -> None:
    ends: list[str] = []

    async def worker(name: str) -> None:
        try:
            await trio.sleep_forever()
        finally:
            ends.append(name)

    with trio.fail_after(LIMIT):
        ours, _theirs = trio.testing.memory_stream_pair()
        idle = Connection(ours)
        with pytest.raises(RuntimeError, match="not running"):
            idle.start_soon(worker, "early")
        async with raw_connection() as (conn, _peer, _wire):
            conn.start_soon(worker, "w", name="worker")
            await settle()
            assert ends == []
        # Cancelled by closing.
        assert ends == ["w"]
        with pytest.raises(ConnectionClosed):
            conn.start_soon(worker, "late")


async def test_closed_error_is_what_calls_raise(autojump_clock: Any) -> None:
    with trio.fail_after(LIMIT):
        async with raw_connection() as (conn, peer, _wire):
            await peer.aclose()
            await conn.wait_closed()
        with pytest.raises(ConnectionClosed) as caught:
            await conn.call("m")
        first, second = conn.closed_error(), conn.closed_error()
        assert first is not second
        assert isinstance(first, ConnectionClosed)
        assert str(first) == str(caught.value)


async def test_handler_is_the_one_it_runs(autojump_clock: Any) -> None:
    made: list[FnHandler] = []

    def factory(conn: Connection) -> FnHandler:
        made.append(FnHandler())
        return made[-1]

    with trio.fail_after(LIMIT):
        handler = FnHandler()
        async with raw_connection(handler) as (conn, _peer, _wire):
            assert conn.handler is handler
        ours, _theirs = trio.testing.memory_stream_pair()
        assert Connection(ours, factory).handler is made[0]
