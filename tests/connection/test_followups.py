"""Smaller guarantees: no hang on an abandoned request's result, the deadline
named as the cause while the handler is being cancelled."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from acp_trio import LocalProtocolError
from acp_trio.lowlevel import CancelCause, RequestContext

from .conftest import LIMIT, FnHandler, cancelled, raw_connection, req


async def test_result_after_leaving_open_request_raises_instead_of_hanging(
    autojump_clock: Any,
) -> None:
    with trio.fail_after(LIMIT):
        async with raw_connection() as (conn, peer, _):
            async with conn.open_request("slow") as pending:
                assert await peer.receive() == req(0, "slow")
            assert pending.done
            with pytest.raises(LocalProtocolError, match="abandoned"):
                await pending.result()


async def test_deadline_is_the_cause_seen_inside_the_handler(autojump_clock: Any) -> None:
    causes: list[CancelCause | None] = []

    async def slow(ctx: RequestContext, params: Any) -> Any:
        try:
            await trio.sleep_forever()
        finally:
            causes.append(ctx.cancel_cause)

    with trio.fail_after(LIMIT):
        async with raw_connection(FnHandler({"slow": slow}), request_timeout=3) as (
            _,
            peer,
            _,
        ):
            await peer.send(req(1, "slow"))
            assert await peer.receive() == cancelled(1)
            assert trio.current_time() == 3
    assert causes == [CancelCause.DEADLINE]


@pytest.mark.parametrize("params", [3, "text", True])
async def test_scalar_params_are_refused_locally(autojump_clock: Any, params: Any) -> None:
    with trio.fail_after(LIMIT):
        async with raw_connection() as (conn, peer, _):
            with pytest.raises(LocalProtocolError, match="params must be"):
                await conn.call("x", params)
            with pytest.raises(LocalProtocolError, match="params must be"):
                await conn.notify("y", params)
            await peer.expect_silence(5)
