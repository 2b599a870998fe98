"""``_meta`` and unknown keys through the typed layer, extension methods and
notifications both ways, unknown methods, and invalid params."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from acp_trio import RemoteProtocolError, RequestError
from acp_trio.schema import (
    PromptRequest,
    PromptResponse,
    SessionNotification,
    TextContent,
    UnknownSessionUpdate,
    WriteTextFileRequest,
    converter,
)

from .conftest import (
    LIMIT,
    NEW_SESSION,
    RecordingClient,
    ScriptedAgent,
    notif,
    ok,
    open_pair,
    raw_agent,
    raw_client,
    req,
    settle,
    start_session,
)

TRACE = {"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "n": [1]}


async def test_meta_round_trip_on_a_prompt(autojump_clock: Any) -> None:
    async def script(agent: ScriptedAgent, params: PromptRequest) -> PromptResponse:
        return PromptResponse(stop_reason="end_turn", meta={"usage": {"tokens": 7}})

    agent = ScriptedAgent(script)
    with trio.fail_after(LIMIT):
        async with open_pair(agent, RecordingClient()) as (to_agent, _, awire, cwire):
            sid = await start_session(to_agent)
            result = await to_agent.prompt(
                PromptRequest(
                    session_id=sid,
                    prompt=[TextContent(text="hi", meta={"block": True})],
                    meta=TRACE,
                )
            )
    (received,) = agent.prompts
    assert received.meta == TRACE
    assert received.prompt == [TextContent(text="hi", meta={"block": True})]
    assert received.extra_ == {}
    # On the wire: under "_meta", never merged into the params themselves.
    (sent,) = cwire.sent_requests("session/prompt")
    assert sent["params"] == {
        "sessionId": sid,
        "prompt": [{"type": "text", "text": "hi", "_meta": {"block": True}}],
        "_meta": TRACE,
    }
    assert result.meta == {"usage": {"tokens": 7}}
    assert awire.sent()[-1]["result"] == {
        "stopReason": "end_turn",
        "_meta": {"usage": {"tokens": 7}},
    }


async def test_unknown_keys_survive_the_typed_layer(autojump_clock: Any) -> None:
    """Keys the schema does not know reach the agent, and re-encode exactly."""
    params = {
        "sessionId": "sess-1",
        "prompt": [{"type": "text", "text": "hi", "futureFlag": True}],
        "_meta": {"traceparent": "00-x"},
        "futureField": {"nested": [1, 2]},
    }
    agent = ScriptedAgent()
    with trio.fail_after(LIMIT):
        async with raw_client(agent) as (peer, _, _w):
            await peer.send(req(1, "session/prompt", params))
            assert (await peer.receive())["method"] == "session/update"
            assert await peer.receive() == ok(1, {"stopReason": "end_turn"})
    (received,) = agent.prompts
    assert received.extra_ == {"futureField": {"nested": [1, 2]}}
    assert received.meta == {"traceparent": "00-x"}
    assert "traceparent" not in received.extra_
    assert converter.unstructure(received) == params


async def test_unknown_keys_and_variants_reach_the_client(autojump_clock: Any) -> None:
    client = RecordingClient()
    with trio.fail_after(LIMIT):
        async with raw_agent(client) as (peer, to_agent, wire):
            update = {"sessionUpdate": "future_thing", "x": 1}
            await peer.send(
                notif("session/update", {"sessionId": "s", "update": update, "extraTop": 2})
            )
            await settle()
            async with trio.open_nursery() as nursery:
                nursery.start_soon(to_agent.initialize)
                init = await peer.receive()
                await peer.send(ok(init["id"], {"protocolVersion": 1, "futureKey": "kept"}))
            assert to_agent.capabilities is not None
    (note,) = client.updates
    assert note.update == UnknownSessionUpdate(raw=update)
    assert note.extra_ == {"extraTop": 2}
    assert converter.unstructure(note) == {"sessionId": "s", "update": update, "extraTop": 2}
    assert wire.sent_responses() == []


class ExtAgent(ScriptedAgent):
    async def ext_method(self, method: str, params: Any) -> Any:
        self.log.append(("ext_method", method, params))
        if method == "_acme/ping":
            return {"pong": params["n"] + 1}
        return await super().ext_method(method, params)

    async def ext_notification(self, method: str, params: Any) -> None:
        self.log.append(("ext_notification", method, params))


class ExtClient(RecordingClient):
    async def ext_method(self, method: str, params: Any) -> Any:
        self.log.append(("ext_method", method, params))
        if method == "_zed.dev/workspace/buffers":
            return ["a.py", "b.py"]
        return await super().ext_method(method, params)

    async def ext_notification(self, method: str, params: Any) -> None:
        self.log.append(("ext_notification", method, params))


async def test_extension_methods_client_to_agent(autojump_clock: Any) -> None:
    agent = ExtAgent()
    registered: list[Any] = []

    async def stats(params: Any) -> Any:
        registered.append(params)
        return {"sessions": 0}

    async def on_note(params: Any) -> None:
        registered.append(("note", params))

    agent.add_extension_method("_acme/stats", stats)
    agent.add_extension_notification("_acme/registered_note", on_note)
    with trio.fail_after(LIMIT):
        async with open_pair(agent, RecordingClient()) as (to_agent, _, awire, cwire):
            assert await to_agent.ext_method("_acme/ping", {"n": 1}) == {"pong": 2}
            assert await to_agent.ext_method("_acme/stats", [1, "x"]) == {"sessions": 0}
            await to_agent.ext_notification("_acme/note", {"k": "v"})
            await to_agent.ext_notification("_acme/registered_note")
            with pytest.raises(RequestError) as info:
                await to_agent.ext_method("_x", {})
            assert info.value.code == -32601
            assert info.value.data == {"method": "_x"}
            await to_agent.ext_notification("_y", {"ignored": True})
            await settle()
    # Names and params on the wire exactly as given.
    assert [(m["method"], m.get("params")) for m in cwire.sent()] == [
        ("_acme/ping", {"n": 1}),
        ("_acme/stats", [1, "x"]),
        ("_acme/note", {"k": "v"}),
        ("_acme/registered_note", None),
        ("_x", {}),
        ("_y", {"ignored": True}),
    ]
    # The registered handlers took precedence over ext_method/ext_notification.
    assert registered == [[1, "x"], ("note", None)]
    # (Notifications and requests are handled by different tasks: their
    # relative order is not fixed, each kind's own order is.)
    assert [e for e in agent.log if e[0] == "ext_method"] == [
        ("ext_method", "_acme/ping", {"n": 1}),
        ("ext_method", "_x", {}),
    ]
    assert [e for e in agent.log if e[0] == "ext_notification"] == [
        ("ext_notification", "_acme/note", {"k": "v"}),
        ("ext_notification", "_y", {"ignored": True}),
    ]
    # Three answered requests, one error; nothing for the notifications.
    responses = awire.sent_responses()
    assert [("error" in m) for m in responses] == [False, False, True]
    assert len(awire.sent()) == 3


async def test_extension_methods_agent_to_client(autojump_clock: Any) -> None:
    client = ExtClient()

    async def reload(params: Any) -> Any:
        return {"reloaded": params}

    client.add_extension_method("_zed.dev/reload", reload)
    with trio.fail_after(LIMIT):
        async with open_pair(ScriptedAgent(), client) as (_, to_client, awire, cwire):
            result = await to_client.ext_method("_zed.dev/workspace/buffers", {"all": True})
            assert result == ["a.py", "b.py"]
            assert await to_client.ext_method("_zed.dev/reload", [3]) == {"reloaded": [3]}
            await to_client.ext_notification("_zed.dev/ping", {"at": 1})
            with pytest.raises(RequestError) as info:
                await to_client.ext_method("_unknown/thing")
            assert info.value.code == -32601
            await settle()
    assert [m["method"] for m in awire.sent()] == [
        "_zed.dev/workspace/buffers",
        "_zed.dev/reload",
        "_zed.dev/ping",
        "_unknown/thing",
    ]
    assert "params" not in awire.sent()[-1]
    assert sorted(client.log) == [
        ("ext_method", "_unknown/thing", None),
        ("ext_method", "_zed.dev/workspace/buffers", {"all": True}),
        ("ext_notification", "_zed.dev/ping", {"at": 1}),
    ]
    assert len(cwire.sent()) == 3


async def test_extension_names_must_start_with_underscore(autojump_clock: Any) -> None:
    agent, client = ScriptedAgent(), RecordingClient()

    async def handler(params: Any) -> Any:
        return None  # pragma: no cover

    for register in (
        agent.add_extension_method,
        agent.add_extension_notification,
        client.add_extension_method,
        client.add_extension_notification,
    ):
        with pytest.raises(ValueError, match="start with '_'"):
            register("acme/ping", handler)
    with trio.fail_after(LIMIT):
        async with open_pair(agent, client) as (to_agent, to_client, awire, cwire):
            for proxy in (to_agent, to_client):
                with pytest.raises(ValueError, match="start with '_'"):
                    await proxy.ext_method("acme/ping", {})
                with pytest.raises(ValueError, match="start with '_'"):
                    await proxy.ext_notification("session/update", {})
            await settle()
            assert awire.sent() == cwire.sent() == []


async def test_unknown_methods_through_the_typed_layer(autojump_clock: Any) -> None:
    """Unknown non-extension requests get -32601 (also methods the Agent does
    not override); unknown notifications get nothing."""
    with trio.fail_after(LIMIT):
        async with raw_client(ScriptedAgent()) as (peer, _, wire):
            await peer.send(req(1, "session/frobnicate", {}))
            answer = await peer.receive()
            assert answer["error"]["code"] == -32601
            assert answer["id"] == 1
            # authenticate is in the protocol, but ScriptedAgent lacks it.
            await peer.send(req(2, "authenticate", {"methodId": "x"}))
            answer = await peer.receive()
            assert answer["error"] == {
                "code": -32601,
                "message": "Method not found",
                "data": {"method": "authenticate"},
            }
            await peer.send(notif("session/frobnicated", {}), notif("_acme/event", {"a": 1}))
            await peer.expect_silence(5)
            assert len(wire.sent()) == 2


async def test_invalid_prompt_params_are_refused_readably(autojump_clock: Any) -> None:
    agent = ScriptedAgent()
    with trio.fail_after(LIMIT):
        async with raw_client(agent) as (peer, _, _w):
            await peer.send(req(7, "session/prompt", {"sessionId": "s", "prompt": 5}))
            answer = await peer.receive()
            assert answer["id"] == 7
            assert answer["error"]["code"] == -32602
            errors = answer["error"]["data"]["errors"]
            assert errors
            assert all(isinstance(e, str) for e in errors)
            assert any("prompt" in e for e in errors)
            # Missing params entirely: also -32602, not a crash.
            await peer.send(req(8, "session/prompt"))
            answer = await peer.receive()
            assert answer["error"]["code"] == -32602
            assert any("sessionId" in e for e in answer["error"]["data"]["errors"])
            await peer.expect_silence(5)
    assert agent.prompts == []


async def test_garbage_session_update_is_ignored(autojump_clock: Any) -> None:
    client = RecordingClient()
    with trio.fail_after(LIMIT):
        async with raw_agent(client) as (peer, to_agent, wire):
            await peer.send(
                notif("session/update", {"sessionId": 5}),
                notif("session/update", ["not", "an", "object"]),
                notif("session/update"),
                notif("session/update", {"sessionId": "s", "update": {"content": 1}}),
            )
            await peer.expect_silence(5)
            assert client.updates == []
            # The connection goes on: a good update is delivered, a request answered.
            good = {
                "sessionUpdate": "agent_message_chunk",
                "content": {"type": "text", "text": "ok"},
            }
            await peer.send(notif("session/update", {"sessionId": "s", "update": good}))
            await peer.send(req(1, "fs/read_text_file", {"sessionId": "s", "path": "/a"}))
            assert await peer.receive() == ok(1, {"content": "contents of /a"})
            assert client.texts() == ["ok"]
            assert isinstance(client.updates[0], SessionNotification)
            assert wire.sent() == [ok(1, {"content": "contents of /a"})]
            assert not to_agent.connection.closed


async def test_invalid_result_is_a_remote_protocol_error(autojump_clock: Any) -> None:
    """An agent answering session/new without a sessionId: the typed call
    raises RemoteProtocolError; the connection goes on."""
    with trio.fail_after(LIMIT):
        async with raw_agent(RecordingClient()) as (peer, to_agent, _w):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(to_agent.initialize)
                init = await peer.receive()
                await peer.send(ok(init["id"], {"protocolVersion": 1}))

            async def new_session() -> None:
                with pytest.raises(RemoteProtocolError, match="session/new"):
                    await to_agent.new_session(NEW_SESSION)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(new_session)
                request = await peer.receive()
                await peer.send(ok(request["id"], {"sessionID": "typo"}))
            assert not to_agent.connection.closed


async def test_null_results_read_as_empty_objects(autojump_clock: Any) -> None:
    """Doc examples answer some methods ``null``: accepted as ``{}``."""
    with trio.fail_after(LIMIT):
        async with raw_client(ScriptedAgent()) as (peer, to_client, _w):
            await peer.send(
                req(
                    1,
                    "initialize",
                    {"protocolVersion": 1, "clientCapabilities": {"fs": {"writeTextFile": True}}},
                )
            )
            await peer.receive()

            async def write() -> None:
                result = await to_client.write_text_file(
                    WriteTextFileRequest(session_id="s", path="/a", content="x")
                )
                assert result.meta is None

            async with trio.open_nursery() as nursery:
                nursery.start_soon(write)
                request = await peer.receive()
                assert request["method"] == "fs/write_text_file"
                await peer.send(ok(request["id"], None))
