"""``acp_trio.proxy.Proxy`` over memory streams, the test playing the
conductor: the envelope both ways, typed overrides, bad input."""

from __future__ import annotations

import json
import logging
from typing import Any

import attrs
import pytest
import trio
import trio.lowlevel
import trio.testing

import acp_trio
from acp_trio import schema
from acp_trio.proxy import Proxy, serve_proxy


class Conductor(acp_trio.lowlevel.Handler):
    """Answers what the proxy sends: records it, echoes the envelope back."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, Any]] = []

    async def handle_request(
        self, ctx: acp_trio.lowlevel.RequestContext, method: str, params: Any
    ) -> Any:
        self.seen.append((method, params))
        if method == "proxy/successor" and params["method"] == "initialize":
            return {"protocolVersion": 1}
        if method == "proxy/successor" and params["method"] == "session/prompt":
            return {"stopReason": "end_turn"}
        if method == "session/request_permission":
            return {"outcome": {"outcome": "cancelled"}}
        raise acp_trio.RequestError(-32042, "from the successor", {"x": 1})


class Shouting(Proxy):
    async def prompt(self, params: schema.PromptRequest) -> schema.PromptResponse:
        text = schema.TextContent(text="LOUD")
        return await self.successor.prompt(params.session_id, [*params.prompt, text])


async def run_with(proxy: Proxy, conductor: Conductor, body: Any) -> None:
    left, right = trio.testing.memory_stream_pair()
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(serve_proxy, proxy, right)
            async with acp_trio.lowlevel.open_connection(left, conductor) as conn:
                await body(conn)
            nursery.cancel_scope.cancel()


async def test_messages_pass_through_the_envelope_both_ways() -> None:
    conductor = Conductor()

    async def body(conn: acp_trio.lowlevel.Connection) -> None:
        assert await conn.call("proxy/initialize", {"protocolVersion": 1}) == {"protocolVersion": 1}
        prompt = {"sessionId": "s", "prompt": [{"type": "text", "text": "hi"}]}
        assert await conn.call("session/prompt", prompt) == {"stopReason": "end_turn"}
        # The successor's request comes wrapped, goes to the client side plain.
        asked = {"method": "session/request_permission", "params": {"sessionId": "s"}}
        assert await conn.call("proxy/successor", asked) == {"outcome": {"outcome": "cancelled"}}
        # An error comes back unchanged.
        with pytest.raises(acp_trio.RequestError) as caught:
            await conn.call("session/new", {"cwd": "/", "mcpServers": []})
        assert (caught.value.code, caught.value.data) == (-32042, {"x": 1})
        with pytest.raises(acp_trio.RequestError) as bad:
            await conn.call("proxy/successor", {"params": {}})
        assert bad.value.code == -32602

    await run_with(Shouting(), conductor, body)
    methods = [(m, p.get("method")) for m, p in conductor.seen]
    assert methods == [
        ("proxy/successor", "initialize"),
        ("proxy/successor", "session/prompt"),
        ("session/request_permission", None),
        ("proxy/successor", "session/new"),
    ]
    sent_prompt = conductor.seen[1][1]["params"]["prompt"]
    assert [b["text"] for b in sent_prompt] == ["hi", "LOUD"]


async def test_ill_typed_params_of_an_overridden_method_get_invalid_params() -> None:
    async def body(conn: acp_trio.lowlevel.Connection) -> None:
        with pytest.raises(acp_trio.RequestError) as caught:
            await conn.call("session/prompt", {"sessionId": 3})
        assert caught.value.code == -32602

    await run_with(Shouting(), Conductor(), body)


async def test_a_proxy_serves_one_connection() -> None:
    proxy = Proxy()
    left, _right = trio.testing.memory_stream_pair()
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            await nursery.start(serve_proxy, proxy, left)
            with pytest.raises(RuntimeError, match="already serves"):
                await serve_proxy(proxy, left)
            nursery.cancel_scope.cancel()


class Appending(Proxy):
    """Changes the prompt the way examples/proxies/context_proxy.py does."""

    async def prompt(self, params: schema.PromptRequest) -> schema.PromptResponse:
        text = schema.TextContent(text="LOUD")
        return await self.successor.prompt(attrs.evolve(params, prompt=[*params.prompt, text]))


class Recording(Conductor):
    async def handle_request(
        self, ctx: acp_trio.lowlevel.RequestContext, method: str, params: Any
    ) -> Any:
        self.seen.append((method, params))
        if method == "proxy/successor":
            return {"stopReason": "end_turn", "_meta": {"answer": "kept"}}
        return {"outcome": {"outcome": "cancelled"}, "_meta": {"answer": "kept"}}


@pytest.mark.parametrize("typed", [True, False])
async def test_the_envelope_meta_is_hop_local_and_the_message_meta_passes(typed: bool) -> None:
    conductor = Recording()
    inner = {"trace": {"id": "t-1"}, "nested": [1, {"a": None}]}

    async def body(conn: acp_trio.lowlevel.Connection) -> None:
        prompt = {
            "sessionId": "s",
            "prompt": [{"type": "text", "text": "hi", "_meta": {"block": 1}}],
            "_meta": inner,
        }
        result = await conn.call("session/prompt", prompt)
        assert result == {"stopReason": "end_turn", "_meta": {"answer": "kept"}}
        asked = {
            "method": "session/request_permission",
            "params": {
                "sessionId": "s",
                "toolCall": {"toolCallId": "c"},
                "options": [{"optionId": "a", "name": "A", "kind": "allow_once"}],
                "_meta": inner,
            },
            "_meta": {"hop": "local to the conductor's hop"},
        }
        result = await conn.call("proxy/successor", asked)
        assert result == {"outcome": {"outcome": "cancelled"}, "_meta": {"answer": "kept"}}

    proxy = Appending() if typed else Proxy()
    await run_with(proxy, conductor, body)
    (sent_method, envelope), (up_method, plain) = conductor.seen
    assert sent_method == "proxy/successor"
    assert "_meta" not in envelope  # the proxy's envelope has no meta of its own
    assert envelope["params"]["_meta"] == inner  # the message's own, unchanged
    assert envelope["params"]["prompt"][0]["_meta"] == {"block": 1}
    assert up_method == "session/request_permission"
    assert plain["_meta"] == inner  # the envelope's _meta stayed on its hop
    assert "hop" not in json.dumps(plain)


class Holding(Proxy):
    """Checkpoints before passing a prompt on (as any real override may)."""

    async def prompt(self, params: schema.PromptRequest) -> schema.PromptResponse:
        await trio.lowlevel.checkpoint()
        return await self.successor.prompt(params)


async def test_a_notification_waits_for_the_requests_read_before_it() -> None:
    # Without ForwardOrder the session/cancel, read after the prompt, would
    # go out first while the override checkpoints.
    received: list[str] = []

    def trace(direction: str, frame: bytes) -> None:
        message = json.loads(frame)
        if direction == "recv" and "method" in message:
            received.append(message["params"].get("method", message["method"]))

    config = acp_trio.ConnectionConfig(trace=trace)
    prompt = {"sessionId": "s", "prompt": [{"type": "text", "text": "hi"}]}
    left, right = trio.testing.memory_stream_pair()
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(serve_proxy, Holding(), right)
            async with acp_trio.lowlevel.open_connection(left, Recording(), config=config) as conn:
                async with conn.open_request("session/prompt", prompt) as pending:
                    await conn.notify("session/cancel", {"sessionId": "s"})
                    await pending.result()
                await conn.call("session/prompt", prompt)  # the cancel went out before
            nursery.cancel_scope.cancel()
    assert received == ["session/prompt", "session/cancel", "session/prompt"]


class V2Conductor(Conductor):
    """Its agent speaks v2: initialize says 2, a prompt is accepted with a
    messageId (no stopReason: a v1 PromptResponse would not parse)."""

    async def handle_request(
        self, ctx: acp_trio.lowlevel.RequestContext, method: str, params: Any
    ) -> Any:
        self.seen.append((method, params))
        if params["method"] == "initialize":
            return {"protocolVersion": 2, "agentCapabilities": {}}
        return {"messageId": "m-1"}


@pytest.mark.parametrize("asked", [1, 2])
async def test_typed_methods_are_skipped_once_the_chain_speaks_v2(asked: int) -> None:
    # The client asks for 1 or 2; the agent answers 2 either way.
    proxy = Shouting()
    conductor = V2Conductor()

    async def body(conn: acp_trio.lowlevel.Connection) -> None:
        assert proxy.protocol_version is None
        init = await conn.call("proxy/initialize", {"protocolVersion": asked})
        assert init["protocolVersion"] == 2
        assert proxy.protocol_version == 2
        prompt = {"sessionId": "s", "prompt": [{"type": "text", "text": "hi"}]}
        assert await conn.call("session/prompt", prompt) == {"messageId": "m-1"}

    await run_with(proxy, conductor, body)
    # Passed on unchanged: no "LOUD" block added by the (v1) typed override.
    assert conductor.seen[1][1] == {
        "method": "session/prompt",
        "params": {"sessionId": "s", "prompt": [{"type": "text", "text": "hi"}]},
    }


class Stuck(acp_trio.lowlevel.Handler):
    """A conductor whose successor never answers: records each request
    and its cancellation."""

    def __init__(self) -> None:
        self.seen: list[tuple[Any, str, Any]] = []
        self.cancelled: list[Any] = []
        self.changed = trio.Event()

    async def handle_request(
        self, ctx: acp_trio.lowlevel.RequestContext, method: str, params: Any
    ) -> Any:
        self.seen.append((ctx.id, method, params))
        self.changed.set()
        try:
            await trio.sleep_forever()
        finally:
            self.cancelled.append(ctx.id)
            self.changed.set()

    async def wait_until(self, condition: Any) -> None:
        while not condition():
            await self.changed.wait()
            self.changed = trio.Event()


@pytest.mark.parametrize("typed", [False, True], ids=["passed-on", "typed"])
async def test_a_cancelled_request_is_cancelled_on_the_next_hop_with_its_own_id(
    typed: bool, caplog: pytest.LogCaptureFixture
) -> None:
    # A proxy that changes nothing passes the prompt on as it is read (its
    # fast path); one with a typed prompt, through its handler. Either way
    # the conductor's $/cancel_request cancels the request the proxy sent,
    # by the proxy's own id, the prompt is answered -32800, and the late
    # answer to the cancelled request is dropped quietly.
    holding = Stuck()
    prompt = {"sessionId": "s", "prompt": [{"type": "text", "text": "hi"}]}

    async def body(conn: acp_trio.lowlevel.Connection) -> None:
        async with conn.open_request("session/prompt", prompt) as pending:
            await holding.wait_until(lambda: holding.seen)
            with pytest.raises(acp_trio.RequestError) as cancelled:
                await pending.cancel_and_wait()
        assert cancelled.value.code == -32800
        ((sent_id, method, params),) = holding.seen
        assert method == "proxy/successor"
        assert params["method"] == "session/prompt"
        await holding.wait_until(lambda: holding.cancelled)
        assert holding.cancelled == [sent_id]

    await run_with(Shouting() if typed else Proxy(), holding, body)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


class SlowUpdates(Proxy):
    """Changes each session update, taking a few scheduler passes for it."""

    async def session_update(self, params: schema.SessionNotification) -> None:
        for _ in range(5):
            await trio.lowlevel.checkpoint()
        await self.client.session_update(params.session_id, params.update)


class Answering(acp_trio.lowlevel.Handler):
    """A conductor whose successor sends an update, then answers the prompt;
    records what reaches the client side, in order."""

    def __init__(self) -> None:
        self.order: list[str] = []

    async def handle_request(
        self, ctx: acp_trio.lowlevel.RequestContext, method: str, params: Any
    ) -> Any:
        update = {
            "sessionId": "s",
            "update": {
                "sessionUpdate": "agent_message_chunk",
                "content": {"type": "text", "text": "first"},
            },
        }
        envelope = {"method": "session/update", "params": update}
        await ctx.connection.notify("proxy/successor", envelope)
        return {"stopReason": "end_turn"}

    async def handle_notification(self, method: str, params: Any) -> None:
        self.order.append(method)


async def test_an_answer_passed_on_never_overtakes_an_update_the_proxy_changes() -> None:
    # The prompt and its answer pass frame by frame; the update before the
    # answer goes through the proxy's typed session_update, which takes its
    # time: the answer waits for it, as the connection's replies wait for
    # the notifications read before them.
    answering = Answering()
    prompt = {"sessionId": "s", "prompt": [{"type": "text", "text": "hi"}]}

    async def body(conn: acp_trio.lowlevel.Connection) -> None:
        for _ in range(3):
            assert await conn.call("session/prompt", prompt) == {"stopReason": "end_turn"}
            answering.order.append("answer")

    await run_with(SlowUpdates(), answering, body)
    assert answering.order == ["session/update", "answer"] * 3
