"""The wrapper a handler task runs in (``Connection._run_handler``) and the
shared method names: regressions from the review of the leaner wrapper."""

from __future__ import annotations

import gc
import tracemalloc
from typing import Any

import pytest
import trio
import trio.testing

import acp_trio._core._incoming as connection_module
from acp_trio import ConnectionConfig
from acp_trio.lowlevel import RequestContext, open_connection

from .conftest import FnHandler, raw_connection, req


@pytest.mark.parametrize("eager", [False, True])
async def test_an_interrupt_while_building_the_reply_never_sends_a_bare_result(
    monkeypatch: pytest.MonkeyPatch, eager: bool, autojump_clock: trio.testing.MockClock
) -> None:
    # Trio's SIGINT handler raises KeyboardInterrupt wherever unprotected code
    # runs, response() included: the handler's result must not go out as is.
    def interrupted(request_id: Any, result: Any) -> Any:
        raise KeyboardInterrupt

    async def handler(ctx: RequestContext, params: Any) -> Any:
        await trio.lowlevel.checkpoint()
        return {"sessionId": "bare result"}

    monkeypatch.setattr(connection_module, "response", interrupted)
    with pytest.raises(KeyboardInterrupt), trio.fail_after(10):  # noqa: PT012
        async with raw_connection(FnHandler({"m": handler}), eager_handlers=eager) as (
            _conn,
            peer,
            wire,
        ):
            await peer.send(req(1, "m"))
            await trio.sleep(1)
    sent = wire.sent()
    assert {"sessionId": "bare result"} not in sent
    assert all(isinstance(m, dict) and m.get("jsonrpc") == "2.0" for m in sent), sent


async def test_requests_of_one_method_share_its_name(
    autojump_clock: trio.testing.MockClock,
) -> None:
    seen: list[str] = []
    release = trio.Event()

    async def hold(ctx: RequestContext, params: Any) -> Any:
        seen.append(ctx.method)
        await release.wait()
        return {}

    with trio.fail_after(10):
        async with raw_connection(FnHandler({"session/hold": hold})) as (_conn, peer, _wire):
            await peer.send(*(req(i, "session/hold") for i in range(1, 6)))
            await trio.testing.wait_all_tasks_blocked()
            assert len(seen) == 5
            release.set()
            [await peer.receive() for _ in range(5)]
    assert len({id(name) for name in seen}) == 1


#: Requests held in flight by the memory test, and the bound on traced
#: bytes per request (serving side: the handler's task, frames, scope and
#: context, the table entry). About 3,000 B when written; the headroom is
#: for other Python versions, not for a frame keeping a big object alive.
HELD = 2_000
BYTES_PER_REQUEST = 4_500


async def test_memory_per_request_in_flight_stays_bounded() -> None:
    """Each request in flight keeps its handler's task, frames and scope for
    as long as it runs, so every byte there is paid 10,000 times over by
    10,000 waiting requests (a nested ``try`` in the handler wrapper once
    cost 16 B a request; a frame keeping a big object alive costs more).
    Measured as ``benchmarks/bench_connection.py``'s ``memory_in_flight``."""

    async def hold(ctx: RequestContext, params: Any) -> Any:
        await trio.sleep_forever()

    frame = b'{"jsonrpc":"2.0","id":%d,"method":"hold"}\n'
    raw, ours = trio.testing.memory_stream_pair()
    config = ConnectionConfig(max_concurrent_requests=HELD, outbox_limit=4096)
    with trio.fail_after(60):
        async with open_connection(ours, FnHandler({"hold": hold}), config=config) as conn:
            gc.collect()
            tracemalloc.start()
            try:
                base = tracemalloc.get_traced_memory()[0]
                for start in range(0, HELD, 500):
                    await raw.send_all(b"".join(frame % i for i in range(start, start + 500)))
                # Every request read, and every handler started and parked.
                await trio.testing.wait_all_tasks_blocked()
                gc.collect()
                per_request = (tracemalloc.get_traced_memory()[0] - base) / HELD
            finally:
                tracemalloc.stop()
            assert conn.statistics().incoming_in_flight == HELD
            await raw.aclose()
    assert per_request <= BYTES_PER_REQUEST, f"{per_request:.0f} B per request in flight"
