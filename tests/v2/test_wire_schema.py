"""Review tests: the v2 agent's real wire output validates against the
v2 JSON Schema, and background work is announced before any state
snapshot lists it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import trio
import trio.testing

from .conftest import LIMIT, RecordingClient, memory_pair, text

# The structural v2 schema the package ships (the published one, without its prose).
SCHEMA = Path(__file__).resolve().parents[2] / "acp_trio" / "schema" / "json" / "v2" / "schema.json"


def _validator(definition: str) -> Any:
    schema = json.loads(SCHEMA.read_text())
    return jsonschema.Draft202012Validator(
        {"$defs": schema["$defs"], "$ref": f"#/$defs/{definition}"}
    )


async def test_every_update_of_a_busy_session_validates_against_the_v2_schema(
    autojump_clock: trio.testing.MockClock,
) -> None:
    client = RecordingClient()
    with trio.fail_after(LIMIT):
        async with memory_pair(client) as agent:
            sid = (await agent.new_session("/tmp")).session_id
            for prompt in ("hello", "raise", "permission", "background"):
                await agent.prompt(sid, text(prompt))
            await agent.send_prompt(sid, text("tools"))
            await client.wait_for(lambda u: u.get("toolCallId") == "slow")
            await agent.cancel_tool_call(sid, "slow")
            await client.wait_for(lambda u: u.get("stopReason") == "end_turn")
            await agent.send_prompt(sid, text("terminal"))
            await client.wait_for(lambda u: u.get("terminalId") == "t1")
            await agent.cancel_terminal(sid, "t1")
            await client.wait_for(lambda u: u.get("exitStatus") is not None)
            await agent.send_prompt(sid, text("fixed"))
            await client.wait_for(lambda u: u.get("toolCallId") == "fixed")
            await agent.cancel(sid)
            await client.wait_for(lambda u: u.get("stopReason") == "cancelled")
            await agent.close_session(sid)
    validator = _validator("SessionUpdate")
    for update in client.updates:
        errors = list(validator.iter_errors(update))
        assert not errors, (update, [e.message for e in errors])


def _listed_before_announced(updates: list[dict[str, Any]]) -> list[str]:
    announced: set[str] = set()
    wrong = []
    for update in updates:
        if update["sessionUpdate"] == "tool_call_update":
            announced.add(update["toolCallId"])
        for item in update.get("background") or []:
            if item["type"] == "tool_call" and item["toolCallId"] not in announced:
                wrong.append(item["toolCallId"])
    return wrong


async def test_background_work_is_announced_before_a_state_update_lists_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    client = RecordingClient()
    with trio.fail_after(LIMIT):
        async with memory_pair(client) as agent:
            sid = (await agent.new_session("/tmp")).session_id
            result = await agent.prompt(sid, text("background"))
            await client.wait_for(lambda u: u.get("background"))
            await agent.close_session(sid)
    assert result.stop_reason == "end_turn"
    assert _listed_before_announced(client.updates) == []
    # The work was listed while it ran, and its end reported before the
    # snapshot without it.
    listed = [u for u in client.updates if u.get("background")]
    assert listed
    final = [i for i, u in enumerate(client.updates) if u.get("status") == "cancelled"]
    assert final
    assert client.updates[-1]["sessionUpdate"] == "state_update"
    assert client.updates[-1]["background"] == []
