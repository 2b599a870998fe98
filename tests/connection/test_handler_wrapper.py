"""The wrapper a handler task runs in (``Connection._run_handler``) and the
shared method names: regressions from the review of the leaner wrapper."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

import acp_trio._core._incoming as connection_module
from acp_trio.lowlevel import Connection, RequestContext

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


def test_the_handler_wrapper_frame_stays_small() -> None:
    """``_run_handler``'s frame lives as long as its request is in flight, so
    every slot in it is paid 10,000 times over by 10,000 waiting requests
    (a nested ``try`` in it once cost 16 B a request). Guard its size."""
    code = Connection._run_handler.__code__
    assert code.co_nlocals <= 6, code.co_varnames
    assert code.co_stacksize <= 6
