"""What an Agent or Client subclass answers for a method it does not
override: -32601 naming the method, except for the few methods whose
default does something (initialize answers, a cancel or an update is
taken)."""

from __future__ import annotations

from typing import Any

import pytest

import acp_trio
from acp_trio.schema._generated_proxies import AGENT_METHOD_NAMES, CLIENT_METHOD_NAMES

#: The methods whose default is not -32601.
ANSWERED = {"initialize", "session/cancel", "session/update", "elicitation/complete"}


def cases() -> list[Any]:
    return [
        pytest.param(base, wire, name, id=wire)
        for base, names in (
            (acp_trio.Agent, AGENT_METHOD_NAMES),
            (acp_trio.Client, CLIENT_METHOD_NAMES),
        )
        for wire, name in names.items()
        if wire not in ANSWERED
    ]


@pytest.mark.parametrize(("base", "wire", "name"), cases())
async def test_a_method_not_overridden_is_not_found(base: type, wire: str, name: str) -> None:
    handler = base.__new__(base)
    with pytest.raises(acp_trio.RequestError) as info:
        await getattr(handler, name)(None)
    assert info.value.code == -32601
    assert info.value.data == {"method": wire}


async def test_the_other_defaults_answer() -> None:
    answered = []
    for base, names in (
        (acp_trio.Agent, AGENT_METHOD_NAMES),
        (acp_trio.Client, CLIENT_METHOD_NAMES),
    ):
        handler = base.__new__(base)
        for wire, name in names.items():
            if wire in ANSWERED:
                await getattr(handler, name)(None)  # raises nothing
                answered.append(wire)
    assert sorted(answered) == sorted(ANSWERED)
