"""``RequestContext.connection`` is typed as the ``ConnectionAPI`` protocol
(so the per-request objects need not import the connection): it lists every
public member of ``Connection`` but the three only the code that made the
connection uses, with the same parameters, and a handler that uses all of
it (``tests/typed_usage/lowlevel_usage.py``, checked by ``mypy --strict``)
runs."""

from __future__ import annotations

import inspect
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from acp_trio.lowlevel import Connection, ConnectionAPI, PendingRequest, RequestContext

from .conftest import LIMIT, FnHandler, connection_pair

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "typed_usage"))

from lowlevel_usage import ForwardingHandler, as_api

#: Public members of Connection a handler has no use for, each with why.
ONLY_FOR_THE_MAKER = {
    "config": "set when the connection is made",
    "handler": "the handler itself, or the one wrapped around it",
    "serve": "runs the connection, once, by the code that made it",
}


def public_members(cls: type) -> dict[str, Any]:
    return {name: value for name, value in vars(cls).items() if not name.startswith("_")}


def drift(connection_class: type) -> tuple[set[str], set[str]]:
    """(public members of the connection the protocol lacks, members of the
    protocol the connection lacks)."""
    # ``config`` is an attribute set in __init__.
    ours = {*public_members(connection_class), "config"} - set(ONLY_FOR_THE_MAKER)
    for base in connection_class.__mro__[1:]:
        if base is not object:
            ours |= set(public_members(base)) - set(ONLY_FOR_THE_MAKER)
    api = set(public_members(ConnectionAPI))
    return ours - api, api - ours


def test_the_protocol_lists_every_public_member_of_the_connection() -> None:
    assert drift(Connection) == (set(), set())
    assert set(ONLY_FOR_THE_MAKER) <= {*public_members(Connection), "config"}


def test_a_member_on_one_side_only_is_caught() -> None:
    class Grown(Connection):  # (final for type checkers only)
        def extra(self) -> None:
            """A method the protocol does not list."""

    assert drift(Grown) == ({"extra"}, set())

    class Shrunk:
        closed = False

    lacking = drift(Shrunk)[1]
    assert "call" in lacking
    assert "closed" not in lacking


def test_each_member_of_the_protocol_takes_what_the_connection_takes() -> None:
    for name, member in public_members(ConnectionAPI).items():
        ours = getattr(Connection, name)
        if isinstance(member, property):
            assert isinstance(ours, property), name
            continue
        theirs = inspect.signature(member).parameters
        assert list(inspect.signature(ours).parameters.items()) == list(theirs.items()), name
        assert inspect.iscoroutinefunction(ours) == inspect.iscoroutinefunction(member), name


async def test_a_handler_uses_its_connection_through_the_protocol(autojump_clock: Any) -> None:
    async def inner(ctx: RequestContext, params: Any) -> Any:
        return params["n"] * 10

    seen: list[str] = []
    three = trio.Event()

    async def note(method: str, params: Any) -> None:
        seen.append(method)
        if len(seen) == 3:
            three.set()

    forwarding = ForwardingHandler()
    with trio.fail_after(LIMIT):
        async with connection_pair(forwarding, FnHandler({"inner": inner}, {"note": note})) as (
            a,
            b,
            _,
            _,
        ):
            assert as_api(a) is a
            answer = await b.call("ask", {})
            await forwarding.ran_in_order.wait()
            await three.wait()
    assert answer["answers"] == [10, 20, 30]
    assert answer["report"] == {
        "incoming": 1,
        "tree": ["ask"],
        "dump": "<- ask id=0 [running]",
        "closing": None,
    }
    assert seen == ["note"] * 3


def test_the_per_request_objects_have_no_public_constructor() -> None:
    # Live objects of a connection, made by it only (as trio's are).
    for cls in (RequestContext, PendingRequest):
        with pytest.raises(TypeError, match="made by its connection only"):
            cls()
